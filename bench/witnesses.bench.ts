/**
 * The embedded witnesses as the proof batcher calls them (in process, no HTTP), on SQLite and
 * PostgreSQL, each against a baseline measured in the same run:
 *
 * - TSA: `TimestampWitness.timestamp(root)` (serial row, TSTInfo, CMS signature, self-check)
 *   vs. one bare ECDSA P-256 WebCrypto signature (the one signature a token needs).
 * - ledger append: `LedgerWitness.submit(root)` (locked transaction, two signatures, insert)
 *   vs. a plain one-row insert through the same store (the TSA serial insert).
 * - ledger read: `getEntry(i)` with an inclusion proof and checkpoint in the current tree vs.
 *   reading the same row plainly.
 * PostgreSQL uses DATABASE_URL, else postgres://postgres@127.0.0.1:5432; skipped if absent.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash, webcrypto } from 'node:crypto';
import pg from 'pg';
import { buildApp } from '../packages/server/src/app.js';
import { loadConfig, type Role } from '../packages/server/src/config.js';
import { createTimestampWitness } from '../packages/server/src/tsa/witness.js';
import { createLedgerWitness } from '../packages/server/src/ledger/witness.js';

const N = 300;
const root = (i: number): Uint8Array => new Uint8Array(createHash('sha256').update(`root ${i}`).digest());

async function timed(n: number, task: (i: number) => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await task(i);
  return n / (Number(process.hrtime.bigint() - t0) / 1e9);
}

async function postgresUrl(): Promise<string | undefined> {
  const base = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = 'cs_bench_w_' + Math.random().toString(36).slice(2, 8);
  const admin = new pg.Client({ connectionString: base });
  try {
    await admin.connect();
    await admin.query(`create database ${name}`);
  } catch {
    return undefined;
  } finally {
    await admin.end().catch(() => undefined);
  }
  const u = new URL(base);
  u.pathname = '/' + name;
  return u.toString();
}

async function runOn(store: 'sqlite' | 'postgres', databaseUrl: string | undefined): Promise<Record<string, number>> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cs-bench-w-'));
  const config = { ...loadConfig({ dataDir, logLevel: 'silent' }, {}), databaseUrl, roles: new Set<Role>(['tsa', 'ledger']) };
  const app = await buildApp(config);
  try {
    const tsa = await createTimestampWitness(app.ctx);
    const ledger = await createLedgerWitness(app.ctx);
    const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign'])) as CryptoKeyPair;
    // Warm up both paths (JIT, connections, the identity load).
    for (let i = 0; i < 20; i++) {
      await tsa.timestamp(root(i));
      await ledger.submit(Buffer.from(root(-i - 1)).toString('hex'));
    }
    const bareSign = await timed(N, (i) => webcrypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, keys.privateKey, root(i)));
    const tokens = await timed(N, (i) => tsa.timestamp(root(i)));
    const plainInsert = await timed(N, (i) =>
      app.ctx.store.tsaTokens.allocateSerial({ genTime: i, hashOid: 'bench', hashedMessageHex: 'ab' }),
    );
    const appends = await timed(N, (i) => ledger.submit(Buffer.from(root(N + i)).toString('hex')));
    const size = await app.ctx.store.ledger.size();
    const plainRead = await timed(N, (i) => app.ctx.store.ledger.byIndex(i % size));
    const entryReads = await timed(N, (i) => ledger.getEntry(i % size));
    const r = {
      bareSignPerSec: bareSign,
      timestampsPerSec: tokens,
      plainInsertPerSec: plainInsert,
      ledgerAppendsPerSec: appends,
      plainReadPerSec: plainRead,
      entryReadsPerSec: entryReads,
      ledgerSize: size,
    };
    process.stdout.write(
      [
        `${store}: TSA token ${tokens.toFixed(0)}/s vs bare ECDSA sign ${bareSign.toFixed(0)}/s (ratio ${(tokens / bareSign).toFixed(2)})`,
        `${store}: ledger append ${appends.toFixed(0)}/s vs plain insert ${plainInsert.toFixed(0)}/s (ratio ${(appends / plainInsert).toFixed(2)})`,
        `${store}: entry with proof ${entryReads.toFixed(0)}/s vs plain row read ${plainRead.toFixed(0)}/s (ratio ${(entryReads / plainRead).toFixed(2)}, tree of ${size})`,
      ].join('\n') + '\n',
    );
    return r;
  } finally {
    await app.close();
  }
}

/** Runs the witness benchmark on SQLite and (when reachable) PostgreSQL. */
export default async function witnesses(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = { sqlite: await runOn('sqlite', undefined) };
  const url = await postgresUrl();
  if (url) out.postgres = await runOn('postgres', url);
  else process.stdout.write('postgres: not reachable, skipped\n');
  return out;
}
