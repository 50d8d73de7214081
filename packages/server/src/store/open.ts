/**
 * Opens the store: SQLite (better-sqlite3, WAL) in the data dir by default, PostgreSQL when a
 * URL is given. Both sit behind the same Kysely schema and migrations.
 */
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import {
  CompiledQuery,
  Kysely,
  Migrator,
  PostgresDialect,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type MigrationProvider,
  type SqliteDialectConfig,
} from 'kysely';
import type { Database } from './schema.js';
import { MIGRATIONS } from './migrations/index.js';
import type { WriteBackend } from './log-writer.js';
import { SqliteWriter } from './sqlite-writer.js';
import { PgWriter } from './pg-writer.js';
import { lockDataDir } from './data-dir-lock.js';
import { ensurePrivateFile, makePrivateDir, restrictIfPresent } from '../data-dir.js';

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
  /**
   * The store deadline, ms (`COUNTERSIGN_STORE_TIMEOUT_MS`, default 5000): how long a hot-path
   * write may take (log-writer.ts), how long SQLite waits for its write lock, and PostgreSQL's
   * `lock_timeout` (a statement stuck behind a lock fails instead of waiting for ever).
   */
  timeoutMs?: number;
}

/** Default store deadline, ms. */
export const DEFAULT_STORE_TIMEOUT_MS = 5000;

/** An open database with its dialect. */
export interface OpenDatabase {
  db: Kysely<Database>;
  dialect: Dialect;
  /** PostgreSQL pool (for LISTEN/NOTIFY and advisory locks), when the dialect is postgres. */
  pgPool?: pg.Pool;
  /** The better-sqlite3 handle behind Kysely (reads and the cold writes), when the dialect is sqlite. */
  sqlite?: BetterSqlite3.Database;
  /** What commits the hot writes (log-writer.ts): a worker thread on SQLite, a dedicated connection on PostgreSQL. */
  writer?: WriteBackend;
  /** The data directory's lock (data-dir-lock.ts), held while the store is open, when the dialect is sqlite. */
  dataDirLock?: BetterSqlite3.Database;
}

// int8 (bigint) columns hold epoch milliseconds and sequence numbers, well inside 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

/** Opens the database and applies every pending migration. */
export async function openDatabase(options: OpenStoreOptions): Promise<OpenDatabase> {
  let opened: OpenDatabase;
  const timeoutMs = options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (options.databaseUrl) {
    // Migrations first, on a connection without lock_timeout: an instance starting beside one
    // that is migrating waits for it, however long that takes.
    await migrateOnce(options.databaseUrl);
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      // A table locked by another session (or a pool exhausted by such waits) fails the statement
      // at the store deadline: 503 log_store_unavailable, not a call that hangs (availability.ts).
      options: `-c lock_timeout=${timeoutMs}`,
      connectionTimeoutMillis: timeoutMs,
    });
    // A dropped idle connection must not crash the process; the pool replaces it.
    pool.on('error', () => undefined);
    // pg-pool listens for errors only on IDLE clients: a connection that dies while checked out
    // (a query in flight, the seal lock held) emits 'error' with no listener, which would crash
    // the process on a database restart. The query itself rejects with the same error (mapped to
    // 503 log_store_unavailable), and the pool discards the broken client on release.
    pool.on('connect', (client) => client.on('error', () => undefined));
    opened = { db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }), dialect: 'postgres', pgPool: pool };
  } else {
    makePrivateDir(options.dataDir);
    // Owner-only files (data-dir.ts): made 0600 before SQLite opens them, because SQLite creates
    // a database 0644 and gives its -wal, -shm and -journal files the mode of the database file.
    ensurePrivateFile(path.join(options.dataDir, 'countersign.lock'));
    const dbFile = path.join(options.dataDir, 'countersign.db');
    const dataDirLock = lockDataDir(options.dataDir);
    let file: BetterSqlite3.Database;
    try {
      ensurePrivateFile(dbFile);
      for (const suffix of ['-wal', '-shm', '-journal']) restrictIfPresent(dbFile + suffix);
      file = new BetterSqlite3(dbFile);
    } catch (e) {
      dataDirLock.close();
      throw e;
    }
    file.pragma('journal_mode = WAL');
    file.pragma(`synchronous = ${options.sqliteSync === 'full' ? 'FULL' : 'NORMAL'}`);
    // Blocks the event loop while another connection holds the write lock: only the cold writes
    // run here (the hot path is the writer thread's), and never longer than the store deadline.
    file.pragma(`busy_timeout = ${timeoutMs}`);
    file.pragma('foreign_keys = ON');
    // Checkpoints run in the writer thread (sqlite-writer-worker.ts), never inside a request's commit.
    file.pragma('wal_autocheckpoint = 0');
    const dialect = new ImmediateSqliteDialect({ database: file });
    opened = { db: new Kysely<Database>({ dialect }), dialect: 'sqlite', sqlite: file, dataDirLock };
  }
  try {
    if (opened.sqlite) await migrate(opened);
    opened.writer = opened.sqlite
      ? await SqliteWriter.start({
          file: path.join(options.dataDir, 'countersign.db'),
          synchronous: options.sqliteSync === 'full' ? 'FULL' : 'NORMAL',
          timeoutMs,
        })
      : new PgWriter(options.databaseUrl!, timeoutMs);
  } catch (e) {
    await opened.db.destroy();
    opened.dataDirLock?.close();
    throw e;
  }
  return opened;
}

/**
 * SQLite transactions of the main connection start with `BEGIN IMMEDIATE`: the writer thread
 * commits beside it, and a deferred transaction that read first could not upgrade to a write
 * once the writer has committed (SQLITE_BUSY_SNAPSHOT, which no busy timeout waits out). Taking
 * the write lock up front makes it wait for the writer's transaction instead.
 */
class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;
  constructor(config: SqliteDialectConfig) {
    super(config);
    this.#config = config;
  }
  override createDriver(): SqliteDriver {
    return new ImmediateSqliteDriver(this.#config);
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

/** Applies pending PostgreSQL migrations through a connection of their own. */
async function migrateOnce(databaseUrl: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  pool.on('error', () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    await migrate({ db, dialect: 'postgres' });
  } finally {
    await db.destroy();
  }
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
