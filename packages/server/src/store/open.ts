/**
 * Opens the store: SQLite (better-sqlite3, WAL) in the data dir by default, PostgreSQL when a
 * URL is given. Both sit behind the same Kysely schema and migrations.
 */
import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, type MigrationProvider } from 'kysely';
import type { Database } from './schema.js';
import { MIGRATIONS } from './migrations/index.js';
import { WalCheckpointer } from './checkpointer.js';
import { lockDataDir } from './data-dir-lock.js';

/** Which database is behind the store. */
export type Dialect = 'sqlite' | 'postgres';

/** How to open the store. */
export interface OpenStoreOptions {
  /** Data directory; the SQLite file is `<dataDir>/countersign.db`. */
  dataDir: string;
  /** PostgreSQL URL; wins over SQLite when set. */
  databaseUrl?: string | undefined;
  /** SQLite `synchronous` pragma: NORMAL survives a killed process, FULL also a power cut. */
  sqliteSync?: 'normal' | 'full';
  /** Pool size for PostgreSQL. */
  poolSize?: number;
}

/** An open database with its dialect. */
export interface OpenDatabase {
  db: Kysely<Database>;
  dialect: Dialect;
  /** PostgreSQL pool (for LISTEN/NOTIFY and advisory locks), when the dialect is postgres. */
  pgPool?: pg.Pool;
  /** The better-sqlite3 handle behind Kysely, when the dialect is sqlite (for the hot write path). */
  sqlite?: BetterSqlite3.Database;
  /** The background WAL checkpointer, when the dialect is sqlite. */
  checkpointer?: WalCheckpointer;
  /** The data directory's lock (data-dir-lock.ts), held while the store is open, when the dialect is sqlite. */
  dataDirLock?: BetterSqlite3.Database;
}

// int8 (bigint) columns hold epoch milliseconds and sequence numbers, well inside 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

/** Opens the database and applies every pending migration. */
export async function openDatabase(options: OpenStoreOptions): Promise<OpenDatabase> {
  let opened: OpenDatabase;
  if (options.databaseUrl) {
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: options.poolSize ?? 10 });
    // A dropped idle connection must not crash the process; the pool replaces it.
    pool.on('error', () => undefined);
    // pg-pool listens for errors only on IDLE clients: a connection that dies while checked out
    // (a query in flight, the seal lock held) emits 'error' with no listener, which would crash
    // the process on a database restart. The query itself rejects with the same error (mapped to
    // 503 log_store_unavailable), and the pool discards the broken client on release.
    pool.on('connect', (client) => client.on('error', () => undefined));
    opened = { db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }), dialect: 'postgres', pgPool: pool };
  } else {
    fs.mkdirSync(options.dataDir, { recursive: true });
    const dataDirLock = lockDataDir(options.dataDir);
    let file: BetterSqlite3.Database;
    try {
      file = new BetterSqlite3(path.join(options.dataDir, 'countersign.db'));
    } catch (e) {
      dataDirLock.close();
      throw e;
    }
    file.pragma('journal_mode = WAL');
    file.pragma(`synchronous = ${options.sqliteSync === 'full' ? 'FULL' : 'NORMAL'}`);
    file.pragma('busy_timeout = 5000');
    file.pragma('foreign_keys = ON');
    // Checkpoints run in a worker (checkpointer.ts), never inside a request's commit.
    file.pragma('wal_autocheckpoint = 0');
    opened = { db: new Kysely<Database>({ dialect: new SqliteDialect({ database: file }) }), dialect: 'sqlite', sqlite: file, dataDirLock };
  }
  try {
    await migrate(opened);
  } catch (e) {
    await opened.db.destroy();
    opened.dataDirLock?.close();
    throw e;
  }
  if (opened.sqlite) opened.checkpointer = await WalCheckpointer.start(path.join(options.dataDir, 'countersign.db'));
  return opened;
}

async function migrate({ db, dialect }: OpenDatabase): Promise<void> {
  const provider: MigrationProvider = {
    getMigrations: async () => Object.fromEntries(MIGRATIONS.map((m) => [m.name, { up: (k: Kysely<unknown>) => m.up(k, dialect) }])),
  };
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new Error(`database migration ${failed?.migrationName ?? ''} failed: ${String((error as Error).message ?? error)}`, {
      cause: error,
    });
  }
}
