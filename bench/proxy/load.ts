/**
 * Load generation for the proxy benchmark: open loop at a fixed rate (latency from each
 * request's SCHEDULED time, so a stall of the system under test is charged to every request it
 * delays: no coordinated omission), closed-loop saturation, and SSE time to first event.
 * Latencies go into HDR histograms in microseconds.
 */
import * as hdr from 'hdr-histogram-js';
import { Worker } from 'node:worker_threads';
import { Pool } from 'undici';

/** How one target is called: origin, path, method, headers, body. */
export interface CallSpec {
  origin: string;
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

/** What every benchmark call sends: a small chat-style JSON request. */
const REQUEST = { model: 'm', prompt: 'hello' };

/** The body of every benchmark call, as bytes on the wire ({@link REQUEST}). */
export const REQUEST_BODY = JSON.stringify(REQUEST);

/**
 * The SSE stream whose first event the benchmarks time: 50 events, the 49 after the first in one
 * write, so that the destination's burst of writes on the caller's core does not hold the caller
 * back (docs/performance.md, "Where the SSE first-event overhead goes").
 */
export const FIRST_EVENT_STREAM = '/sse?n=50&rest=together';

/** `POST /json` with {@link REQUEST_BODY} to `origin`: the upstream itself, or a proxy that passes the path on. */
export function plainJsonCall(origin: string): CallSpec {
  return { origin, path: '/json', method: 'POST', headers: { 'content-type': 'application/json' }, body: REQUEST_BODY };
}

/** A `POST /v1/proxy` call of Countersign at `origin` to `target`, sealed with `encryptionKey`. */
export function proxyDoorCall(origin: string, apiKey: string, encryptionKey: string, target: string): CallSpec {
  return {
    origin,
    path: '/v1/proxy',
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': encryptionKey },
    body: JSON.stringify({ target, payload: REQUEST }),
  };
}

/**
 * The same call through forward mode (`/v1/forward/{upstream}/…`, the SDK drop-in): `path`
 * (e.g. `/json`) on the upstream named `bench` (the benchmark's COUNTERSIGN_UPSTREAMS), the body
 * streamed as the caller sends it; `GET` when there is no body.
 */
export function forwardDoorCall(origin: string, apiKey: string, encryptionKey: string, path: string, body?: string): CallSpec {
  const headers: Record<string, string> = { 'x-service-key': apiKey, 'x-service-encryption-key': encryptionKey };
  if (body === undefined) return { origin, path: '/v1/forward/bench' + path, method: 'GET', headers };
  return { origin, path: '/v1/forward/bench' + path, method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body };
}

/** Histogram of microseconds, 1 µs to 60 s at 3 significant digits. */
export function histogram(): hdr.Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
}

/** A pooled client for one target (one per target, reused by every scenario). */
export function clientFor(spec: CallSpec): Pool {
  return new Pool(spec.origin, { connections: 256, pipelining: 1, keepAliveTimeout: 30_000 });
}

/** One call from `since` (a performance.now() time): [µs to headers, µs to the body's end]; throws on a non-200. */
export async function callOnce(pool: Pool, spec: CallSpec, since: number = performance.now()): Promise<[number, number]> {
  const r = await pool.request({ path: spec.path, method: spec.method, headers: spec.headers, body: spec.body });
  const headersAt = performance.now();
  for await (const chunk of r.body) void chunk;
  if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
  return [(headersAt - since) * 1000, (performance.now() - since) * 1000];
}

/** What a fixed-rate run measured. */
export interface RateRun {
  /** Requests completed with 200. */
  ok: number;
  errors: number;
  /** Latency from the scheduled send time to the end of the body, µs. */
  total: hdr.Histogram;
  /** From the scheduled send time to the response headers, µs. */
  ttfb: hdr.Histogram;
  /** Achieved completion rate, req/s. */
  achievedRps: number;
}

/**
 * Open loop: request i is due at start + i / rate; every due request is sent at once, whatever
 * the answers to earlier ones do, and its latency counts from when it was due. `each`, when
 * given, sees every answered request: when it was due (epoch ms) and its latency (µs).
 */
export async function openLoop(
  pool: Pool,
  spec: CallSpec,
  rate: number,
  seconds: number,
  each?: (dueEpochMs: number, totalUs: number) => void,
): Promise<RateRun> {
  const total = histogram();
  const ttfb = histogram();
  let ok = 0;
  let errors = 0;
  const n = Math.max(1, Math.round(rate * seconds));
  const gapMs = 1000 / rate;
  const inflight = new Set<Promise<void>>();
  const start = performance.now() + 1;
  for (let sent = 0; sent < n;) {
    const now = performance.now();
    for (; sent < n && start + sent * gapMs <= now; sent++) {
      const due = start + sent * gapMs;
      const p: Promise<void> = callOnce(pool, spec, due).then(
        ([h, t]) => {
          ok++;
          ttfb.recordValue(Math.max(1, Math.round(h)));
          total.recordValue(Math.max(1, Math.round(t)));
          each?.(performance.timeOrigin + due, t);
        },
        () => void errors++,
      );
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
    }
    if (sent < n) await sleepUntil(start + sent * gapMs);
  }
  await Promise.all(inflight);
  const elapsed = (performance.now() - start) / 1000;
  return { ok, errors, total, ttfb, achievedRps: ok / elapsed };
}

