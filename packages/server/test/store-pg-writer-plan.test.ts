/**
 * The PostgreSQL writer's outcome join stays an index lookup as `logs` grows. Its statements
 * are named (prepared once per connection); after five executions PostgreSQL may switch to a
 * generic plan, and the generic plan made while the table was nearly empty joined the outcomes
 * by a sequential scan of `logs`: every batch became O(table) (40 ms a batch after 5,000 rows;
 * the proxy fell to 200 calls/s). The writer's connection now runs with sequential scans off
 * (every statement it runs has an index to use). Asserted without timing: over 60 batches of
 * pending inserts and earlier outcomes (named by seq; as scalars and, over four rows, as arrays;
 * and 10 more naming rows by project and id), against a table of 3,000 rows, the writer does not scan `logs` each batch (a backend's
 * scan counts are read once it has ended).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { freshPostgresDatabase, STORES, tempDir } from './helpers/server.js';
import { PgWriter } from '../src/store/pg-writer.js';
import { proofLog } from './proofs-helpers.js';
import { Store, type NewLog } from '../src/store/index.js';

// PostgreSQL only (CI always has it: COUNTERSIGN_REQUIRE_POSTGRES).
for (const _ of STORES.filter((s) => s === 'postgres'))
  test('PostgreSQL writer: outcomes join logs by index however large it grows', async () => {
    const url = await freshPostgresDatabase();
    const st = await Store.open({ dataDir: tempDir(), databaseUrl: url });
    const writer = new PgWriter(url, 5000);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const row = (i: number): NewLog =>
        proofLog(Date.now(), {
          id: `log_plan_${i}`,
          projectId: 'prj_plan',
          source: 'proxy',
          status: 'pending',
          requestProof: false,
          instanceId: st.instance.id,
        });
      // The seq each insert returned, by row number: what the proxy hands back with the outcome.
      const seqOf = new Map<number, number>();
      const outcome = (i: number, by: 'seq' | 'key' = 'seq') => ({
        ref: { projectId: 'prj_plan', id: `log_plan_${i}`, ...(by === 'seq' ? { seq: seqOf.get(i)! } : {}) },
        c: { status: 'complete' as const, payload: '{"done":true}', payloadHash: 'cd'.repeat(32), completedAt: Date.now() },
      });
      const far = () => Date.now() + 5000;
      const write = async (from: number, ins: NewLog[], outs: ReturnType<typeof outcome>[]) => {
        const r = await writer.write({ inserts: ins, outcomes: outs, refusals: [] }, far());
        [...r.seqs].forEach((seq, k) => seqOf.set(from + k, seq));
        return r;
      };
      const scans = async () =>
        Number(
          (await admin.query<{ seq_scan: string }>("select seq_scan from pg_stat_user_tables where relname = 'logs'")).rows[0]!.seq_scan,
        );
      const before = await scans();
      // Small batches of the hot shape first, while the table is nearly empty: the executions a
      // generic plan is made from.
      let n = 0;
      await write(n, [row(n++)], []);
      for (let b = 0; b < 10; b++) await write(n, [row(n++)], [outcome(n - 2)]);
      // Grow the table as traffic does, with no ANALYZE in between (autovacuum lags behind).
      for (let b = 0; b < 30; b++)
        await write(
          n,
          Array.from({ length: 100 }, () => row(n++)),
          [],
        );
      // The hot pattern: each batch carries new pending records and the outcomes of earlier ones.
      for (let b = 0; b < 60; b++) {
        const from = n;
        const r = await write(from, [row(n++), row(n++), row(n++)], [outcome(from - 3), outcome(from - 2)]);
        assert.deepEqual([...r.inserted], [1, 1, 1]);
        assert.ok([...r.seqs].every((seq) => seq > 0));
        assert.deepEqual([...r.completed], [1, 1]);
      }
      // Batches over four of each go as arrays through unnest (up to four: one scalar per value).
      for (let b = 0; b < 10; b++) {
        const from = n;
        const ins = Array.from({ length: 6 }, () => row(n++));
        const outs = Array.from({ length: 6 }, (_, k) => outcome(from - 12 + k));
        const r = await write(from, ins, outs);
        assert.deepEqual([...r.inserted], [1, 1, 1, 1, 1, 1]);
        assert.deepEqual([...r.completed], [1, 1, 1, 1, 1, 1]);
      }
      // Outcomes without a seq (owed ones) find their rows through the unique (project, id) index.
      for (let b = 0; b < 10; b++) {
        const r = await write(n, [], [outcome(100 + 2 * b, 'key'), outcome(101 + 2 * b, 'key')]);
        assert.deepEqual([...r.completed], [1, 1]);
      }
      // A backend reports its table statistics when idle for a while or when it ends: end it.
      await writer.close();
      let after = before;
      for (let i = 0; i < 50 && after === before; i++) {
        await new Promise((r) => setTimeout(r, 100));
        after = await scans();
      }
      // A plan that scans does so on every one of the 90 batches with outcomes.
      assert.ok(after - before <= 15, `sequential scans of logs by the writer: ${after - before} (a generic plan scans on every batch)`);
    } finally {
      await admin.end();
      await writer.close().catch(() => undefined);
      await st.close();
    }
  });

// PostgreSQL only: migration 013.
for (const _ of STORES.filter((s) => s === 'postgres'))
  test('PostgreSQL stores log payloads out of line without compressing them (ciphertext does not compress)', async () => {
    const url = await freshPostgresDatabase();
    const st = await Store.open({ dataDir: tempDir(), databaseUrl: url });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const storage = await admin.query<{ attstorage: string }>(
        "select attstorage from pg_attribute where attrelid = 'logs'::regclass and attname = 'payload'",
      );
      assert.equal(storage.rows[0]?.attstorage, 'e', 'STORAGE EXTERNAL');
      // A payload far over the TOAST threshold, and one PostgreSQL could compress: stored as it is.
      const big = proofLog(Date.now(), { projectId: 'prj_storage', payload: JSON.stringify({ ct: 'A'.repeat(20_000) }) });
      assert.equal(await st.logs.insert(big), true);
      const stored = await admin.query<{ method: string | null; bytes: number }>(
        'select pg_column_compression(payload) as method, pg_column_size(payload) as bytes from logs where id = $1',
        [big.id],
      );
      assert.equal(stored.rows[0]?.method, null, 'not compressed');
      assert.ok(stored.rows[0]!.bytes >= big.payload.length, `stored size ${stored.rows[0]!.bytes}`);
      assert.equal((await st.logs.get('prj_storage', big.id))?.payload, big.payload);
    } finally {
      await admin.end();
      await st.close();
    }
  });
