/**
 * Checkpoints of the SQLite WAL, split between two threads so that the write path waits for as
 * few of them as possible (docs/performance-log.md, "What the stalls were").
 *
 * A checkpoint copies committed pages from the `-wal` file into the database, and at every
 * `synchronous` level above OFF it syncs the WAL before copying and the database after. Measured
 * on the benchmark machine, a checkpoint of 200 calls' frames took 7 ms with those two syncs and
 * 1.5 ms without: most of a checkpoint is waiting on the disk. Run by the writer thread (as every
 * 200 ms until 2026-11-26), that wait stalled every write-ahead record queued behind it.
 *
 * - The **background checkpointer** (this module's worker, a connection of its own) runs a PASSIVE
 *   checkpoint every {@link CheckpointPolicy.backgroundEveryMs}. PASSIVE never takes the write
 *   lock, so the writer keeps committing while it copies and syncs; frames appended meanwhile
 *   wait for the next pass. It also syncs the database file after each pass (SQLite does so only
 *   after a pass that copied everything), so that no closing pass inherits that flush.
 * - The writer's closing pass (below) waits for a background pass to end, then copies only the
 *   frames committed since: measured at 1,000 req/s, 3.1-4.0 → 1.0 ms (p50) during which no
 *   commit can happen, and the end-to-end p99 5.0-15.9 → 4.1-4.5 ms (docs/performance-log.md).
 * - That alone never lets the WAL start over: SQLite rewinds the WAL only when a write begins
 *   after every frame has been copied, and under steady load some frame always arrives during a
 *   pass. So the **writer** closes a cycle every {@link CheckpointPolicy.closeEveryMs} with a
 *   PASSIVE checkpoint of its own between two transactions: it copies only what the background
 *   pass left (a few pages, plus the two syncs), and its next commit restarts the WAL from the
 *   beginning (`journal_size_limit` trims the file). Once idle it truncates the WAL to 0 bytes.
 *
 * The syncs are never skipped: a checkpoint without them could leave a database that a power
 * loss corrupts, which an audit store must not risk for speed.
 *
 * {@link sqliteCheckpointerMain} runs in the worker from its source text, like the writer's body
 * (sqlite-writer-worker.ts): it may use only its parameters and globals.
 */
import { createRequire } from 'node:module';
import { Worker, type MessagePort } from 'node:worker_threads';
import type BetterSqlite3 from 'better-sqlite3';
import { nameThisThread, THREAD_NAMES } from '../thread-name.js';

/** When each thread checkpoints. */
export interface CheckpointPolicy {
  /** The background checkpointer's PASSIVE pass, ms apart. */
  backgroundEveryMs: number;
  /** The writer's closing PASSIVE pass (which lets the WAL restart), at most this often while writing. */
  closeEveryMs: number;
  /** Idle this long → the writer's TRUNCATE checkpoint (the -wal file goes back to 0 bytes). */
  truncateIdleMs: number;
  /**
   * A background pass that took at least this long (its copying and syncs) says the disk's
   * flushes are slow: the writer then defers its closing pass, whose syncs would wait for them
   * on the commit path, until a pass is quick again.
   */
  slowPassMs: number;
  /** The longest the writer defers its closing pass for slow passes (the WAL grows meanwhile). */
  slowDeferMs: number;
}

/**
 * The policy of a running server. The writer's closing pass and the commit after it (which
 * restarts the WAL and syncs its new header) cost more the longer the WAL: measured at 1,000
 * req/s, closing every 500 ms gave a p99 of 11-16 ms, every 1 s 15-18 ms, every 3-5 s 34-63 ms
 * (docs/performance-log.md). A background pass as long as its interval means the disk is not
 * keeping up; the soak saw passes of 0.5-3 s in such moments, and the writer's closing pass
 * blocked in its syncs for as long (docs/performance-log.md, eighth session). Deferring it for
 * up to 3 s lets the WAL grow by ~140 MB at 1,000 req/s, then trimmed to 32 MiB at the restart.
 */
