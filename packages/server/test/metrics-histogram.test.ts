/**
 * BucketHistogram (metrics/bucket-histogram.ts) against prom-client's own Histogram as the
 * oracle: the same observations render the same Prometheus text and the same JSON, line for
 * line, through prom-client's registry; plus what it does differently on purpose (non-finite
 * values dropped, reset zeroes the series its callers hold).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Histogram, Registry } from 'prom-client';
import { BucketHistogram } from '../src/metrics/bucket-histogram.js';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Values on, between, below and above the bounds. */
const VALUES = [0, 0.0001, 0.0005, 0.0007, 0.001, 0.003, 0.005, 0.0051, 0.7, 1, 2.5, 59.9, 60, 61, 1e6];

function pair(labelNames: string[]) {
  const ours = new Registry();
  const theirs = new Registry();
  const fast = new BucketHistogram({
    name: 'h_seconds',
    help: 'a "help" with \\ and\nnewline',
    labelNames,
    buckets: BUCKETS,
    registers: [ours],
  });
  const oracle = new Histogram({
    name: 'h_seconds',
    help: 'a "help" with \\ and\nnewline',
    labelNames,
    buckets: BUCKETS,
    registers: [theirs],
  });
  return { ours, theirs, fast, oracle };
}

test('BucketHistogram renders what prom-client renders for the same observations (labelled series, in first-use order)', async () => {
  const { ours, theirs, fast, oracle } = pair(['method', 'route', 'status']);
  const series = [
    ['POST', '/v1/proxy', '200'],
    ['GET', '/v1/projects/:projectId/logs', '200'],
    ['POST', '/v1/proxy', '503'],
    ['GET', 'unmatched', '404'],
    ['GET', 'a "quoted" \\ route\nwith newline', '200'],
  ] as const;
  VALUES.forEach((v, i) => {
    for (let k = 0; k <= i % series.length; k++) {
      const [method, route, status] = series[k]!;
      fast.labels(method, route, status).observe(v);
      oracle.observe({ method, route, status }, v);
    }
  });
  // The object form, for callers off the hot path, lands in the same series.
  fast.observe({ method: 'POST', route: '/v1/proxy', status: '200' }, 0.002);
  oracle.observe({ method: 'POST', route: '/v1/proxy', status: '200' }, 0.002);
  assert.equal(await ours.metrics(), await theirs.metrics());
  assert.deepEqual(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON());
});

test('BucketHistogram without labels renders its zero series before any observation, as prom-client does', async () => {
  const { ours, theirs, fast, oracle } = pair([]);
  assert.equal(await ours.metrics(), await theirs.metrics());
  for (const v of VALUES) {
    fast.labels().observe(v);
    oracle.observe(v);
  }
  assert.equal(await ours.metrics(), await theirs.metrics());
});

test('BucketHistogram drops a value that is not a finite number instead of throwing, and checks the label count', async () => {
  const { ours, fast } = pair(['via']);
  const s = fast.labels('proxy');
  s.observe(Number.NaN);
  s.observe(Number.POSITIVE_INFINITY);
  s.observe(0.01);
  assert.equal(s.count, 1);
  assert.equal(s.sum, 0.01);
  assert.match(await ours.metrics(), /^h_seconds_count\{via="proxy"\} 1$/m);
  assert.throws(() => fast.labels('proxy', 'extra'), TypeError);
  assert.throws(() => fast.labels(), TypeError);
});

test('resetMetrics zeroes the series a caller holds, which then counts on where it is rendered', async () => {
  const { ours, fast } = pair(['queue']);
  const held = fast.labels('log_inserts');
  held.observe(0.001);
  held.observe(0.002);
  ours.resetMetrics();
  assert.match(await ours.metrics(), /^h_seconds_count\{queue="log_inserts"\} 0$/m);
  held.observe(0.003);
  const text = await ours.metrics();
  assert.match(text, /^h_seconds_count\{queue="log_inserts"\} 1$/m);
  assert.match(text, /^h_seconds_sum\{queue="log_inserts"\} 0\.003$/m);
  assert.match(text, /^h_seconds_bucket\{le="0\.0025",queue="log_inserts"\} 0$/m);
  assert.match(text, /^h_seconds_bucket\{le="0\.005",queue="log_inserts"\} 1$/m);
});
