/**
 * The SQLite writer thread (started by sqlite-writer.ts). It owns a connection of its own and is
 * the only writer of the hot path: messages posted by the main thread while it was committing
 * are committed together (one `BEGIN IMMEDIATE … COMMIT`), and each message gets its per-row
 * results back once the transaction is in the WAL. It closes the WAL's checkpoint cycles
 * (sqlite-checkpointer.ts): a PASSIVE checkpoint between transactions at most every
 * `policy.closeEveryMs` (later while background passes are slow), after which its next commit
 * restarts the WAL, and TRUNCATE once idle; the bulk of the copying is the background
 * checkpointer's.
 *
 * {@link sqliteWriterMain} runs in the worker from its source text (`Function.prototype.toString`),
 * so it must not use anything from this module's scope: only its parameters and globals.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { MessagePort } from 'node:worker_threads';
import type { CheckpointEvent, CheckpointPolicy, runCheckpoint } from './sqlite-checkpointer.js';
import type { monotonicMs } from '../monotonic-clock.js';

/** What the worker is started with. */
export interface WriterWorkerData {
  file: string;
  synchronous: 'NORMAL' | 'FULL';
  /** The store deadline, ms: the longest a transaction waits for SQLite's write lock. */
  busyTimeoutMs: number;
  /** When it closes a WAL cycle, defers that for slow passes, and truncates when idle (sqlite-checkpointer.ts). */
  policy: CheckpointPolicy;
  /** The background checkpointer's count of finished passes and the last one's duration (sqlite-checkpointer.ts `passCounter`). */
  passes: SharedArrayBuffer;
  /** `journal_size_limit`: what a restarted WAL is trimmed to, bytes. */
  walLimitBytes: number;
  sql: { insert: string; completeBySeq: string; completeByKey: string; refuse: string };
  /** Values per row in a batch message, and ahead of its rows ({@link BATCH_HEAD}). */
  widths: { insert: number; outcome: number; refusal: number; head: number };
}

/**
 * A batch posted by the main thread, as one flat list: `n, deadline, insert rows, outcome rows`,
 * then the rows' column values: inserts, outcomes, and refusals to the end ({@link BATCH_HEAD}
 * values ahead of them; each row {@link WriterWorkerData.widths} wide). One list rather than an
 * object of lists: the structured clone writes and reads no property names, and the main thread
 * builds no object.
 */
export type BatchMessage = unknown[];

/** Values ahead of the rows in a {@link BatchMessage}. */
export const BATCH_HEAD = 4;

/**
 * The worker's answer for the messages of one transaction, as one flat list. Per message:
 * `n, 0, k, i₁…iₖ, s₁…sₖ, m, o₁…oₘ` (the row codes of its k inserts, the `seq` of each written
 * one, the row codes of its m outcomes), or `n, 1, code, message` when its transaction failed.
 * A list of numbers, not objects and not typed arrays: the main thread deserializes it without
 * building an object per message (the objects' deserialization was ~1 % of the event loop at
 * 1,000 req/s), and a typed array would arrive with a memory block of its own, which the young
 * generation's collector must free in its pause.
 */
export type DoneMessage = Array<number | string>;