export const CHECKPOINT_POLICY: CheckpointPolicy = {
  backgroundEveryMs: 100,
  closeEveryMs: 500,
  truncateIdleMs: 1000,
  slowPassMs: 100,
  slowDeferMs: 3000,
};

/** One checkpoint that copied frames, as the threads report it (for metrics, and on `CHECKPOINT_CHANNEL`: diagnostics-channels.ts). */
export interface CheckpointEvent {
  t: 'checkpoint';
  /** Which thread ran it. */
  by: 'writer' | 'background';
  mode: 'PASSIVE' | 'TRUNCATE';
  /** Epoch ms when it started. */
  at: number;
  ms: number;
  /** Frames in the WAL, and how many of them are now in the database. */
  log: number;
  copied: number;
  /** True when another checkpoint held the lock (nothing was done). */
  busy: boolean;
  /**
   * The writer's closing pass only: the count of background passes it had seen end when it
   * started (it waits for a new one), or `overdue` when it ran without one, twice overdue, or
   * after deferring for slow passes (`slowPass`: how long the last one took, ms).
   */
  afterPass?: number;
  overdue?: true;
  slowPass?: number;
}

/**
 * Runs one checkpoint on `db`; returns its event, or undefined when it found nothing new to copy
 * (the same WAL as `previous`, the last event of this thread, left it).
 */
export function runCheckpoint(
  db: BetterSqlite3.Database,
  mode: CheckpointEvent['mode'],
  by: CheckpointEvent['by'],
  previous: CheckpointEvent | undefined,
): CheckpointEvent | undefined {
  const at = Date.now();
  const started = performance.now();
  const [r] = db.pragma(`wal_checkpoint(${mode})`) as Array<{ busy: number; log: number; checkpointed: number }>;
  if (!r) return undefined;
  const busy = r.busy !== 0;
  const unchanged = previous !== undefined && !previous.busy && r.log === previous.log && r.checkpointed === previous.copied;
  if (!busy && (r.log <= 0 || unchanged)) return undefined;
  return { t: 'checkpoint', by, mode, at, ms: performance.now() - started, log: r.log, copied: r.checkpointed, busy };
}

/** What the background checkpointer is started with. */
export interface CheckpointerData {
  file: string;
  /** The store's `synchronous` level: a checkpoint syncs as the writer's commits do. */
  synchronous: 'NORMAL' | 'FULL';
  everyMs: number;
  /** Counts the passes that finished and holds the last one's duration (shared with the writer: see {@link passCounter}). */
  passes: SharedArrayBuffer;
}

/**
 * Two Int32s in shared memory, read by index in the threads' bodies (which run from their text
 * and import nothing): [0] the count of finished background passes, so that the writer thread can
 * see, without a message, that a pass has just ended (it starts its closing pass then, when only
 * the frames committed since are left to copy: at 1,000 req/s ~1 ms of them instead of up to
 * 100 ms); [1] how long the last one took, ms rounded up, which tells it whether the disk's
 * flushes are slow right now.
 */
export function passCounter(): SharedArrayBuffer {
  return new SharedArrayBuffer(8);
}

