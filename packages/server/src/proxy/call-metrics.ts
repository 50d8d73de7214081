/**
 * The proxy's two per-call metrics (docs/operations.md "Metrics"): the upstream's time, by door
 * and outcome, and what the proxy adds to it, by door. Recorded for every call that was
 * dispatched upstream, once its answer to the caller has ended; a call refused before (target
 * refused, store refused) has no upstream time, and shows in the request counts by status.
 */
import { metrics } from '../metrics/registry.js';
import type { ProxyCall } from './pipeline.js';
import type { ExchangeResult } from './upstream.js';

// Both doors' added-latency series exist from the start, so a door without calls reads 0.
for (const via of ['proxy', 'forward'] as const) metrics.proxyAddedLatency.labels(via);

/**
 * Records one call: `totalMs` runs from the pipeline's start (the call read) to the end of the
 * caller's answer, so what it adds is everything but the upstream's own time: the guard, the
 * sealing, both commits, and the relaying of the bytes.
 */
export function observeProxyCall(via: ProxyCall['via'], result: ExchangeResult, totalMs: number): void {
  const upstreamMs = result.upstreamMs;
  if (upstreamMs === undefined) return;
  metrics.proxyUpstreamTime.labels(via, result.outcome).observe(upstreamMs / 1000);
  metrics.proxyAddedLatency.labels(via).observe(Math.max(0, totalMs - upstreamMs) / 1000);
}
