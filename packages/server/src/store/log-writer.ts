/**
 * The hot write path of the store: log inserts (the proxy's write-ahead record, `/v1/log`
 * entries) and proxy outcomes. Everything submitted in one turn of the event loop becomes one
 * batch, handed to a backend that owns its own connection and commits off the event loop: a
 * worker thread on SQLite (sqlite-writer.ts), one dedicated connection with one multi-row
 * statement per batch on PostgreSQL (pg-writer.ts). Each caller's promise settles when its rows
 * are durable (or refused), never before.
 *
 * Deadline. A store that hangs (a table locked by another session, a database that stopped
 * answering) must not make calls wait for ever: every batch has a deadline
 * (`COUNTERSIGN_STORE_TIMEOUT_MS`, from submission, on the monotonic clock: a step of the wall
 * clock moves no deadline, monotonic-clock.ts), after which its callers get
 * {@link StoreTimeoutError} (503 `log_store_unavailable`; the proxy forwards nothing). The
 * backends refuse to commit rows past their deadline (the SQLite worker rolls such a
 * transaction back; PostgreSQL's `statement_timeout` cancels the statement), so a timed-out row
 * normally never lands. Should one land anyway (its commit raced the deadline, or an error hid
 * a commit that happened), a `pending` proxy record the caller was told about as refused is
 * marked `failed` by a compensating write, retried until the store takes it: a record is
 * never left pending by a call that got 503 (docs/proxy.md, "Store deadline").
 */
import { channel } from 'node:diagnostics_channel';
import { STORE_BATCH_CHANNEL } from './diagnostics-channels.js';
import { BusyClock, metrics, queueDepth } from '../metrics/registry.js';
import { SlotSet } from '../slot-set.js';
import { monotonicMs } from '../monotonic-clock.js';
import type { LogCompletion, NewLog } from './logs.js';

/** A write-ahead record a caller was refused for: made `failed` if it is (or becomes) stored as pending. */
export interface Refusal {
  projectId: string;
  id: string;
  at: number;
}

/**
 * The stored row an outcome completes: its project and id (unique together, migration 005) and,
 * when the caller has it from the insert of the pending record, its `seq` (the primary key). The
 * backends find the row by `seq`, else by the unique (project, id) index: never by id alone,
 * which no index serves.
 */
export interface RowRef {
  projectId: string;
  id: string;
  seq?: number | undefined;
}

/** One group of writes, committed by a backend as one transaction per kind (or one in all). */
export interface WriteBatch {
  inserts: NewLog[];
  outcomes: Array<{ ref: RowRef; c: LogCompletion }>;
  refusals: Refusal[];
}

/**
 * Per row: 1 written, 0 not (an insert whose project and id existed; an outcome for a sealed or
 * unknown record), 2 expired (not written: past the deadline). `seqs` holds the `seq` of each
 * insert written (0 for the others).
 */
export interface WriteResult {
  inserted: RowCodes;
  seqs: RowCodes;
  completed: RowCodes;
}

/**
 * A result column. Plain arrays on both backends, not typed ones: each typed array brings a
 * memory block of its own for the young generation's collector to free in its pause.
 */
export type RowCodes = number[];

/** Row code in a {@link WriteResult}. */
export const WRITTEN = 1;
/** Row code in a {@link WriteResult}: the backend did not write the row because its deadline had passed. */
export const EXPIRED = 2;

/** What commits batches: owns its connection, keeps its own order. */
export interface WriteBackend {
  /**
   * How many calls to `write` may be under way at once. Infinity: every turn's batch is handed
   * over at once (the backend coalesces them itself); otherwise batches queue while that many
   * are in flight, and the next call carries everything queued meanwhile.
   */
  readonly maxInflight: number;
  /** Commits `batch`, writing nothing once `deadline` ({@link monotonicMs}) has passed. */
  write(batch: WriteBatch, deadline: number): Promise<WriteResult>;
  /** Finishes what was handed over, then releases the connection. */
  close(): Promise<void>;
}

