/**
 * Outbound webhooks against a real receiver on a loopback port: signed per Standard Webhooks
 * (checked by the `standardwebhooks` package, an independent implementation), retried with
 * backoff through a 500 and a timeout until the receiver recovers, every attempt in the
 * delivery log, redelivery with the same webhook-id, the SSRF guard on webhook URLs, deliveries
 * that survive a restart, and (PostgreSQL) exactly one delivery per event across two instances.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { STORES, freshPostgresDatabase, startApp, tempDir, type TestApp } from './helpers/server.js';
import { assertError, fullProject, postLog } from './foundation-helpers.js';
import { runCli, sleep, waitUntil } from './proofs-helpers.js';
import { MAX_RETRY_DELAY_MS, RETRY_FOR_MS, nextRetryAt } from '../src/webhooks/dispatcher.js';
import { webhookSignature } from '../src/webhooks/signing.js';

/** What the receiver does with the next request: answer a status, or hold it past the sender's timeout. */
type Step = number | 'hang';

interface Received {
  headers: Record<string, string>;
  body: string;
}

/** A webhook receiver on an ephemeral loopback port, scripted request by request (then 200). */
async function receiver(script: Step[] = []) {
  const received: Received[] = [];
  const hung: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString('utf8') });
      const step = script.shift() ?? 200;
      if (step === 'hang') hung.push(res);
      else res.writeHead(step, { 'content-type': 'text/plain' }).end(step < 300 ? 'ok' : 'nope');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    target: `127.0.0.1:${port}`,
    received,
    script,
    close: async () => {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

const master = (t: TestApp) => ({ authorization: `Bearer ${t.masterKey}` });

async function addWebhook(t: TestApp, projectId: string, url: string, events?: string[]) {
  const r = await t.app.inject({
    method: 'POST',
    url: `/v1/projects/${projectId}/webhooks`,
    headers: master(t),
    payload: { url, ...(events ? { events } : {}) },
  });
  assert.equal(r.statusCode, 201, r.body);
  return r.json().webhook as { id: string; url: string; events: string[]; secret: string };
}

async function deliveries(t: TestApp, projectId: string, webhookId: string) {
  const r = await t.app.inject({ method: 'GET', url: `/v1/projects/${projectId}/webhooks/${webhookId}/deliveries`, headers: master(t) });
  assert.equal(r.statusCode, 200, r.body);
  return r.json().deliveries as Array<{
    id: string;
    eventId: string;
    eventType: string;
    state: string;
    attemptCount: number;
    lastStatus: number | null;
    attempts: Array<{ statusCode: number | null; error: string | null }>;
  }>;
}

/** A credential handover: a human key with agent context, the event every webhook test sends. */
function handover(t: TestApp, humanKey: string, actor = 'alice') {
  return postLog(t.app, humanKey, { actor, payload: {} }, { 'x-service-encryption-key': 'k', 'x-agent-rationale': 'because' });
}

/** Checks a received request with the standardwebhooks package and returns its parsed body. */
function verified(secret: string, r: Received): { type: string; timestamp: string; data: Record<string, unknown> } {
  const body = new Webhook(secret).verify(r.body, {
    'webhook-id': r.headers['webhook-id']!,
    'webhook-timestamp': r.headers['webhook-timestamp']!,
    'webhook-signature': r.headers['webhook-signature']!,
  });
  return body as { type: string; timestamp: string; data: Record<string, unknown> };
}

test('signatures: our HMAC matches the standardwebhooks package, and a wrong secret fails', () => {
  const secret = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
  const at = new Date(1_700_000_000_000);
  const sig = webhookSignature(secret, 'msg_1', 1_700_000_000, '{"a":1}');
  assert.equal(sig, new Webhook(secret).sign('msg_1', at, '{"a":1}'));
  assert.notEqual(sig, webhookSignature('whsec_' + Buffer.alloc(32, 8).toString('base64'), 'msg_1', 1_700_000_000, '{"a":1}'));
});

test('retry schedule: exponential from the base, capped at an hour, over within a day', () => {
  const base = 5_000;
  assert.equal(nextRetryAt(1, 0, 0, base, 0.5), base);
  assert.equal(nextRetryAt(2, 0, 0, base, 0.5), 2 * base);
  assert.equal(nextRetryAt(3, 0, 1000, base, 0.5), 1000 + 4 * base);
  assert.equal(nextRetryAt(20, 0, 0, base, 0.5), MAX_RETRY_DELAY_MS, 'capped at an hour');
  // Walk a whole schedule that always fails: attempts go on for a day and then stop.
  let now = 0;
  let attempts = 1;
  for (let at = nextRetryAt(1, 0, now, base); at !== null; at = nextRetryAt(attempts, 0, now, base)) {
    assert.ok(at > now);
    now = at;
    attempts++;
  }
  assert.ok(now <= RETRY_FOR_MS && now > RETRY_FOR_MS - 2 * MAX_RETRY_DELAY_MS, `the last attempt is near the end of the day (${now})`);
  assert.ok(attempts > 20 && attempts < 40, `${attempts} attempts in a day`);
});

for (const store of STORES) {
  test(`webhooks: a receiver that fails, times out and recovers gets the signed event; log and redeliver (${store})`, async () => {
    const rx = await receiver([500, 'hang']);
    const t = await startApp({ store, listen: true, config: { allowTargets: [rx.target], webhooks: { timeoutMs: 400, retryBaseMs: 50 } } });
    try {
      const p = await fullProject(t, 'hooks');
      // The SSRF guard: a private address not on the allow list, and a non-http scheme.
      const blocked = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${p.projectId}/webhooks`,
        headers: master(t),
        payload: { url: 'http://10.1.2.3/hook' },
      });
      assertError(blocked, 403, 'target_blocked');
      const meta = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${p.projectId}/webhooks`,
        headers: master(t),
        payload: { url: 'http://169.254.169.254/' },
      });
      assertError(meta, 403, 'target_blocked');
      const ftp = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${p.projectId}/webhooks`,
        headers: master(t),
        payload: { url: 'ftp://example.com/' },
      });
      assertError(ftp, 400, 'invalid_request');
      const badType = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${p.projectId}/webhooks`,
        headers: master(t),
        payload: { url: rx.url, events: ['nope'] },
      });
      assertError(badType, 400, 'invalid_request');
      const notMaster = await t.app.inject({
        method: 'GET',
        url: `/v1/projects/${p.projectId}/webhooks`,
        headers: { authorization: `Bearer ${p.live}` },
      });
      assertError(notMaster, 403, 'wrong_credential_class');

      const hook = await addWebhook(t, p.projectId, rx.url, ['security.policy_violation']);
      assert.match(hook.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
      assert.deepEqual(hook.events, ['security.policy_violation']);
      const listed = await t.app.inject({ method: 'GET', url: `/v1/projects/${p.projectId}/webhooks`, headers: master(t) });
      assert.equal(listed.json().webhooks.length, 1);
      assert.equal(listed.json().webhooks[0].secret, undefined, 'the secret is shown once');

      const log = await handover(t, p.human);
      assert.equal(log.statusCode, 201);
      // 500, then a timeout, then 200.
      await waitUntil('three attempts', async () => rx.received.length >= 3, 20_000);
      await waitUntil(
        'the delivery to be marked delivered',
        async () => (await deliveries(t, p.projectId, hook.id))[0]?.state === 'delivered',
        10_000,
      );
      const [d] = await deliveries(t, p.projectId, hook.id);
      assert.equal(d!.eventType, 'security.policy_violation');
      assert.equal(d!.attemptCount, 3);
      assert.equal(d!.lastStatus, 200);
      assert.deepEqual(
        d!.attempts.map((a) => a.statusCode),
        [200, null, 500],
        'newest first: 200, the timeout (no answer), 500',
      );
      assert.match(d!.attempts[1]!.error!, /timeout/);
      assert.equal(d!.attempts[2]!.error, 'HTTP 500');

      // Every attempt carries the same webhook-id and body, each signed for its own timestamp.
      const ids = new Set(rx.received.map((r) => r.headers['webhook-id']));
      assert.deepEqual([...ids], [d!.id]);
      for (const r of rx.received.slice(0, 3)) {
        const body = verified(hook.secret, r);
        assert.equal(body.type, 'security.policy_violation');
        assert.equal(body.data.logId, log.json().id);
        assert.equal(body.data.reason, 'credential_handover');
        assert.equal(body.data.actor, 'alice');
        assert.equal(body.data.projectId, p.projectId);
        assert.equal(r.headers['content-type'], 'application/json');
      }
      assert.throws(() => verified('whsec_' + Buffer.alloc(32).toString('base64'), rx.received[2]!), /signature/i);

      // Redeliver: the same message again, now.
      const again = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${p.projectId}/webhooks/${hook.id}/deliveries/${d!.id}/redeliver`,
        headers: master(t),
      });
      assert.equal(again.statusCode, 202, again.body);
      await waitUntil('the redelivery', async () => rx.received.length >= 4, 10_000);
      assert.equal(rx.received[3]!.headers['webhook-id'], d!.id);
      assert.equal(verified(hook.secret, rx.received[3]!).data.logId, log.json().id);
      await waitUntil(
        'the redelivery to be logged',
        async () => (await deliveries(t, p.projectId, hook.id))[0]!.attempts.length === 4,
        10_000,
      );
      const missing = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${p.projectId}/webhooks/${hook.id}/deliveries/msg_nope/redeliver`,
        headers: master(t),
      });
      assertError(missing, 404, 'not_found');

      // Delete: no more deliveries to it.
      const del = await t.app.inject({ method: 'DELETE', url: `/v1/projects/${p.projectId}/webhooks/${hook.id}`, headers: master(t) });
      assert.equal(del.statusCode, 200, del.body);
      await handover(t, p.human, 'bob');
      await sleep(300);
      assert.equal(rx.received.length, 4);
      const gone = await t.app.inject({
        method: 'GET',
        url: `/v1/projects/${p.projectId}/webhooks/${hook.id}/deliveries`,
        headers: master(t),
      });
      assertError(gone, 404, 'not_found');
    } finally {
      await t.close();
      await rx.close();
    }
  });

  test(`webhooks: deliveries are stored, so they survive a restart (${store})`, async () => {
    const rx = await receiver([503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503]);
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const config = { allowTargets: [rx.target], webhooks: { timeoutMs: 400, retryBaseMs: 200 } };
    let t = await startApp({ store, dataDir, ...(databaseUrl ? { databaseUrl } : {}), config });
    let p: Awaited<ReturnType<typeof fullProject>>;
    let hook: Awaited<ReturnType<typeof addWebhook>>;
    try {
      p = await fullProject(t, 'restart');
      hook = await addWebhook(t, p.projectId, rx.url);
      await handover(t, p.human);
      await waitUntil('a failed attempt', async () => rx.received.length >= 1, 10_000);
    } finally {
      await t.close();
    }
    rx.script.length = 0; // the receiver recovers while the server is down
    t = await startApp({ store, dataDir, ...(databaseUrl ? { databaseUrl } : {}), config });
    try {
      await waitUntil(
        'delivery after the restart',
        async () => (await deliveries(t, p.projectId, hook.id))[0]?.state === 'delivered',
        20_000,
      );
      const last = rx.received[rx.received.length - 1]!;
      assert.equal(verified(hook.secret, last).type, 'security.policy_violation');
      assert.equal(new Set(rx.received.map((r) => r.headers['webhook-id'])).size, 1);
    } finally {
      await t.close();
      await rx.close();
    }
  });
}

