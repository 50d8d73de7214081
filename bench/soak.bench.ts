/**
 * `npm run bench -- soak`: Countersign under sustained load, the way issue 10 first saw the WAL
 * grow (a 15-minute run at 1,000 req/s had left a 604 MB `-wal`). One Countersign process pinned
 * to the proxy core like in the proxy benchmark (SQLite, or PostgreSQL with SOAK_STORE=postgres
 * and DATABASE_URL), driven open loop at one fixed rate for SOAK_MINUTES, latency from each
 * request's scheduled time. Every window (SOAK_WINDOW_S) it reports the window's latency, the
 * process's CPU per call and resident memory, and the store's size: SQLite's `-wal` (its largest
 * size seen, sampled every second) and database file, or PostgreSQL's database; and the
 * window's longest GC pause, event-loop stall, checkpoint and store batch, from its submission to
 * its commit (the tail benchmark's stall log, bench/proxy/stall-log.ts, preloaded: it costs the
 * event loop ~10-30 µs per call). At the end it
 * checks the audit trail itself: every call's record must be `complete` (none left pending,
 * failed or interrupted), and there must be one record per call sent.
 *
 * What it answers: does the WAL stay bounded for the whole run (not only for the seconds of a
 * rate step), does memory level off rather than grow with the calls served, does the latency of
 * the last minutes match the first (no slow drift as the table grows), and is nothing lost.
 *
 * Not part of a plain `npm run bench` (bench/run.ts runs it only when named: it takes SOAK_MINUTES).
 * Knobs: SOAK_MINUTES (default 15), SOAK_RATE (default 1000 req/s), SOAK_WINDOW_S (default 60),
 * SOAK_STORE=postgres, SOAK_DOOR=forward (forward mode instead of `POST /v1/proxy`);
 * BENCH_QUICK=1 runs 40 s in 10-s windows. Countersign runs as built (bench/proxy/built.ts).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { freshDatabaseOffCore } from './proxy/pin-postgres.js';
import { CORES, COUNTERSIGN_FLAGS, cpuSeconds, fileSize, pinSelf, rssBytes, startRole, type Child } from './proxy/children.js';
import { clientFor, forwardDoorCall, histogram, openLoop, pctMs, proxyDoorCall, REQUEST_BODY } from './proxy/load.js';
import type { TailEvent } from './proxy/tail-attribution.js';
import type { BatchEvent } from '../packages/server/src/store/log-writer.js';
import type * as hdr from 'hdr-histogram-js';

const QUICK = process.env.BENCH_QUICK === '1';
const MINUTES = Number(process.env.SOAK_MINUTES ?? (QUICK ? 40 / 60 : 15));
const RATE = Number(process.env.SOAK_RATE ?? 1000);
const WINDOW_S = Number(process.env.SOAK_WINDOW_S ?? (QUICK ? 10 : 60));
const STORE = process.env.SOAK_STORE === 'postgres' ? 'postgres' : 'sqlite';
const FORWARD = process.env.SOAK_DOOR === 'forward';
const WARMUP_S = 3;
const MIB = 1024 * 1024;
const stallLog = path.join(path.dirname(fileURLToPath(import.meta.url)), 'proxy', 'stall-log.ts');

/** One window of the run, as reported. */
interface WindowFigures {
  minute: number;
  answered: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  cpu_us_per_call: number;
  rss_mib: number;
  /** SQLite: the largest `-wal` seen in the window; PostgreSQL: not measured (the server's own WAL). */
  wal_peak_mib?: number;
  store_mib: number;
  /** The window's longest GC pause, event-loop stall, checkpoint (by thread and mode) and store batch (submission to commit). */
  longest: Record<string, number>;
}

/**
 * The longest event of each kind seen in the stall log and the store's batch log, by window: read
 * as the files grow (the batch log gets ~2,000 lines a second), each line counted in the window
 * its event started in.
 */
class LongestByWindow {
  readonly #windows: Array<Record<string, number>>;
  readonly #offsets = new Map<string, number>();
  readonly #rest = new Map<string, string>();

  constructor(
    windows: number,
    /** When the measured run starts (epoch ms): events before it (start-up, warm-up) are not counted. */
    private readonly from: number,
    private readonly windowOf: (epochMs: number) => number,
  ) {
    this.#windows = Array.from({ length: windows }, () => ({}));
  }

