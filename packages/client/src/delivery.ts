/**
 * Background delivery of sealed logs to `POST /v1/log`: an ordered in-memory queue, batches of
 * logs that share the same context headers, a few requests in flight, retries with exponential
 * backoff and full jitter (or the server's `Retry-After`), and a failure path that receives
 * every log that could not be delivered, in the order the logs were queued.
 *
 * Every log carries its client-made id, so a retry of a batch the server already stored answers
 * `duplicate` instead of storing it twice (the server's idempotency rule).
 */
import type { Envelope, LogIngestEntry } from '@countersign/core';
import { ClientError } from './errors.js';
import type { DeliveryOptions } from './config.js';

/** A log as the client sends it in `POST /v1/log`: always a client-sealed envelope with its id and hash. */
export type WireEntry = LogIngestEntry & { id: string; payload: Envelope; payloadHash: string };

/** A log waiting for delivery, or handed to the failure path: the entry and its context headers (never credentials). */
export interface FailedLog {
  entry: WireEntry;
  /** Agent context headers the log was sent with (`x-service-run-id`, `traceparent`, `x-agent-rationale` (encrypted), …). */
  headers: Record<string, string>;
}

/** Why logs reached the failure path. */
export type DeliveryFailureReason = 'rejected' | 'retries_exhausted' | 'queue_full' | 'shutdown';

/** What `onDeliveryFailure` receives. */
export interface DeliveryFailure {
  /** The logs, in the order they were queued. */
  logs: FailedLog[];
  /** `rejected` (the server refused them: 4xx), `retries_exhausted`, `queue_full`, or `shutdown` (abandoned at the shutdown deadline). */
  reason: DeliveryFailureReason;
  /** The last error. */
  error: Error;
  /** HTTP status of the last answer, if there was one. */
  status?: number;
  /** The server's error code of the last answer, if there was one. */
  serverCode?: string;
  /** Requests made for these logs. */
  attempts: number;
}

/** A callback for undeliverable logs. It is called once per failed batch, one call at a time, in queue order. */
export type DeliveryFailureHandler = (failure: DeliveryFailure) => void | Promise<void>;

/** An object that takes undeliverable logs (e.g. `FileFallbackTransport`); may be passed as `onDeliveryFailure`. */
export interface DeliveryFailureSink {
  /** Takes one failure; resolves once it is safely kept. */
  handleDeliveryFailure(failure: DeliveryFailure): Promise<void>;
}

/** The server's answer to a delivered batch. */
export interface BatchResult {
  ids: string[];
  duplicates: number;
}

const RETRYABLE = new Set([408, 425, 429, 500, 502, 503, 504]);

/**
 * The delay a `Retry-After` header asks for, in ms (delta-seconds or an HTTP date), or undefined.
 */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Full-jitter exponential backoff: a random delay in [0, min(max, base·2^attempt)]. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.floor(Math.random() * Math.min(maxMs, baseMs * 2 ** attempt));
}

/** One HTTP attempt's outcome. */
type Attempt = { ok: true; result: BatchResult } | { ok: false; retryable: boolean; error: ClientError; retryAfter?: number };

/**
 * Posts one batch once. Network errors and 408/425/429/5xx are retryable; other answers are not.
 */
export async function postLogBatch(endpoint: string, apiKey: string, logs: FailedLog[], signal: AbortSignal): Promise<Attempt> {
  let res: Response;
  try {
    res = await fetch(endpoint + '/v1/log', {
      method: 'POST',
      headers: { ...logs[0]!.headers, authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ logs: logs.map((l) => l.entry) }),
      signal,
    });
  } catch (cause) {
    const why = cause instanceof Error && cause.name === 'TimeoutError' ? 'timed out' : 'could not reach the endpoint';
    return { ok: false, retryable: true, error: new ClientError('request_failed', `POST /v1/log ${why}`, { cause }) };
  }
  const text = await res.text().catch(() => '');
  let body: { ids?: string[]; duplicates?: number; error?: { code?: string; message?: string } } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    /* a gateway's HTML error page: the status says enough */
  }
  if (res.ok) return { ok: true, result: { ids: body.ids ?? [], duplicates: body.duplicates ?? 0 } };
  const error = new ClientError(
    'request_failed',
    `POST /v1/log answered ${res.status}: ${body.error?.message ?? (text.slice(0, 200) || res.statusText)}`,
    {
      status: res.status,
      serverCode: body.error?.code,
    },
  );
  return { ok: false, retryable: RETRYABLE.has(res.status), error, retryAfter: retryAfterMs(res.headers.get('retry-after')) };
}

