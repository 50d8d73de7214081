/**
 * The client library (`@countersign/client`) against a real server (SQLite, listening on a
 * loopback port, same process):
 *
 * 1. Throughput: N logs through `ServiceClient.log()` until `flush()` has delivered them
 *    (redaction, telemetry, sealing, hashing, batching, HTTP, server storage). Baseline, same
 *    run, same server: the same number of already sealed entries posted by a bare `fetch` loop
 *    in the same batch size and concurrency (the HTTP and server part alone).
 * 2. Per-call overhead of `log()` (sealing and queueing, nothing sent during the timed loop).
 *    Baselines: `JSON.stringify` of the same entry, and core's `sealPayload` + `payloadHashHex`
 *    alone (the crypto floor every client-side-encrypted log pays).
 */
import { performance } from 'node:perf_hooks';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { deriveEnvelopeKey, payloadHashHex, randomId, randomNonce, sealPayload } from '@countersign/core';
import { ServiceClient } from '../packages/client/src/index.js';
import { buildApp } from '../packages/server/src/app.js';
import { loadConfig } from '../packages/server/src/config.js';

const N = 6000;
const CALLS = 5000;
const BATCH = 100;
const CONCURRENCY = 4;
const ENTRY = {
  action: 'llm.completion',
  actor: 'support-agent',
  traceId: 'bench-trace',
  metadata: { model: 'gpt-x', tokens: 512, tenant: 'acme' },
  payload: { prompt: 'summarise the quarterly report '.repeat(8), temperature: 0.2, answer: 'The quarter went well. '.repeat(6) },
};

