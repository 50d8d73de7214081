/**
 * Work per proxied call as instructions executed (valgrind's callgrind), for the Node floor and
 * Countersign on SQLite (and on PostgreSQL when DATABASE_URL is set): the CPU goal of issue 10
 * (CPU per call ≤ 2× the floor's) in a unit that does not move with the machine's speed. The
 * proxy benchmark's CPU µs per call does: on these VMs the same tree measured 37 and 135 µs per
 * call for the floor on one day, so a change of 5 % in the work is lost in the noise there, and
 * shows here.
 *
 * Each target runs alone under callgrind (the upstream, not counted, on the load core), takes
 * warm-up calls one at a time until the JIT has settled, has its counters zeroed, then takes the
 * measured calls, by default also one at a time (each call alone: the quiet server, and the same
 * work in every run, since no two calls share a batch or a turn of the loop). Reported per call,
 * by thread: the event loop, the SQLite writer, the rest (libuv's and the offload pool's threads),
 * and apart, out of the ratio because time drives them rather than calls, the SQLite checkpointer
 * and V8's optimizing compiler (still at work after the warm-up). V8's collector, which runs on
 * the event loop, is counted apart too (bench/proxy/callgrind-collector.ts), and two ratios are
 * given: with it, and without it. The second is the one that repeats: whether a mark-sweep lands
 * in the measured window is chance, and one that does adds a tenth to the floor's count.
 *
 * What an instruction count leaves out: cache misses, system calls' time in the kernel, and
 * wake-ups, all of which the µs figures include. Both are needed; this one is the repeatable one.
 *
 * Run: `npm run bench -- instructions` (about 10 minutes; BENCH_QUICK=1: a smoke run). Knobs:
 * INSTRUCTIONS_WARM (default 1,500 calls), INSTRUCTIONS_CALLS (default 1,000),
 * INSTRUCTIONS_DOOR=forward (Countersign's calls through forward mode), INSTRUCTIONS_CONCURRENCY
 * (measured calls that many at a time, as at saturation; default 1), INSTRUCTIONS_DIST (the server
 * build to measure, default this tree's), INSTRUCTIONS_KEEP=1 (keeps callgrind's files, for
 * `callgrind_annotate`: the cost by function). Needs valgrind; this tree's build is brought up to
 * date first (bench/proxy/built.ts), another tree's (INSTRUCTIONS_DIST) must be built.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Pool } from 'undici';
import { freshDatabaseOffCore } from './proxy/pin-postgres.js';
import { CORES, pinSelf, startRole, type Child } from './proxy/children.js';
import { HAS_VALGRIND, startUnderCallgrind, type ThreadInstructions } from './proxy/callgrind.js';
import { BUILT_ROLES, bundled, THIS_DIST } from './proxy/built.js';
import { callOnce, clientFor, forwardDoorCall, plainJsonCall, proxyDoorCall, REQUEST_BODY, type CallSpec } from './proxy/load.js';
import { SERVING_NODE_FLAGS, SERVING_V8_FLAGS } from '../packages/server/src/serving-gc.js';

const QUICK = process.env.BENCH_QUICK === '1';
const WARM = Number(process.env.INSTRUCTIONS_WARM ?? (QUICK ? 100 : 1500));
const CALLS = Number(process.env.INSTRUCTIONS_CALLS ?? (QUICK ? 50 : 1000));
// INSTRUCTIONS_DOOR=forward: Countersign's calls through forward mode instead of POST /v1/proxy.
const DOOR = process.env.INSTRUCTIONS_DOOR === 'forward' ? 'forward' : 'proxy';
// INSTRUCTIONS_CONCURRENCY=32: the measured calls 32 at a time, as in the proxy benchmark's
// saturation step, where calls share turns of the loop and store batches (after the sequential
// warm-up, 20 rounds at that concurrency open the connections it needs before the count starts).
// The work per call then shows what a saturated process amortizes.
const IN_FLIGHT = Math.max(1, Number(process.env.INSTRUCTIONS_CONCURRENCY ?? 1));
// INSTRUCTIONS_DIST: another tree's server build (its packages/server/dist), to compare two trees
// in one run of this benchmark's code.
const dist = process.env.INSTRUCTIONS_DIST ?? THIS_DIST;

/** Instructions per call of one target, by thread role. */
interface TargetFigures {
  perCall: Record<string, number>;
  total: number;
  /**
   * The total without the threads that time drives, not calls: the JIT compiler, and the
   * checkpointer, which copies the WAL every 100 ms however many calls came (under valgrind a call
   * takes ~100 ms, so it runs about once a call here, where at 1,000 req/s it runs once in 100).
   * What the ratio compares.
   */
  work: number;
  /**
   * {@link work} without V8's garbage collector (callgrind-collector.ts): the figure that repeats
   * from run to run, since whether a mark-sweep lands in the measured window is chance.
   */
  workWithoutCollector: number;
}

/**
 * `n` calls, `inFlight` at a time on as many connections (closed loop). One at a time, each call
 * is alone in the process; more at a time, they share turns of the loop and store batches, as at
 * saturation.
 */
async function calls(pool: Pool, spec: CallSpec, n: number, inFlight = 1): Promise<void> {
  let left = n;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (left > 0) {
        left--;
        await callOnce(pool, spec);
      }
    }),
  );
}

/** The event loop's count is split in two: V8's collector, and the rest ("event loop"). */
const COLLECTOR = "V8's collector";

