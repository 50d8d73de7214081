/**
 * `GET /metrics` on a real server: Prometheus text with request metrics per route pattern
 * (never the raw URL) and status, store commit latency, queue depth and the writer's busy time,
 * proof batch metrics, pending records, owed outcomes, witness failures, rate-limit refusals and
 * event-loop delay;
 * and who may scrape (loopback by default, the bearer token when COUNTERSIGN_METRICS_TOKEN is set).
 * The registry is one per process, so values are compared before and after.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig, ConfigError } from '../src/config.js';
import { STORES, startApp } from './helpers/server.js';
import { assertError, fullProject, postLog } from './foundation-helpers.js';
import { ingestProofLogs, waitForReceipt, waitUntil } from './proofs-helpers.js';
import { closedPort, makeProjectKey, proxyCall, startUpstream } from './helpers/upstreams.js';
import { lockLogs } from './helpers/lock-logs.js';

const TOKEN = 'metrics-token-0123456789';

/** The metrics text, scraped over a real loopback socket. */
async function scrape(url: string, headers: Record<string, string> = {}): Promise<string> {
  const r = await fetch(url + '/metrics', { headers });
  assert.equal(r.status, 200, await r.clone().text());
  assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return r.text();
}

/** The value of one sample (`name{labels}` exactly as printed), or undefined. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(series + ' ')) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

for (const store of STORES) {
  test(`GET /metrics: request, store, proof and process metrics in Prometheus text (${store})`, async () => {
    const t = await startApp({ store, listen: true, config: { proofWindowMs: 200 } });
    try {
      const p = await fullProject(t, 'metrics');
      const before = await scrape(t.url);
      const route = 'countersign_http_requests_total{method="POST",route="/v1/log",status="201"}';
      const commits = 'countersign_store_commit_seconds_count{queue="log_inserts",result="ok"}';
      const leaves = 'countersign_proof_batch_leaves_count';
      const sealed = 'countersign_proof_seal_delay_seconds_count';

      // Two logs over HTTP, one asking for a proof; a read by path with ids in it.
      const r = await fetch(t.url + '/v1/log', {
        method: 'POST',
        headers: { authorization: `Bearer ${p.agent}`, 'content-type': 'application/json', 'x-service-encryption-key': 'k' },
        body: JSON.stringify({ payload: { a: 1 } }),
      });
      assert.equal(r.status, 201);
      const [proofLog] = await ingestProofLogs(t.app, p.agent, 1, 'metrics');
      await waitForReceipt(t.app, p.live, p.projectId, proofLog!.id);
      const read = await fetch(`${t.url}/v1/projects/${p.projectId}/logs/${proofLog!.id}`, {
        headers: { authorization: `Bearer ${p.live}` },
      });
      assert.equal(read.status, 200);

      const after = await scrape(t.url);
      assert.equal((sample(after, route) ?? 0) - (sample(before, route) ?? 0), 2, 'two 201s on POST /v1/log');
      assert.ok(sample(after, 'countersign_http_request_duration_seconds_count{method="POST",route="/v1/log",status="201"}')! >= 2);
      // The route pattern is the label; the ids of the URL appear nowhere.
      assert.ok(
        sample(after, 'countersign_http_requests_total{method="GET",route="/v1/projects/:projectId/logs/:logId",status="200"}')! >= 1,
      );
      assert.ok(!after.includes(p.projectId), 'no raw project id in any label');
      assert.ok(!after.includes(proofLog!.id), 'no raw log id in any label');
      // Store: a group commit per batch, queue drained.
      assert.ok(sample(after, commits)! - (sample(before, commits) ?? 0) >= 1);
      assert.equal(sample(after, 'countersign_store_queue_depth{queue="log_inserts"}'), 0);
      assert.ok(sample(after, 'countersign_store_commit_batch_size_count{queue="log_inserts"}')! >= 1);
      // Proofs: the batch was claimed and sealed here.
      assert.ok(sample(after, leaves)! - (sample(before, leaves) ?? 0) >= 1);
      assert.ok(sample(after, sealed)! - (sample(before, sealed) ?? 0) >= 1);
      assert.equal(sample(after, 'countersign_proof_batches_unsealed'), 0);
      assert.equal(sample(after, 'countersign_proof_lag_seconds'), 0);
      // Gauges read on scrape, and Node's own metrics (event-loop delay among them).
      assert.equal(sample(after, 'countersign_pending_records'), 0);
      assert.equal(sample(after, 'countersign_proxy_owed_outcomes'), 0);
      assert.ok(sample(after, 'countersign_webhook_backlog') !== undefined);
      assert.ok(sample(after, 'nodejs_eventloop_lag_p99_seconds') !== undefined);
      assert.match(after, /# TYPE countersign_proxy_added_latency_seconds histogram/);
      assert.match(after, /# TYPE countersign_proxy_upstream_seconds histogram/);
    } finally {
      await t.close();
    }
  });
}

const BUSY = 'countersign_store_busy_seconds_total';

for (const store of STORES) {
  test(`the store writer's busy seconds: grow by a commit's time, by the wall time while a batch hangs, not while idle (${store})`, async () => {
    // No proof batcher tick in the test's few seconds: on SQLite its claim is a write on the
    // event loop's connection, which would wait (the event loop with it) for the lock held below
    // from this same thread, until the held batch's deadline.
    const t = await startApp({ store, listen: true, config: { storeTimeoutMs: 5000, proofWindowMs: 600_000 } });
    try {
      const p = await fullProject(t, 'busy');
      // A scrape, with the times before it was sent and after it was answered (the server reads
      // its clock in between).
      const at = async () => {
        const sent = performance.now();
        const text = await scrape(t.url);
        return { text, sent, answered: performance.now() };
      };
      // One commit: some busy time, never more than the wall time around it.
      const a = await at();
      assert.equal((await postLog(t.app, p.agent, { payload: { n: 1 } }, { 'x-service-encryption-key': 'k' })).statusCode, 201);
      const b = await at();
      const committed = sample(b.text, BUSY)! - sample(a.text, BUSY)!;
      assert.ok(committed > 0 && committed <= (b.answered - a.sent) / 1000, `one commit: ${committed} s`);

      // A batch held by a locked table counts while it is in flight, up to each scrape.
      const lock = await lockLogs(t);
      const held = postLog(t.app, p.agent, { payload: { n: 2 } }, { 'x-service-encryption-key': 'k' });
      await new Promise((r) => setTimeout(r, 100));
      const c = await at();
      await new Promise((r) => setTimeout(r, 500));
      const d = await at();
      const hung = sample(d.text, BUSY)! - sample(c.text, BUSY)!;
      const apart = (d.answered - c.sent) / 1000;
      assert.ok(hung >= 0.45 && hung <= apart, `a hung batch between two scrapes at most ${apart} s apart: ${hung} s`);
      await lock.release();
      assert.equal((await held).statusCode, 201, 'the held write lands once the lock is gone');

      // Idle: the clock stands still.
      const e = await at();
      await new Promise((r) => setTimeout(r, 300));
      const f = await at();
      assert.equal(sample(f.text, BUSY), sample(e.text, BUSY), 'no batch in flight, no busy time');
      assert.match(f.text, /# TYPE countersign_store_busy_seconds_total counter/);
    } finally {
      await t.close();
    }
  });
}

test('a proxied call counts in the upstream-time histogram by door and outcome, and in the added-latency one', async () => {
  const up = await startUpstream({ record: false });
  const dead = await closedPort();
  const t = await startApp({ listen: true, config: { allowTargets: [up.hostPort, `127.0.0.1:${dead}`] } });
  try {
    const { apiKey } = await makeProjectKey(t.app);
    const count = (text: string, series: string) => sample(text, series) ?? 0;
    const added = 'countersign_proxy_added_latency_seconds_count{via="proxy"}';
    const complete = 'countersign_proxy_upstream_seconds_count{via="proxy",outcome="complete"}';
    const unreachable = 'countersign_proxy_upstream_seconds_count{via="proxy",outcome="upstream_unreachable"}';
    const answered = 'countersign_http_requests_total{method="POST",route="/v1/proxy",status="200"}';
    const before = await scrape(t.url);

    for (let i = 0; i < 3; i++) assert.equal((await proxyCall(t.url, apiKey, { target: up.url + '/json', payload: {} })).status, 200);
    assert.equal((await proxyCall(t.url, apiKey, { target: `http://127.0.0.1:${dead}/x`, payload: {} })).status, 502);

    const after = await scrape(t.url);
    assert.equal(count(after, complete) - count(before, complete), 3);
    assert.equal(count(after, unreachable) - count(before, unreachable), 1);
    assert.equal(count(after, added) - count(before, added), 4);
    // The request count is the duration histogram's own count, copied when scraped.
    assert.equal(count(after, answered) - count(before, answered), 3);
    assert.equal(
      count(after, answered),
      count(after, 'countersign_http_request_duration_seconds_count{method="POST",route="/v1/proxy",status="200"}'),
    );
    // What the proxy adds is a part of the call's time, not the upstream's.
    const sum = (name: string) => count(after, name) - count(before, name);
    assert.ok(sum('countersign_proxy_added_latency_seconds_sum{via="proxy"}') > 0);
    assert.ok(
      sum('countersign_proxy_added_latency_seconds_sum{via="proxy"}') <
        sum('countersign_http_request_duration_seconds_sum{method="POST",route="/v1/proxy",status="200"}') +
          sum('countersign_http_request_duration_seconds_sum{method="POST",route="/v1/proxy",status="502"}'),
    );
  } finally {
    await t.close();
    await up.close();
  }
});

test('GET /metrics counts pending records (scrape-time count, refreshed after the cache)', async () => {
  const t = await startApp({ listen: true });
  try {
    const p = await fullProject(t, 'pending');
    const first = await scrape(t.url);
    assert.equal(sample(first, 'countersign_pending_records'), 0);
    await t.app.ctx.store.logs.insert({
      id: 'log_pendingmetricsxxxxxxxxxxx',
      projectId: p.projectId,
      keyId: 'kid_x',
      receivedAt: Date.now(),
      occurredAt: null,
      actor: 'a',
      action: 'b',
      traceId: null,
      actorType: 'agent',
      credentialHandoverDetected: false,
      source: 'proxy',
      status: 'pending',
      requestProof: false,
      payloadHash: null,
      payload: '{}',
      metadata: null,
      instanceId: t.app.ctx.store.instance.id,
    });
    await waitUntil(
      'the pending record to be counted',
      async () => sample(await scrape(t.url), 'countersign_pending_records') === 1,
      15_000,
    );
  } finally {
    await t.close();
  }
});

test('rate-limit refusals and TSA failures are counted', async () => {
  // An outside TSA that is not there: every timestamp attempt fails.
  const t = await startApp({
    listen: true,
    config: { rateLimit: 1, proofWindowMs: 200, tsaUrl: 'http://127.0.0.1:9/tsa', tsaRoots: undefined },
  });
  try {
    const p = await fullProject(t, 'rl');
    const before = await scrape(t.url);
    const limited = 'countersign_rate_limited_total{route="/v1/log"}';
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await postLog(t.app, p.agent, { payload: { i } }, { 'x-service-encryption-key': 'k' }));
    const refused = answers.filter((r) => r.statusCode === 429).length;
    assert.ok(refused >= 1, 'a burst of 2 at 1/s refuses some of 4');
    assert.equal((sample(await scrape(t.url), limited) ?? 0) - (sample(before, limited) ?? 0), refused);

    await new Promise((r) => setTimeout(r, 2100)); // the bucket refills
    await ingestProofLogs(t.app, p.service, 1, 'tsa-down');
    const failures = (text: string) =>
      text
        .split('\n')
        .filter((l) => l.startsWith('countersign_witness_failures_total{witness="tsa"'))
        .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    const base = failures(before);
    await waitUntil('a counted TSA failure', async () => failures(await scrape(t.url)) > base, 20_000);
    assert.ok(sample(await scrape(t.url), 'countersign_proof_batches_unsealed')! >= 0);
  } finally {
    await t.close();
  }
});

test('who may scrape: loopback without a token; with COUNTERSIGN_METRICS_TOKEN everyone needs it', async () => {
  const open = await startApp({ listen: true });
  try {
    await scrape(open.url); // a loopback socket, no token configured
    const remote = await open.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '192.0.2.7' });
    assertError(remote, 403, 'metrics_forbidden');
    assert.match(remote.json().error.message, /COUNTERSIGN_METRICS_TOKEN/);
    // X-Forwarded-For is not the client: a spoofed header opens nothing.
    const spoofed = await open.app.inject({
      method: 'GET',
      url: '/metrics',
      remoteAddress: '192.0.2.7',
      headers: { 'x-forwarded-for': '127.0.0.1' },
    });
    assertError(spoofed, 403, 'metrics_forbidden');
  } finally {
    await open.close();
  }

  const locked = await startApp({ listen: true, config: { metricsToken: TOKEN } });
  try {
    const noToken = await fetch(locked.url + '/metrics');
    assert.equal(noToken.status, 401, 'loopback too must send the token once one is set');
    assert.equal(((await noToken.json()) as { error: { code: string } }).error.code, 'missing_api_key');
    const wrong = await locked.app.inject({
      method: 'GET',
      url: '/metrics',
      remoteAddress: '192.0.2.7',
      headers: { authorization: 'Bearer wrong-token-0123456789' },
    });
    assertError(wrong, 401, 'invalid_api_key');
    const right = await locked.app.inject({
      method: 'GET',
      url: '/metrics',
      remoteAddress: '192.0.2.7',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(right.statusCode, 200);
    assert.match(right.body, /countersign_http_requests_total/);
    await scrape(locked.url, { authorization: `Bearer ${TOKEN}` });
  } finally {
    await locked.close();
  }
});

test('COUNTERSIGN_METRICS_TOKEN: read from the environment, refused when short', () => {
  assert.equal(loadConfig({}, { COUNTERSIGN_METRICS_TOKEN: TOKEN }).metricsToken, TOKEN);
  assert.equal(loadConfig({}, {}).metricsToken, undefined);
  assert.throws(() => loadConfig({}, { COUNTERSIGN_METRICS_TOKEN: 'short' }), ConfigError);
});
