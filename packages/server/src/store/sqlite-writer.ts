/**
 * The SQLite backend of the log writer (log-writer.ts): a worker thread with its own
 * better-sqlite3 connection (sqlite-writer-worker.ts) commits inserts and outcomes, so neither
 * the statements nor a commit that waits on the WAL run on the event loop; a second thread
 * copies the WAL into the database beside it (sqlite-checkpointer.ts). The main thread posts
 * one message per turn of its event loop (rows as flat arrays of column values: cheap to
 * clone) and gets per-row results when the transaction is in the WAL. Reads stay on the main
 * connection: in WAL mode they proceed beside the writer.
 *
 * A worker that dies (it should not) fails the batches it held with a store error (503) and is
 * started again for the next batch.
 */
import { channel } from 'node:diagnostics_channel';
import type { Worker } from 'node:worker_threads';
import { metrics } from '../metrics/registry.js';
import type { LogCompletion } from './logs.js';
import { INSERT_COLUMNS, OUTCOME_COLUMNS, pushInsert, pushOutcomeValues } from './write-rows.js';
import type { RowRef, WriteBackend, WriteBatch, WriteResult } from './log-writer.js';
import { monotonicMs } from '../monotonic-clock.js';
import { BATCH_HEAD, sqliteWriterMain, type BatchMessage, type DoneMessage, type WriterWorkerData } from './sqlite-writer-worker.js';
import {
  BackgroundCheckpointer,
  CHECKPOINT_POLICY,
  passCounter,
  runCheckpoint,
  startSqliteThread,
  stopSqliteThread,
  type CheckpointEvent,
  type CheckpointPolicy,
} from './sqlite-checkpointer.js';
import { THREAD_NAMES } from '../thread-name.js';
import { CHECKPOINT_CHANNEL } from './diagnostics-channels.js';

const SET_OUTCOME = OUTCOME_COLUMNS.map((c) => `${c} = ?`).join(', ');
// A record already sealed into a proof batch never changes (proxy-outcomes.ts); only a proxy
// record is completed, never a /v1/log entry reusing its id in another project (migration 005).
const OUTCOME_GUARD = "source = 'proxy' and proof_batch_id is null";

/** The writer thread's statements (exported for the test that checks their query plans). */
export const WRITER_SQL: WriterWorkerData['sql'] = {
  insert: `insert into logs (${INSERT_COLUMNS.join(', ')}) values (${INSERT_COLUMNS.map(() => '?').join(', ')}) on conflict (project_id, id) do nothing`,
  completeBySeq: `update logs set ${SET_OUTCOME}, instance_id = null where seq = ? and ${OUTCOME_GUARD}`,
  completeByKey: `update logs set ${SET_OUTCOME}, instance_id = null where project_id = ? and id = ? and ${OUTCOME_GUARD}`,
  refuse: "update logs set status = 'failed', completed_at = ?, instance_id = null where project_id = ? and id = ? and status = 'pending'",
};

/** Appends one outcome row (seq or null, project id, id, then {@link OUTCOME_COLUMNS}) to a flat array. */
export function pushOutcome(out: unknown[], ref: RowRef, c: LogCompletion): void {
  out.push(ref.seq ? ref.seq : null, ref.projectId, ref.id);
  pushOutcomeValues(out, c);
}

/** What a restarted WAL is trimmed to (`journal_size_limit`). */
const WAL_LIMIT_BYTES = 32 * 1024 * 1024;

const checkpointChannel = channel(CHECKPOINT_CHANNEL);

function observeCheckpoint(e: CheckpointEvent): void {
  if (!e.busy) metrics.sqliteCheckpointSeconds.labels(e.by, e.mode).observe(e.ms / 1000);
  if (checkpointChannel.hasSubscribers) checkpointChannel.publish(e);
}

/** What {@link SqliteWriter.start} needs. */
export interface SqliteWriterOptions {
  file: string;
  synchronous: 'NORMAL' | 'FULL';
  /** The store deadline, ms. */
  timeoutMs: number;
  /** When each thread checkpoints; {@link CHECKPOINT_POLICY} unless a test needs another. */
  policy?: CheckpointPolicy;
}

/** A batch handed to the writer thread, waiting for its answer. */
interface BatchWaiter {
  n: number;
  resolve: (r: WriteResult) => void;
  reject: (e: unknown) => void;
}

/** Worker-thread backend for SQLite. */
export class SqliteWriter implements WriteBackend {
  readonly maxInflight = Infinity;
  #worker: Worker | undefined;
  #starting: Promise<Worker> | undefined;
  #n = 0;
  /**
   * Batches handed to the thread, oldest first (an array, not a Map: a Map churned per batch keeps
   * its dead entries reachable to the scavenger; see slot-set.ts). Answers come nearly in order.
   */
  readonly #waiting: BatchWaiter[] = [];
  #closed = false;
  #checkpointer: BackgroundCheckpointer | undefined;
  readonly #passes = passCounter();

