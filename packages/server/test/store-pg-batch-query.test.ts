/**
 * The PostgreSQL writer's own query (store/pg-batch-query.ts): a named statement executed
 * without a Describe, its rows as text arrays. Against a real server: it is parsed once per
 * connection and again on a new one; a statement's error rejects with node-pg's DatabaseError
 * (its SQLSTATE code, which the writer's outage handling reads) and leaves the connection
 * usable; a value node-pg cannot map rejects without wedging the connection; a connection the
 * server kills rejects what was in flight, and the pool's next connection parses again. The
 * writer keeps its connection between batches, and replaces one the server ended while idle
 * before the next batch rather than failing that batch on it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { freshPostgresDatabase, STORES, tempDir } from './helpers/server.js';
import { executeNamed } from '../src/store/pg-batch-query.js';
import { PgWriter } from '../src/store/pg-writer.js';
import { Store, type NewLog } from '../src/store/index.js';
import { proofLog } from './proofs-helpers.js';
import { monotonicMs } from '../src/monotonic-clock.js';

const ECHO = { name: 'cs_t_echo', text: 'select $1::int8 as a, $2::text as b, null::text as c, 1 / $3::int4 as d' };
const ARRAYS = { name: 'cs_t_arrays', text: 'select x, y from unnest($1::text[], $2::int8[]) as v(x, y)' };

for (const _ of STORES.filter((s) => s === 'postgres'))
  test('PostgreSQL writer query: named, undescribed, text rows; errors keep their code and the connection', async () => {
    const url = await freshPostgresDatabase();
    const pool = new pg.Pool({ connectionString: url, max: 1, idleTimeoutMillis: 0 });
    pool.on('error', () => undefined);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const client = await pool.connect();
      // Twice on one connection: the same rows, the statement prepared once.
      for (let i = 0; i < 2; i++) {
        const rows = await executeNamed(client, ECHO.name, ECHO.text, ['9007199254740993', 'é', 1]);
        assert.deepEqual(rows, [['9007199254740993', 'é', null, '1']]);
      }
      const prepared = await client.query<{ name: string }>('select name from pg_prepared_statements');
      assert.deepEqual(
        prepared.rows.map((r) => r.name),
        [ECHO.name],
      );
      // Arrays (the writer's unnest statements) map through node-pg's own prepareValue.
      assert.deepEqual(
        await executeNamed(client, ARRAYS.name, ARRAYS.text, [
          ['a', 'b"c', null],
          [1, 2, 3],
        ]),
        [
          ['a', '1'],
          ['b"c', '2'],
          [null, '3'],
        ],
      );

      // A statement's error: node-pg's DatabaseError with its SQLSTATE; the connection goes on.
      await assert.rejects(executeNamed(client, ECHO.name, ECHO.text, [1, 'x', 0]), (err: Error & { code?: string }) => {
        assert.equal(err.code, '22012'); // division_by_zero
        return true;
      });
      assert.deepEqual(await executeNamed(client, ECHO.name, ECHO.text, [2, 'y', 1]), [['2', 'y', null, '1']]);

      // A value node-pg cannot map (a cycle): rejected before anything is bound; the connection goes on.
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      await assert.rejects(executeNamed(client, ECHO.name, ECHO.text, [1, cyclic, 1]));
      assert.deepEqual(await executeNamed(client, ECHO.name, ECHO.text, [3, 'z', 1]), [['3', 'z', null, '1']]);

      // The server kills the connection while a statement runs: the statement rejects without a
      // SQLSTATE of its own to keep the connection by; the pool's next one parses the statement again.
      const pid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      // Both handled from the start: the rejection can come before pg_terminate_backend answers
      // (a rejection with no handler yet is an unhandled one), and pg emits 'error' on a
      // checked-out client when its socket ends, which pg-pool does not listen for.
      client.on('error', () => undefined);
      const slow = executeNamed(client, 'cs_t_sleep', 'select pg_sleep($1::float8)::text', [5]).then(
        () => undefined,
        (e: Error) => e,
      );
      await new Promise((r) => setTimeout(r, 200));
      await admin.query('select pg_terminate_backend($1)', [pid]);
      const err = await slow;
      assert.ok(err instanceof Error, 'the killed statement rejects');
      client.release(err);
      const next = await pool.connect();
      try {
        assert.deepEqual(await executeNamed(next, ECHO.name, ECHO.text, [4, 'w', 1]), [['4', 'w', null, '1']]);
      } finally {
        next.release();
      }
    } finally {
      await admin.end();
      await pool.end();
    }
  });

for (const _ of STORES.filter((s) => s === 'postgres'))
  test('PostgreSQL writer: one connection kept across batches; one the server ends while idle is replaced, not failed on', async () => {
    const url = await freshPostgresDatabase();
    const st = await Store.open({ dataDir: tempDir(), databaseUrl: url });
    const writer = new PgWriter(url, 5000);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const writerPids = async () =>
      (
        await admin.query<{ pid: number }>(
          "select pid from pg_stat_activity where datname = current_database() and application_name = 'countersign-writer'",
        )
      ).rows.map((r) => r.pid);
    try {
      const log = (i: number): NewLog =>
        proofLog(Date.now(), { id: `log_held_${i}`, projectId: 'prj_held', source: 'proxy', status: 'pending', requestProof: false });
      const write = (i: number) => writer.write({ inserts: [log(i)], outcomes: [], refusals: [] }, monotonicMs() + 5000);
      for (let i = 0; i < 5; i++) assert.deepEqual([...(await write(i)).inserted], [1]);
      const mine = await writerPids();
      assert.equal(mine.length, 1, 'five batches, one connection');
      await admin.query('select pg_terminate_backend($1)', [mine[0]]);
      // The held connection hears its end (a moment: terminate only signals the backend).
      for (let i = 0; i < 50 && (await writerPids()).includes(mine[0]!); i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual([...(await write(5)).inserted], [1], 'the batch after the kill goes through on a new connection');
      const after = await writerPids();
      assert.equal(after.length, 1);
      assert.notEqual(after[0], mine[0]);
    } finally {
      await admin.end();
      await writer.close();
      await st.close();
    }
  });
