/**
 * Proof receipts: sealing, reading, verifying, and the latency goal of the issue.
 *
 * 1. Seal a 100,000-leaf batch on SQLite (and PostgreSQL when reachable): claim the leaves,
 *    build the RFC 9162 tree and every audit path, store 100,000 receipt rows, timestamp the root
 *    with the embedded TSA and enter it in the embedded ledger. Baseline, same store, same run:
 *    inserting the 100,000 log rows themselves.
 * 2. Receipt reads per second through `GET …/proof` vs `GET …/logs/{id}` (the baseline read).
 * 3. Verifications per second with core's `verifyReceipt`, offline and with the ledger entry, vs
 *    the baseline of only hashing the payload (step 1 of spec 4.5).
 * 4. Latency goal: 1,000 proof requests per second into a 5-second window (real batcher, real
 *    TSA and ledger); time from the window's end until its batch is sealed, vs the 2 s goal.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { payloadHashHex, randomNonce, verifyReceipt, type ProofReceipt } from '@countersign/core';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../packages/server/src/app.js';
import { loadConfig, type ServerConfig } from '../packages/server/src/config.js';
import { ProofBatcher } from '../packages/server/src/proofs/batcher.js';
import { toProofReceipt } from '../packages/server/src/proofs/answer.js';
import { createTimestampWitness } from '../packages/server/src/tsa/witness.js';
import { createLedgerWitness } from '../packages/server/src/ledger/witness.js';
import { proofLog } from '../packages/server/test/proofs-helpers.js';

const LEAVES = 100_000;
const READS = 2000;
const VERIFY_N = 300;
const RATE = 1000;
const WINDOW_MS = 5000;

const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;
const round = (x: number, d = 1): number => Math.round(x * 10 ** d) / 10 ** d;
/** A past window boundary `back` windows ago (receipts must not predate their TSA genTime). */
const pastWindow = (back: number): number => (Math.floor(Date.now() / WINDOW_MS) - back) * WINDOW_MS;
const tmp = (): string => fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-bench-proofs-'));

async function postgresUrl(): Promise<string | undefined> {
  const base = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const admin = new pg.Client({ connectionString: base });
  try {
    await admin.connect();
    const name = 'cs_bench_' + Math.random().toString(36).slice(2, 10);
    await admin.query(`create database ${name}`);
    const u = new URL(base);
    u.pathname = '/' + name;
    return u.toString();
  } catch {
    return undefined;
  } finally {
    await admin.end().catch(() => undefined);
  }
}

async function app(over: Partial<ServerConfig>): Promise<FastifyInstance> {
  const config: ServerConfig = { ...loadConfig({ dataDir: tmp(), port: '0', logLevel: 'silent' }, {}), ...over };
  return buildApp(config);
}

/** Part 1: a 100k-leaf seal with the real TSA and ledger, against inserting the same rows. */
async function sealBench(label: string, databaseUrl: string | undefined) {
  // No `proofs` role: this benchmark drives the batcher itself, with a clock it controls.
  const a = await app({ databaseUrl, roles: new Set(['management', 'tsa', 'ledger']), proofWindowMs: WINDOW_MS });
  try {
    const store = a.ctx.store;
    const t0 = pastWindow(100);
    const logs = Array.from({ length: LEAVES }, (_, i) => proofLog(t0 + (i % WINDOW_MS), { projectId: 'prj_live_bench' }));
    let t = process.hrtime.bigint();
    for (let i = 0; i < logs.length; i += 5000) await store.logs.insertMany(logs.slice(i, i + 5000));
    const insertMs = ms(t);
    const clock = { now: t0 + WINDOW_MS + 1000 };
    const tsa = await createTimestampWitness(a.ctx);
    const ledger = await createLedgerWitness(a.ctx);
    const batcher = new ProofBatcher({
      store,
      timestampWitness: async () => tsa,
      ledgerWitness: async () => ledger,
      windowMs: WINDOW_MS,
      now: () => clock.now,
      log: a.ctx.log,
    });
    t = process.hrtime.bigint();
    const pass = await batcher.pass();
    const sealMs = ms(t);
    if (pass.claimed?.treeSize !== LEAVES || pass.sealed.length !== 1)
      throw new Error(`seal bench: unexpected pass ${JSON.stringify(pass)}`);
    return { label, app: a, batchId: pass.claimed.id, insertMs, sealMs };
  } catch (e) {
    await a.close();
    throw e;
  }
}

