/**
 * `npm run bench -- pg-capacity`: what one PostgreSQL takes of Countersign's write pattern, for
 * the capacity model in docs/operations.md. Needs `DATABASE_URL` (a server where it may create
 * and drop a database).
 *
 * - Footprint of one proxied call (1 KB JSON request, 1 KB JSON answer, the record sealed as the
 *   server seals it): rows inserted and updated, table + index bytes and WAL bytes per call.
 * - The ceiling: W writers (each standing for one instance's store writer: a dedicated
 *   connection committing a group of write-ahead inserts and outcomes per round trip, as
 *   store/pg-writer.ts does) writing as fast as they can; calls per second and commit latency.
 *   Baseline in the same run: one call's two writes committed one statement at a time (what a
 *   writer without group commit would do), on one connection.
 */
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freshDatabase } from './fresh-database.js';
import { deriveEnvelopeKey, randomNonce } from '@countersign/core';
import { Store, type NewLog, type RowRef } from '../packages/server/src/store/index.js';
import { PgWriter } from '../packages/server/src/store/pg-writer.js';
import { sealProxyPayload, type ProxyPayload } from '../packages/server/src/proxy/record.js';
import { quantile } from './proxy/report.js';
import { monotonicMs } from '../packages/server/src/monotonic-clock.js';

const SECONDS = Number(process.env.PG_BENCH_SECONDS ?? 4);
const BATCH = 32;
const WRITERS = [1, 2, 4, 8];

/** A proxied call's two records (write-ahead and outcome), sealed as the server seals them. */
async function sealedCall(id: string): Promise<{ pending: string; final: string; hash: string }> {
  const key = await deriveEnvelopeKey('pg-capacity-key');
  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x'.repeat(900) }] };
  const answer = { id: 'cmpl-1', choices: [{ index: 0, message: { role: 'assistant', content: 'y'.repeat(880) } }] };
  const pending: ProxyPayload = {
    nonce: randomNonce(),
    source: 'proxy',
    via: 'proxy',
    outcome: 'pending',
    request: {
      method: 'POST',
      target: 'https://api.example.com/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body,
      bytes: 1024,
      sha256: 'a'.repeat(64),
      truncated: false,
    },
  };
  const final: ProxyPayload = {
    ...pending,
    outcome: 'complete',
    response: {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: answer,
      bytes: 1024,
      sha256: 'b'.repeat(64),
      truncated: false,
    },
    timings: { firstByteMs: 120, totalMs: 450 },
  };
  const [p, f] = await Promise.all([sealProxyPayload(pending, key, id), sealProxyPayload(final, key, id)]);
  return { pending: p.envelope, final: f.envelope, hash: f.payloadHash };
}

function row(id: string, payload: string, instanceId: string): NewLog {
  return {
    id,
    projectId: 'prj_capacity',
    keyId: 'key_capacity',
    receivedAt: Date.now(),
    occurredAt: null,
    actor: 'agent',
    action: 'llm.chat',
    traceId: 'run-capacity',
    actorType: 'agent',
    credentialHandoverDetected: false,
    source: 'proxy',
    status: 'pending',
    requestProof: false,
    payloadHash: 'c'.repeat(64),
    payload,
    metadata: null,
    instanceId,
    spanId: 'a1a1a1a1a1a1a1a1',
    parentSpanId: null,
    startedAt: Date.now(),
  };
}

/** The rows a write inserted, as the refs their outcomes name (the seq each insert returned). */
function refsOf(ids: string[], seqs: ArrayLike<number>): RowRef[] {
  return ids.map((id, k) => ({ projectId: 'prj_capacity', id, seq: seqs[k]! }));
}

