/**
 * The webhook dispatcher of one instance: claims due deliveries from the store, posts each to
 * its endpoint, logs the attempt and schedules the next one.
 *
 * - Exactly one instance per attempt: a claim moves the delivery's due time past the attempt
 *   (a lease), and on PostgreSQL takes the rows FOR UPDATE SKIP LOCKED (store/webhooks.ts).
 * - Survives restarts: deliveries are rows; a process killed mid-attempt leaves a lease that
 *   ends, and the delivery is tried again (the receiver drops the duplicate by `webhook-id`).
 * - Retries: exponential backoff from `retryBaseMs` (default 5 s), doubling to at most an hour
 *   between attempts, with ±20 % jitter, for a day from the first attempt; then `failed`.
 *   A redelivery starts a new day.
 * - The SSRF guard of the proxy applies: the connection dials only addresses the
 *   {@link TargetGuard} checked (allowTargets honoured), redirects are not followed.
 * - Woken at once when an event queues deliveries (NOTIFY `countersign_webhooks` on
 *   PostgreSQL reaches every instance), else it looks when the next delivery is due, and at
 *   least every {@link POLL_MS}.
 */
import { randomId } from '@countersign/core';
import type { Logger } from 'pino';
import { request, type Agent } from 'undici';
import type { Store } from '../store/index.js';
import type { DeliveryRow, WebhookRow } from '../store/index.js';
import { TargetBlockedError, TargetGuard } from '../proxy/ssrf.js';
import { createUpstreamAgent } from '../proxy/upstream.js';
import { metrics } from '../metrics/registry.js';
import { webhookHeaders } from './signing.js';

/** Longest wait between two looks at the queue, ms. */
export const POLL_MS = 1_000;
/** Retries stop this long after the first attempt of a schedule. */
export const RETRY_FOR_MS = 24 * 60 * 60 * 1000;
/** Longest wait between two attempts. */
export const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;
/** Deliveries claimed per pass, and attempts in flight at once. */
const CLAIM_BATCH = 32;
const CONCURRENCY = 8;

/**
 * When to try again after the `failures`-th failed attempt of a schedule that started at
 * `scheduleStart`, or null when retrying is over (a day has passed). `random` in [0, 1).
 */
export function nextRetryAt(failures: number, scheduleStart: number, now: number, baseMs: number, random = Math.random()): number | null {
  const delay = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.min(failures - 1, 30)) * (0.8 + 0.4 * random);
  const at = Math.round(now + delay);
  return at > scheduleStart + RETRY_FOR_MS ? null : at;
}

/** Settings of a {@link WebhookDispatcher}. */
export interface WebhookDispatcherOptions {
  store: Store;
  /** host:port entries admitted past the SSRF guard (config.allowTargets). */
  allowTargets: readonly string[];
  /** Per-attempt timeout (connect, headers and body), ms. */
  timeoutMs: number;
  /** First retry delay, ms. */
  retryBaseMs: number;
  now: () => number;
  log: Logger;
}

/** Delivers webhooks for one app instance. */
export class WebhookDispatcher {
  readonly guard: TargetGuard;
  readonly #agent: Agent;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  #unlisten: (() => void) | undefined;

  constructor(private readonly o: WebhookDispatcherOptions) {
    this.guard = new TargetGuard({ allowTargets: o.allowTargets });
    this.#agent = createUpstreamAgent(this.guard, { connect: o.timeoutMs, firstByte: o.timeoutMs, idle: o.timeoutMs });
  }

