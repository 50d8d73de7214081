/**
 * Direct-ingest throughput: `POST /v1/log` over a real socket (plain payload sealed by the
 * server with X-Service-Encryption-Key), single entries and `{"logs":[…]}` batches of 100, on
 * SQLite and PostgreSQL. The baseline, measured in the same run on the same database engine,
 * is a raw insert loop of rows of the same shape: better-sqlite3 prepared inserts (one commit
 * each, and 100 per transaction) and pg parameterised inserts at the same concurrency.
 * PostgreSQL uses DATABASE_URL, else postgres://postgres@127.0.0.1:5432; skipped if absent.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { buildApp } from '../packages/server/src/app.js';
import { loadConfig } from '../packages/server/src/config.js';

const SINGLE = 4000;
const BATCHES = 150;
const BATCH_SIZE = 100;
const CONCURRENCY = 32;
const PAYLOAD = { model: 'gpt-x', prompt: 'summarise the quarterly report '.repeat(8), tokens: 512, temperature: 0.2 };
const ENVELOPE_LIKE = JSON.stringify({
  v: 1,
  alg: 'A256GCM',
  kid: 'sha256:0123456789abcdef',
  iv: 'x'.repeat(16),
  ct: 'y'.repeat(420),
  tag: 'z'.repeat(22),
});

type Row = Record<string, unknown>;

function rawRow(i: number): (string | number | null)[] {
  return [
    `raw_${i}_${Math.random().toString(36).slice(2)}`,
    'prj',
    'kid',
    Date.now(),
    null,
    'bench',
    'bench.run',
    'trace',
    'agent',
    0,
    'log',
    'complete',
    0,
    'a'.repeat(64),
    ENVELOPE_LIKE,
    null,
  ];
}

const COLS =
  'id, project_id, key_id, received_at, occurred_at, actor, action, trace_id, actor_type, credential_handover_detected, source, status, request_proof, payload_hash, payload, metadata';

/** Runs `task(i)` for i < n with `c` in flight; returns seconds. */
async function pooled(n: number, c: number, task: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (next < n) await task(next++);
    }),
  );
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

function sqliteBaseline(dir: string): { single: number; batched: number } {
  const db = new BetterSqlite3(path.join(dir, 'raw.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(
    `create table logs (seq integer primary key autoincrement, ${COLS.split(', ')
      .map((c) => `${c} ${c === 'id' ? 'text unique' : ''}`)
      .join(', ')})`,
  );
  const ins = db.prepare(
    `insert into logs (${COLS}) values (${COLS.split(', ')
      .map(() => '?')
      .join(', ')})`,
  );
  let t0 = process.hrtime.bigint();
  for (let i = 0; i < SINGLE; i++) ins.run(rawRow(i));
  const single = SINGLE / (Number(process.hrtime.bigint() - t0) / 1e9);
  const many = db.transaction((rows: unknown[][]) => rows.forEach((r) => ins.run(r)));
  t0 = process.hrtime.bigint();
  for (let b = 0; b < BATCHES; b++) many(Array.from({ length: BATCH_SIZE }, (_, i) => rawRow(b * BATCH_SIZE + i + SINGLE)));
  const batched = (BATCHES * BATCH_SIZE) / (Number(process.hrtime.bigint() - t0) / 1e9);
  db.close();
  return { single, batched };
}

async function pgBaseline(url: string): Promise<{ single: number; batched: number }> {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  await pool.query(
    `create table raw_logs (seq bigserial primary key, ${COLS.split(', ')
      .map(
        (c) =>
          `${c} ${c === 'id' ? 'text unique' : c.endsWith('_at') && c !== 'occurred_at' ? 'bigint' : c === 'credential_handover_detected' || c === 'request_proof' ? 'integer' : 'text'}`,
      )
      .join(', ')})`,
  );
  const ph = (k: number) =>
    `(${COLS.split(', ')
      .map((_, j) => `$${k * 16 + j + 1}`)
      .join(', ')})`;
  const secsSingle = await pooled(SINGLE, CONCURRENCY, async (i) => {
    await pool.query(`insert into raw_logs (${COLS}) values ${ph(0)}`, rawRow(i));
  });
  const secsBatch = await pooled(BATCHES, CONCURRENCY, async (b) => {
    const rows = Array.from({ length: BATCH_SIZE }, (_, i) => rawRow(SINGLE + b * BATCH_SIZE + i));
    await pool.query(`insert into raw_logs (${COLS}) values ${rows.map((_, k) => ph(k)).join(', ')}`, rows.flat());
  });
  await pool.end();
  return { single: SINGLE / secsSingle, batched: (BATCHES * BATCH_SIZE) / secsBatch };
}

async function countersign(dataDir: string, databaseUrl: string | undefined): Promise<{ single: number; batched: number }> {
  const config = { ...loadConfig({ dataDir, port: '0', logLevel: 'silent' }, {}), databaseUrl };
  const app = await buildApp(config);
  try {
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    const made = await app.inject({
      method: 'POST',
      url: '/v1/projects',
      headers: { authorization: `Bearer ${app.ctx.masterKey}` },
      payload: { name: 'bench', credentialClass: 'agent' },
    });
    const key = (made.json() as { project: { apiKey: string } }).project.apiKey;
    const http = new HttpPool(base, { connections: CONCURRENCY, pipelining: 1 });
    const headers = {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'x-service-encryption-key': 'bench-encryption-key',
    };
    const post = async (body: unknown) => {
      const r = await http.request({ method: 'POST', path: '/v1/log', headers, body: JSON.stringify(body) });
      const text = await r.body.text();
      if (r.statusCode !== 201) throw new Error(`POST /v1/log answered ${r.statusCode}: ${text}`);
    };
    await pooled(200, CONCURRENCY, () => post({ actor: 'warm', action: 'warm', payload: PAYLOAD })); // warm-up (JIT, caches)
    const secsSingle = await pooled(SINGLE, CONCURRENCY, (i) =>
      post({ actor: 'bench', action: 'bench.run', traceId: `t${i % 50}`, payload: PAYLOAD }),
    );
    const entries = Array.from({ length: BATCH_SIZE }, (_, i) => ({
      actor: 'bench',
      action: 'bench.batch',
      traceId: `b${i % 10}`,
      payload: PAYLOAD,
    }));
    const secsBatch = await pooled(BATCHES, CONCURRENCY, () => post({ logs: entries }));
    await http.close();
    return { single: SINGLE / secsSingle, batched: (BATCHES * BATCH_SIZE) / secsBatch };
  } finally {
    await app.close();
  }
}

async function freshPg(): Promise<string | undefined> {
  const base = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const admin = new pg.Client({ connectionString: base, connectionTimeoutMillis: 2000 });
  try {
    await admin.connect();
  } catch {
    return undefined;
  }
  const name = 'cs_bench_' + Math.random().toString(36).slice(2, 10);
  await admin.query(`create database ${name}`);
  await admin.end();
  const u = new URL(base);
  u.pathname = '/' + name;
  return u.toString();
}

async function dropPg(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  const u = new URL(url);
  u.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: u.toString() });
  await admin.connect();
  await admin.query(`drop database if exists ${name}`);
  await admin.end();
}