/** A queued log; `log` is undefined while it is still being sealed (its place in the order is kept). */
interface Slot {
  log: FailedLog | undefined;
  group: string;
  /**
   * `performance.now()` when reserved. Not `Date.now()`: a wall clock stepped back made `waited`
   * negative and held a filling batch for the length of the step (an hour back, an hour held).
   */
  queuedAt: number;
}

/** Delivery settings plus where to send. */
export interface DeliverySettings extends Required<DeliveryOptions> {
  endpoint: string;
  apiKey: string;
  onDeliveryFailure: DeliveryFailureHandler | undefined;
}

/** The ordered queue and its sender. One per `ServiceClient`. */
export class DeliveryQueue {
  readonly #s: DeliverySettings;
  readonly #queue: Slot[] = [];
  #inflight = 0;
  #timer: NodeJS.Timeout | undefined;
  #flushing = 0;
  #idleWaiters: Array<() => void> = [];
  /** Failures are released in batch order, one handler call at a time. */
  #nextSeq = 0;
  #releaseSeq = 0;
  readonly #finished = new Map<number, DeliveryFailure | null>();
  #failureChain: Promise<void> = Promise.resolve();
  readonly #abandon = new AbortController();
  /** Logs delivered and duplicates seen, for stats. */
  readonly stats = { delivered: 0, duplicates: 0, failed: 0, requests: 0 };

  constructor(settings: DeliverySettings) {
    this.#s = settings;
  }

  /** Logs queued or in flight. */
  get pending(): number {
    return this.#queue.length + this.#inflight;
  }