/** Part 3: verifications per second. */
async function verifyBench(a: FastifyInstance) {
  const key = a.ctx.store;
  const trust = {
    tsaRoots: await (await createTimestampWitness(a.ctx)).trustRootsPem(),
    ledgerPublicKey: await (await createLedgerWitness(a.ctx)).publicKeyPem(),
  };
  // A small real batch with known payloads.
  const payloads = Array.from({ length: 8 }, (_, i) => ({ i, nonce: randomNonce() }));
  const t0 = pastWindow(50);
  const logs = payloads.map((p) => ({ ...proofLog(t0, { projectId: 'prj_live_verify' }), payloadHash: payloadHashHex(p) }));
  await key.logs.insertMany(logs);
  const tsa = await createTimestampWitness(a.ctx);
  const ledger = await createLedgerWitness(a.ctx);
  const batcher = new ProofBatcher({
    store: key,
    timestampWitness: async () => tsa,
    ledgerWitness: async () => ledger,
    windowMs: WINDOW_MS,
    now: () => t0 + WINDOW_MS + 1000,
    log: a.ctx.log,
  });
  await batcher.pass();
  const receipts: ProofReceipt[] = [];
  for (const l of logs) receipts.push(toProofReceipt((await key.proofs.receipt('prj_live_verify', l.id))!));
  const entry = await ledger.getEntry(receipts[0]!.rekorLogIndex);
  const rate = async (f: (i: number) => Promise<unknown> | unknown) => {
    const t = process.hrtime.bigint();
    for (let i = 0; i < VERIFY_N; i++) await f(i);
    return VERIFY_N / (ms(t) / 1000);
  };
  const hashOnly = await rate((i) => payloadHashHex(payloads[i % 8]!));
  const offline = await rate(async (i) => {
    const r = await verifyReceipt({ payload: payloads[i % 8], receipt: receipts[i % 8]!, trust, offline: true });
    if (!r.ok) throw new Error('offline verification failed');
  });
  const online = await rate(async (i) => {
    const r = await verifyReceipt({ payload: payloads[i % 8], receipt: receipts[i % 8]!, trust, ledgerEntry: entry });
    if (!r.ok) throw new Error('verification with the ledger entry failed');
  });
  return { hashOnly, offline, online };
}

/** Part 2: receipt reads through the endpoint vs log reads. */
async function readBench(a: FastifyInstance) {
  const made = await a.inject({
    method: 'POST',
    url: '/v1/projects',
    headers: { authorization: `Bearer ${a.ctx.masterKey}` },
    payload: { name: 'bench', credentialClass: 'live' },
  });
  const { id: projectId, apiKey } = made.json().project as { id: string; apiKey: string };
  const t0 = pastWindow(30);
  const logs = Array.from({ length: 200 }, () => proofLog(t0, { projectId }));
  await a.ctx.store.logs.insertMany(logs);
  const tsa = await createTimestampWitness(a.ctx);
  const ledger = await createLedgerWitness(a.ctx);
  await new ProofBatcher({
    store: a.ctx.store,
    timestampWitness: async () => tsa,
    ledgerWitness: async () => ledger,
    windowMs: WINDOW_MS,
    now: () => t0 + WINDOW_MS + 1000,
    log: a.ctx.log,
  }).pass();
  const headers = { authorization: `Bearer ${apiKey}` };
  const rate = async (suffix: string) => {
    const t = process.hrtime.bigint();
    for (let i = 0; i < READS; i++) {
      const r = await a.inject({ method: 'GET', url: `/v1/projects/${projectId}/logs/${logs[i % logs.length]!.id}${suffix}`, headers });
      if (r.statusCode !== 200) throw new Error(`read ${suffix} answered ${r.statusCode}`);
    }
    return READS / (ms(t) / 1000);
  };
  return { logReads: await rate(''), proofReads: await rate('/proof') };
}

