/**
 * `npm run bench -- bursts`: traffic that comes and goes. One Countersign process (pinned like
 * in the proxy benchmark, started with the serving flags of packages/server/src/serving-gc.ts)
 * gets BURSTS_N bursts of BURSTS_RATE req/s (open loop, 2 s of warm-up then BURSTS_SECONDS
 * measured), each after BURSTS_IDLE_S seconds without a call, and the direct call gets one burst
 * the same way as the baseline. What it catches: what an idle process does to the next burst
 * (V8's memory reducer shrinking the heap, then a full GC in the middle of the burst; see
 * docs/performance-log.md, 2026-11-27). BURSTS_STORE=postgres with DATABASE_URL for PostgreSQL;
 * PROXY_BENCH_CS_FLAGS adds Node flags (e.g. `--trace-gc`).
 */
import { freshDatabaseOffCore } from './proxy/pin-postgres.js';
import { CORES, COUNTERSIGN_FLAGS, pinSelf, startRole, type Child } from './proxy/children.js';
import { clientFor, latencyFigures, openLoop, plainJsonCall, proxyDoorCall, type CallSpec, type LatencyFigures } from './proxy/load.js';

const QUICK = process.env.BENCH_QUICK === '1';
const N = Number(process.env.BURSTS_N ?? (QUICK ? 2 : 4));
const RATE = Number(process.env.BURSTS_RATE ?? 1000);
const SECONDS = Number(process.env.BURSTS_SECONDS ?? (QUICK ? 2 : 5));
const IDLE_S = Number(process.env.BURSTS_IDLE_S ?? (QUICK ? 3 : 25));
const STORE = process.env.BURSTS_STORE === 'postgres' ? 'postgres' : 'sqlite';

interface BurstFigures extends LatencyFigures {
  errors: number;
}

/** Idles, warms up for 2 s at the rate, then measures one burst. */
async function burst(spec: CallSpec, pool: ReturnType<typeof clientFor>): Promise<BurstFigures> {
  await new Promise((r) => setTimeout(r, IDLE_S * 1000));
  await openLoop(pool, spec, RATE, 2);
  const r = await openLoop(pool, spec, RATE, SECONDS);
  return { ...latencyFigures(r.total), errors: r.errors };
}

const line = (label: string, f: BurstFigures) =>
  `${label}: p50 ${f.p50_ms} / p99 ${f.p99_ms} / p99.9 ${f.p999_ms} / max ${f.max_ms} ms, ${f.errors} errors\n`;

/** Runs the study; prints and returns its figures. */
export default async function burstsBench(): Promise<Record<string, unknown>> {
  if (STORE === 'postgres' && !process.env.DATABASE_URL) throw new Error('BURSTS_STORE=postgres needs DATABASE_URL');
  pinSelf();
  const children: Child[] = [];
  const db = STORE === 'postgres' ? await freshDatabaseOffCore(process.env.DATABASE_URL!, CORES.load) : undefined;
  try {
    const upstream = await startRole('upstream', 'upstream', CORES.load);
    children.push(upstream);
    const env: Record<string, string> = { PROXY_BENCH_UPSTREAM: upstream.info.url! };
    if (db) env.PROXY_BENCH_DATABASE_URL = db.url;
    const cs = await startRole('countersign', 'countersign', CORES.proxy, env, COUNTERSIGN_FLAGS);
    children.push(cs);
    const spec = proxyDoorCall(cs.info.url!, cs.info.apiKey!, 'bursts-key', upstream.info.url + '/json');
    const pool = clientFor(spec);
    await openLoop(pool, spec, RATE / 2, 2);
    process.stdout.write(
      `Countersign ${STORE}${db?.pinned ? ' (PostgreSQL on the load core)' : ''}: ${N} bursts of ${RATE} req/s for ${SECONDS} s, each after ${IDLE_S} s idle\n`,
    );
    const bursts: BurstFigures[] = [];
    for (let i = 0; i < N; i++) {
      bursts.push(await burst(spec, pool));
      process.stdout.write(line(`  burst ${i + 1}`, bursts[i]!));
    }
    const direct = plainJsonCall(upstream.info.url!);
    const baseline = await burst(direct, clientFor(direct));
    process.stdout.write(line('  direct call, one burst', baseline));
    const worst = bursts.reduce((a, b) => (b.p999_ms > a.p999_ms ? b : a));
    process.stdout.write(`worst burst p99.9 ${worst.p999_ms} ms (×${(worst.p999_ms / baseline.p999_ms).toFixed(1)} the direct call's)\n`);
    return { store: STORE, rate: RATE, seconds: SECONDS, idle_s: IDLE_S, flags: COUNTERSIGN_FLAGS, bursts, direct: baseline };
  } finally {
    for (const c of children.reverse()) await c.stop().catch(() => undefined);
    await db?.drop();
  }
}