if (STORES.includes('postgres')) {
  test('webhooks on PostgreSQL: two instances, each event delivered exactly once', async () => {
    const rx = await receiver();
    const databaseUrl = await freshPostgresDatabase();
    const config = { allowTargets: [rx.target], webhooks: { timeoutMs: 2000, retryBaseMs: 50 } };
    const a = await startApp({ store: 'postgres', databaseUrl, config });
    const b = await startApp({ store: 'postgres', databaseUrl, config });
    try {
      const p = await fullProject(a, 'fleet');
      const hook = await addWebhook(a, p.projectId, rx.url);
      const n = 20;
      await Promise.all(Array.from({ length: n }, (_, i) => handover(i % 2 ? a : b, p.human, `actor-${i}`)));
      await waitUntil('every delivery', async () => rx.received.length >= n, 20_000);
      await sleep(500); // a duplicate, if any, would arrive now
      const ids = rx.received.map((r) => r.headers['webhook-id']);
      assert.equal(ids.length, n, 'no event delivered twice');
      assert.equal(new Set(ids).size, n);
      const actors = new Set(rx.received.map((r) => verified(hook.secret, r).data.actor));
      assert.equal(actors.size, n);
    } finally {
      await a.close();
      await b.close();
      await rx.close();
    }
  });
}