  /** Reads what `file` gained since the last call; `kindOf` names an event (or skips it). */
  read(file: string, kindOf: (e: Record<string, unknown>) => [kind: string, at: number, ms: number] | undefined): void {
    let text: string;
    try {
      const fd = fs.openSync(file, 'r');
      try {
        const from = this.#offsets.get(file) ?? 0;
        const size = fs.fstatSync(fd).size;
        const buf = Buffer.alloc(size - from);
        fs.readSync(fd, buf, 0, buf.length, from);
        this.#offsets.set(file, size);
        text = (this.#rest.get(file) ?? '') + buf.toString('utf8');
      } finally {
        fs.closeSync(fd);
      }
    } catch {
      return; // not written yet
    }
    const lines = text.split('\n');
    this.#rest.set(file, lines.pop() ?? '');
    for (const line of lines) {
      if (!line) continue;
      const named = kindOf(JSON.parse(line) as Record<string, unknown>);
      if (!named) continue;
      const [kind, at, ms] = named;
      if (at < this.from) continue;
      const w = this.#windows[this.windowOf(at)]!;
      w[kind] = Math.max(w[kind] ?? 0, Math.round(ms * 10) / 10);
    }
  }

  of(w: number): Record<string, number> {
    return this.#windows[w]!;
  }
}

/** A stall-log line: GC pauses by kind, event-loop stalls, checkpoints by thread and mode. */
function stallKind(e: Record<string, unknown>): [string, number, number] | undefined {
  const t = e as unknown as TailEvent;
  const kind = t.what === 'checkpoint' ? `checkpoint ${t.kind}` : t.what === 'gc' ? `gc ${t.kind}` : 'loop stall';
  return [kind, t.at, t.ms];
}

/** A store batch (store-batches.ts): from its oldest write's submission to the backend's answer. */
function batchKind(e: Record<string, unknown>): [string, number, number] | undefined {
  const b = e as unknown as BatchEvent;
  return ['store batch', b.submittedAt, b.doneAt - b.submittedAt];
}

/** The store's size now: SQLite's database file and `-wal`, or PostgreSQL's database. */
type StoreProbe = { wal(): number; size(): Promise<number>; statuses(): Promise<Record<string, number>>; close(): Promise<void> };

function sqliteProbe(dataDir: string): StoreProbe {
  const file = path.join(dataDir, 'countersign.db');
  return {
    wal: () => fileSize(file + '-wal'),
    size: () => Promise.resolve(fileSize(file)),
    statuses: () => {
      // A reader beside the running server (WAL mode lets it in without blocking the writer).
      const db = new Database(file, { readonly: true, fileMustExist: true });
      try {
        const rows = db.prepare('select status, count(*) as n from logs group by status').all() as Array<{ status: string; n: number }>;
        return Promise.resolve(Object.fromEntries(rows.map((r) => [r.status, r.n])));
      } finally {
        db.close();
      }
    },
    close: () => Promise.resolve(),
  };
}

async function postgresProbe(url: string): Promise<StoreProbe> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    wal: () => 0,
    size: async () => Number((await client.query<{ n: string }>('select pg_database_size(current_database()) as n')).rows[0]!.n),
    statuses: async () => {
      const r = await client.query<{ status: string; n: string }>('select status, count(*) as n from logs group by status');
      return Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
    },
    close: () => client.end(),
  };
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** Runs the soak; prints one line per window and the verdicts, and returns the figures. */
export default async function soakBench(): Promise<Record<string, unknown>> {
  if (STORE === 'postgres' && !process.env.DATABASE_URL) throw new Error('SOAK_STORE=postgres needs DATABASE_URL');
  pinSelf();
  const children: Child[] = [];
  const stallFile = path.join(os.tmpdir(), `soak-stalls-${process.pid}.jsonl`);
  const batchFile = path.join(os.tmpdir(), `soak-batches-${process.pid}.jsonl`);
  const db = STORE === 'postgres' ? await freshDatabaseOffCore(process.env.DATABASE_URL!, CORES.load) : undefined;
  let probe: StoreProbe | undefined;
  try {
    const upstream = await startRole('upstream', 'upstream', CORES.load);
    children.push(upstream);
    const env: Record<string, string> = {
      PROXY_BENCH_UPSTREAM: upstream.info.url!,
      PROXY_BENCH_STALL_FILE: stallFile,
      PROXY_BENCH_BATCH_FILE: batchFile,
    };
    if (db) env.PROXY_BENCH_DATABASE_URL = db.url;
    const cs = await startRole('countersign', 'countersign', CORES.proxy, env, [...COUNTERSIGN_FLAGS, '--import', stallLog]);
    children.push(cs);
    probe = db ? await postgresProbe(db.url) : sqliteProbe(cs.info.dataDir!);
    const spec = FORWARD
      ? forwardDoorCall(cs.info.url!, cs.info.apiKey!, 'soak-key', '/json', REQUEST_BODY)
      : proxyDoorCall(cs.info.url!, cs.info.apiKey!, 'soak-key', upstream.info.url + '/json');
    const pool = clientFor(spec);
    const warm = await openLoop(pool, spec, RATE, WARMUP_S);

    const pid = cs.proc.pid!;
    const seconds = Math.round(MINUTES * 60);
    const windows = Math.max(1, Math.ceil(seconds / WINDOW_S));
    const hists: hdr.Histogram[] = Array.from({ length: windows }, () => histogram());
    const answered = new Array<number>(windows).fill(0);
    const walPeak = new Array<number>(windows).fill(0);
    const rows: WindowFigures[] = [];
    // Windows on the monotonic clock, as the load's due times are (load.ts: timeOrigin + now): a
    // VM snapshot once stepped the wall clock ~7 s ahead mid-run, and windows kept by Date.now()
    // were then reported before their last seconds' calls were sent (fifty-fourth session).
    const clock = () => performance.timeOrigin + performance.now();
    const start = clock() + 1;
    const windowOf = (epochMs: number) => Math.min(windows - 1, Math.max(0, Math.floor((epochMs - start) / (WINDOW_S * 1000))));
    const longest = new LongestByWindow(windows, start, windowOf);
    let lastCpu = cpuSeconds(pid);
    let lastAnswered = 0;
    let reported = 0;
    // Reports run one after another (PostgreSQL's size is a query), in window order.
    let reporting = Promise.resolve();
    process.stdout.write(
      `Countersign ${STORE}${FORWARD ? ' (forward mode)' : ''}, ${RATE} req/s for ${round2(MINUTES)} min, windows of ${WINDOW_S} s\n` +
        'minute | answered | p50 / p99 / max ms | CPU µs/call | RSS MiB | WAL peak MiB | store MiB | longest events, ms\n',
    );
    // Each window is reported once the next one has begun and its last requests had 2 s to answer.
    const report = async (w: number) => {
      const cpu = cpuSeconds(pid);
      const calls = answered.slice(0, w + 1).reduce((a, b) => a + b, 0);
      const figures: WindowFigures = {
        minute: round2(((w + 1) * WINDOW_S) / 60),
        answered: answered[w]!,
        p50_ms: pctMs(hists[w]!, 50),
        p99_ms: pctMs(hists[w]!, 99),
        max_ms: pctMs(hists[w]!, 100),
        cpu_us_per_call: Math.round(((cpu - lastCpu) / Math.max(1, calls - lastAnswered)) * 1e6),
        rss_mib: round2(rssBytes(pid) / MIB),
        ...(db ? {} : { wal_peak_mib: round2(walPeak[w]! / MIB) }),
        store_mib: round2((await probe!.size()) / MIB),
        longest: longest.of(w),
      };
      lastCpu = cpu;
      lastAnswered = calls;
      rows.push(figures);
      const f = figures;
      process.stdout.write(
        `${f.minute} | ${f.answered} | ${f.p50_ms} / ${f.p99_ms} / ${f.max_ms} | ${f.cpu_us_per_call} | ${f.rss_mib} | ${f.wal_peak_mib ?? '-'} | ${f.store_mib} | ${describeLongest(f.longest)}\n`,
      );
    };
    const sampler = setInterval(() => {
      longest.read(stallFile, stallKind);
      longest.read(batchFile, batchKind);
      const w = windowOf(clock());
      walPeak[w] = Math.max(walPeak[w]!, probe!.wal());
      // Report each finished window 2 s into the next one (its late answers are in by then).
      while (reported < windows - 1 && clock() >= start + (reported + 1) * WINDOW_S * 1000 + 2000) {
        const w = reported++;
        reporting = reporting.then(() => report(w));
      }
    }, 1000);
    const run = await openLoop(pool, spec, RATE, seconds, (due, us) => {
      const w = windowOf(due);
      hists[w]!.recordValue(Math.max(1, Math.round(us)));
      answered[w]!++;
    });
    clearInterval(sampler);
    await new Promise((r) => setTimeout(r, 300)); // the stall log writes its batches five times a second
    longest.read(stallFile, stallKind);
    longest.read(batchFile, batchKind);
    await reporting;
    while (reported < windows) await report(reported++);
    await pool.close();

    // The audit trail: one record per call sent, every one complete.
    const statuses = await probe.statuses();
    const sent = warm.ok + warm.errors + run.ok + run.errors;
    const records = Object.values(statuses).reduce((a, b) => a + b, 0);
    const incomplete = records - (statuses.complete ?? 0);
    const walEnd = probe.wal();
    await new Promise((r) => setTimeout(r, 2000));
    const walIdle = probe.wal();
    const half = rows.slice(Math.floor(rows.length / 2));
    const out = {
      store: STORE,
      door: FORWARD ? 'forward' : 'proxy',
      rate: RATE,
      minutes: round2(MINUTES),
      window_s: WINDOW_S,
      countersign_node_flags: COUNTERSIGN_FLAGS,
      answered: run.ok,
      errors: run.errors,
      latency_ms: { p50: pctMs(run.total, 50), p99: pctMs(run.total, 99), p999: pctMs(run.total, 99.9), max: pctMs(run.total, 100) },
      windows: rows,
      wal_mib: db ? undefined : { peak: round2(Math.max(...walPeak) / MIB), end: round2(walEnd / MIB), after_idle: round2(walIdle / MIB) },
      rss_mib: {
        first_window: rows[0]?.rss_mib,
        last_window: rows[rows.length - 1]?.rss_mib,
        max: Math.max(...rows.map((r) => r.rss_mib)),
      },
      rss_mib_per_minute_second_half: slopePerMinute(half.map((r) => [r.minute, r.rss_mib])),
      records: { sent, stored: records, statuses, incomplete },
    };
    process.stdout.write(
      `\nall: ${run.ok} answered, ${run.errors} errors; p50 ${out.latency_ms.p50} / p99 ${out.latency_ms.p99} / p99.9 ${out.latency_ms.p999} / max ${out.latency_ms.max} ms\n` +
        (out.wal_mib
          ? `WAL: peak ${out.wal_mib.peak} MiB, ${out.wal_mib.end} at the end, ${out.wal_mib.after_idle} after 2 s idle\n`
          : '') +
        `RSS: ${out.rss_mib.first_window} MiB after the first window, ${out.rss_mib.last_window} after the last, max ${out.rss_mib.max}; ` +
        `second half's trend ${out.rss_mib_per_minute_second_half} MiB/min\n` +
        `records: ${records} stored for ${sent} calls sent (${JSON.stringify(statuses)}); not complete: ${incomplete}\n`,
    );
    return out;
  } finally {
    await probe?.close().catch(() => undefined);
    for (const c of children.reverse()) await c.stop();
    await db?.drop();
    fs.rmSync(stallFile, { force: true });
    fs.rmSync(batchFile, { force: true });
  }
}

/** The events of 10 ms or more, longest first. */
function describeLongest(longest: Record<string, number>): string {
  const big = Object.entries(longest)
    .filter(([, ms]) => ms >= 10)
    .sort((a, b) => b[1] - a[1]);
  return big.length === 0 ? 'none of 10 ms or more' : big.map(([k, ms]) => `${k} ${ms}`).join(', ');
}

/** Least-squares slope of `points` (minute, value), per minute; 0 with fewer than two points. */
function slopePerMinute(points: Array<[number, number]>): number {
  if (points.length < 2) return 0;
  const n = points.length;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  const sxy = points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
  const sxx = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : round2(sxy / sxx);
}
