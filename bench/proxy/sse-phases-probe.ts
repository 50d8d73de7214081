/**
 * Where a streamed call's time goes before its first event, inside the process: preloaded
 * (`--import`) into Countersign or the Node floor by the `sse-phases` benchmark, it stamps each
 * call's steps from diagnostics channels that Node, Fastify, undici and our store already publish
 * (nothing in the product is patched), and writes one JSON line per call to
 * PROXY_BENCH_PHASES_FILE when the response finishes.
 *
 * The steps, in the order a call passes them:
 * - `request`: Node's HTTP server has the request's head (`http.server.request.start`);
 * - `handler`: Fastify calls the route's handler, after routing, the key check, admission, the
 *   body and its schema (`tracing:fastify.request.handler:start`; Countersign only);
 * - `submitted`, `committed`: the write-ahead record handed to the store writer and answered
 *   (the first batch with an insert submitted after `handler`, from the store's batch channel);
 * - `created`: undici builds the upstream request (the pipeline dispatches it);
 * - `sent`: undici writes its head to the destination's socket;
 * - `status`: the destination's status line is in;
 * - `firstChunk`: its first body bytes are in (the proxy writes them to the caller at once).
 *
 * Calls must come one at a time (the benchmark's are sequential): a step belongs to the call
 * whose request came last.
 */
import { subscribe } from 'node:diagnostics_channel';
import fs from 'node:fs';
import type { Server } from 'node:http';
import { STORE_BATCH_CHANNEL } from '../../packages/server/src/store/diagnostics-channels.js';
import type { BatchEvent } from '../../packages/server/src/store/log-writer.js';

/** The steps of one call, epoch ms (`performance.timeOrigin + performance.now()`), as far as it got. */
export type PhaseStamps = Partial<Record<(typeof STEPS)[number], number>>;

/** Every step, in order. */
export const STEPS = ['request', 'handler', 'submitted', 'committed', 'created', 'sent', 'status', 'firstChunk'] as const;

/** The named intervals between steps, each from the step before it that the call has. */
export const PHASES: Record<Exclude<(typeof STEPS)[number], 'request'>, string> = {
  handler: 'routing, key check, admission, body, schema',
  submitted: 'target check, seal of the request half',
  committed: "write-ahead commit (the store writer's round trip)",
  created: 'until undici makes the upstream request',
  sent: "undici writes the request's head",
  status: "the destination's status line",
  firstChunk: 'its first bytes',
};

const now = (): number => performance.timeOrigin + performance.now();

/**
 * Subscribes the probe; `emit` gets each call's stamps when its response finishes. `server`: only
 * that HTTP server's requests are calls (a process that also serves the destination, as a test
 * does); by default every request is one.
 */
export function installPhaseProbe(emit: (stamps: PhaseStamps) => void, server?: Server): void {
  let current: PhaseStamps | undefined;
  const stamp = (step: keyof PhaseStamps) => {
    if (current && current[step] === undefined) current[step] = now();
  };
  const ours = (m: unknown) => server === undefined || (m as { server?: Server }).server === server;
  subscribe('http.server.request.start', (m) => {
    if (ours(m)) current = { request: now() };
  });
  subscribe('tracing:fastify.request.handler:start', () => stamp('handler'));
  subscribe(STORE_BATCH_CHANNEL, (m) => {
    const b = m as BatchEvent;
    if (!current || current.submitted !== undefined || b.inserts === 0) return;
    if (b.submittedAt < (current.handler ?? current.request!)) return; // an earlier call's batch
    current.submitted = b.submittedAt;
    current.committed = b.doneAt;
  });
  subscribe('undici:request:create', () => stamp('created'));
  subscribe('undici:client:sendHeaders', () => stamp('sent'));
  subscribe('undici:request:headers', () => stamp('status'));
  subscribe('undici:request:bodyChunkReceived', () => stamp('firstChunk'));
  subscribe('http.server.response.finish', (m) => {
    if (!ours(m)) return;
    if (current) emit(current);
    current = undefined;
  });
}

/** Each phase's duration (ms) for one call: from the latest earlier step it has; absent steps give none. */
export function phaseDurations(stamps: PhaseStamps): Partial<Record<keyof typeof PHASES, number>> {
  const out: Partial<Record<keyof typeof PHASES, number>> = {};
  let last = stamps.request;
  for (const step of STEPS.slice(1) as Array<keyof typeof PHASES>) {
    const at = stamps[step];
    if (at === undefined || last === undefined) continue;
    out[step] = at - last;
    last = at;
  }
  return out;
}

/** The `p` quantile of `xs` (0 to 1; ms), the lower of two at a tie, to the µs; NaN for none. */
export function percentileMs(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return Math.round(sorted[Math.floor(p * (sorted.length - 1))]! * 1000) / 1000;
}

/** The median of `xs` (ms), to the µs; NaN for none. */
export function medianMs(xs: number[]): number {
  return percentileMs(xs, 0.5);
}

/** The median time from the request's head to the destination's first bytes (ms), over the calls that got that far. */
export function medianToFirstChunk(calls: PhaseStamps[]): number {
  return medianMs(calls.flatMap((c) => (c.request !== undefined && c.firstChunk !== undefined ? [c.firstChunk - c.request] : [])));
}

/** Per phase, the median over calls (ms, to the µs), and the calls that had it. */
export function medianPhases(calls: PhaseStamps[]): Array<{ phase: keyof typeof PHASES; what: string; median_ms: number; calls: number }> {
  const per = new Map<keyof typeof PHASES, number[]>();
  for (const c of calls) {
    for (const [k, v] of Object.entries(phaseDurations(c)) as Array<[keyof typeof PHASES, number]>) {
      const xs = per.get(k);
      if (xs) xs.push(v);
      else per.set(k, [v]);
    }
  }
  return (Object.keys(PHASES) as Array<keyof typeof PHASES>)
    .filter((p) => per.has(p))
    .map((phase) => ({ phase, what: PHASES[phase], median_ms: medianMs(per.get(phase)!), calls: per.get(phase)!.length }));
}

const file = process.env.PROXY_BENCH_PHASES_FILE;
if (file) installPhaseProbe((stamps) => fs.appendFileSync(file, JSON.stringify(stamps) + '\n'));
