/**
 * The proxy side by side, in one invocation, interleaved: the direct call; the Node floor (bare
 * node:http + undici, bench/proxy/node-floor.ts); nginx (`proxy_pass` with upstream keepalive,
 * when installed); Countersign on SQLite; Countersign on PostgreSQL when DATABASE_URL is set.
 * Every proxy runs pinned to the proxy core (default core 1), the upstream and this load
 * generator to the load core (default 0), so per-call figures are one core's (bench/proxy/children.ts).
 *
 * Scenarios, each run for every target in turn before the next scenario (so a slow moment of
 * the machine hits all of them alike): 1 KB JSON answer at fixed rates of 500, 1,000 and
 * 2,000 req/s, open loop, latency from each request's scheduled time (bench/proxy/load.ts),
 * after 10 s at 500 req/s for every target and each rate warmed up at that rate first;
 * saturation with 32 connections, closed loop; CPU per call of the proxy process (all threads,
 * /proc/<pid>/stat) at each rate and at saturation, where its kernel part (system time) is given
 * too, since the instructions benchmark counts only the process's own code; SSE time to the first
 * event (streams of 50 events, 100 per target one stream at a time after 500 to warm up,
 * PROXY_BENCH_SSE_WARM; the destination writes the 49 after the first together, so that its burst
 * of writes on the caller's core does not hold the caller back: docs/performance.md, "Where the SSE
 * first-event overhead goes"); for Countersign on SQLite, the `-wal` file's size (peak while
 * running, at the end, and after 2 s idle). Before and after, the proxy core's prices at that
 * moment (proxy/machine-moment.ts), and the share of each core's time the hypervisor took over the
 * run (steal, proxy/steal.ts), to read the run by.
 *
 * Run: `npm run bench -- proxy` (a few minutes). `BENCH_QUICK=1` is a smoke run (well under a
 * minute, figures not meaningful). Knobs: PROXY_BENCH_ROUNDS (medians over rounds, default 1),
 * PROXY_BENCH_SECONDS (per measured rate step, default 5), PROXY_BENCH_DOOR=forward (Countersign
 * through `/v1/forward/…` instead of `POST /v1/proxy`), PROXY_BENCH_PROFILE=cs_sqlite|cs_pg|floor
 * (`--cpu-prof` of that process into $TMPDIR/proxy-bench-prof), PROXY_BENCH_CS_FLAGS (extra Node
 * flags for the Countersign processes, e.g. `--single-threaded-gc`), PROXY_BENCH_LOAD_CORE /
 * PROXY_BENCH_PROXY_CORE, PROXY_BENCH_SPIN=1 (the load generator busy-waits for each due time, as
 * before 2026-11-26 evening: punctual, but it keeps the load core busy; see load.ts),
 * PROXY_BENCH_FROM=src (Countersign and the floor from the sources through tsx, as before
 * 2026-11-27's sixth session; by default they run as built, what `npm start` runs:
 * bench/proxy/built.ts).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Pool } from 'undici';
import { freshDatabaseOffCore } from './proxy/pin-postgres.js';
import { formatMoment, measureMachineMoment } from './proxy/machine-moment.js';
import { coreTicks, formatSteal, stealPercent } from './proxy/steal.js';
import {
  CAN_PIN,
  CORES,
  COUNTERSIGN_FLAGS,
  NGINX,
  cpuSeconds,
  cpuSplitSeconds,
  fileSize,
  pinSelf,
  startNginx,
  startRole,
  type Child,
} from './proxy/children.js';
import {
  clientFor,
  FIRST_EVENT_STREAM,
  forwardDoorCall,
  latencyFigures,
  openLoop,
  pctMs,
  plainJsonCall,
  proxyDoorCall,
  REQUEST_BODY,
  saturate,
  sseRuns,
  sseStream,
  type CallSpec,
} from './proxy/load.js';
import {
  medianOf,
  ratioLines,
  roundLines,
  ratios,
  table,
  type RateFigures,
  type SaturationFigures,
  type SseFigures,
  type TargetFigures,
} from './proxy/report.js';

const QUICK = process.env.BENCH_QUICK === '1';
const ROUNDS = Number(process.env.PROXY_BENCH_ROUNDS ?? 1);
const MEASURE_S = Number(process.env.PROXY_BENCH_SECONDS ?? (QUICK ? 1.5 : 5));
const WARM_S = QUICK ? 0.5 : 2;
/**
 * The first warm-up, before any scenario: V8 is still optimizing Countersign's functions for its
 * first ~5,000 calls (its compiler threads ~22 µs a call at 1,000 req/s after 3,000 calls, ~1 after
 * 20,000: twentieth session), which would weigh on the first round's first rate.
 */