  private constructor(private readonly options: SqliteWriterOptions) {}

  get #policy(): CheckpointPolicy {
    return this.options.policy ?? CHECKPOINT_POLICY;
  }

  /** Starts the writer thread and the background checkpointer; resolves once both have opened the database. */
  static async start(options: SqliteWriterOptions): Promise<SqliteWriter> {
    const w = new SqliteWriter(options);
    await w.#spawn();
    w.#checkpointer = await BackgroundCheckpointer.start(
      { file: options.file, synchronous: options.synchronous, everyMs: w.#policy.backgroundEveryMs, passes: w.#passes },
      observeCheckpoint,
    );
    return w;
  }

  #spawn(): Promise<Worker> {
    if (this.#starting) return this.#starting;
    const data: WriterWorkerData = {
      file: this.options.file,
      synchronous: this.options.synchronous,
      busyTimeoutMs: this.options.timeoutMs,
      policy: this.#policy,
      passes: this.#passes,
      walLimitBytes: WAL_LIMIT_BYTES,
      sql: WRITER_SQL,
      widths: { insert: INSERT_COLUMNS.length, outcome: OUTCOME_COLUMNS.length + 3, refusal: 3, head: BATCH_HEAD },
    };
    const worker = startSqliteThread(sqliteWriterMain, data, THREAD_NAMES.writer, [runCheckpoint, monotonicMs]);
    this.#starting = new Promise<Worker>((resolve, reject) => {
      worker.once('message', () => resolve(worker));
      worker.once('error', reject);
    });
    worker.on('message', (m: DoneMessage | CheckpointEvent | { t: 'ready' | 'stopped' }) => {
      if (Array.isArray(m)) this.#done(m);
      else if (m.t === 'checkpoint') observeCheckpoint(m);
    });
    worker.on('error', () => undefined); // reported through 'exit' below
    worker.once('exit', () => {
      if (this.#worker === worker) this.#worker = undefined;
      this.#starting = undefined;
      const lost = Object.assign(new Error('the SQLite writer thread stopped'), { code: 'SQLITE_IOERR_WRITER' });
      for (const w of this.#waiting.splice(0)) w.reject(lost);
    });
    return this.#starting.then((w) => {
      this.#worker = w;
      return w;
    });
  }

  /** Reads the thread's answer (layout: {@link DoneMessage}) and settles each batch's waiter. */
  #done(r: DoneMessage): void {
    for (let p = 0; p < r.length;) {
      const w = this.#take(r[p] as number);
      if (r[p + 1] === 1) {
        const code = r[p + 2] as string;
        w?.reject(Object.assign(new Error(r[p + 3] as string), code ? { code } : {}));
        p += 4;
        continue;
      }
      const k = r[p + 2] as number;
      const i = r.slice(p + 3, p + 3 + k) as number[];
      const seqs = r.slice(p + 3 + k, p + 3 + 2 * k) as number[];
      const m = r[p + 3 + 2 * k] as number;
      const completed = r.slice(p + 4 + 2 * k, p + 4 + 2 * k + m) as number[];
      p += 4 + 2 * k + m;
      w?.resolve({ inserted: i, seqs, completed });
    }
  }

  write(batch: WriteBatch, deadline: number): Promise<WriteResult> {
    const n = ++this.#n;
    const message: BatchMessage = [n, deadline, batch.inserts.length, batch.outcomes.length];
    for (const l of batch.inserts) pushInsert(message, l);
    for (const { ref, c } of batch.outcomes) pushOutcome(message, ref, c);
    for (const r of batch.refusals) message.push(r.projectId, r.id, r.at);
    return new Promise<WriteResult>((resolve, reject) => {
      this.#waiting.push({ n, resolve, reject });
      if (this.#worker) this.#worker.postMessage(message);
      else if (this.#closed) {
        this.#take(n);
        reject(Object.assign(new Error('the store is closed'), { code: 'SQLITE_MISUSE' }));
      } else
        this.#spawn().then(
          (w) => w.postMessage(message),
          (e: unknown) => {
            this.#take(n);
            reject(e);
          },
        );
    });
  }

  /** Removes and returns the waiter of batch `n`. */
  #take(n: number): BatchWaiter | undefined {
    const at = this.#waiting.findIndex((w) => w.n === n);
    return at < 0 ? undefined : this.#waiting.splice(at, 1)[0];
  }

  async close(): Promise<void> {
    this.#closed = true;
    // First the background passes, so that the writer's closing TRUNCATE finds the lock free.
    await this.#checkpointer?.close();
    if (this.#worker) await stopSqliteThread(this.#worker);
  }
}