/** The benchmark. */
export default async function ingestBench(): Promise<Record<string, unknown>> {
  const rows: Row[] = [];
  const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
  const report = (store: string, base: { single: number; batched: number }, ours: { single: number; batched: number }) => {
    rows.push(
      {
        store,
        mode: `single (1 log/request, ${CONCURRENCY} in flight)`,
        'baseline logs/s': fmt(base.single),
        'countersign logs/s': fmt(ours.single),
        'ratio ours/baseline': (ours.single / base.single).toFixed(2),
      },
      {
        store,
        mode: `batched (${BATCH_SIZE} logs/request)`,
        'baseline logs/s': fmt(base.batched),
        'countersign logs/s': fmt(ours.batched),
        'ratio ours/baseline': (ours.batched / base.batched).toFixed(2),
      },
    );
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cs-bench-ingest-'));
  try {
    report('sqlite', sqliteBaseline(dir), await countersign(path.join(dir, 'app'), undefined));
    const pgUrl = await freshPg();
    if (pgUrl) {
      try {
        const base = await pgBaseline(pgUrl);
        const appUrl = await freshPg();
        try {
          report('postgres', base, await countersign(path.join(dir, 'app-pg'), appUrl!));
        } finally {
          await dropPg(appUrl!);
        }
      } finally {
        await dropPg(pgUrl);
      }
    } else {
      process.stdout.write('PostgreSQL not reachable: its rows are skipped\n');
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.table(rows);
  process.stdout.write(
    `Baseline: raw inserts of the same row shape on the same engine (SQLite: sequential prepared inserts, one commit each / ${BATCH_SIZE} per transaction; PostgreSQL: parameterised inserts, ${CONCURRENCY} in flight / ${BATCH_SIZE}-row inserts). Countersign: HTTP POST /v1/log with auth, validation, AES-256-GCM sealing and group commit. Machine: ${os.cpus().length} CPU, Node ${process.version}.\n`,
  );
  return { rows, single: SINGLE, batches: BATCHES, batchSize: BATCH_SIZE, concurrency: CONCURRENCY, cpus: os.cpus().length };
}
