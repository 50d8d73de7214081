/**
 * The trace index keeps only entries that have a trace id (migration 014): calls without one
 * write no entry in it, and a trace is still read through it, on both stores.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { freshPostgresDatabase, STORES, tempDir } from './helpers/server.js';
import { proofLog } from './proofs-helpers.js';
import { Store } from '../src/store/index.js';

for (const store of STORES)
  test(`the trace index holds traced entries only and serves a trace's reads (${store})`, async () => {
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const st = await Store.open({ dataDir: tempDir(), databaseUrl });
    try {
      // 300 entries without a trace, 30 traces of 3: a table a planner has reasons to index.
      for (let i = 0; i < 300; i++) await st.logs.insert(proofLog(Date.now(), { projectId: 'prj_trace', traceId: null }));
      for (let t = 0; t < 30; t++)
        for (let k = 0; k < 3; k++) await st.logs.insert(proofLog(Date.now(), { projectId: 'prj_trace', traceId: `run-${t}` }));
      const read = await st.logs.trace('prj_trace', 'run-7');
      assert.equal(read.length, 3);
      assert.ok(read.every((r) => r.traceId === 'run-7'));

      const query = sql`select * from logs where project_id = ${'prj_trace'} and trace_id = ${'run-7'} order by seq asc limit 10000`;
      if (store === 'postgres') {
        const def = await sql<{ indexdef: string }>`select indexdef from pg_indexes where indexname = 'logs_project_trace'`.execute(st.db);
        assert.match(def.rows[0]!.indexdef, /WHERE \(trace_id IS NOT NULL\)/);
        await sql`analyze logs`.execute(st.db);
        const plan = await sql<{ 'QUERY PLAN': string }>`explain ${query}`.execute(st.db);
        assert.match(plan.rows.map((r) => r['QUERY PLAN']).join('\n'), /logs_project_trace/);
      } else {
        const def = await sql<{ sql: string }>`select sql from sqlite_master where name = 'logs_project_trace'`.execute(st.db);
        assert.match(def.rows[0]!.sql, /where trace_id is not null/i);
        const plan = await sql<{ detail: string }>`explain query plan ${query}`.execute(st.db);
        assert.match(plan.rows.map((r) => r.detail).join('\n'), /INDEX logs_project_trace/);
        // 90 traced entries in the index, not 390 (SQLite counts an index's entries through dbstat's cells).
        const cells = await sql<{
          n: number;
        }>`select sum(ncell) as n from dbstat where name = 'logs_project_trace' and pagetype = 'leaf'`.execute(st.db);
        assert.equal(Number(cells.rows[0]!.n), 90);
      }
    } finally {
      await st.close();
    }
  });
