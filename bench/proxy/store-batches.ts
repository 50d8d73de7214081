/**
 * The store writer's batches under the tail benchmark (TAIL_BATCHES=1): the process under test
 * publishes each settled batch on the store's diagnostics channel (`STORE_BATCH_CHANNEL`,
 * store/diagnostics-channels.ts), the preloaded stall log (stall-log.ts) writes them to a file, and this
 * module says how long batches queued behind the one in flight, how long the backend took, how
 * many rows each carried, how much of the run the backend was busy, and what the batches of
 * the slow requests looked like against everyone's. Beside it, for a local PostgreSQL, what the
 * database's backends spent per call (CPU and time waiting for a core, from
 * `/proc/<pid>/schedstat`), since the database's work runs on the load core, not the proxy's.
 */
import fs from 'node:fs';
import pg from 'pg';
import type { BatchEvent } from '../../packages/server/src/store/log-writer.js';
import { quantile } from './report.js';

/** What the batches of a run looked like. */
export interface BatchReport {
  batches: number;
  rows_per_batch: number;
  queue_ms: { p50: number; p99: number };
  backend_ms: { p50: number; p99: number };
  /** Share of the run during which a batch was in the backend's hands. */
  backend_busy: number;
  /** Backend time p50 by rows in the batch (1, 2, … 5 and more). */
  backend_p50_ms_by_rows: Record<string, number>;
  /** For the requests over the slow mark, and for all: median queue and backend time of the batch that carried their insert and of the one that carried their outcome. */
  slow_requests: { insert: [number, number]; outcome: [number, number] } | undefined;
  all_requests: { insert: [number, number]; outcome: [number, number] } | undefined;
}

const r2 = (ms: number) => Math.round(ms * 100) / 100;

const median = (values: number[]) => quantile(values, 0.5);
/** How long a batch waited behind the one in flight, and how long the backend then took (ms). */
const queueOf = (b: BatchEvent) => b.sentAt - b.submittedAt;
const backendOf = (b: BatchEvent) => b.doneAt - b.sentAt;

/** The batches the stall log wrote to `file`, from epoch ms `from` on. */
export function readBatches(file: string, from: number): BatchEvent[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as BatchEvent)
    .filter((b) => b.sentAt >= from)
    .sort((a, b) => a.submittedAt - b.submittedAt);
}

/**
 * A request's two batches, found by time (the log does not name the calls a batch carried): its
 * insert rode on the first batch submitted after the request was due, its outcome on the last
 * one answered before the request's answer came back.
 */
function batchesOf(due: number, ms: number, bySubmit: BatchEvent[], byDone: BatchEvent[]): [BatchEvent, BatchEvent] | undefined {
  let lo = 0;
  let hi = bySubmit.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (bySubmit[mid]!.submittedAt < due) lo = mid + 1;
    else hi = mid;
  }
  const insert = bySubmit[lo];
  lo = 0;
  hi = byDone.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (byDone[mid]!.doneAt <= due + ms) lo = mid + 1;
    else hi = mid;
  }
  const outcome = byDone[lo - 1];
  return insert && outcome && outcome.doneAt >= insert.doneAt ? [insert, outcome] : undefined;
}

/** Median [queue, backend] ms of the insert and outcome batches of `samples`. */
function medianSplit(samples: Array<[number, number]>, bySubmit: BatchEvent[], byDone: BatchEvent[]) {
  const found = samples.map(([due, ms]) => batchesOf(due, ms, bySubmit, byDone)).filter((x) => x !== undefined);
  if (found.length === 0) return undefined;
  const pair = (k: 0 | 1): [number, number] => [r2(median(found.map((f) => queueOf(f[k])))), r2(median(found.map((f) => backendOf(f[k]))))];
  return { insert: pair(0), outcome: pair(1) };
}

