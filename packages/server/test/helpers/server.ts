/**
 * Test harness: a real app on a temporary data dir, against SQLite or PostgreSQL.
 * `STORES` lists the stores to run a suite against: SQLite always; PostgreSQL when
 * DATABASE_URL is set (CI sets it; locally the PostgreSQL suites skip with a message).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { buildApp } from '../../src/app.js';
import { loadConfig, type ServerConfig } from '../../src/config.js';

/** Which store a suite runs against. */
export type StoreKind = 'sqlite' | 'postgres';

/** The stores available in this run. */
export const STORES: StoreKind[] = process.env.DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];

if (!process.env.DATABASE_URL && process.env.COUNTERSIGN_REQUIRE_POSTGRES) {
  // CI promises PostgreSQL: a missing URL there is a failure, never a silent skip.
  throw new Error('COUNTERSIGN_REQUIRE_POSTGRES is set but DATABASE_URL is not');
}
if (!process.env.DATABASE_URL && !process.env.COUNTERSIGN_QUIET_SKIP) {
  process.stderr.write('note: DATABASE_URL is not set, so PostgreSQL variants of the server suites are skipped (CI sets it)\n');
}

/** A fresh temporary directory. */
export function tempDir(prefix = 'countersign-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * A fresh, empty PostgreSQL database for one test app (named after a random suffix), created on
 * the server of DATABASE_URL. Returns its URL.
 */
export async function freshPostgresDatabase(): Promise<string> {
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set');
  const name = 'cs_t_' + Math.random().toString(36).slice(2, 10);
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(base);
  u.pathname = '/' + name;
  return u.toString();
}

/** Options of {@link startApp}. */
export interface StartAppOptions {
  store?: StoreKind;
  /** Reuse a data dir (restart tests). */
  dataDir?: string;
  /** Reuse a PostgreSQL database (restart tests). */
  databaseUrl?: string;
  /** Extra settings over the test defaults. */
  config?: Partial<ServerConfig>;
  /** Listen on an ephemeral loopback port (default: inject only). */
  listen?: boolean;
}

/** A running test app. */
export interface TestApp {
  app: FastifyInstance;
  config: ServerConfig;
  masterKey: string;
  /** Base URL when listening. */
  url: string;
  close: () => Promise<void>;
}

/** Builds (and optionally listens) a real app for a test. */
export async function startApp(options: StartAppOptions = {}): Promise<TestApp> {
  const dataDir = options.dataDir ?? tempDir();
  const databaseUrl = options.databaseUrl ?? (options.store === 'postgres' ? await freshPostgresDatabase() : undefined);
  const config: ServerConfig = { ...loadConfig({ dataDir, port: '0', logLevel: 'silent' }, {}), databaseUrl, ...options.config };
  const app = await buildApp(config);
  let url = '';
  if (options.listen) url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, config, masterKey: app.ctx.masterKey, url, close: () => app.close() };
}

/** A superuser session on the PostgreSQL server of a test app, to take its database away and back. */
export interface PgAdmin {
  client: pg.Client;
  /** The test app's database. */
  dbName: string;
  /** `alter database … with allow_connections` on the app's database. */
  allowConnections(on: boolean): Promise<void>;
  /** Ends every session of the app's database (pg_terminate_backend only signals: it returns at once). */
  terminateSessions(): Promise<void>;
  end(): Promise<void>;
}

/** Connects a {@link PgAdmin} for the PostgreSQL test app `t`. */
export async function pgAdmin(t: TestApp): Promise<PgAdmin> {
  const dbName = new URL(t.config.databaseUrl!).pathname.slice(1);
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  return {
    client,
    dbName,
    allowConnections: async (on) => {
      await client.query(`alter database ${dbName} with allow_connections ${on}`);
    },
    terminateSessions: async () => {
      await client.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [dbName]);
    },
    end: () => client.end(),
  };
}