/**
 * Sleeping until a request is due. libuv's timers have 1 ms granularity, too coarse for 1,000
 * req/s; busy-waiting for the last millisecond (the old way, PROXY_BENCH_SPIN=1) is punctual
 * but kept the load core 80-90 % busy at 1,000 req/s, starving what shares that core (the
 * upstream, and PostgreSQL's backend, which no core is reserved for). So a small clock thread
 * sleeps in `Atomics.wait` (a futex with a sub-millisecond timeout, no spinning) until each due
 * time and wakes the event loop with a message: requests go out within ~0.1 ms of their due
 * time at a few µs of CPU each.
 */
const SPIN = process.env.PROXY_BENCH_SPIN === '1';

const CLOCK_SOURCE = `
const { parentPort } = require('node:worker_threads');
const cell = new Int32Array(new SharedArrayBuffer(4));
parentPort.on('message', (at) => {
  for (let left = at - performance.timeOrigin - performance.now(); left > 0; left = at - performance.timeOrigin - performance.now())
    Atomics.wait(cell, 0, 0, left);
  parentPort.postMessage(0);
});`;

let clock: Worker | undefined;

/** The clock thread, started on first use and not keeping the process alive. */
function clockThread(): Worker {
  if (!clock) {
    clock = new Worker(CLOCK_SOURCE, { eval: true });
    clock.unref();
  }
  return clock;
}

/** Waits until `at` (performance.now() time). */
async function sleepUntil(at: number): Promise<void> {
  const wait = at - performance.now();
  if (wait <= 0) return;
  if (SPIN) {
    if (wait > 1.5) await new Promise((r) => setTimeout(r, Math.floor(wait - 1)));
    while (performance.now() < at) await new Promise((r) => setImmediate(r));
    return;
  }
  // Long waits on a timer; the last 2 ms (or a short wait) on the clock thread, in epoch ms.
  if (wait > 3) await new Promise((r) => setTimeout(r, Math.floor(wait - 2)));
  const t = clockThread();
  await new Promise<void>((r) => {
    t.once('message', () => r());
    t.postMessage(performance.timeOrigin + at);
  });
}

/** Closed loop with `connections` callers for `seconds`; returns completed calls and the real duration. */
export async function saturate(
  pool: Pool,
  spec: CallSpec,
  connections: number,
  seconds: number,
): Promise<{ calls: number; errors: number; seconds: number }> {
  let calls = 0;
  let errors = 0;
  const t0 = performance.now();
  const until = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < until) {
        try {
          await callOnce(pool, spec, performance.now());
          calls++;
        } catch {
          errors++;
        }
      }
    }),
  );
  return { calls, errors, seconds: (performance.now() - t0) / 1000 };
}

/**
 * One SSE stream read to its end: when it was sent, when its first event was in and when it ended,
 * epoch ms (`performance.timeOrigin + performance.now()`, the clock the sse-phases probe stamps
 * with). Throws unless the answer is 200 with an event in it.
 */
export async function sseStream(pool: Pool, spec: CallSpec): Promise<{ sentAt: number; firstAt: number; endAt: number }> {
  const now = () => performance.timeOrigin + performance.now();
  const sentAt = now();
  const r = await pool.request({ path: spec.path, method: spec.method, headers: spec.headers, body: spec.body });
  let firstAt = 0;
  let seen = '';
  for await (const chunk of r.body) {
    if (firstAt === 0) {
      seen += String(chunk);
      if (seen.includes('\n\n')) firstAt = now();
    }
  }
  if (r.statusCode !== 200 || firstAt === 0) throw new Error(`status ${r.statusCode}`);
  return { sentAt, firstAt, endAt: now() };
}

/** Time to the first SSE event and to the stream's end, ms, for `runs` streams one after another. */
export async function sseRuns(
  pool: Pool,
  spec: CallSpec,
  runs: number,
): Promise<{ first: hdr.Histogram; whole: hdr.Histogram; errors: number }> {
  const first = histogram();
  const whole = histogram();
  let errors = 0;
  for (let i = 0; i < runs; i++) {
    try {
      const s = await sseStream(pool, spec);
      first.recordValue(Math.max(1, Math.round((s.firstAt - s.sentAt) * 1000)));
      whole.recordValue(Math.max(1, Math.round((s.endAt - s.sentAt) * 1000)));
    } catch {
      errors++;
    }
  }
  return { first, whole, errors };
}

/** Milliseconds from a µs histogram percentile, rounded to µs. */
export function pctMs(h: hdr.Histogram, p: number): number {
  return h.totalCount === 0 ? NaN : Math.round(h.getValueAtPercentile(p)) / 1000;
}

/** The latency percentiles every fixed-rate report gives, ms. */
export interface LatencyFigures {
  p50_ms: number;
  p99_ms: number;
  p999_ms: number;
  max_ms: number;
}

/** {@link LatencyFigures} of a µs histogram (an open-loop run's `total`). */
export function latencyFigures(h: hdr.Histogram): LatencyFigures {
  return { p50_ms: pctMs(h, 50), p99_ms: pctMs(h, 99), p999_ms: pctMs(h, 99.9), max_ms: pctMs(h, 100) };
}