const FIRST_WARM_S = QUICK ? 0.5 : 10;
const SAT_S = QUICK ? 1.5 : 5;
const SSE_RUNS = QUICK ? 10 : 100;
/**
 * SSE streams per target before the measured ones: the JSON scenarios leave the streaming path
 * (the relay of events, the capture) less warm than V8 has it after a few thousand calls
 * (docs/performance-log.md, twentieth and twenty-first sessions).
 */
const SSE_WARM = Number(process.env.PROXY_BENCH_SSE_WARM ?? (QUICK ? 5 : 500));
const RATES = [500, 1000, 2000];
const CONNECTIONS = 32;
const DOOR = process.env.PROXY_BENCH_DOOR === 'forward' ? 'forward' : 'proxy';
const ENC = 'bench-encryption-key';

/** One thing called: its JSON and SSE calls, the process whose CPU counts, its pool. */
interface Target {
  name: string;
  label: string;
  json: CallSpec;
  sse: CallSpec;
  pid: number;
  pool: Pool;
  walFile?: string;
}

function plainTarget(name: string, label: string, origin: string, pid: number): Target {
  const json = plainJsonCall(origin);
  return { name, label, json, sse: { origin, path: FIRST_EVENT_STREAM, method: 'GET', headers: {} }, pid, pool: clientFor(json) };
}

function countersignTarget(name: string, label: string, child: Child, upstream: string): Target {
  const origin = child.info.url!;
  let json: CallSpec;
  let sse: CallSpec;
  if (DOOR === 'forward') {
    json = forwardDoorCall(origin, child.info.apiKey!, ENC, '/json', REQUEST_BODY);
    sse = forwardDoorCall(origin, child.info.apiKey!, ENC, FIRST_EVENT_STREAM);
  } else {
    json = proxyDoorCall(origin, child.info.apiKey!, ENC, upstream + '/json');
    sse = proxyDoorCall(origin, child.info.apiKey!, ENC, upstream + FIRST_EVENT_STREAM);
  }
  const walFile = child.info.dataDir && !name.endsWith('pg') ? path.join(child.info.dataDir, 'countersign.db-wal') : undefined;
  return { name, label, json, sse, pid: child.proc.pid!, pool: clientFor(json), ...(walFile ? { walFile } : {}) };
}

/** One fixed-rate step of one target: warm-up at the rate, then the measured run with CPU. */
async function rateStep(t: Target, rate: number): Promise<Omit<RateFigures, 'added_p50_ms' | 'added_p99_ms'>> {
  await openLoop(t.pool, t.json, rate, WARM_S);
  const cpu0 = cpuSeconds(t.pid);
  const r = await openLoop(t.pool, t.json, rate, MEASURE_S);
  const cpu = cpuSeconds(t.pid) - cpu0;
  return {
    ...latencyFigures(r.total),
    ttfb_p50_ms: pctMs(r.ttfb, 50),
    achieved_rps: Math.round(r.achievedRps),
    errors: r.errors,
    cpu_us_per_call: r.ok > 0 ? Math.round((cpu / r.ok) * 1e6) : NaN,
  };
}

async function saturationStep(t: Target): Promise<SaturationFigures> {
  await saturate(t.pool, t.json, CONNECTIONS, Math.min(1, SAT_S / 3));
  const cpu0 = cpuSplitSeconds(t.pid);
  const s = await saturate(t.pool, t.json, CONNECTIONS, SAT_S);
  const cpu1 = cpuSplitSeconds(t.pid);
  const system = cpu1.system - cpu0.system;
  const cpu = cpu1.user - cpu0.user + system;
  return {
    rps: Math.round(s.calls / s.seconds),
    errors: s.errors,
    cpu_us_per_call: s.calls > 0 ? Math.round((cpu / s.calls) * 1e6) : NaN,
    system_us_per_call: s.calls > 0 ? Math.round((system / s.calls) * 1e6) : NaN,
    cpu_cores: Math.round((cpu / s.seconds) * 100) / 100,
  };
}

