/**
 * The SQLite WAL is checkpointed by the background worker, not inside request commits. The
 * serving connection has automatic checkpoints off, so the database file itself only grows when
 * the worker copies the WAL back: watching its size tells the worker did it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startApp } from './helpers/server.js';
import { fullProject, postLog } from './foundation-helpers.js';

test('SQLite: the background worker checkpoints the WAL into the database file', async () => {
  const t = await startApp({ store: 'sqlite' });
  const dbFile = path.join(t.config.dataDir, 'countersign.db');
  try {
    const p = await fullProject(t, 'wal');
    await new Promise((r) => setTimeout(r, 600)); // let the worker settle what migrations wrote
    const before = fs.statSync(dbFile).size;
    const logs = Array.from({ length: 200 }, (_, i) => ({ payload: { i, text: 'x'.repeat(4000) } }));
    for (let i = 0; i < 4; i++) {
      const r = await postLog(t.app, p.agent, { logs: logs.slice(i * 50, i * 50 + 50) }, { 'x-service-encryption-key': 'k' });
      assert.equal(r.statusCode, 201, r.body);
    }
    let grown = 0;
    for (let i = 0; i < 100 && grown < 500_000; i++) {
      await new Promise((r) => setTimeout(r, 50));
      grown = fs.statSync(dbFile).size - before;
    }
    assert.ok(grown >= 500_000, `the database file grew by ${grown} bytes only`);
  } finally {
    await t.close();
  }
});