/** The background checkpointer's body. `checkpoint` is {@link runCheckpoint}, passed in as text. */
export function sqliteCheckpointerMain(
  port: MessagePort,
  cfg: CheckpointerData,
  Database: typeof BetterSqlite3,
  checkpoint: typeof runCheckpoint,
): void {
  const db = new Database(cfg.file);
  db.pragma(`synchronous = ${cfg.synchronous}`);
  db.pragma('wal_autocheckpoint = 0');
  let last: CheckpointEvent | undefined;
  const passes = new Int32Array(cfg.passes);
  // SQLite syncs the database file only at the end of a checkpoint that copied every frame, which
  // under load is only ever the writer's closing pass: that sync then flushed every page the
  // background passes had copied since the last one (~half a second of them), while the writer
  // held every commit. Syncing here after each pass that copied leaves it only its own few pages.
  const fs = process.getBuiltinModule('node:fs');
  const dbFd = fs.openSync(cfg.file, 'r');
  const timer = setInterval(() => {
    try {
      const e = checkpoint(db, 'PASSIVE', 'background', last);
      if (e && !e.busy) {
        const t0 = performance.now();
        fs.fsyncSync(dbFd);
        e.ms += performance.now() - t0;
      }
      if (e) port.postMessage((last = e));
      if (!e?.busy) {
        // [1] the pass's duration, then [0] the count the writer watches (passCounter).
        Atomics.store(passes, 1, e ? Math.ceil(e.ms) : 0);
        Atomics.add(passes, 0, 1);
      }
    } catch {
      /* an I/O error here is the writer's to report; the next pass tries again */
    }
  }, cfg.everyMs);
  port.on('message', (m: { t: string }) => {
    if (m.t !== 'stop') return;
    clearInterval(timer);
    fs.closeSync(dbFd);
    db.close();
    port.postMessage({ t: 'stopped' });
    port.close();
  });
  port.postMessage({ t: 'ready' });
}

/**
 * Starts a worker running `main(parentPort, cfg, require('better-sqlite3'), ...helpers)` from
 * source text, so that the store needs no worker file of its own in src/ or dist/. `__name` is
 * what tsx's transform may wrap named functions in; it is not defined in a bare worker. The
 * thread first names itself `threadName` ({@link nameThisThread}, run from its source text too),
 * so that an operator can tell the writer from the checkpointer by name.
 */
export function startSqliteThread(
  main: (...args: never[]) => void,
  cfg: unknown,
  threadName: string,
  helpers: Array<(...args: never[]) => unknown> = [],
): Worker {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const args = ['wt.parentPort', 'wt.workerData.cfg', 'require(wt.workerData.driver)', ...helpers.map((h) => `(${h.toString()})`)];
  const naming = `(${nameThisThread.toString()})(wt.workerData.threadName);`;
  const source = `var __name = (f) => f;\nconst wt = require('node:worker_threads');\n${naming}\n(${main.toString()})(${args.join(', ')});`;
  return new Worker(source, { eval: true, workerData: { cfg, driver, threadName } });
}

/**
 * Asks a thread started by {@link startSqliteThread} to finish (`{ t: 'stop' }`, answered with
 * `{ t: 'stopped' }` once its connection is closed), waits at most 5 s, then ends it.
 */
export async function stopSqliteThread(worker: Worker): Promise<void> {
  const stopped = new Promise<void>((resolve) => {
    worker.on('message', (m: { t: string }) => m.t === 'stopped' && resolve());
    worker.once('exit', () => resolve());
  });
  worker.postMessage({ t: 'stop' });
  await Promise.race([stopped, new Promise((r) => setTimeout(r, 5000).unref())]);
  await worker.terminate();
}

/** The background checkpointer thread, seen from the main thread. */
export class BackgroundCheckpointer {
  private constructor(private readonly worker: Worker) {}

  /** Starts it; resolves once its connection is open. Events of every pass go to `onCheckpoint`. */
  static async start(data: CheckpointerData, onCheckpoint: (e: CheckpointEvent) => void): Promise<BackgroundCheckpointer> {
    const worker = startSqliteThread(sqliteCheckpointerMain, data, THREAD_NAMES.checkpointer, [runCheckpoint]);
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('error', reject);
    });
    worker.on('message', (m: CheckpointEvent | { t: string }) => {
      if (m.t === 'checkpoint') onCheckpoint(m as CheckpointEvent);
    });
    // A checkpointer that died costs only WAL growth until the writer's closing passes catch up.
    worker.on('error', () => undefined);
    worker.unref();
    return new BackgroundCheckpointer(worker);
  }

  /** Stops the passes and closes its connection. */
  close(): Promise<void> {
    return stopSqliteThread(this.worker);
  }
}