function byRole(threads: ThreadInstructions[], callCount: number): TargetFigures {
  const perCall: Record<string, number> = {};
  const add = (role: string, n: number) => (perCall[role] = (perCall[role] ?? 0) + n / callCount);
  for (const t of threads) {
    add(t.role, t.instructions - t.collector);
    if (t.role === 'event loop') add(COLLECTOR, t.collector);
  }
  for (const k of Object.keys(perCall)) perCall[k] = Math.round(perCall[k]!);
  const total = Object.values(perCall).reduce((a, b) => a + b, 0);
  const work = total - (perCall['JIT compiler'] ?? 0) - (perCall['SQLite checkpointer'] ?? 0);
  return { perCall, total, work, workWithoutCollector: work - (perCall[COLLECTOR] ?? 0) };
}

/** Runs the measurement; prints and returns its figures. */
export default async function instructionsBench(): Promise<Record<string, unknown>> {
  if (!HAS_VALGRIND) {
    console.log('valgrind is not installed (apt-get install valgrind): nothing measured');
    return { skipped: 'valgrind not installed' };
  }
  pinSelf();
  // Bundling brings this tree's build up to date first (built.ts); another tree's must be built already.
  const script = await bundled(BUILT_ROLES);
  if (!fs.existsSync(path.join(dist, 'app.js'))) throw new Error(`no server build in ${dist}: run npm run build there first`);
  const children: Child[] = [];
  const db = process.env.DATABASE_URL ? await freshDatabaseOffCore(process.env.DATABASE_URL, CORES.load) : undefined;
  const results: Record<string, TargetFigures> = {};
  try {
    const upstream = await startRole('upstream', 'upstream', CORES.load);
    children.push(upstream);
    const targets: Array<[string, Record<string, string>, readonly string[]]> = [
      // The floor with Countersign's V8 flags too: the same collector, and compiler-only platform
      // threads in both, so that what differs is the program. Countersign sets SERVING_V8_FLAGS
      // itself, as `countersign serve` does; the floor gets them on its command line.
      ['floor', { PROXY_BENCH_ROLE: 'floor' }, [...SERVING_NODE_FLAGS, ...SERVING_V8_FLAGS]],
      ['cs_sqlite', { PROXY_BENCH_ROLE: 'countersign' }, SERVING_NODE_FLAGS],
    ];
    if (db) targets.push(['cs_pg', { PROXY_BENCH_ROLE: 'countersign', PROXY_BENCH_DATABASE_URL: db.url }, SERVING_NODE_FLAGS]);
    for (const [name, env, flags] of targets) {
      const started = Date.now();
      const target = await startUnderCallgrind(script, { ...env, PROXY_BENCH_UPSTREAM: upstream.info.url!, PROXY_BENCH_DIST: dist }, flags);
      try {
        const url = target.info.url!;
        const spec =
          env.PROXY_BENCH_ROLE === 'floor'
            ? plainJsonCall(url)
            : DOOR === 'forward'
              ? forwardDoorCall(url, target.info.apiKey!, 'instructions-key', '/json', REQUEST_BODY)
              : proxyDoorCall(url, target.info.apiKey!, 'instructions-key', upstream.info.url + '/json');
        const pool = clientFor(spec);
        await calls(pool, spec, WARM);
        // Open the connections (the caller's and the proxy's upstream ones) before the count.
        if (IN_FLIGHT > 1) await calls(pool, spec, IN_FLIGHT * 20, IN_FLIGHT);
        target.zero();
        await calls(pool, spec, CALLS, IN_FLIGHT);
        results[name] = byRole(target.dump(), CALLS);
        await pool.close();
      } finally {
        await target.stop();
      }
      console.log(
        `  ${name}: ${(results[name]!.work / 1e6).toFixed(3)} M instructions per call, ${((results[name]!.total - results[name]!.work) / 1e6).toFixed(3)} M more in the JIT compiler and the checkpointer (${Math.round((Date.now() - started) / 1000)} s)`,
      );
    }
  } finally {
    for (const c of children.reverse()) await c.stop();
    await db?.drop();
  }
  const floor = results.floor!;
  const roles = ['event loop', COLLECTOR, 'SQLite writer', 'other', 'SQLite checkpointer', 'JIT compiler'];
  const thousands = (n: number) => String(Math.round(n / 1000));
  const measured = IN_FLIGHT > 1 ? `${IN_FLIGHT} at a time` : 'one at a time';
  console.log(`\ndoor ${DOOR}: ${WARM} warm-up calls, then ${CALLS} measured, ${measured}; instructions per call (thousands):`);
  console.log(`| target | ${roles.join(' | ')} | work (all but the last two) | × floor | work without the collector | × floor |`);
  console.log(`| --- | ${roles.map(() => '---').join(' | ')} | --- | --- | --- | --- |`);
  for (const [name, r] of Object.entries(results)) {
    const cells = roles.map((role) => (r.perCall[role] === undefined ? '' : thousands(r.perCall[role])));
    const ratio = (r.work / floor.work).toFixed(2);
    const ratioWithout = (r.workWithoutCollector / floor.workWithoutCollector).toFixed(2);
    console.log(
      `| ${name} | ${cells.join(' | ')} | ${thousands(r.work)} | ×${ratio} | ${thousands(r.workWithoutCollector)} | ×${ratioWithout} |`,
    );
  }
  const ratios = (pick: (r: TargetFigures) => number) =>
    Object.fromEntries(Object.entries(results).map(([name, r]) => [name, pick(r) / pick(floor)]));
  return {
    door: DOOR,
    warmCalls: WARM,
    calls: CALLS,
    inFlight: IN_FLIGHT,
    results,
    ratioToFloor: ratios((r) => r.work),
    ratioToFloorWithoutCollector: ratios((r) => r.workWithoutCollector),
  };
}
