/**
 * An outcome names the row it completes (log-writer.ts `RowRef`): by the seq its pending
 * record's insert returned, else by project and id. Neither depends on what a writer remembers:
 * the writer that inserted a record may be gone (a restarted writer thread, an owed outcome
 * written after an outage) and the outcome still lands on its row, through an index.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { STORES, freshPostgresDatabase, tempDir } from './helpers/server.js';
import { proofLog } from './proofs-helpers.js';
import { Store } from '../src/store/index.js';
import type { WriteBackend } from '../src/store/log-writer.js';
import { SqliteWriter, WRITER_SQL } from '../src/store/sqlite-writer.js';
import { PgWriter } from '../src/store/pg-writer.js';
import { monotonicMs } from '../src/monotonic-clock.js';

const far = () => monotonicMs() + 5000;
const done = (payload: string) => ({ status: 'complete' as const, payload, payloadHash: 'cd'.repeat(32), completedAt: Date.now() });

for (const store of STORES)
  test(`an outcome lands on its row through a writer that did not insert it, by seq and by project and id (${store})`, async () => {
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const st = await Store.open({ dataDir, databaseUrl });
    const open = async (): Promise<WriteBackend> =>
      databaseUrl
        ? new PgWriter(databaseUrl, 5000)
        : SqliteWriter.start({ file: path.join(dataDir, 'countersign.db'), synchronous: 'NORMAL', timeoutMs: 5000 });
    let first: WriteBackend | undefined = await open();
    let second: WriteBackend | undefined;
    try {
      const pending = (projectId: string) => proofLog(Date.now(), { projectId, source: 'proxy', status: 'pending', requestProof: false });
      const a = pending('prj_rows_a');
      const b = pending('prj_rows_b');
      const inserted = await first.write({ inserts: [a, b], outcomes: [], refusals: [] }, far());
      assert.deepEqual([...inserted.inserted], [1, 1]);
      const [seqA, seqB] = [...inserted.seqs];
      assert.equal((await st.logs.get(a.projectId, a.id))?.seq, seqA, 'the seq returned is the stored row');
      assert.equal((await st.logs.get(b.projectId, b.id))?.seq, seqB);
      // The inserting writer is gone (what a restarted writer thread or a later retry looks like).
      await first.close();
      first = undefined;
      second = await open();
      const r = await second.write(
        {
          inserts: [],
          outcomes: [
            { ref: { projectId: a.projectId, id: a.id, seq: seqA }, c: done('{"a":true}') },
            { ref: { projectId: b.projectId, id: b.id }, c: done('{"b":true}') },
            // A ref whose project does not hold that id completes nothing.
            { ref: { projectId: 'prj_rows_other', id: a.id }, c: done('{"other":true}') },
          ],
          refusals: [],
        },
        far(),
      );
      assert.deepEqual([...r.completed], [1, 1, 0]);
      assert.equal((await st.logs.get(a.projectId, a.id))?.payload, '{"a":true}');
      assert.equal((await st.logs.get(b.projectId, b.id))?.payload, '{"b":true}');
      assert.equal((await st.logs.get(a.projectId, a.id))?.status, 'complete');
    } finally {
      await first?.close();
      await second?.close();
      await st.close();
    }
  });

test('SQLite: the writer finds an outcome row by primary key or by the (project, id) index, never by scanning logs', async () => {
  const dataDir = tempDir();
  const st = await Store.open({ dataDir });
  await st.close();
  const db = new BetterSqlite3(path.join(dataDir, 'countersign.db'), { readonly: true });
  try {
    for (const [name, text] of [
      ['completeBySeq', WRITER_SQL.completeBySeq],
      ['completeByKey', WRITER_SQL.completeByKey],
      ['refuse', WRITER_SQL.refuse],
    ] as const) {
      const explain = db.prepare(`explain query plan ${text}`);
      const params = new Array<null>(text.split('?').length - 1).fill(null);
      const plan = (explain.all(...params) as Array<{ detail: string }>).map((r) => r.detail).join('; ');
      assert.match(plan, /^SEARCH logs USING (INTEGER PRIMARY KEY|INDEX sqlite_autoindex_logs_\d+|INDEX \w+) \(/, `${name}: ${plan}`);
      assert.doesNotMatch(plan, /SCAN logs/, `${name}: ${plan}`);
    }
  } finally {
    db.close();
  }
});