/** The writer thread's body. */
export function sqliteWriterMain(
  port: MessagePort,
  cfg: WriterWorkerData,
  Database: typeof BetterSqlite3,
  checkpointOnce: typeof runCheckpoint,
  // Deadlines come from the main thread on the process's monotonic clock; the cycle's timing uses
  // it too, so that a step of the wall clock neither expires writes nor stalls the WAL's restart.
  clock: typeof monotonicMs,
): void {
  const db = new Database(cfg.file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${cfg.synchronous}`);
  db.pragma(`busy_timeout = ${cfg.busyTimeoutMs}`);
  db.pragma('foreign_keys = ON');
  db.pragma('wal_autocheckpoint = 0');
  db.pragma(`journal_size_limit = ${cfg.walLimitBytes}`);
  const insert = db.prepare(cfg.sql.insert);
  const completeBySeq = db.prepare(cfg.sql.completeBySeq);
  const completeByKey = db.prepare(cfg.sql.completeByKey);
  const refuse = db.prepare(cfg.sql.refuse);
  const IW = cfg.widths.insert;
  const OW = cfg.widths.outcome;
  const RW = cfg.widths.refusal;
  const HEAD = cfg.widths.head;
  const expired = new Error('expired');
  let busyTimeout = cfg.busyTimeoutMs;
  let queue: BatchMessage[] = [];
  let scheduled = false;
  let stopping = false;
  let lastWrite = clock();
  let lastCheckpoint = clock();
  let truncated = true;
  const passes = new Int32Array(cfg.passes);
  // passCounter (sqlite-checkpointer.ts): [0] background passes ended, [1] the last one's ms.
  let passesSeen = Atomics.load(passes, 0);

  /** A message's deadline and row counts (its layout: {@link BatchMessage}). */
  const insertsOf = (m: BatchMessage) => m[2] as number;
  const outcomesOf = (m: BatchMessage) => m[3] as number;
  const deadlineOf = (m: BatchMessage) => m[1] as number;

  /** Answers a message past its deadline: nothing written, every row code 2 (log-writer.ts `EXPIRED`). */
  const expiredAnswer = (out: DoneMessage, m: BatchMessage) => {
    const k = insertsOf(m);
    const o = outcomesOf(m);
    out.push(m[0] as number, 0, k);
    for (let x = 0; x < k; x++) out.push(2);
    for (let x = 0; x < k; x++) out.push(0);
    out.push(o);
    for (let x = 0; x < o; x++) out.push(2);
  };

  /** Runs the messages' rows, answering into `out`; throws `expired` (rolling back) if a deadline passed meanwhile. */
  const run = db.transaction((msgs: BatchMessage[], out: DoneMessage) => {
    let first = Infinity;
    for (const v of msgs) {
      first = Math.min(first, deadlineOf(v));
      const k = insertsOf(v);
      const m = outcomesOf(v);
      out.push(v[0] as number, 0, k);
      // Row codes at [at, at + k), seqs at [at + k, at + 2k): filled as the rows are written.
      const at = out.length;
      for (let x = 0; x < 2 * k; x++) out.push(0);
      let p = HEAD;
      for (let x = 0; x < k; x++, p += IW) {
        const r = insert.run(
          v[p],
          v[p + 1],
          v[p + 2],
          v[p + 3],
          v[p + 4],
          v[p + 5],
          v[p + 6],
          v[p + 7],
          v[p + 8],
          v[p + 9],
          v[p + 10],
          v[p + 11],
          v[p + 12],
          v[p + 13],
          v[p + 14],
          v[p + 15],
          v[p + 16],
          v[p + 17],
          v[p + 18],
          v[p + 19],
          v[p + 20],
        );
        if (r.changes > 0) {
          out[at + x] = 1;
          out[at + k + x] = Number(r.lastInsertRowid);
        }
      }
      out.push(m);
      for (let x = 0; x < m; x++, p += OW) {
        // An outcome row: seq (or null), project id, id, then the columns it sets.
        const r =
          v[p] !== null
            ? completeBySeq.run(v[p + 3], v[p + 4], v[p + 5], v[p + 6], v[p + 7], v[p + 8], v[p + 9], v[p + 10], v[p])
            : completeByKey.run(v[p + 3], v[p + 4], v[p + 5], v[p + 6], v[p + 7], v[p + 8], v[p + 9], v[p + 10], v[p + 1], v[p + 2]);
        out.push(r.changes > 0 ? 1 : 0);
      }
      for (const end = v.length; p < end; p += RW) refuse.run(v[p + 2], v[p], v[p + 1]);
    }
    if (clock() >= first) throw expired;
  });

  const commit = (msgs: BatchMessage[]): DoneMessage => {
    const results: DoneMessage = [];
    let live = msgs;
    while (live.length > 0) {
      const now = clock();
      const keep: BatchMessage[] = [];
      for (const m of live) {
        if (deadlineOf(m) > now) keep.push(m);
        else expiredAnswer(results, m);
      }
      live = keep;
      if (live.length === 0) break;
      // Wait for the write lock no longer than the earliest deadline (a lock held elsewhere).
      const wait = Math.max(1, Math.min(...live.map(deadlineOf)) - now);
      if (Math.abs(wait - busyTimeout) > 50) {
        busyTimeout = wait;
        db.pragma(`busy_timeout = ${wait}`);
      }
      const answered = results.length;
      try {
        run.immediate(live, results);
        break;
      } catch (e) {
        results.length = answered; // the rolled-back transaction's answers go
        if (e === expired) continue; // rolled back: drop what expired, commit the rest
        const err = e as { code?: string; message?: string };
        for (const m of live) results.push(m[0] as number, 1, err.code ?? '', String(err.message ?? e));
        break;
      }
    }
    return results;
  };

  let lastEvent: CheckpointEvent | undefined;
  /** False when the checkpoint lock was taken (the background pass): the caller tries again soon. */
  const checkpoint = (mode: CheckpointEvent['mode'], why?: Pick<CheckpointEvent, 'afterPass' | 'overdue' | 'slowPass'>): boolean => {
    let e: CheckpointEvent | undefined;
    try {
      e = checkpointOnce(db, mode, 'writer', lastEvent);
    } catch {
      /* an I/O error: next time */
    }
    if (e && why) Object.assign(e, why);
    if (e) port.postMessage((lastEvent = e));
    if (e?.busy) return false;
    lastCheckpoint = clock();
    return true;
  };

  /**
   * The closing pass, once due, waits for the end of a background pass (seen since the last look,
   * so at most one flush ago): what is left to copy is then a few frames, not up to a pass's
   * interval of them. Twice overdue, it runs anyway (a checkpointer that stopped). When the last
   * background pass was slow, the disk's flushes are: the closing pass would wait for them here,
   * holding every commit (its syncs of the WAL and the database), so it waits for a quick pass
   * instead, up to `policy.slowDeferMs`, and the WAL grows meanwhile.
   */
  const closeIfDue = () => {
    const seen = Atomics.load(passes, 0);
    const fresh = seen !== passesSeen;
    passesSeen = seen;
    const since = clock() - lastCheckpoint;
    if (since < cfg.policy.closeEveryMs) return;
    const slowPass = Atomics.load(passes, 1);
    if (slowPass >= cfg.policy.slowPassMs) {
      if (since >= cfg.policy.slowDeferMs) checkpoint('PASSIVE', { overdue: true, slowPass });
    } else if (fresh) checkpoint('PASSIVE', { afterPass: seen });
    else if (since >= 2 * cfg.policy.closeEveryMs) checkpoint('PASSIVE', { overdue: true });
  };

  const flush = () => {
    scheduled = false;
    const msgs = queue;
    queue = [];
    if (msgs.length > 0) {
      port.postMessage(commit(msgs));
      lastWrite = clock();
      truncated = false;
    }
    closeIfDue();
    if (stopping && queue.length === 0) stop();
  };

  // Writes of the main connection (projects, proofs, sweeps) land in the WAL too: checkpoint on
  // a timer as well, and shrink the file once the store has been idle for a while.
  const timer = setInterval(
    () => {
      if (scheduled) return;
      const idle = clock() - lastWrite;
      if (!truncated && idle >= cfg.policy.truncateIdleMs) truncated = checkpoint('TRUNCATE');
      else closeIfDue();
    },
    Math.min(cfg.policy.closeEveryMs, cfg.policy.truncateIdleMs) / 4,
  );

  const stop = () => {
    clearInterval(timer);
    checkpoint('TRUNCATE');
    db.close();
    port.postMessage({ t: 'stopped' });
    port.close();
  };

  port.on('message', (m: BatchMessage | { t: 'stop' }) => {
    if (!Array.isArray(m)) {
      stopping = true;
      if (!scheduled) flush();
      return;
    }
    queue.push(m);
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  });
  port.postMessage({ t: 'ready' });
}
