/**
 * The store deadline (issue 8: "a store that hangs makes calls wait indefinitely"). With the
 * logs table locked by another session (SQLite: a second connection in BEGIN IMMEDIATE;
 * PostgreSQL: LOCK TABLE … ACCESS EXCLUSIVE), a proxied call answers 503 log_store_unavailable
 * and the upstream receives nothing; `/v1/log` answers 503 too; once the lock is gone the same
 * server serves again and no record is left pending. Plus the rule for a write-ahead record
 * that lands after its caller was refused (log-writer.ts): it is marked `failed`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { sql } from 'kysely';
import { STORES, startApp, tempDir, freshPostgresDatabase, type TestApp } from './helpers/server.js';
import { lockLogs } from './helpers/lock-logs.js';
import { makeProjectKey, proxyCall, startUpstream, waitFor, type Upstream } from './helpers/upstreams.js';
import { postLog } from './foundation-helpers.js';
import { Store, type NewLog } from '../src/store/index.js';
import { LogWriter, type WriteBackend, type WriteBatch, type WriteResult } from '../src/store/log-writer.js';
import { SqliteWriter } from '../src/store/sqlite-writer.js';
import { PgWriter } from '../src/store/pg-writer.js';
import { monotonicMs } from '../src/monotonic-clock.js';

const DEADLINE_MS = 400;

async function pendingCount(t: TestApp): Promise<number> {
  const r = await sql<{ n: number }>`select count(*) as n from logs where status = 'pending'`.execute(t.app.ctx.store.db);
  return Number(r.rows[0]!.n);
}

for (const store of STORES) {
  test(`a locked logs table: 503 log_store_unavailable at the store deadline, nothing forwarded, service after release, nothing left pending (${store})`, async () => {
    const up: Upstream = await startUpstream();
    const t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort], storeTimeoutMs: DEADLINE_MS } });
    try {
      const { apiKey } = await makeProjectKey(t.app, 'agent');
      const before = await proxyCall(t.url, apiKey, { target: up.url + '/json', payload: { n: 0 } });
      assert.equal(before.status, 200, before.text);
      const seen = up.requests.length;

      const lock = await lockLogs(t);
      let released = false;
      try {
        // The answer arrives while the lock is still held: the call did not wait for the store.
        // It comes at the configured deadline: the bound below is that deadline with tenfold slack
        // (not a speed figure), and below the 5 s a busy SQLite connection used to wait anyway.
        const started = Date.now();
        const during = await proxyCall(t.url, apiKey, { target: up.url + '/json', payload: { n: 1 } });
        assert.ok(Date.now() - started < DEADLINE_MS * 10, `answered after ${Date.now() - started} ms`);
        assert.equal(during.status, 503, during.text);
        assert.equal(during.json.error.code, 'log_store_unavailable');
        assert.equal(up.requests.length, seen, 'the upstream received nothing');
        const log = await postLog(t.app, apiKey, { payload: { n: 2 } }, { 'x-service-encryption-key': 'k' });
        assert.equal(log.statusCode, 503, log.body);
        assert.equal(log.json().error.code, 'log_store_unavailable');
        await lock.release();
        released = true;
      } finally {
        if (!released) await lock.release();
      }

      const after = await proxyCall(t.url, apiKey, { target: up.url + '/json', payload: { n: 3 } });
      assert.equal(after.status, 200, after.text);
      assert.equal(up.requests.length, seen + 1);
      const logged = await postLog(t.app, apiKey, { payload: { n: 4 } }, { 'x-service-encryption-key': 'k' });
      assert.equal(logged.statusCode, 201, logged.body);
      // Whatever the refused call left (normally nothing) is settled once the writer is idle.
      await t.app.ctx.store.drain();
      await waitFor(async () => ((await pendingCount(t)) === 0 ? true : undefined), 100, 50);
    } finally {
      await t.close();
      await up.close();
    }
  });

  test(`a write-ahead record that lands after its caller got 503 is marked failed, not left pending (${store})`, async () => {
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const st = await Store.open({ dataDir, databaseUrl });
    const real: WriteBackend = databaseUrl
      ? new PgWriter(databaseUrl, 5000)
      : await SqliteWriter.start({ file: path.join(dataDir, 'countersign.db'), synchronous: 'NORMAL', timeoutMs: 5000 });
    // Hands the first batch to the real store only after its deadline, with the deadline lifted:
    // the commit the deadline rule exists for (one that races the deadline and wins).
    let late = true;
    const lateOnce: WriteBackend = {
      maxInflight: real.maxInflight,
      async write(batch: WriteBatch, deadline: number): Promise<WriteResult> {
        if (!late || batch.inserts.length === 0) return real.write(batch, deadline);
        late = false;
        await new Promise((r) => setTimeout(r, deadline - monotonicMs() + 150));
        return real.write(batch, monotonicMs() + 5000);
      },
      close: () => real.close(),
    };
    const writer = new LogWriter(lateOnce, 200);
    try {
      const row: NewLog = {
        id: 'log_late_' + Math.random().toString(36).slice(2, 10),
        projectId: 'prj_late',
        keyId: 'key_late',
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
        payload: '{"pending":true}',
        metadata: null,
        instanceId: st.instance.id,
      };
      await assert.rejects(writer.insert(row), (e: unknown) => (e as { code?: string }).code === 'STORE_TIMEOUT');
      const final = await waitFor(
        async () => {
          const r = await st.logs.get(row.projectId, row.id);
          return r && r.status !== 'pending' ? r : undefined;
        },
        100,
        50,
      );
      assert.equal(final.status, 'failed');
      assert.equal(final.payload, '{"pending":true}', 'the sealed request half is kept');
      assert.equal(writer.owedRefusals, 0);
    } finally {
      await writer.close();
      await st.close();
    }
  });
}

test('SQLite: a main-connection transaction that reads then writes succeeds while the writer thread commits', async () => {
  const st = await Store.open({ dataDir: tempDir() });
  try {
    const base: Omit<NewLog, 'id'> = {
      projectId: 'prj_mix',
      keyId: 'key_mix',
      receivedAt: Date.now(),
      occurredAt: null,
      actor: 'a',
      action: 'x',
      traceId: null,
      actorType: 'agent',
      credentialHandoverDetected: false,
      source: 'log',
      status: 'complete',
      requestProof: false,
      payloadHash: null,
      payload: '{}',
      metadata: null,
    };
    let stop = false;
    let n = 0;
    const load = (async () => {
      while (!stop) await st.logs.insert({ ...base, id: `log_mix_${n++}` });
    })();
    // Read, let the writer commit meanwhile, then write: a deferred transaction would fail here
    // with SQLITE_BUSY_SNAPSHOT (its snapshot is stale); BEGIN IMMEDIATE waits for the lock instead.
    for (let i = 0; i < 5; i++) {
      await st.db.transaction().execute(async (tx) => {
        const r = await sql<{ n: number }>`select count(*) as n from logs`.execute(tx);
        await new Promise((res) => setTimeout(res, 20));
        await sql`update logs set metadata = ${String(r.rows[0]!.n)} where project_id = 'prj_mix' and id = 'log_mix_0'`.execute(tx);
      });
    }
    stop = true;
    await load;
    assert.ok(n > 0, 'the writer was committing throughout');
  } finally {
    await st.close();
  }
});
