/**
 * Holding the store's `logs` table from another session, to make the hot-path writer wait as a
 * hung store would: SQLite through a second connection in `BEGIN IMMEDIATE`, PostgreSQL through
 * `LOCK TABLE … ACCESS EXCLUSIVE`.
 */
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import type { TestApp } from './server.js';

/** Holds the write lock of the app's logs table from another session until `release()`. */
export async function lockLogs(t: TestApp): Promise<{ release: () => Promise<void> }> {
  if (t.config.databaseUrl) {
    const c = new pg.Client({ connectionString: t.config.databaseUrl });
    await c.connect();
    await c.query('begin');
    await c.query('lock table logs in access exclusive mode');
    return {
      release: async () => {
        await c.query('rollback');
        await c.end();
      },
    };
  }
  const db = new BetterSqlite3(path.join(t.config.dataDir, 'countersign.db'));
  db.exec('begin immediate');
  return {
    release: async () => {
      db.exec('rollback');
      db.close();
    },
  };
}
