/**
 * Issue 8: log ids are scoped to their project (migration 005), on SQLite and PostgreSQL.
 * - the same client id in two projects is two logs (201 both), so an answer never tells whether
 *   another project used an id; within a project a retry is 200 duplicate and different content
 *   409, as before;
 * - reads, proofs (claim, receipt lookup) and proxy outcome completion find a log by project and
 *   id: the same id in two projects is sealed into one batch as two leaves, each read back with
 *   its own receipt; a proxy outcome never lands on another project's `/v1/log` entry;
 * - migration 005 keeps every row (and its `seq`) of a store made before it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely';
import { deriveEnvelopeKey, openPayload, payloadHashHex, randomNonce, sealPayload, type Envelope } from '@countersign/core';
import { Store } from '../src/store/index.js';
import { MIGRATIONS } from '../src/store/migrations/index.js';
import { claimAndBuild } from '../src/proofs/build.js';
import { STORES, freshPostgresDatabase, startApp, tempDir, type StoreKind } from './helpers/server.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';
import { proofLog } from './proofs-helpers.js';

const KEY = 'hardening ids key';

/** A fresh store of `kind` (its own data dir or database). */
async function openStore(kind: StoreKind): Promise<Store> {
  return Store.open({ dataDir: tempDir(), databaseUrl: kind === 'postgres' ? await freshPostgresDatabase() : undefined });
}

