/**
 * The three mechanisms behind the proxy's stalls at 1,000 req/s that the 2026-11-26 work removed
 * (docs/performance-log.md, "What the stalls were"), each measured beside its baseline in this run:
 *
 * 1. **A WAL checkpoint is mostly waiting on the disk.** 200 transactions of ~2.5 KB rows, then
 *    one PASSIVE checkpoint, with the syncs SQLite does at `synchronous = NORMAL` and without
 *    them (`OFF`, the baseline: copying only). Why checkpoints left the writer thread.
 * 2. **A Map churned per call promotes its dead entries.** A long-lived Map whose table has
 *    reached the old generation, three entries in it at any time, one added and one deleted per
 *    iteration; the baseline keeps the same three entries in an array. Old-generation growth
 *    per iteration, each variant in a fresh worker (a heap of its own). Why SlotSet exists.
 * 3. **Spreading a wide record and adding members builds a hidden class per call.** Bytes
 *    allocated per object by `{ ...record, more }` against the same object written member by
 *    member (V8's sampling heap profiler, every 512 bytes). Why newProxyLog is written out.
 *
 * Run: `npm run bench -- stalls` (a few seconds).
 */
import Database from 'better-sqlite3';
import crypto from 'node:crypto';
import fs from 'node:fs';
import inspector from 'node:inspector';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';

/** Median ms of one PASSIVE checkpoint after 200 single-row transactions, at `synchronous`. */
function checkpointMs(synchronous: 'NORMAL' | 'OFF'): { ms: number; frames: number } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-stalls-'));
  const db = new Database(path.join(dir, 'c.db'));
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    db.pragma('wal_autocheckpoint = 0');
    db.exec('create table t (id integer primary key, k text unique, p text)');
    const insert = db.prepare('insert into t (k, p) values (?, ?)');
    const runs: Array<{ ms: number; frames: number }> = [];
    for (let round = 0; round < 12; round++) {
      for (let i = 0; i < 200; i++) insert.run(crypto.randomBytes(12).toString('hex'), crypto.randomBytes(1800).toString('base64'));
      const t0 = performance.now();
      const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
      runs.push({ ms: performance.now() - t0, frames: r!.log });
    }
    const steady = runs.slice(2).sort((a, b) => a.ms - b.ms);
    return steady[steady.length >> 1]!;
  } finally {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Old-generation bytes per iteration when 3 live entries churn through a Map (or an array). */
function churnPromotedBytes(kind: 'map' | 'array'): Promise<number> {
  const source = `
    const v8 = require('node:v8');
    const { parentPort } = require('node:worker_threads');
    const old = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size;
    const map = new Map([[-1, 1], [-2, 2]]);
    let junk = [];
    for (let i = 0; i < 2e6; i++) { junk.push({ i }); if (junk.length > 1000) junk = []; } // promotes the Map's table
    const live = [];
    const N = 300000;
    const before = old();
    for (let i = 0; i < N; i++) {
      const v = { payload: new Array(60).fill(i) };
      if (${JSON.stringify(kind)} === 'map') { map.set(i, v); if (i >= 3) map.delete(i - 3); }
      else { live.push(v); if (live.length > 3) live.shift(); }
    }
    parentPort.postMessage((old() - before) / N);`;
  return new Promise((resolve, reject) => {
    const w = new Worker(source, { eval: true });
    w.once('message', (bytes: number) => void w.terminate().then(() => resolve(bytes)));
    w.once('error', reject);
  });
}

/** Bytes allocated per object built by `make`, sampled by V8's heap profiler. */
async function bytesPerObject(make: (i: number) => unknown): Promise<number> {
  const session = new inspector.Session();
  session.connect();
  const post = <T>(method: string, params: object = {}) =>
    new Promise<T>((resolve, reject) => session.post(method, params, (e, r) => (e ? reject(e) : resolve(r as T))));
  const N = 100_000;
  const keep: unknown[] = [];
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', {
    samplingInterval: 512,
    includeObjectsCollectedByMinorGC: true,
    includeObjectsCollectedByMajorGC: true,
  });
  for (let i = 0; i < N; i++) {
    const o = make(i);
    if (i % 10_000 === 0) keep.push(o);
  }
  const { profile } = await post<{ profile: { head: ProfileNode } }>('HeapProfiler.stopSampling');
  session.disconnect();
  let bytes = 0;
  const walk = (n: ProfileNode) => {
    if (n.callFrame.functionName === 'spread' || n.callFrame.functionName === 'written') bytes += n.selfSize;
    n.children.forEach(walk);
  };
  walk(profile.head);
  return bytes / N;
}

