/**
 * Retention and deletion on a real server: `PATCH /v1/projects/{projectId}` sets retentionDays
 * (fields independent, validated), the purge deletes expired logs with their receipts in
 * bounded batches while ingest goes on, sealed receipts of what remains still verify (the
 * batch and its ledger entry stay), the purge is recorded as a `retention.purged` event that a
 * webhook receives, and `DELETE /v1/projects/{projectId}` removes everything of the project,
 * its keys failing at once (on another instance too, with PostgreSQL).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { verifyReceipt } from '@countersign/core';
import { STORES, freshPostgresDatabase, startApp, type TestApp } from './helpers/server.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';
import { atWindowStart, fetchLedgerEntry, fetchTrust, ingestProofLogs, proofLog, waitForReceipt, waitUntil } from './proofs-helpers.js';
import { PURGE_BATCH, purgeExpired } from '../src/retention/purge.js';

const DAY = 24 * 60 * 60 * 1000;
const master = (t: TestApp) => ({ authorization: `Bearer ${t.masterKey}` });

function patch(t: TestApp, projectId: string, body: unknown, headers = master(t)) {
  return t.app.inject({ method: 'PATCH', url: `/v1/projects/${projectId}`, headers, payload: body as Record<string, unknown> });
}

for (const store of STORES) {
  test(`PATCH /v1/projects/{projectId}: retentionDays set, cleared and validated (${store})`, async () => {
    const t = await startApp({ store });
    try {
      const p = await fullProject(t, 'settings');
      const set = await patch(t, p.projectId, { retentionDays: 30 });
      assert.equal(set.statusCode, 200, set.body);
      assert.equal(set.json().project.retentionDays, 30);
      assert.equal(set.json().project.id, p.projectId);
      assert.equal(await t.app.ctx.store.retention.retentionDays(p.projectId), 30);
      const cleared = await patch(t, p.projectId, { retentionDays: null });
      assert.equal(cleared.json().project.retentionDays, null);
      assertError(await patch(t, p.projectId, { retentionDays: 0 }), 400, 'invalid_request');
      assertError(await patch(t, p.projectId, { retentionDays: 1.5 }), 400, 'invalid_request');
      assertError(await patch(t, p.projectId, { retentionDays: '3' }), 400, 'invalid_request');
      assertError(await patch(t, p.projectId, { nope: 1 }), 400, 'invalid_request');
      assertError(await patch(t, p.projectId, {}), 400, 'invalid_request');
      assertError(await patch(t, p.projectId, { retentionDays: 1 }, { authorization: `Bearer ${p.live}` }), 403, 'wrong_credential_class');
      assertError(await patch(t, 'prj_live_missing', { retentionDays: 1 }), 404, 'not_found');
    } finally {
      await t.close();
    }
  });

  test(`retention purge: expired logs and receipts go, the rest still verifies, the purge is an event and a webhook (${store})`, async () => {
    const received: Array<{ headers: Record<string, string>; body: string }> = [];
    const rx = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers as Record<string, string>, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => rx.listen(0, '127.0.0.1', r));
    const port = (rx.address() as AddressInfo).port;
    const t = await startApp({
      store,
      config: { proofWindowMs: 2000, allowTargets: [`127.0.0.1:${port}`], webhooks: { timeoutMs: 2000, retryBaseMs: 50 } },
    });
    try {
      const a = await fullProject(t, 'expiring');
      const b = await fullProject(t, 'kept');
      assert.equal((await patch(t, a.projectId, { retentionDays: 1 })).statusCode, 200);
      const hook = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${a.projectId}/webhooks`,
        headers: master(t),
        payload: { url: `http://127.0.0.1:${port}/`, events: ['retention.purged'] },
      });
      assert.equal(hook.statusCode, 201, hook.body);
      const secret = hook.json().webhook.secret as string;

      // Both projects' proofs land in the same sealed batch; A also has a handover event. They are
      // sent together at the start of a 2 s window: sent together anywhere in a 1 s window, they
      // still straddled its boundary once in CI under load.
      await atWindowStart(t.app);
      const [[la], [lb]] = await Promise.all([ingestProofLogs(t.app, a.agent, 1, 'a'), ingestProofLogs(t.app, b.agent, 1, 'b')]);
      await postLog(t.app, a.human, { payload: {} }, { 'x-service-encryption-key': 'k', 'x-agent-x': '1' });
      const ra = await waitForReceipt(t.app, a.live, a.projectId, la!.id);
      const rb = await waitForReceipt(t.app, b.live, b.projectId, lb!.id);
      assert.equal(ra.batchId, rb.batchId);

      // Nothing is old enough yet.
      const early = await purgeExpired(t.app.ctx);
      assert.deepEqual(
        early!.map((x) => x.logs),
        [0],
      );

      const later = Date.now() + 2 * DAY;
      const [purge] = (await purgeExpired(t.app.ctx, later))!;
      assert.equal(purge!.projectId, a.projectId);
      assert.equal(purge!.logs, 2);
      assert.equal(purge!.receipts, 1);
      assert.equal(purge!.events, 1);
      assertError(await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs/${la!.id}/proof`), 404, 'not_found');
      assert.equal((await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs`)).json().logs.length, 0);

      // B's receipt, in the same batch, still verifies end to end (batch and ledger entry kept).
      const trust = await fetchTrust(t.app);
      const ledgerEntry = await fetchLedgerEntry(t.app, rb.rekorLogIndex);
      const report = await verifyReceipt({
        payload: lb!.payload,
        receipt: (await waitForReceipt(t.app, b.live, b.projectId, lb!.id)) ?? rb,
        trust: { tsaRoots: trust.tsaRootsPem, ledgerPublicKey: trust.ledgerPublicKeyPem },
        ledgerEntry,
        now: new Date(),
      });
      assert.ok(report.ok, JSON.stringify(report.steps));
      // A receipt A's client kept also still verifies: only the server's copy of the log went.
      assert.ok(
        (
          await verifyReceipt({
            payload: la!.payload,
            receipt: ra,
            trust: { tsaRoots: trust.tsaRootsPem, ledgerPublicKey: trust.ledgerPublicKeyPem },
            ledgerEntry,
            now: new Date(),
          })
        ).ok,
      );

      // The purge is an event: listed (the handover event itself was purged) and delivered.
      const events = (await getWith(t.app, a.live, `/v1/projects/${a.projectId}/events`)).json().events;
      assert.equal(events.length, 1);
      assert.equal(events[0].type, 'retention.purged');
      assert.deepEqual(events[0].deleted, { logs: 2, receipts: 1, events: 1, deliveries: 0 });
      assert.equal(events[0].retentionDays, 1);
      assert.ok(events[0].from && events[0].to);
      await waitUntil('the retention.purged webhook', async () => received.length >= 1, 10_000);
      const body = new Webhook(secret).verify(received[0]!.body, received[0]!.headers) as {
        type: string;
        data: { deleted: { logs: number } };
      };
      assert.equal(body.type, 'retention.purged');
      assert.equal(body.data.deleted.logs, 2);
    } finally {
      await t.close();
      await new Promise((r) => rx.close(r));
    }
  });

  test(`retention purge: bounded batches, pending records kept, ingest goes on meanwhile (${store})`, async () => {
    const t = await startApp({ store });
    try {
      const p = await fullProject(t, 'bulk');
      const old = Date.now() - 3 * DAY;
      const n = 2 * PURGE_BATCH + 100;
      const logs = Array.from({ length: n }, (_, i) => proofLog(old + i, { projectId: p.projectId, requestProof: false }));
      await t.app.ctx.store.logs.insertMany(logs);
      // A proxy record still pending (its instance owes an outcome) is not purged.
      await t.app.ctx.store.logs.insert(proofLog(old, { projectId: p.projectId, status: 'pending', source: 'proxy', requestProof: false }));
      await patch(t, p.projectId, { retentionDays: 1 });

      // One batch removes at most PURGE_BATCH rows and says there is more.
      const first = await t.app.ctx.store.retention.purgeLogs(p.projectId, Date.now() - DAY, 0, PURGE_BATCH);
      assert.equal(first.deleted, PURGE_BATCH);
      assert.equal(first.done, false);

      // The rest, with ingest going on at the same time.
      const [purge, ...posts] = await Promise.all([
        purgeExpired(t.app.ctx),
        ...Array.from({ length: 20 }, (_, i) => postLog(t.app, p.agent, { payload: { i } }, { 'x-service-encryption-key': 'k' })),
      ]);
      for (const r of posts as Array<{ statusCode: number }>) assert.equal(r.statusCode, 201);
      assert.equal((purge as Array<{ logs: number }>)[0]!.logs, n - PURGE_BATCH);
      const left = await t.app.ctx.store.retention.remaining(p.projectId);
      assert.equal(left.logs, 20 + 1, 'the new logs and the pending record');
    } finally {
      await t.close();
    }
  });

  test(`DELETE /v1/projects/{projectId}: keys fail at once, every row of the project goes, others stay (${store})`, async () => {
    const t = await startApp({ store, config: { proofWindowMs: 200 } });
    try {
      const a = await fullProject(t, 'doomed');
      const b = await fullProject(t, 'other');
      const [la] = await ingestProofLogs(t.app, a.agent, 1, 'a');
      await postLog(t.app, a.human, { payload: {} }, { 'x-service-encryption-key': 'k', 'x-agent-x': '1' });
      await waitForReceipt(t.app, a.live, a.projectId, la!.id);
      const hook = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${a.projectId}/webhooks`,
        headers: master(t),
        payload: { url: 'https://example.com/hook' },
      });
      assert.equal(hook.statusCode, 201, hook.body);
      await postLog(t.app, b.agent, { payload: {} }, { 'x-service-encryption-key': 'k' });
      // The key is in the cache now.
      assert.equal((await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs`)).statusCode, 200);

      assertError(
        await t.app.inject({ method: 'DELETE', url: `/v1/projects/${a.projectId}`, headers: { authorization: `Bearer ${a.live}` } }),
        403,
        'wrong_credential_class',
      );
      const del = await t.app.inject({ method: 'DELETE', url: `/v1/projects/${a.projectId}`, headers: master(t) });
      assert.equal(del.statusCode, 200, del.body);
      const d = del.json().deleted;
      assert.equal(d.keys, 4);
      assert.equal(d.logs, 2);
      assert.equal(d.receipts, 1);
      assert.equal(d.events, 1);
      assert.equal(d.webhooks, 1);
      assert.deepEqual(await t.app.ctx.store.retention.remaining(a.projectId), {
        logs: 0,
        events: 0,
        receipts: 0,
        keys: 0,
        webhooks: 0,
        deliveries: 0,
      });
      assert.equal(await t.app.ctx.store.projects.get(a.projectId), undefined);
      assertError(await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs`), 401, 'invalid_api_key');
      assertError(await postLog(t.app, a.agent, { payload: {} }, { 'x-service-encryption-key': 'k' }), 401, 'invalid_api_key');
      assertError(await t.app.inject({ method: 'DELETE', url: `/v1/projects/${a.projectId}`, headers: master(t) }), 404, 'not_found');
      // The other project is whole.
      assert.equal((await getWith(t.app, b.live, `/v1/projects/${b.projectId}/logs`)).json().logs.length, 1);
    } finally {
      await t.close();
    }
  });
}

if (STORES.includes('postgres')) {
  test('DELETE /v1/projects/{projectId} on PostgreSQL: a key cached by another instance fails there at once', async () => {
    const databaseUrl = await freshPostgresDatabase();
    const a = await startApp({ store: 'postgres', databaseUrl });
    const b = await startApp({ store: 'postgres', databaseUrl });
    try {
      const p = await fullProject(a, 'fleet');
      assert.equal((await postLog(b.app, p.agent, { payload: {} }, { 'x-service-encryption-key': 'k' })).statusCode, 201);
      const del = await a.app.inject({ method: 'DELETE', url: `/v1/projects/${p.projectId}`, headers: master(a) });
      assert.equal(del.statusCode, 200, del.body);
      // Instance B had the key cached for 30 s; the NOTIFY of the deletion cleared it.
      await waitUntil(
        'B to refuse the key',
        async () => (await postLog(b.app, p.agent, { payload: {} }, { 'x-service-encryption-key': 'k' })).statusCode === 401,
        5_000,
      );
      assert.equal((await a.app.ctx.store.retention.remaining(p.projectId)).logs, 0);
    } finally {
      await a.close();
      await b.close();
    }
  });
}