/** One settled batch, as published on `STORE_BATCH_CHANNEL` (diagnostics-channels.ts); times in epoch ms, fractional. */
export interface BatchEvent {
  /** When the oldest write it carries was submitted. */
  submittedAt: number;
  /** When it was handed to the backend (the gap to `submittedAt` is the queue). */
  sentAt: number;
  /** When the backend answered (or failed). */
  doneAt: number;
  inserts: number;
  outcomes: number;
  ok: boolean;
}

const batchChannel = channel(STORE_BATCH_CHANNEL);

/** The store did not commit in time; nothing of the call should go further. */
export class StoreTimeoutError extends Error {
  /** Stable code, recognised by `isStoreUnavailable` (503 `log_store_unavailable`). */
  readonly code = 'STORE_TIMEOUT';
  constructor(ms: number) {
    super(`the store did not commit within ${ms} ms`);
    this.name = 'StoreTimeoutError';
  }
}

/** A caller waiting for its row; an insert's learns the row's seq (0: its project had the id), an outcome's whether it was written. */
interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (e: unknown) => void;
}

/** The writes of one turn of the event loop, until they settle. */
class Part {
  readonly batch: WriteBatch = { inserts: [], outcomes: [], refusals: [] };
  readonly insertWaiters: Array<Waiter<number>> = [];
  readonly outcomeWaiters: Array<Waiter<boolean>> = [];
  /** Callers were told it failed; its result now only decides compensation. */
  abandoned = false;
  /** When its first write was submitted (epoch ms), kept only while someone watches the batch channel. */
  readonly submittedAt = batchChannel.hasSubscribers ? performance.timeOrigin + performance.now() : 0;
  constructor(readonly deadline: number) {}
}

/** Most rows one backend call carries (when queued parts are merged). */
const MAX_ROWS = 1000;
/** Compensations kept while the store refuses them (each a few hundred bytes); past this the oldest go to the orphan sweep. */
const MAX_REFUSALS = 100_000;
/** Extra wait for a batch already handed to the backend, which enforces the deadline itself. */
const HANDED_OVER_GRACE_MS = 25;