export default async function pgCapacity(): Promise<Record<string, unknown>> {
  const base = process.env.DATABASE_URL;
  if (!base) {
    process.stdout.write('DATABASE_URL is not set: nothing to measure\n');
    return {};
  }
  const db = await freshDatabase(base, 'cs_pgcap_');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cs-pgcap-'));
  const store = await Store.open({ dataDir, databaseUrl: db.url });
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  const sample = await sealedCall('log_sample_capacity_0001');
  const out: Record<string, unknown> = {
    machine: { cpus: os.cpus().length },
    envelope_bytes: { pending: sample.pending.length, final: sample.final.length },
  };
  let seq = 0;
  const nextId = () => `log_cap_${(seq++).toString(36).padStart(10, '0')}`;
  const far = () => monotonicMs() + 30_000;
  try {
    // Footprint of 2,000 calls through one writer.
    const stat = async () => {
      const r = await admin.query<{ ins: string; upd: string; size: string; lsn: string }>(
        "select n_tup_ins as ins, n_tup_upd as upd, pg_total_relation_size('logs') as size, pg_current_wal_lsn()::text as lsn from pg_stat_user_tables where relname = 'logs'",
      );
      return r.rows[0]!;
    };
    const before = await stat();
    const writer = new PgWriter(db.url, 30_000);
    let previous: RowRef[] = [];
    for (let b = 0; b < 2000 / BATCH; b++) {
      const ids = Array.from({ length: BATCH }, nextId);
      const written = await writer.write(
        {
          inserts: ids.map((id) => row(id, sample.pending, store.instance.id)),
          outcomes: previous.map((ref) => ({
            ref,
            c: {
              status: 'complete' as const,
              payload: sample.final,
              payloadHash: sample.hash,
              completedAt: Date.now(),
              endedAt: Date.now(),
            },
          })),
          refusals: [],
        },
        far(),
      );
      previous = refsOf(ids, written.seqs);
    }
    await writer.write(
      {
        inserts: [],
        outcomes: previous.map((ref) => ({
          ref,
          c: { status: 'complete' as const, payload: sample.final, payloadHash: sample.hash, completedAt: Date.now() },
        })),
        refusals: [],
      },
      far(),
    );
    await writer.close(); // a backend reports its table statistics when it ends
    await new Promise((r) => setTimeout(r, 1500));
    const after = await stat();
    const wal = await admin.query<{ d: string }>('select pg_wal_lsn_diff($1, $2) as d', [after.lsn, before.lsn]);
    const calls = 2000;
    out.per_call = {
      rows_inserted: (Number(after.ins) - Number(before.ins)) / calls,
      rows_updated: (Number(after.upd) - Number(before.upd)) / calls,
      table_and_index_bytes: Math.round((Number(after.size) - Number(before.size)) / calls),
      wal_bytes: Math.round(Number(wal.rows[0]!.d) / calls),
    };
    process.stdout.write(
      `per proxied call: ${JSON.stringify(out.per_call)} (envelopes ${sample.pending.length} + ${sample.final.length} bytes)\n`,
    );

    // Baseline: one statement per commit, one connection.
    {
      const w = new PgWriter(db.url, 30_000);
      const lat: number[] = [];
      const until = Date.now() + SECONDS * 1000;
      let n = 0;
      while (Date.now() < until) {
        const id = nextId();
        const t0 = performance.now();
        const written = await w.write({ inserts: [row(id, sample.pending, store.instance.id)], outcomes: [], refusals: [] }, far());
        await w.write(
          {
            inserts: [],
            outcomes: [
              {
                ref: refsOf([id], written.seqs)[0]!,
                c: { status: 'complete', payload: sample.final, payloadHash: sample.hash, completedAt: Date.now() },
              },
            ],
            refusals: [],
          },
          far(),
        );
        lat.push(performance.now() - t0);
        n++;
      }
      await w.close();
      out.baseline_one_at_a_time = {
        calls_per_s: Math.round(n / SECONDS),
        call_p50_ms: quantile(lat, 0.5),
        call_p99_ms: quantile(lat, 0.99),
      };
      process.stdout.write(`baseline, one write per commit: ${JSON.stringify(out.baseline_one_at_a_time)}\n`);
    }

    // The ceiling: W writers, each committing groups of BATCH write-ahead inserts + BATCH outcomes.
    const ceiling: Record<string, unknown>[] = [];
    for (const writers of WRITERS) {
      const lat: number[] = [];
      let calls = 0;
      const until = Date.now() + SECONDS * 1000;
      await Promise.all(
        Array.from({ length: writers }, async () => {
          const w = new PgWriter(db.url, 30_000);
          let prev: RowRef[] = [];
          while (Date.now() < until) {
            const ids = Array.from({ length: BATCH }, nextId);
            const t0 = performance.now();
            const written = await w.write(
              {
                inserts: ids.map((id) => row(id, sample.pending, store.instance.id)),
                outcomes: prev.map((ref) => ({
                  ref,
                  c: { status: 'complete' as const, payload: sample.final, payloadHash: sample.hash, completedAt: Date.now() },
                })),
                refusals: [],
              },
              far(),
            );
            lat.push(performance.now() - t0);
            calls += prev.length;
            prev = refsOf(ids, written.seqs);
          }
          await w.close();
        }),
      );
      const r = {
        writers,
        calls_per_s: Math.round(calls / SECONDS),
        commit_p50_ms: +quantile(lat, 0.5).toFixed(2),
        commit_p99_ms: +quantile(lat, 0.99).toFixed(2),
      };
      ceiling.push(r);
      process.stdout.write(`${writers} writer(s), groups of ${BATCH}: ${JSON.stringify(r)}\n`);
    }
    out.ceiling = ceiling;
    const best = Math.max(...ceiling.map((c) => c.calls_per_s as number));
    out.ratio_best_to_baseline = +(best / (out.baseline_one_at_a_time as { calls_per_s: number }).calls_per_s).toFixed(1);
    const size = await admin.query<{ s: string }>("select pg_total_relation_size('logs') as s");
    out.logs_table_bytes_at_end = Number(size.rows[0]!.s);
  } finally {
    await admin.end();
    await store.close();
    await db.drop();
  }
  return out;
}