interface ProfileNode {
  callFrame: { functionName: string };
  selfSize: number;
  children: ProfileNode[];
}

// A record as wide as a proxy log's indexed fields, and the two ways of completing it.
const fields = {
  id: 'log_x',
  projectId: 'prj',
  keyId: 'kid',
  receivedAt: 1,
  actor: 'proxy',
  action: 'proxy.request',
  traceId: null,
  actorType: 'agent',
  credentialHandoverDetected: false,
  requestProof: false,
  spanId: 'abc',
  parentSpanId: null,
  startedAt: 1,
};
function spread(i: number) {
  const row = { ...fields, occurredAt: null, source: 'proxy', status: 'pending', payloadHash: 'h', payload: 'p', metadata: null };
  return { ...row, instanceId: 'i' + (i & 1) };
}
function written(i: number) {
  const f = fields;
  return {
    id: f.id,
    projectId: f.projectId,
    keyId: f.keyId,
    receivedAt: f.receivedAt,
    occurredAt: null,
    actor: f.actor,
    action: f.action,
    traceId: f.traceId,
    actorType: f.actorType,
    credentialHandoverDetected: f.credentialHandoverDetected,
    source: 'proxy',
    status: 'pending',
    requestProof: f.requestProof,
    payloadHash: 'h',
    payload: 'p',
    metadata: null,
    instanceId: 'i' + (i & 1),
    spanId: f.spanId,
    parentSpanId: f.parentSpanId,
    startedAt: f.startedAt,
  };
}

/** Runs the three measurements; prints and returns them. */
export default async function stallsBench(): Promise<Record<string, unknown>> {
  const synced = checkpointMs('NORMAL');
  const copyOnly = checkpointMs('OFF');
  const mapBytes = await churnPromotedBytes('map');
  const arrayBytes = await churnPromotedBytes('array');
  const spreadBytes = await bytesPerObject(spread);
  const writtenBytes = await bytesPerObject(written);
  const out = {
    checkpoint_ms: { with_syncs: round(synced.ms), copy_only: round(copyOnly.ms), frames: synced.frames },
    churn_promoted_bytes_per_iteration: { map: Math.round(mapBytes), array: Math.round(arrayBytes) },
    bytes_per_object: { spread: Math.round(spreadBytes), written_out: Math.round(writtenBytes) },
  };
  process.stdout.write(
    [
      `checkpoint of ~${synced.frames} frames: ${out.checkpoint_ms.with_syncs} ms with syncs (NORMAL), ${out.checkpoint_ms.copy_only} ms copying only (OFF): ${Math.round((1 - copyOnly.ms / synced.ms) * 100)} % is waiting on the disk`,
      `3 live entries churned through a long-lived Map: ${out.churn_promoted_bytes_per_iteration.map} B promoted per iteration; in an array: ${out.churn_promoted_bytes_per_iteration.array} B`,
      `a 21-member record: ${out.bytes_per_object.spread} B allocated per object spread and extended, ${out.bytes_per_object.written_out} B written member by member`,
    ].join('\n') + '\n',
  );
  return out;
}

const round = (ms: number) => Math.round(ms * 100) / 100;