for (const store of STORES) {
  test(`log ids are scoped to the project on ${store}`, async (s) => {
    const t = await startApp({ store });
    try {
      const a = await fullProject(t, 'a');
      const b = await fullProject(t, 'b');
      const id = 'shared-client-id-000001';

      await s.test('the same client id in two projects: both 201, two logs, each read in its own project', async () => {
        const inA = await postLog(t.app, a.agent, { id, action: 'in.a', payload: { who: 'a' } }, { 'x-service-encryption-key': KEY });
        assert.equal(inA.statusCode, 201, inA.body);
        const inB = await postLog(t.app, b.agent, { id, action: 'in.b', payload: { who: 'b' } }, { 'x-service-encryption-key': KEY });
        assert.equal(inB.statusCode, 201, inB.body);
        assert.equal(inB.json().duplicate, false);
        for (const [p, who] of [
          [a, 'a'],
          [b, 'b'],
        ] as const) {
          const r = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/${id}`);
          assert.equal(r.statusCode, 200, r.body);
          const log = r.json().log;
          assert.equal(log.projectId, p.projectId);
          assert.equal(log.action, `in.${who}`);
          assert.equal((await openPayload(log.payload as Envelope, await deriveEnvelopeKey(KEY), id)).who, who);
        }
      });

      await s.test('within a project: a retry is 200 duplicate, other content 409; the other project is untouched', async () => {
        const retry = await postLog(t.app, a.agent, { id, action: 'in.a', payload: { who: 'a' } }, { 'x-service-encryption-key': KEY });
        assert.equal(retry.statusCode, 200, retry.body);
        assert.equal(retry.json().duplicate, true);
        const clash = await postLog(t.app, a.agent, { id, action: 'other', payload: { who: 'a' } }, { 'x-service-encryption-key': KEY });
        assertError(clash, 409, 'idempotency_conflict');
        const batch = await postLog(
          t.app,
          b.agent,
          {
            logs: [
              { id, action: 'in.b', payload: { who: 'b' } },
              { id: 'fresh-id-in-b-0000001', payload: {} },
            ],
          },
          { 'x-service-encryption-key': KEY },
        );
        assert.equal(batch.statusCode, 201, batch.body);
        assert.equal(batch.json().duplicates, 1);
        const aLogs = (await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs`)).json().logs as Array<{ id: string }>;
        assert.equal(aLogs.filter((l) => l.id === id).length, 1);
      });

      await s.test('a client envelope under the same id in a third project is its own log (the AAD is the bare id)', async () => {
        const c = await fullProject(t, 'c');
        const envelope = await sealPayload({ who: 'c' }, await deriveEnvelopeKey(KEY), id);
        const r = await postLog(t.app, c.agent, { id, payload: envelope });
        assert.equal(r.statusCode, 201, r.body);
        const back = (await getWith(t.app, c.live, `/v1/projects/${c.projectId}/logs/${id}`)).json().log;
        assert.deepEqual(back.payload, envelope);
      });
    } finally {
      await t.close();
    }
  });

  test(`proofs and proxy outcomes find a log by project and id on ${store}`, async (s) => {
    const st = await openStore(store);
    try {
      const id = 'log_' + randomNonce();
      const logA = proofLog(1000, { id, projectId: 'prj_live_a', payloadHash: payloadHashHex({ who: 'a', nonce: randomNonce() }) });
      const logB = proofLog(1000, { id, projectId: 'prj_live_b', payloadHash: payloadHashHex({ who: 'b', nonce: randomNonce() }) });

      await s.test('the same id in two projects: two leaves of one batch, each receipt in its own project', async () => {
        assert.deepEqual(await st.logs.insertMany([logA, logB]), [true, true]);
        assert.deepEqual(await st.logs.insertMany([logA]), [false], 'a second insert in the same project is refused');
        const batch = await claimAndBuild(st, { batchId: 'batch_ids_1', windowStart: 0, windowEnd: 5000 }, { chunk: 500, now: () => 6000 });
        assert.ok(batch, 'the window was claimed');
        assert.equal(batch.treeSize, 2);
        const ra = await st.proofs.receipt('prj_live_a', id);
        const rb = await st.proofs.receipt('prj_live_b', id);
        assert.equal(ra?.payloadHash, logA.payloadHash);
        assert.equal(rb?.payloadHash, logB.payloadHash);
        assert.notEqual(ra?.leafIndex, rb?.leafIndex);
        assert.equal(await st.proofs.receipt('prj_live_c', id), undefined);
      });

      await s.test("a proxy outcome completes the proxy record it names, never another project's /v1/log entry with that id", async () => {
        const outcome = (payload: string) => ({ status: 'complete' as const, payload, payloadHash: null, completedAt: 3000 });
        for (const by of ['seq', 'project and id'] as const) {
          const shared = 'log_' + randomNonce();
          const logEntry = proofLog(2000, { id: shared, projectId: 'prj_live_a', requestProof: false, payload: '{"mine":true}' });
          const pending = proofLog(2000, {
            id: shared,
            projectId: 'prj_live_b',
            source: 'proxy',
            status: 'pending',
            requestProof: false,
            payload: '{"pending":true}',
            payloadHash: null,
          });
          const entrySeq = await st.logs.insertReturningSeq(logEntry);
          const pendingSeq = await st.logs.insertReturningSeq(pending);
          assert.ok(entrySeq > 0 && pendingSeq > entrySeq, 'each insert tells its seq');
          assert.equal((await st.logs.get('prj_live_b', shared))?.seq, pendingSeq);
          assert.equal(await st.logs.insertReturningSeq(pending), 0, 'an id its project has: 0, nothing written');
          // The /v1/log entry is never completed, whether named by its seq or by its project and id.
          const entryRef = by === 'seq' ? { projectId: 'prj_live_a', id: shared, seq: entrySeq } : { projectId: 'prj_live_a', id: shared };
          assert.equal(await st.proxyOutcomes.complete(entryRef, outcome('{"hijack":true}')), false);
          const ref = by === 'seq' ? { projectId: 'prj_live_b', id: shared, seq: pendingSeq } : { projectId: 'prj_live_b', id: shared };
          assert.equal(await st.proxyOutcomes.complete(ref, outcome('{"done":true}')), true, `found by ${by}`);
          assert.equal((await st.logs.get('prj_live_b', shared))?.payload, '{"done":true}');
          const untouched = await st.logs.get('prj_live_a', shared);
          assert.equal(untouched?.payload, '{"mine":true}');
          assert.equal(untouched?.status, 'complete');
          assert.equal(untouched?.completedAt, null);
        }
      });
    } finally {
      await st.close();
    }
  });

  test(`migration 005 keeps the rows of an older store on ${store}`, async () => {
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    // A store as it was before 005: migrations 001-004 only, with a log and a receipt in it.
    const sqlite = databaseUrl ? undefined : new BetterSqlite3(path.join(dataDir, 'countersign.db'));
    const pool = databaseUrl ? new pg.Pool({ connectionString: databaseUrl }) : undefined;
    const old = new Kysely<any>({ dialect: pool ? new PostgresDialect({ pool }) : new SqliteDialect({ database: sqlite! }) }); // eslint-disable-line @typescript-eslint/no-explicit-any -- the pre-005 schema
    const dialect = pool ? 'postgres' : 'sqlite';
    const upTo004 = MIGRATIONS.filter((m) => m.name <= '004');
    const migrated = await new Migrator({
      db: old,
      provider: {
        getMigrations: async () => Object.fromEntries(upTo004.map((m) => [m.name, { up: (k: Kysely<unknown>) => m.up(k, dialect) }])),
      },
    }).migrateToLatest();
    assert.equal(migrated.error, undefined);
    const before = proofLog(1000, { id: 'old-log-id-00000001', projectId: 'prj_live_old', requestProof: false });
    const oldRow = (id: string) => ({
      id,
      project_id: before.projectId,
      key_id: before.keyId,
      received_at: before.receivedAt,
      occurred_at: null,
      actor: before.actor,
      action: before.action,
      trace_id: null,
      actor_type: before.actorType,
      credential_handover_detected: 0,
      source: 'log',
      status: 'complete',
      request_proof: 0,
      payload_hash: before.payloadHash,
      payload: before.payload,
      metadata: null,
      completed_at: null,
    });
    await old
      .insertInto('logs')
      .values([oldRow('old-log-id-00000000'), oldRow(before.id)])
      .execute();
    const seqBefore = Number((await old.selectFrom('logs').select('seq').where('id', '=', before.id).executeTakeFirstOrThrow()).seq);
    await old.destroy();

    const st = await Store.open({ dataDir, databaseUrl });
    try {
      const kept = await st.logs.get('prj_live_old', before.id);
      assert.equal(kept?.seq, seqBefore);
      assert.equal(kept?.payloadHash, before.payloadHash);
      // After 005: the id is free in another project, taken in its own, and seq goes on.
      assert.deepEqual(await st.logs.insertMany([{ ...before, projectId: 'prj_live_new' }, before]), [true, false]);
      const next = await st.logs.get('prj_live_new', before.id);
      assert.ok(next && next.seq > seqBefore, `seq continues after the copied rows (got ${next?.seq})`);
    } finally {
      await st.close();
    }
  });
}