test('countersign webhooks: add, list, deliveries and remove through the CLI', async () => {
  const rx = await receiver();
  const t = await startApp({ listen: true, config: { allowTargets: [rx.target], webhooks: { timeoutMs: 1000, retryBaseMs: 50 } } });
  try {
    const p = await fullProject(t, 'cli');
    const conn = ['--url', t.url, '--master-key', t.masterKey];
    const add = await runCli(['webhooks', 'add', p.projectId, rx.url, '--events', 'security.policy_violation', ...conn, '--json']);
    assert.equal(add.code, 0, add.stderr);
    const hook = JSON.parse(add.stdout).webhook;
    assert.match(hook.secret, /^whsec_/);
    const list = await runCli(['webhooks', 'list', p.projectId, ...conn]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, new RegExp(`${hook.id}\\s+${rx.url}`));
    await handover(t, p.human);
    await waitUntil('the delivery', async () => (await deliveries(t, p.projectId, hook.id))[0]?.state === 'delivered', 10_000);
    const log = await runCli(['webhooks', 'deliveries', p.projectId, hook.id, ...conn]);
    assert.equal(log.code, 0, log.stderr);
    assert.match(log.stdout, /security\.policy_violation\s+delivered\s+1 attempt/);
    const rm = await runCli(['webhooks', 'remove', p.projectId, hook.id, ...conn]);
    assert.equal(rm.code, 0, rm.stderr);
    const bad = await runCli(['webhooks', 'remove', p.projectId, hook.id, ...conn]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /not_found/);
  } finally {
    await t.close();
    await rx.close();
  }
});
