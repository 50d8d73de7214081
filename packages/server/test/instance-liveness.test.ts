/**
 * Pending write-ahead records belong to the instance that owes their outcome. A starting or
 * sweeping instance marks interrupted only the records of instances that are gone, never those
 * another live instance is still streaming (several instances on one PostgreSQL database); and a
 * record already sealed into a proof batch is never rewritten by a late outcome.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { STORES, pgAdmin, startApp, type TestApp } from './helpers/server.js';
import { makeProjectKey, startUpstream, waitFor } from './helpers/upstreams.js';
import type { NewLog } from '../src/store/index.js';
import type { ProofDatabase } from '../src/store/proofs.js';
import type { Kysely } from 'kysely';

async function pendingRow(t: TestApp, projectId: string, keyId: string, instanceId: string | null, extra: Partial<NewLog> = {}) {
  const id = 'log_' + Math.random().toString(36).slice(2).padEnd(24, '0').slice(0, 24);
  const inserted = await t.app.ctx.store.logs.insert({
    id,
    projectId,
    keyId,
    receivedAt: Date.now(),
    occurredAt: null,
    actor: 'proxy',
    action: 'proxy.request',
    traceId: null,
    actorType: 'agent',
    credentialHandoverDetected: false,
    source: 'proxy',
    status: 'pending',
    requestProof: false,
    payloadHash: 'ab'.repeat(32),
    payload: '{}',
    metadata: null,
    instanceId,
    ...extra,
  });
  assert.equal(inserted, true);
  return id;
}

async function statusOf(t: TestApp, projectId: string, id: string) {
  return (await t.app.ctx.store.logs.get(projectId, id))?.status;
}

for (const store of STORES) {
  test(`orphan sweep: records of gone or unknown instances are marked interrupted, this instance's are kept (${store})`, async () => {
    const t = await startApp({ store });
    try {
      const { projectId, keyId } = await makeProjectKey(t.app, 'agent');
      const mine = await pendingRow(t, projectId, keyId, t.app.ctx.store.instance.id);
      const gone = await pendingRow(t, projectId, keyId, 'ins_' + 'f'.repeat(16));
      const legacy = await pendingRow(t, projectId, keyId, null);
      assert.equal(await t.app.ctx.store.markOrphanedRecordsInterrupted(Date.now()), 2);
      assert.equal(await statusOf(t, projectId, mine), 'pending');
      assert.equal(await statusOf(t, projectId, gone), 'interrupted');
      assert.equal(await statusOf(t, projectId, legacy), 'interrupted');
      assert.equal(await t.app.ctx.store.markOrphanedRecordsInterrupted(Date.now()), 0);
    } finally {
      await t.close();
    }
  });

  test(`a late outcome never rewrites a record already sealed into a proof batch (${store})`, async () => {
    const t = await startApp({ store });
    try {
      const { projectId, keyId } = await makeProjectKey(t.app, 'agent');
      const id = await pendingRow(t, projectId, keyId, 'ins_' + 'e'.repeat(16), { requestProof: true });
      await t.app.ctx.store.markOrphanedRecordsInterrupted(Date.now());
      // What the batcher does when it claims a final record (store/proof-claims.ts claimChunk).
      const db = t.app.ctx.store.db as unknown as Kysely<ProofDatabase>;
      await db.updateTable('logs').set({ proof_batch_id: 'batch_x' }).where('id', '=', id).execute();
      const written = await t.app.ctx.store.proxyOutcomes.complete(
        { projectId, id },
        {
          status: 'complete',
          payload: '{"late":true}',
          payloadHash: 'cd'.repeat(32),
          completedAt: Date.now(),
        },
      );
      assert.equal(written, false);
      const row = await t.app.ctx.store.logs.get(projectId, id);
      assert.equal(row?.status, 'interrupted');
      assert.equal(row?.payloadHash, 'ab'.repeat(32));
      assert.equal(row?.payload, '{}');
    } finally {
      await t.close();
    }
  });
}

if (process.env.DATABASE_URL) {
  test('two instances on one PostgreSQL database: a starting instance leaves the other one’s live exchange alone; a dead one’s records are swept', async () => {
    const up = await startUpstream();
    const a = await startApp({ store: 'postgres', listen: true, config: { allowTargets: [up.hostPort] } });
    let b: TestApp | undefined;
    try {
      const { projectId, apiKey, keyId } = await makeProjectKey(a.app, 'agent');
      // A streams an SSE answer that advances only when the test says so.
      const call = request(a.url + '/v1/proxy', {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': 'k' },
        body: JSON.stringify({ target: up.url + '/sse-step?n=2', payload: {} }),
      });
      const answer = await call;
      const logId = answer.headers['x-service-log-id'] as string;
      assert.equal(await statusOf(a, projectId, logId), 'pending');

      // B starts on the same database (its start runs the sweep) and sweeps again explicitly.
      b = await startApp({ databaseUrl: a.config.databaseUrl, config: { allowTargets: [up.hostPort] } });
      await b.app.ready();
      assert.notEqual(b.app.ctx.store.instance.id, a.app.ctx.store.instance.id);
      assert.equal(await b.app.ctx.store.markOrphanedRecordsInterrupted(Date.now()), 0);
      assert.equal(await statusOf(b, projectId, logId), 'pending', 'a live instance’s exchange must stay pending');

      // A finishes its exchange: the record is complete, as the caller saw it.
      up.step();
      up.step();
      const text = await answer.body.text();
      assert.match(text, /step 1/);
      await waitFor(async () => ((await statusOf(b!, projectId, logId)) === 'complete' ? true : undefined));

      // A record A still owed when it died: once A's session is gone, B's sweep marks it.
      const owed = await pendingRow(a, projectId, keyId, a.app.ctx.store.instance.id);
      assert.equal(await b.app.ctx.store.markOrphanedRecordsInterrupted(Date.now()), 0);
      await a.close();
      await waitFor(async () => ((await b!.app.ctx.store.markOrphanedRecordsInterrupted(Date.now())) === 1 ? true : undefined), 100, 50);
      assert.equal(await statusOf(b, projectId, owed), 'interrupted');
    } finally {
      await b?.close();
      await a.close().catch(() => undefined);
      await up.close();
    }
  });
}

if (process.env.DATABASE_URL) {
  test('the LISTEN and liveness-lock connections come back after PostgreSQL drops them', async () => {
    const t = await startApp({ store: 'postgres' });
    const admin = await pgAdmin(t);
    try {
      const store = t.app.ctx.store;
      const id = store.instance.id;
      // The backends holding this app's liveness lock.
      const lockHolders = async () =>
        (
          await admin.client.query<{ pid: number }>(
            "select l.pid from pg_locks l join pg_database d on d.oid = l.database where l.locktype = 'advisory' and l.granted and d.datname = $1 and l.classid = $2",
            [admin.dbName, 0x4353494e],
          )
        ).rows.map((r) => r.pid);
      const [before] = await lockHolders();
      assert.ok(before);
      // Drop every session of the app: the LISTENing one and the lock holder with the rest.
      await admin.terminateSessions();
      // Both come back on their own (retry after a second): the lock, held by a NEW backend under
      // the same id, and the LISTEN, shown by a notification sent through the pool reaching the
      // handler. (pg_terminate_backend only signals: the old backend may hold the lock a moment.)
      await waitFor(
        async () => {
          const now = await lockHolders();
          return now.length === 1 && now[0] !== before ? true : undefined;
        },
        100,
        50,
      );
      assert.equal(store.instance.id, id, 'the id is on this instance’s records: it must not change');
      const heard: string[] = [];
      store.notifier.on('countersign_keys', (p) => heard.push(p));
      await waitFor(
        async () => {
          // An idle pooled connection that died with the others can fail one send; the pool drops it.
          await store.notifier.notify('countersign_keys', 'ping').catch(() => undefined);
          await new Promise((r) => setTimeout(r, 50));
          return heard.includes('ping') ? true : undefined;
        },
        60,
        50,
      );
      // A sweep meanwhile treats this instance as alive again.
      const { projectId, keyId } = await makeProjectKey(t.app, 'agent');
      const mine = await pendingRow(t, projectId, keyId, id);
      assert.equal(await store.markOrphanedRecordsInterrupted(Date.now()), 0);
      assert.equal(await statusOf(t, projectId, mine), 'pending');
    } finally {
      await admin.end();
      await t.close();
    }
  });
}