/** Summarizes `batches` against the run's `samples` ([due epoch ms, latency ms]). */
export function batchReport(batches: BatchEvent[], samples: Array<[number, number]>, slowMs: number): BatchReport | undefined {
  if (batches.length === 0) return undefined;
  const queue = batches.map(queueOf);
  const backend = batches.map(backendOf);
  const rows = batches.reduce((a, b) => a + b.inserts + b.outcomes, 0);
  // Busy: the union of the backend's intervals (several may overlap when it takes more than one).
  let busy = 0;
  let reach = -Infinity;
  const bySent = [...batches].sort((x, y) => x.sentAt - y.sentAt);
  for (const b of bySent) {
    busy += Math.max(0, b.doneAt - Math.max(b.sentAt, reach));
    reach = Math.max(reach, b.doneAt);
  }
  // `reach` is now the last answer; no spread of the batches into Math.max/min, which a run of a
  // few minutes (200,000 batches and more) takes past the call stack's limit.
  const span = reach - bySent[0]!.sentAt;
  const byRows: Record<string, number[]> = {};
  for (const b of batches) (byRows[String(Math.min(5, b.inserts + b.outcomes))] ??= []).push(backendOf(b));
  const byDone = [...batches].sort((a, b) => a.doneAt - b.doneAt);
  return {
    batches: batches.length,
    rows_per_batch: r2(rows / batches.length),
    queue_ms: { p50: r2(quantile(queue, 0.5)), p99: r2(quantile(queue, 0.99)) },
    backend_ms: { p50: r2(quantile(backend, 0.5)), p99: r2(quantile(backend, 0.99)) },
    backend_busy: r2(busy / Math.max(1, span)),
    backend_p50_ms_by_rows: Object.fromEntries(Object.entries(byRows).map(([k, v]) => [k, r2(median(v))])),
    slow_requests: medianSplit(
      samples.filter(([, ms]) => ms > slowMs),
      batches,
      byDone,
    ),
    all_requests: medianSplit(samples, batches, byDone),
  };
}

/** The report as lines. */
export function describeBatches(r: BatchReport, calls: number): string {
  const split = (s: BatchReport['all_requests']) =>
    s ? `insert ${s.insert[0]} + ${s.insert[1]} ms, outcome ${s.outcome[0]} + ${s.outcome[1]} ms` : 'none';
  return [
    `store batches: ${r.batches} (${r2(r.batches / Math.max(1, calls))} per call, ${r.rows_per_batch} rows each); queue p50 ${r.queue_ms.p50} / p99 ${r.queue_ms.p99} ms; backend p50 ${r.backend_ms.p50} / p99 ${r.backend_ms.p99} ms, busy ${r.backend_busy} of the run`,
    `  backend p50 by rows: ${Object.entries(r.backend_p50_ms_by_rows)
      .map(([k, v]) => `${k === '5' ? '5+' : k}: ${v}`)
      .join(', ')} ms`,
    `  a request's batches, median queue + backend: all ${split(r.all_requests)}; slow ${split(r.slow_requests)}`,
  ].join('\n');
}

/** CPU and run-queue wait (ns) of each process, from `/proc/<pid>/schedstat`. */
type SchedCounters = Map<number, { runNs: number; waitNs: number }>;

function schedCounters(pids: number[]): SchedCounters {
  const out: SchedCounters = new Map();
  for (const pid of pids) {
    try {
      const [run, wait] = fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ').map(Number);
      out.set(pid, { runNs: run!, waitNs: wait! });
    } catch {
      /* gone, or not on this machine */
    }
  }
  return out;
}

/**
 * Samples the backends connected to the database of `url` (a local server: their pids are
 * processes here); `stop` resolves with their CPU and run-queue wait per call over the interval,
 * or undefined when none could be read.
 */
export async function watchPostgresBackends(
  url: string,
): Promise<{ stop: (calls: number) => { cpu_us: number; wait_us: number } | undefined }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  let pids: number[] = [];
  try {
    const { rows } = await c.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    pids = rows.map((r) => r.pid);
  } finally {
    await c.end();
  }
  const before = schedCounters(pids);
  return {
    stop: (calls) => {
      const after = schedCounters(pids);
      let run = 0;
      let wait = 0;
      for (const [pid, a] of after) {
        const b = before.get(pid);
        if (!b) continue;
        run += a.runNs - b.runNs;
        wait += a.waitNs - b.waitNs;
      }
      if (after.size === 0) return undefined;
      const per = (ns: number) => Math.round(ns / 1000 / Math.max(1, calls));
      return { cpu_us: per(run), wait_us: per(wait) };
    },
  };
}
