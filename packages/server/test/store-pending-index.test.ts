/**
 * The orphan sweep and the pending gauge read the pending records' partial index without
 * visiting every completed call's dead entry again (store/pending-index.ts). Each proxied call
 * leaves one dead entry in `logs_pending_owner` until VACUUM; read by a bitmap scan (what the
 * planner picked with stale statistics), every sweep visited the heap row of every one of them
 * (1.0-1.9 s every 30 s in a 15-minute run at 1,000 req/s). Asserted without timing, by the
 * buffers PostgreSQL's plans touch, on a table whose autovacuum is off (as it was on the machine
 * that found it): as the queries used to run, every read visits the heap blocks of 3,000
 * completed calls; as the store now runs them, once one read has marked the dead entries, each
 * read touches a few pages. And the sweep still does its job.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { sql, type Expression, type Kysely } from 'kysely';
import { freshPostgresDatabase, STORES, tempDir } from './helpers/server.js';
import { waitFor } from './helpers/upstreams.js';
import { proofLog } from './proofs-helpers.js';
import { Store, type NewLog } from '../src/store/index.js';
import { pendingCount, readStoreGauges } from '../src/store/gauges.js';
import { pendingOwners } from '../src/store/logs.js';
import { readPendingIndex } from '../src/store/pending-index.js';
import type { Database } from '../src/store/schema.js';

/** What this test reads of a node of PostgreSQL's JSON plan. */
interface PlanNode {
  'Node Type': string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

const CALLS = 3000;

/**
 * Waits until every row version deleted before this call is dead to any new snapshot, which is
 * when an index scan may mark its entry dead: no transaction with an older id runs in any
 * database of the cluster (a snapshot's horizon counts every running transaction id, so another
 * test file's, under CI's concurrency, kept the last completions alive), and no older snapshot
 * is held in this database.
 */
async function untilNoTransactionPrecedesNow(admin: pg.Client): Promise<void> {
  const now = (await admin.query<{ xid: string }>('select pg_current_xact_id()::xid::text as xid')).rows[0]!.xid;
  let older: unknown[] = [];
  const noneOlder = async () => {
    older = (
      await admin.query(
        `select datname, state, (now() - xact_start)::text as age, query from pg_stat_activity
          where pid <> pg_backend_pid()
            and (age(backend_xid) >= age($1::xid)
                 or (datname = current_database() and age(backend_xmin) >= age($1::xid)))`,
        [now],
      )
    ).rows;
    return older.length === 0 ? true : undefined;
  };
  await waitFor(noneOlder, 1200, 50).catch(() =>
    assert.fail(`transactions older than the completed calls ran for a minute: ${JSON.stringify(older)}`),
  );
}

// PostgreSQL only (SQLite removes an index entry when its row leaves the index; CI always has
// PostgreSQL: COUNTERSIGN_REQUIRE_POSTGRES).
for (const _ of STORES.filter((s) => s === 'postgres'))
  test('PostgreSQL: the orphan sweep and the pending gauge do not revisit completed calls', async () => {
    const url = await freshPostgresDatabase();
    const st = await Store.open({ dataDir: tempDir(), databaseUrl: url });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      // No autovacuum and no automatic ANALYZE for `logs`: the dead entries stay, and the planner
      // keeps the statistics of an empty table.
      await admin.query('alter table logs set (autovacuum_enabled = off)');
      const pending = (over: Partial<NewLog>): NewLog =>
        proofLog(Date.now(), { projectId: 'prj_sweep', source: 'proxy', status: 'pending', requestProof: false, ...over });
      // Calls that came and went: a write-ahead record, then its outcome (a new row version).
      for (let from = 0; from < CALLS; from += 500) {
        const logs = Array.from({ length: 500 }, () => pending({ instanceId: st.instance.id }));
        const seqs = await Promise.all(logs.map((l) => st.logs.insertReturningSeq(l)));
        const done = await Promise.all(
          logs.map((l, k) =>
            st.proxyOutcomes.complete(
              { projectId: l.projectId, id: l.id, seq: seqs[k]! },
              { status: 'complete', payload: '{"done":true}', payloadHash: 'cd'.repeat(32), completedAt: Date.now() },
            ),
          ),
        );
        assert.ok(done.every(Boolean));
      }
      // Still pending: one call of this (live) instance, two of an instance that is gone.
      const live = pending({ instanceId: st.instance.id });
      const orphans = [pending({ instanceId: 'ins_gone_for_good' }), pending({ instanceId: 'ins_gone_for_good' })];
      for (const l of [live, ...orphans]) assert.ok((await st.logs.insertReturningSeq(l)) > 0);

      const completedBlocks = Number(
        (await admin.query<{ n: string }>("select count(distinct (ctid::text::point)[0]) as n from logs where status = 'complete'"))
          .rows[0]!.n,
      );
      assert.ok(completedBlocks >= 50, `the completed calls fill ${completedBlocks} heap blocks`);
      /** PostgreSQL's plan of `query` run as `read` runs it: node types, and buffers touched. */
      const explain = async (query: Expression<unknown>, read: <T>(run: (db: Kysely<Database>) => Promise<T>) => Promise<T>) => {
        const r = await read((db) =>
          sql<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>`explain (analyze, buffers, format json) ${query}`.execute(db),
        );
        const root = r.rows[0]!['QUERY PLAN'][0].Plan;
        const types: string[] = [];
        const walk = (n: PlanNode) => (types.push(n['Node Type']), n.Plans?.forEach(walk));
        walk(root);
        return { types, buffers: root['Shared Hit Blocks'] + root['Shared Read Blocks'] };
      };
      const asIs = <T>(run: (db: Kysely<Database>) => Promise<T>) => run(st.db);
      const asTheStoreReads = <T>(run: (db: Kysely<Database>) => Promise<T>) => readPendingIndex(st.db, st.dialect, run);

      // What the reads did before: a bitmap scan visiting every completed call's heap block, each time.
      for (const query of [pendingOwners(st.db), pendingCount(st.db)])
        for (let k = 0; k < 2; k++) {
          const e = await explain(query, asIs);
          assert.ok(e.types.includes('Bitmap Heap Scan'), `planned as ${e.types.join(' > ')}`);
          assert.ok(e.buffers >= completedBlocks, `${e.buffers} buffers`);
        }

      // The store's reads: the first visits the dead entries once and marks them, provided they
      // are dead to every snapshot. A snapshot taken while any transaction older than the
      // completions still runs, in any database of the cluster (another test file's, under CI's
      // concurrency), keeps them, so wait for those to end first.
      await untilNoTransactionPrecedesNow(admin);
      // The sweep marks the gone instance's records and leaves the live one's.
      assert.equal((await readStoreGauges(st.db, st.dialect)).pendingRecords, 3);
      assert.equal(await st.markOrphanedRecordsInterrupted(Date.now()), 2);
      const statuses = await admin.query<{ id: string; status: string }>('select id, status from logs where id = any($1)', [
        [live.id, ...orphans.map((o) => o.id)],
      ]);
      assert.deepEqual(Object.fromEntries(statuses.rows.map((r) => [r.id, r.status])), {
        [live.id]: 'pending',
        [orphans[0]!.id]: 'interrupted',
        [orphans[1]!.id]: 'interrupted',
      });
      assert.equal(await st.markOrphanedRecordsInterrupted(Date.now()), 0);
      assert.equal((await readStoreGauges(st.db, st.dialect)).pendingRecords, 1);

      // From then on each read touches a few index pages and the live record, not the completed calls.
      for (const query of [pendingOwners(st.db), pendingCount(st.db)]) {
        const e = await explain(query, asTheStoreReads);
        assert.ok(!e.types.some((t) => t.startsWith('Bitmap') || t === 'Seq Scan'), `planned as ${e.types.join(' > ')}`);
        assert.ok(e.buffers < 20, `${e.buffers} buffers (the completed calls fill ${completedBlocks} heap blocks)`);
      }
    } finally {
      await admin.end();
      await st.close();
    }
  });