  /**
   * Reserves the next place in the queue for a log that is still being prepared; call
   * `fill` with it once sealed, or `cancel` if preparing failed. Returns undefined when the
   * queue is full (the caller hands the log to the failure path instead).
   */
  reserve(group: string): { fill: (log: FailedLog) => void; cancel: () => void } | undefined {
    if (this.#queue.length >= this.#s.maxQueueSize) return undefined;
    const slot: Slot = { log: undefined, group, queuedAt: performance.now() };
    this.#queue.push(slot);
    return {
      fill: (log) => {
        slot.log = log;
        // While a batch is filling and its timer runs, a new log needs no scan of the queue.
        if (this.#timer && this.#flushing === 0 && this.#queue.length < this.#s.batchSize) return;
        this.#pump();
      },
      cancel: () => {
        const i = this.#queue.indexOf(slot);
        if (i >= 0) this.#queue.splice(i, 1);
        this.#pump();
      },
    };
  }

  /** Hands logs straight to the failure path (queue full), keeping the failure order. */
  reject(logs: FailedLog[], reason: DeliveryFailureReason, error: Error): void {
    this.#finish(this.#nextSeq++, { logs, reason, error, attempts: 0 });
  }

  /** Resolves when every log queued so far is delivered or handed to the failure path, and the handler has finished. */
  async flush(): Promise<void> {
    this.#flushing++;
    try {
      this.#pump();
      while (!this.#idle()) await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
      await this.#failureChain;
    } finally {
      this.#flushing--;
    }
  }

  /**
   * Stops retrying: waiting and in-flight batches and everything still queued go to the failure
   * path with reason `shutdown`. Used when a shutdown deadline passes.
   */
  abandon(): void {
    this.#abandon.abort(new ClientError('client_closed', 'delivery abandoned at the shutdown deadline'));
    this.#pump();
  }

  #idle(): boolean {
    return this.#queue.length === 0 && this.#inflight === 0;
  }

  #pump(): void {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    while (this.#inflight < this.#s.maxConcurrentRequests || this.#abandon.signal.aborted) {
      const head = this.#queue[0];
      if (!head || !head.log) break;
      let n = 0;
      while (n < this.#s.batchSize && n < this.#queue.length && this.#queue[n]!.log && this.#queue[n]!.group === head.group) n++;
      const full = n === this.#s.batchSize || (n < this.#queue.length && this.#queue[n]!.log !== undefined);
      const waited = performance.now() - head.queuedAt;
      if (!full && this.#flushing === 0 && !this.#abandon.signal.aborted && waited < this.#s.flushIntervalMs) {
        // Let the batch fill; the timer does not keep the process alive (beforeExit flushes).
        this.#timer = setTimeout(() => this.#pump(), this.#s.flushIntervalMs - waited);
        this.#timer.unref();
        break;
      }
      const batch = this.#queue.splice(0, n).map((s) => s.log!);
      const seq = this.#nextSeq++;
      this.#inflight++;
      void this.#deliver(batch)
        .then((failure) => this.#finish(seq, failure))
        .finally(() => {
          this.#inflight--;
          this.#pump();
        });
    }
    if (this.#idle()) for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  /** Delivers a batch with retries; resolves to null on success or to the failure to report. */
  async #deliver(batch: FailedLog[]): Promise<DeliveryFailure | null> {
    let attempts = 0;
    for (;;) {
      if (this.#abandon.signal.aborted) return { logs: batch, reason: 'shutdown', error: this.#abandon.signal.reason as Error, attempts };
      attempts++;
      this.stats.requests++;
      const signal = AbortSignal.any([AbortSignal.timeout(this.#s.requestTimeoutMs), this.#abandon.signal]);
      const r = await postLogBatch(this.#s.endpoint, this.#s.apiKey, batch, signal);
      if (r.ok) {
        this.stats.delivered += batch.length - r.result.duplicates;
        this.stats.duplicates += r.result.duplicates;
        return null;
      }
      if (r.error.status === 413 && batch.length > 1) {
        // The server takes fewer logs per request than we batch: halve and go on.
        const half = Math.ceil(batch.length / 2);
        const a = await this.#deliver(batch.slice(0, half));
        const b = await this.#deliver(batch.slice(half));
        if (!a) return b;
        return b ? { ...b, logs: [...a.logs, ...b.logs] } : a;
      }
      if (this.#abandon.signal.aborted) return { logs: batch, reason: 'shutdown', error: r.error, status: r.error.status, attempts };
      const base = { logs: batch, error: r.error, status: r.error.status, serverCode: r.error.serverCode, attempts };
      if (!r.retryable) return { ...base, reason: 'rejected' };
      if (attempts > this.#s.maxRetries) return { ...base, reason: 'retries_exhausted' };
      const wait = Math.min(
        this.#s.maxRetryDelayMs,
        r.retryAfter ?? backoffMs(attempts - 1, this.#s.retryBaseDelayMs, this.#s.maxRetryDelayMs),
      );
      await this.#sleep(wait);
    }
  }

  /** A wait that ends early when delivery is abandoned. Referenced: a retry keeps the process alive. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const signal = this.#abandon.signal;
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Records a batch outcome and releases failures to the handler in batch order. */
  #finish(seq: number, failure: DeliveryFailure | null): void {
    this.#finished.set(seq, failure);
    while (this.#finished.has(this.#releaseSeq)) {
      const f = this.#finished.get(this.#releaseSeq)!;
      this.#finished.delete(this.#releaseSeq);
      this.#releaseSeq++;
      if (!f) continue;
      this.stats.failed += f.logs.length;
      const handler = this.#s.onDeliveryFailure;
      this.#failureChain = this.#failureChain.then(async () => {
        if (!handler) {
          process.emitWarning(
            `Countersign: ${f.logs.length} log(s) could not be delivered (${f.reason}: ${f.error.message}); set onDeliveryFailure to keep them`,
            { code: 'COUNTERSIGN_DELIVERY_FAILED' },
          );
          return;
        }
        try {
          await handler(f);
        } catch (err) {
          process.emitWarning(`Countersign: onDeliveryFailure threw: ${err instanceof Error ? err.message : String(err)}`, {
            code: 'COUNTERSIGN_DELIVERY_HANDLER_FAILED',
          });
        }
      });
    }
  }
}