/** Part 4: 1,000 proof requests/s through POST /v1/log; window end → batch sealed. */
async function latencyBench() {
  const a = await app({ proofWindowMs: WINDOW_MS });
  try {
    const made = await a.inject({
      method: 'POST',
      url: '/v1/projects',
      headers: { authorization: `Bearer ${a.ctx.masterKey}` },
      payload: { name: 'rate', credentialClass: 'agent' },
    });
    const apiKey = made.json().project.apiKey as string;
    // Start just after a window opens, and cover that whole window.
    const start = (Math.floor(Date.now() / WINDOW_MS) + 1) * WINDOW_MS;
    await new Promise((r) => setTimeout(r, start - Date.now() + 5));
    const tickMs = 50;
    const perTick = (RATE * tickMs) / 1000;
    let sent = 0;
    const inflight: Promise<unknown>[] = [];
    for (let tick = 0; tick < WINDOW_MS / tickMs; tick++) {
      const due = start + tick * tickMs;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const body = {
        logs: Array.from({ length: perTick }, (_, i) => ({
          requestProof: true,
          payloadHash: payloadHashHex({ tick, i }),
          id: `rate-${tick}-${i}-${randomNonce()}`,
          payload: { v: 1, alg: 'A256GCM', kid: 'k', iv: 'AAAAAAAAAAAAAAAA', ct: 'AAAA', tag: 'AAAAAAAAAAAAAAAAAAAAAA' },
        })),
      };
      inflight.push(
        a.inject({
          method: 'POST',
          url: '/v1/log',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          payload: body,
        }),
      );
      sent += perTick;
    }
    const answers = (await Promise.all(inflight)) as Array<{ statusCode: number; body: string }>;
    const refused = answers.find((r) => r.statusCode !== 201);
    if (refused) throw new Error(`latency bench: POST /v1/log answered ${refused.statusCode} ${refused.body}`);
    const windowEnd = start + WINDOW_MS;
    for (;;) {
      const b = (await a.ctx.store.proofs.listBatches()).find((x) => x.windowStart === start);
      if (b?.state === 'sealed') {
        return {
          sent,
          treeSize: b.treeSize,
          sealedAfterEndMs: b.sealedAt! - windowEnd,
          claimStartedAfterEndMs: b.createdAt - windowEnd,
          claimToSealedMs: b.sealedAt! - b.createdAt,
        };
      }
      if (Date.now() > windowEnd + 60_000) throw new Error('latency bench: the window was not sealed within 60 s');
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await a.close();
  }
}

/** The benchmark. */
export default async function proofsBench(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const rows: string[][] = [];
  const pgUrl = await postgresUrl();
  for (const [label, url] of [['sqlite', undefined], ...(pgUrl ? [['postgres', pgUrl]] : [])] as Array<[string, string | undefined]>) {
    const s = await sealBench(label, url);
    try {
      out[`seal_${label}`] = {
        leaves: LEAVES,
        insertLogsMs: round(s.insertMs),
        sealMs: round(s.sealMs),
        sealVsInsert: round(s.sealMs / s.insertMs, 2),
        receiptsPerSecond: Math.round(LEAVES / (s.sealMs / 1000)),
      };
      rows.push([
        `seal 100k leaves (${label})`,
        `${round(s.sealMs)} ms`,
        `insert 100k logs ${round(s.insertMs)} ms`,
        `×${round(s.sealMs / s.insertMs, 2)}`,
      ]);
      rows.push([
        `receipts stored/s (${label})`,
        `${Math.round(LEAVES / (s.sealMs / 1000))}`,
        `log rows inserted/s ${Math.round(LEAVES / (s.insertMs / 1000))}`,
        `×${round(s.insertMs / s.sealMs, 2)}`,
      ]);
      if (label === 'sqlite') {
        const r = await readBench(s.app);
        out.reads = {
          logReadsPerSecond: Math.round(r.logReads),
          proofReadsPerSecond: Math.round(r.proofReads),
          ratio: round(r.proofReads / r.logReads, 2),
        };
        rows.push([
          'GET …/proof per s',
          `${Math.round(r.proofReads)}`,
          `GET …/logs/{id} ${Math.round(r.logReads)}/s`,
          `×${round(r.proofReads / r.logReads, 2)}`,
        ]);
        const v = await verifyBench(s.app);
        out.verify = {
          hashOnlyPerSecond: Math.round(v.hashOnly),
          offlinePerSecond: Math.round(v.offline),
          withLedgerPerSecond: Math.round(v.online),
        };
        rows.push([
          'verifications/s offline',
          `${Math.round(v.offline)}`,
          `payload hash only ${Math.round(v.hashOnly)}/s`,
          `×${round(v.offline / v.hashOnly, 3)}`,
        ]);
        rows.push([
          'verifications/s with ledger entry',
          `${Math.round(v.online)}`,
          `offline ${Math.round(v.offline)}/s`,
          `×${round(v.online / v.offline, 2)}`,
        ]);
      }
    } finally {
      await s.app.close();
    }
  }
  const l = await latencyBench();
  out.latency = { rate: RATE, windowMs: WINDOW_MS, ...l, goalMs: 2000, metGoal: l.sealedAfterEndMs <= 2000 };
  rows.push([
    `1,000 proofs/s: window end → sealed`,
    `${l.sealedAfterEndMs} ms (${l.treeSize} leaves)`,
    `goal 2000 ms`,
    `${round(l.sealedAfterEndMs / 2000, 2)} of goal`,
  ]);

  const widths = [0, 1, 2, 3].map((c) => Math.max(...rows.map((r) => r[c]!.length)));
  process.stdout.write(rows.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ')).join('\n') + '\n');
  return out;
}