/** Runs every scenario over every target; prints the table and returns the figures. */
export default async function proxyBench(): Promise<Record<string, unknown>> {
  pinSelf();
  const loadBefore = os.loadavg()[0]!;
  const ticksBefore = coreTicks();
  const children: Child[] = [];
  const drops: Array<() => Promise<void>> = [];
  let pgPinned = false;
  const targets: Target[] = [];
  const walPeak = new Map<string, number>();
  let sampler: NodeJS.Timeout | undefined;
  const out: Record<string, unknown> = {};
  // The proxy core's prices before and after: which of them moved, when the floor's figures did.
  const momentBefore = await measureMachineMoment(CORES.proxy);
  try {
    const upstream = await startRole('upstream', 'upstream', CORES.load);
    children.push(upstream);
    const upUrl = upstream.info.url!;
    const env = { PROXY_BENCH_UPSTREAM: upUrl };
    const prof = (name: string) =>
      process.env.PROXY_BENCH_PROFILE === name ? ['--cpu-prof', '--cpu-prof-dir=' + path.join(os.tmpdir(), 'proxy-bench-prof')] : [];
    targets.push(plainTarget('direct', 'direct', upUrl, upstream.proc.pid!));
    const floor = await startRole('floor', 'floor', CORES.proxy, env, prof('floor'));
    children.push(floor);
    targets.push(plainTarget('floor', 'Node floor', floor.info.url!, floor.proc.pid!));
    if (NGINX) {
      const nginx = await startNginx(upUrl, CORES.proxy);
      children.push(nginx);
      targets.push(plainTarget('nginx', 'nginx', nginx.info.url!, nginx.proc.pid!));
    }
    const sqlite = await startRole('cs_sqlite', 'countersign', CORES.proxy, env, [...COUNTERSIGN_FLAGS, ...prof('cs_sqlite')]);
    children.push(sqlite);
    targets.push(countersignTarget('cs_sqlite', 'Countersign SQLite', sqlite, upUrl));
    if (process.env.DATABASE_URL) {
      const db = await freshDatabaseOffCore(process.env.DATABASE_URL, CORES.load);
      drops.push(db.drop);
      pgPinned = db.pinned;
      const pgChild = await startRole('cs_pg', 'countersign', CORES.proxy, { ...env, PROXY_BENCH_DATABASE_URL: db.url }, [
        ...COUNTERSIGN_FLAGS,
        ...prof('cs_pg'),
      ]);
      children.push(pgChild);
      targets.push(countersignTarget('cs_pg', 'Countersign PostgreSQL', pgChild, upUrl));
    }
    process.stdout.write(
      `targets: ${targets.map((t) => t.name).join(', ')}; ${CAN_PIN ? `proxies pinned to core ${CORES.proxy}, upstream${pgPinned ? ', PostgreSQL' : ''} and load generator to core ${CORES.load}` : 'taskset missing: NOT pinned'}; door ${DOOR}; ${ROUNDS} round(s)${COUNTERSIGN_FLAGS.length > 0 ? `; Countersign flags ${COUNTERSIGN_FLAGS.join(' ')}` : ''}${QUICK ? '; QUICK smoke run' : ''}\n`,
    );
    sampler = setInterval(() => {
      for (const t of targets) if (t.walFile) walPeak.set(t.name, Math.max(walPeak.get(t.name) ?? 0, fileSize(t.walFile)));
    }, 200);

    // JIT, pools, SQLite pages: every path at a moderate rate, until V8 has optimized what it will.
    for (const t of targets) await openLoop(t.pool, t.json, 500, FIRST_WARM_S);

    const perRound = new Map<string, { rates: Record<string, RateFigures>[]; sat: SaturationFigures[] }>(
      targets.map((t) => [t.name, { rates: [], sat: [] }]),
    );
    for (let round = 0; round < ROUNDS; round++) {
      const rates: Record<string, Record<string, RateFigures>> = Object.fromEntries(targets.map((t) => [t.name, {}]));
      for (const rate of RATES) {
        const step: Record<string, Omit<RateFigures, 'added_p50_ms' | 'added_p99_ms'>> = {};
        for (const t of targets) step[t.name] = await rateStep(t, rate);
        const d = step.direct!;
        for (const t of targets) {
          const s = step[t.name]!;
          rates[t.name]![String(rate)] = { ...s, added_p50_ms: s.p50_ms - d.p50_ms, added_p99_ms: s.p99_ms - d.p99_ms };
        }
        process.stdout.write(`  round ${round + 1}, ${rate} req/s done\n`);
      }
      for (const t of targets) {
        perRound.get(t.name)!.rates.push(rates[t.name]!);
        perRound.get(t.name)!.sat.push(await saturationStep(t));
      }
    }

    // SSE, one stream at a time, targets interleaved stream by stream.
    const sse = new Map<string, SseFigures>();
    const sseRaw = new Map<string, Awaited<ReturnType<typeof sseRuns>>[]>(targets.map((t) => [t.name, []]));
    for (let i = 0; i < SSE_WARM; i++) for (const t of targets) await sseStream(t.pool, t.sse).catch(() => undefined);
    for (let i = 0; i < SSE_RUNS; i++) for (const t of targets) sseRaw.get(t.name)!.push(await sseRuns(t.pool, t.sse, 1));
    const merged = (name: string) => {
      const runs = sseRaw.get(name)!;
      const first = runs[0]!.first;
      const whole = runs[0]!.whole;
      for (const r of runs.slice(1)) {
        first.add(r.first);
        whole.add(r.whole);
      }
      return { first, whole, errors: runs.reduce((n, r) => n + r.errors, 0) };
    };
    const directSse = merged('direct');
    for (const t of targets) {
      const m = t.name === 'direct' ? directSse : merged(t.name);
      sse.set(t.name, {
        runs: SSE_RUNS,
        errors: m.errors,
        first_p50_ms: pctMs(m.first, 50),
        first_p99_ms: pctMs(m.first, 99),
        first_added_p50_ms: Math.round((pctMs(m.first, 50) - pctMs(directSse.first, 50)) * 1000) / 1000,
        first_added_p99_ms: Math.round((pctMs(m.first, 99) - pctMs(directSse.first, 99)) * 1000) / 1000,
        whole_added_p50_ms: Math.round((pctMs(m.whole, 50) - pctMs(directSse.whole, 50)) * 1000) / 1000,
      });
    }

    const figures: Record<string, TargetFigures> = {};
    for (const t of targets) {
      const rounds = perRound.get(t.name)!;
      const f: TargetFigures = {
        label: t.label,
        rates: Object.fromEntries(RATES.map((r) => [String(r), medianOf(rounds.rates.map((x) => x[String(r)]!))])),
        saturation: medianOf(rounds.sat),
        sse: sse.get(t.name)!,
        rounds: rounds.rates,
      };
      if (t.walFile) {
        const end = fileSize(t.walFile);
        await new Promise((r) => setTimeout(r, 2000));
        const mib = (b: number) => Math.round((b / 2 ** 20) * 10) / 10;
        f.wal = {
          peak_mib: mib(Math.max(walPeak.get(t.name) ?? 0, end)),
          end_mib: mib(end),
          after_idle_mib: mib(fileSize(t.walFile)),
          db_mib: mib(fileSize(t.walFile.replace(/-wal$/, ''))),
        };
      }
      figures[t.name] = f;
    }
    out.targets = figures;
    out.ratio_to_node_floor = ratios(figures, 'floor');
    if (figures.nginx) out.ratio_to_nginx = ratios(figures, 'nginx');
    out.method = {
      rates: RATES,
      measure_seconds: MEASURE_S,
      warm_seconds: WARM_S,
      saturation_connections: CONNECTIONS,
      saturation_seconds: SAT_S,
      sse_runs: SSE_RUNS,
      rounds: ROUNDS,
      door: DOOR,
      countersign_node_flags: COUNTERSIGN_FLAGS,
      quick: QUICK,
      pinned: CAN_PIN ? { proxies: CORES.proxy, load_and_upstream: CORES.load, postgres_on_load_core: pgPinned } : false,
    };
    const momentAfter = await measureMachineMoment(CORES.proxy);
    const steal = stealPercent(ticksBefore, coreTicks(), CORES);
    out.machine = {
      steal_percent: steal,
      cpus: os.cpus().length,
      load_1min_before: loadBefore,
      load_1min_after: os.loadavg()[0]!,
      proxy_core_before: momentBefore,
      proxy_core_after: momentAfter,
    };

    process.stdout.write('\n' + table(figures, RATES, CONNECTIONS) + '\n\n');
    const spread = roundLines(figures, 1000);
    if (spread) process.stdout.write(spread + '\n\n');
    process.stdout.write(ratioLines(out.ratio_to_node_floor as Record<string, Record<string, number>>, 'Node floor') + '\n');
    if (out.ratio_to_nginx) process.stdout.write(ratioLines(out.ratio_to_nginx as Record<string, Record<string, number>>, 'nginx') + '\n');
    process.stdout.write(`(1-minute load before ${loadBefore.toFixed(2)}, after ${os.loadavg()[0]!.toFixed(2)})\n`);
    process.stdout.write(`taken by the hypervisor over the run (steal): ${formatSteal(steal)}\n`);
    process.stdout.write(`the proxy core's prices before: ${formatMoment(momentBefore)}\n`);
    process.stdout.write(`                        after: ${formatMoment(momentAfter)}\n`);
  } finally {
    if (sampler) clearInterval(sampler);
    await Promise.all(targets.map((t) => t.pool.close().catch(() => undefined)));
    for (const c of children.reverse()) await c.stop().catch(() => undefined);
    for (const drop of drops) await drop().catch(() => undefined);
  }
  return out;
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fs.realpathSync(new URL(import.meta.url).pathname)) {
  await proxyBench();
  process.exit(0);
}