  /** Starts delivering (and resumes what a previous run left). */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#unlisten = this.o.store.notifier.on('countersign_webhooks', () => this.wake());
    this.#schedule(0);
  }

  /** Looks at the queue now (an event just queued deliveries). */
  wake(): void {
    if (this.#stopped) return;
    if (this.#running) this.#again = true;
    else this.#schedule(0);
  }

  /** Stops, waits for attempts in flight, closes connections. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unlisten?.();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
    await this.#agent.close();
  }

  /** One pass: claims due deliveries and attempts each. Returns how many were attempted. */
  async pass(): Promise<number> {
    const { store, now, timeoutMs } = this.o;
    const at = now();
    // The lease outlives the attempt's own timeout, so no other instance starts it meanwhile.
    const claimed = await store.webhooks.claimDue(at, at + timeoutMs + 30_000, CLAIM_BATCH);
    let next = 0;
    const worker = async () => {
      while (next < claimed.length) {
        const { delivery, webhook } = claimed[next++]!;
        await this.#attempt(delivery, webhook);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, claimed.length) }, worker));
    return claimed.length;
  }

  async #attempt(d: DeliveryRow, w: WebhookRow): Promise<void> {
    const { now, timeoutMs, log } = this.o;
    const attemptedAt = now();
    const started = performance.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    try {
      const res = await request(w.url, {
        method: 'POST',
        dispatcher: this.#agent,
        headers: { ...webhookHeaders(w.secret, d.id, Math.floor(attemptedAt / 1000), d.body), 'user-agent': 'Countersign-Webhooks/1' },
        body: d.body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      statusCode = res.statusCode;
      // The answer's body is not kept; reading a bounded part frees the connection.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      if (statusCode < 200 || statusCode > 299) error = `HTTP ${statusCode}`;
    } catch (err) {
      error = describe(err, timeoutMs);
    }
    const durationMs = Math.round((performance.now() - started) * 1000) / 1000;
    const failures = d.retryCount + 1;
    const retryAt = error === null ? null : nextRetryAt(failures, d.scheduleStart, now(), this.o.retryBaseMs);
    const next =
      error === null
        ? { state: 'delivered' as const }
        : retryAt === null
          ? { state: 'failed' as const }
          : { state: 'pending' as const, at: retryAt };
    metrics.webhookAttempts.inc({ result: next.state === 'pending' ? 'failed' : next.state === 'failed' ? 'gave_up' : 'delivered' });
    if (error !== null)
      log.warn({ webhookId: w.id, deliveryId: d.id, statusCode, error, next: next.state }, 'webhook delivery attempt failed');
    try {
      await this.o.store.webhooks.recordAttempt(d, { attemptId: 'wat_' + randomId(20), attemptedAt, statusCode, error, durationMs, next });
    } catch (err) {
      // The lease runs out and the delivery is tried again: at least once, never lost.
      log.error({ err, deliveryId: d.id }, 'could not record a webhook attempt');
    }
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#running = this.#run().finally(() => (this.#running = undefined));
      },
      Math.max(0, delayMs),
    );
    this.#timer.unref();
  }

  async #run(): Promise<void> {
    let delay = POLL_MS;
    try {
      // A full batch may mean more are due: go on at once.
      while (!this.#stopped && (await this.pass()) === CLAIM_BATCH);
      const due = await this.o.store.webhooks.nextDueAt();
      if (due !== undefined) delay = Math.min(POLL_MS, Math.max(10, due - this.o.now()));
    } catch (err) {
      this.o.log.warn({ err }, 'webhook dispatcher pass failed; retrying');
    }
    if (this.#again) {
      this.#again = false;
      delay = 0;
    }
    // #running is still set here, so schedule after it clears.
    setImmediate(() => this.#schedule(delay));
  }
}

/** A short, secret-free description of a failed attempt. */
function describe(err: unknown, timeoutMs: number): string {
  if (err instanceof TargetBlockedError) return `blocked: ${err.message}`;
  const e = err as { name?: string; code?: string; message?: string; cause?: unknown };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError' || e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT')
    return `timeout after ${timeoutMs} ms`;
  if (e?.cause instanceof TargetBlockedError) return `blocked: ${e.cause.message}`;
  return (e?.code ?? e?.name ?? 'error') + (e?.message ? `: ${e.message.slice(0, 200)}` : '');
}
