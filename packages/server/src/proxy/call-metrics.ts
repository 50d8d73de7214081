/**
 * The proxy's two per-call metrics (docs/operations.md "Metrics"): the upstream's time, by door
 * and outcome, and what the proxy adds to it, by door. Recorded for every call that was
 * dispatched upstream, once its answer to the caller has ended; a call refused before (target
 * refused, store refused) has no upstream time, and shows in the request counts by status.
 */
import type { HistogramSeries } from '../metrics/bucket-histogram.js';
import { metrics } from '../metrics/registry.js';
import type { ExchangeOutcome, ExchangeResult } from './upstream.js';

type Door = 'proxy' | 'forward';

const added: Record<Door, HistogramSeries> = {
  proxy: metrics.proxyAddedLatency.labels('proxy'),
  forward: metrics.proxyAddedLatency.labels('forward'),
};
/** Upstream-time series by door, then outcome (a fixed set of names), made on first use. */
const upstream: Record<Door, Partial<Record<ExchangeOutcome, HistogramSeries>>> = { proxy: {}, forward: {} };

/**
 * Records one call: `totalMs` runs from the pipeline's start (the call read) to the end of the
 * caller's answer, so what it adds is everything but the upstream's own time: the guard, the
 * sealing, both commits, and the relaying of the bytes.
 */
export function observeProxyCall(via: Door, result: ExchangeResult, totalMs: number): void {
  const upstreamMs = result.upstreamMs;
  if (upstreamMs === undefined) return;
  const byOutcome = upstream[via];
  (byOutcome[result.outcome] ??= metrics.proxyUpstreamTime.labels(via, result.outcome)).observe(upstreamMs / 1000);
  added[via].observe(Math.max(0, totalMs - upstreamMs) / 1000);
}