async function setup() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cs-bench-client-'));
  const app = await buildApp({ ...loadConfig({ dataDir, port: '0', logLevel: 'silent' }, {}) });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const post = async (p: string, body: unknown) =>
    (await (
      await fetch(url + p, {
        method: 'POST',
        headers: { authorization: `Bearer ${app.ctx.masterKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    ).json()) as { project: { id: string; apiKey: string } };
  const { project } = await post('/v1/projects', { name: 'bench', credentialClass: 'service' });
  return { app, url, apiKey: project.apiKey, dataDir };
}

/** Entries sealed ahead of time, exactly as the client would send them. */
async function presealed(n: number) {
  const key = await deriveEnvelopeKey('bench key', 'default');
  const out = [];
  for (let i = 0; i < n; i++) {
    const id = 'log_' + randomId(24);
    const payload = { v: 1, kind: 'countersign.log', ...ENTRY, occurredAt: new Date().toISOString(), nonce: randomNonce() };
    out.push({
      id,
      action: ENTRY.action,
      actor: ENTRY.actor,
      traceId: ENTRY.traceId,
      metadata: ENTRY.metadata,
      occurredAt: payload.occurredAt,
      payload: await sealPayload(payload, key, id),
      payloadHash: payloadHashHex(payload),
    });
  }
  return out;
}

async function rawFetchBaseline(url: string, apiKey: string, entries: unknown[]): Promise<number> {
  const batches: unknown[][] = [];
  for (let i = 0; i < entries.length; i += BATCH) batches.push(entries.slice(i, i + BATCH));
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < batches.length) {
        const logs = batches[next++]!;
        const res = await fetch(url + '/v1/log', {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ logs }),
        });
        if (res.status !== 201) throw new Error(`baseline got ${res.status}`);
        await res.arrayBuffer();
      }
    }),
  );
  return (performance.now() - t0) / 1000;
}

async function clientThroughput(url: string, apiKey: string, n: number): Promise<number> {
  const client = new ServiceClient({
    apiKey,
    encryptionKey: 'bench key',
    endpoint: url,
    flushOnExit: false,
    redactKeys: ['metadata.tenant'],
    delivery: { batchSize: BATCH, maxConcurrentRequests: CONCURRENCY, flushIntervalMs: 5 },
  });
  const t0 = performance.now();
  const pending: Promise<string>[] = [];
  for (let i = 0; i < n; i++) pending.push(client.log(ENTRY));
  await Promise.all(pending);
  await client.flush();
  const s = (performance.now() - t0) / 1000;
  if (client.stats.delivered !== n) throw new Error(`client delivered ${client.stats.delivered} of ${n}`);
  await client.shutdown();
  return s;
}

async function perCall(url: string, apiKey: string) {
  // Nothing is sent while timing: the batch timer is long and the batch larger than the loop.
  const client = new ServiceClient({
    apiKey,
    encryptionKey: 'bench key',
    endpoint: url,
    flushOnExit: false,
    delivery: { batchSize: CALLS + 1, flushIntervalMs: 60_000, maxQueueSize: CALLS * 2 },
  });
  const key = await deriveEnvelopeKey('bench key', 'default');
  for (let i = 0; i < 200; i++) {
    await client.log(ENTRY);
    JSON.stringify(ENTRY);
  }
  let sink = 0;
  let t0 = performance.now();
  for (let i = 0; i < CALLS; i++) sink += JSON.stringify({ ...ENTRY, n: i }).length;
  const stringifyUs = ((performance.now() - t0) * 1000) / CALLS;
  t0 = performance.now();
  for (let i = 0; i < CALLS; i++) {
    const id = 'log_' + randomId(24);
    const payload = { ...ENTRY, nonce: randomNonce() };
    sink += (await sealPayload(payload, key, id)).ct.length + payloadHashHex(payload).length;
  }
  const sealUs = ((performance.now() - t0) * 1000) / CALLS;
  t0 = performance.now();
  for (let i = 0; i < CALLS; i++) await client.log(ENTRY);
  const logUs = ((performance.now() - t0) * 1000) / CALLS;
  await client.shutdown();
  if (sink === 0) throw new Error('unreachable');
  return { stringifyUs, sealUs, logUs };
}

/** Runs the client benchmark and prints a table. */
export default async function clientBench(): Promise<Record<string, unknown>> {
  const { app, url, apiKey, dataDir } = await setup();
  try {
    // Warm-up of both paths (JIT, key cache, connections, SQLite pages).
    await rawFetchBaseline(url, apiKey, await presealed(500));
    await clientThroughput(url, apiKey, 500);

    const entries = await presealed(N);
    const rawS = await rawFetchBaseline(url, apiKey, entries);
    const clientS = await clientThroughput(url, apiKey, N);
    const rawRate = N / rawS;
    const clientRate = N / clientS;
    const calls = await perCall(url, apiKey);

    const rows = [
      ['throughput: pre-sealed batches by bare fetch (baseline), logs/s', rawRate.toFixed(0)],
      ['throughput: ServiceClient.log() → delivered, logs/s', clientRate.toFixed(0)],
      ['throughput ratio client / baseline', (clientRate / rawRate).toFixed(2)],
      ['per call: JSON.stringify of the entry (baseline), µs', calls.stringifyUs.toFixed(1)],
      ['per call: core sealPayload + payloadHashHex alone, µs', calls.sealUs.toFixed(1)],
      ['per call: ServiceClient.log() (seal + queue), µs', calls.logUs.toFixed(1)],
      ['log() minus JSON.stringify, µs', (calls.logUs - calls.stringifyUs).toFixed(1)],
      ['log() minus seal+hash floor, µs', (calls.logUs - calls.sealUs).toFixed(1)],
    ];
    const w = Math.max(...rows.map((r) => r[0]!.length));
    for (const [k, v] of rows) process.stdout.write(`${k!.padEnd(w)}  ${v!.padStart(10)}\n`);
    return {
      logs: N,
      batchSize: BATCH,
      concurrency: CONCURRENCY,
      rawLogsPerSec: Math.round(rawRate),
      clientLogsPerSec: Math.round(clientRate),
      ratio: Number((clientRate / rawRate).toFixed(3)),
      perCallUs: calls,
      overheadVsStringifyUs: Number((calls.logUs - calls.stringifyUs).toFixed(2)),
      overheadVsSealUs: Number((calls.logUs - calls.sealUs).toFixed(2)),
    };
  } finally {
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