/** Group-commits inserts and outcomes through a {@link WriteBackend} with a deadline. */
export class LogWriter {
  #open: Part | undefined;
  /** Parts waiting for the backend (when `maxInflight` calls are under way), oldest first. */
  #queued: Part[] = [];
  /** Handed to the backend, not settled, oldest first. */
  #inflight = new SlotSet<Part[]>();
  #refusals = new Map<string, Refusal>();
  #sweeper: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;
  #idle: Array<() => void> = [];
  readonly #insertDepth = queueDepth('log_inserts');
  readonly #outcomeDepth = queueDepth('proxy_outcomes');
  readonly #busyClock = new BusyClock();
  readonly #commitOk = {
    ins: metrics.storeCommitSeconds.labels('log_inserts', 'ok'),
    out: metrics.storeCommitSeconds.labels('proxy_outcomes', 'ok'),
  };
  readonly #commitError = {
    ins: metrics.storeCommitSeconds.labels('log_inserts', 'error'),
    out: metrics.storeCommitSeconds.labels('proxy_outcomes', 'error'),
  };
  readonly #batchSize = { ins: metrics.storeBatchSize.labels('log_inserts'), out: metrics.storeBatchSize.labels('proxy_outcomes') };

  constructor(
    private readonly backend: WriteBackend,
    /** Deadline of every write, ms from submission. */
    readonly timeoutMs: number,
  ) {}

  /** Inserts one entry; resolves with its `seq`, or 0 when its project already had that id. */
  insert(log: NewLog): Promise<number> {
    return new Promise((resolve, reject) => {
      const part = this.#part();
      part.batch.inserts.push(log);
      part.insertWaiters.push({ resolve, reject });
      this.#insertDepth.value++;
    });
  }

  /** Writes the outcome of a proxied exchange; false when the record was sealed into a proof batch (or is unknown). */
  complete(ref: RowRef, c: LogCompletion): Promise<boolean> {
    return new Promise((resolve, reject) => {
      const part = this.#part();
      part.batch.outcomes.push({ ref, c });
      part.outcomeWaiters.push({ resolve, reject });
      this.#outcomeDepth.value++;
    });
  }

  /** Compensations not yet written (a store that refuses them keeps them here). */
  get owedRefusals(): number {
    return this.#refusals.size;
  }

  /** Resolves once nothing submitted is waiting for the backend. */
  drain(): Promise<void> {
    if (this.#busy()) return new Promise((resolve) => this.#idle.push(resolve));
    return Promise.resolve();
  }

  /** Drains, then closes the backend. */
  async close(): Promise<void> {
    await this.drain();
    if (this.#retry) clearTimeout(this.#retry);
    await this.backend.close();
  }

  #busy(): boolean {
    return this.#open !== undefined || this.#queued.length > 0 || this.#inflight.size > 0;
  }

  #part(): Part {
    if (this.#open) return this.#open;
    const part = new Part(monotonicMs() + this.timeoutMs);
    this.#open = part;
    setImmediate(() => this.#endTurn());
    this.#sweep(true);
    return part;
  }

  #endTurn(): void {
    const part = this.#open!;
    this.#open = undefined;
    // Only when there is something: `Map#clear` allocates the map a new table, and for a map
    // that lives in the old generation V8 allocates it there, so clearing an empty map once a
    // turn promoted ~280 bytes per call (the sampling heap profiler, keeping what outlived the
    // scavenges) and brought the full GCs sooner.
    if (this.#refusals.size > 0) {
      for (const r of this.#refusals.values()) part.batch.refusals.push(r);
      this.#refusals.clear();
    }
    this.#queued.push(part);
    this.#pump();
  }

  /** Hands queued parts over while fewer than `maxInflight` calls are under way. */
  #pump(): void {
    while (this.#inflight.size < this.backend.maxInflight && this.#queued.length > 0) this.#sendQueued();
  }

  #sendQueued(): void {
    const parts: Part[] = [];
    let rows = 0;
    while (this.#queued.length > 0) {
      const next = this.#queued[0]!;
      const size = next.batch.inserts.length + next.batch.outcomes.length;
      if (parts.length > 0 && rows + size > MAX_ROWS) break;
      parts.push(this.#queued.shift()!);
      rows += size;
    }
    this.#send(parts);
  }

  #send(parts: Part[]): void {
    const batch: WriteBatch =
      parts.length === 1
        ? parts[0]!.batch
        : {
            inserts: parts.flatMap((p) => p.batch.inserts),
            outcomes: parts.flatMap((p) => p.batch.outcomes),
            refusals: parts.flatMap((p) => p.batch.refusals),
          };
    const deadline = Math.min(...parts.map((p) => p.deadline));
    this.#inflight.add(parts);
    const started = performance.now();
    if (this.#inflight.size === 1) this.#busyClock.start(started);
    if (batch.inserts.length > 0) this.#batchSize.ins.observe(batch.inserts.length);
    if (batch.outcomes.length > 0) this.#batchSize.out.observe(batch.outcomes.length);
    this.backend.write(batch, deadline).then(
      (result) => {
        this.#settle(parts, result, undefined, this.#observe(parts, batch, started, true));
      },
      (error: unknown) => {
        this.#settle(parts, undefined, error, this.#observe(parts, batch, started, false));
      },
    );
  }

  /** Records the settled batch in the metrics and the diagnostics channel; returns the time it read. */
  #observe(parts: Part[], batch: WriteBatch, started: number, ok: boolean): number {
    const now = performance.now();
    const seconds = (now - started) / 1000;
    if (batchChannel.hasSubscribers) publishBatch(parts, batch, started, now, ok);
    const h = ok ? this.#commitOk : this.#commitError;
    if (batch.inserts.length > 0) h.ins.observe(seconds);
    if (batch.outcomes.length > 0) h.out.observe(seconds);
    return now;
  }

  /** Answers the batch's callers; `now` ends the writer's busy period when it was the last in flight. */
  #settle(parts: Part[], result: WriteResult | undefined, error: unknown, now: number): void {
    this.#inflight.delete(parts);
    if (this.#inflight.size === 0) this.#busyClock.stop(now);
    let i = 0;
    let o = 0;
    for (const part of parts) {
      const { inserts, outcomes, refusals } = part.batch;
      if (!result) for (const r of refusals) this.#owe(r);
      for (let k = 0; k < inserts.length; k++, i++) {
        const code = result ? result.inserted[i]! : 0;
        const log = inserts[k]!;
        // A pending record whose caller was told "refused" must not stay pending: it landed after
        // the deadline, or the backend failed in a way that may hide a commit (a connection lost
        // during COMMIT). The compensation is a no-op for a row that is not there.
        if (log.status === 'pending' && (result ? part.abandoned && code === WRITTEN : true))
          this.#owe({ projectId: log.projectId, id: log.id, at: Date.now() });
        if (part.abandoned) continue;
        const w = part.insertWaiters[k]!;
        if (!result) w.reject(error);
        else if (code === EXPIRED) w.reject(new StoreTimeoutError(this.timeoutMs));
        else w.resolve(code === WRITTEN ? result.seqs[i]! : 0);
      }
      for (let k = 0; k < outcomes.length; k++, o++) {
        if (part.abandoned) continue;
        const code = result ? result.completed[o]! : 0;
        const w = part.outcomeWaiters[k]!;
        if (!result) w.reject(error);
        else if (code === EXPIRED) w.reject(new StoreTimeoutError(this.timeoutMs));
        else w.resolve(code === WRITTEN);
      }
      this.#insertDepth.value -= part.abandoned ? 0 : inserts.length;
      this.#outcomeDepth.value -= part.abandoned ? 0 : outcomes.length;
    }
    this.#pump();
    this.#afterSettle();
  }

  #afterSettle(): void {
    if (this.#refusals.size > 0) this.#scheduleRetry();
    if (!this.#busy()) {
      this.#sweep(false);
      this.#idle.splice(0).forEach((f) => f());
    }
  }

  #owe(r: Refusal): void {
    if (this.#refusals.size >= MAX_REFUSALS) this.#refusals.delete(this.#refusals.keys().next().value as string);
    this.#refusals.set(r.projectId + '\u0000' + r.id, r);
  }

  /** Owed compensations ride on the next batch; without traffic, one is made for them. */
  #scheduleRetry(): void {
    if (this.#retry) return;
    this.#retry = setTimeout(
      () => {
        this.#retry = undefined;
        if (this.#refusals.size > 0 && !this.#open) this.#part();
      },
      Math.min(1000, this.timeoutMs),
    );
    this.#retry.unref();
  }

  /** Runs the deadline check while anything is unsettled. */
  #sweep(on: boolean): void {
    if (on && !this.#sweeper) {
      this.#sweeper = setInterval(() => this.#expire(), Math.max(5, Math.min(250, Math.floor(this.timeoutMs / 5))));
      this.#sweeper.unref();
    } else if (!on && this.#sweeper) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }

  #expire(): void {
    const now = monotonicMs();
    while (this.#queued.length > 0 && this.#queued[0]!.deadline <= now) {
      const part = this.#queued.shift()!;
      this.#abandon(part);
      // Never handed over: nothing of it was written; its compensations are still owed.
      for (const r of part.batch.refusals) this.#owe(r);
    }
    for (const parts of this.#inflight)
      for (const part of parts) if (!part.abandoned && part.deadline + HANDED_OVER_GRACE_MS <= now) this.#abandon(part);
    this.#afterSettle();
  }

  #abandon(part: Part): void {
    part.abandoned = true;
    const e = new StoreTimeoutError(this.timeoutMs);
    for (const w of part.insertWaiters) w.reject(e);
    for (const w of part.outcomeWaiters) w.reject(e);
    this.#insertDepth.value -= part.batch.inserts.length;
    this.#outcomeDepth.value -= part.batch.outcomes.length;
  }
}

/** Publishes a settled batch on {@link STORE_BATCH_CHANNEL} (only called while someone subscribes). */
function publishBatch(parts: Part[], batch: WriteBatch, started: number, done: number, ok: boolean): void {
  const origin = performance.timeOrigin;
  // A part made before the first subscriber carries no submission time: its queue is unknown, so 0.
  const submitted = Math.min(...parts.map((p) => p.submittedAt || origin + started));
  const event: BatchEvent = {
    submittedAt: submitted,
    sentAt: origin + started,
    doneAt: origin + done,
    inserts: batch.inserts.length,
    outcomes: batch.outcomes.length,
    ok,
  };
  batchChannel.publish(event);
}
