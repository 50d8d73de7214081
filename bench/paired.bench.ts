/**
 * Two variants of Countersign measured by the tail study (tail.bench.ts) in interleaved pairs,
 * and whether the difference outlives the machine's noise. On these shared VMs two runs of the
 * same tree at 1,000 req/s differ by a third in p99 (docs/performance-log.md), so one pair of runs
 * says nothing about a change worth a few per cent; many pairs, run A B B A A B … so that the
 * machine's drift hits both alike, and a signed-rank test on their differences do
 * (bench/proxy/paired-stats.ts).
 *
 * Variant A is this tree as it is. Variant B is another checkout (`PAIRED_B_TREE`, with its own
 * node_modules; each run builds it as the tail study builds this one) or this tree with other
 * environment variables (`PAIRED_B_ENV`, e.g. `PROXY_BENCH_CS_FLAGS=--max-semi-space-size=64`);
 * `PAIRED_A_ENV` sets A's. `PAIRED_A_SETUP` / `PAIRED_B_SETUP` are shell commands run before each
 * of that variant's runs, for what the environment cannot carry: a setting of the machine (e.g.
 * `echo 200000 > /sys/module/haltpoll/parameters/guest_halt_poll_ns`); A's runs once more at the
 * end, even after a failure, so that the machine is left as variant A has it. Every other knob of
 * the tail study (TAIL_RATE, TAIL_SECONDS, TAIL_STORE, TAIL_DOOR, …) applies to both.
 *
 * With TAIL_WRITEBACK=1 (a trace of the disk's requests in every run) the disk's cache flushes are
 * compared too, p99 and max: a setting of the disk or the kernel shows there even when the proxy's
 * core is too noisy for the latency to show it.
 *
 * Run: `PAIRED_B_TREE=/tmp/base npm run bench -- paired` (PAIRED_PAIRS pairs, default 8: about
 * six minutes at the tail study's defaults, ~20 s a run; BENCH_QUICK=1 runs one short pair). Reports each
 * pair's run, then per figure the medians, the median of the pairs' differences (B − A), how many
 * pairs B won (lower is better for every figure here), and the two-sided p-value.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, signedRank } from './proxy/paired-stats.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const QUICK = process.env.BENCH_QUICK === '1';
const PAIRS = Number(process.env.PAIRED_PAIRS ?? (QUICK ? 1 : 8));

/** A variant: the tree its runs start from, and what their environment adds. */
interface Variant {
  name: 'A' | 'B';
  tree: string;
  env: Record<string, string>;
  /** A shell command run before each of its runs (PAIRED_A_SETUP / PAIRED_B_SETUP), or ''. */
  setup: string;
}

/** Runs `v`'s setup command, if it has one; a failing setup stops the comparison. */
function setUp(v: Variant): void {
  if (!v.setup) return;
  const r = spawnSync('sh', ['-c', v.setup], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`PAIRED_${v.name}_SETUP failed (${r.status}):\n${r.stdout}${r.stderr}`);
}

/** `K=V K2=V2` as an object (values without spaces; a flag list goes in one variable, as PROXY_BENCH_CS_FLAGS takes it). */
function parseEnv(spec: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of (spec ?? '').split(/\s+/).filter(Boolean)) {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new Error(`PAIRED_*_ENV: "${kv}" is not NAME=value`);
    out[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return out;
}

/** The figures compared, read from a tail study's result (all lower-is-better). */
const FIGURES: Array<[name: string, read: (r: TailResult) => number]> = [
  ['p50 ms', (r) => r.latency_ms.p50],
  ['p90 ms', (r) => r.latency_ms.p90],
  ['p99 ms', (r) => r.latency_ms.p99],
  ['p99.9 ms', (r) => r.latency_ms.p999],
  ['event loop µs/call', (r) => r.cpu_us_per_call.event_loop_thread],
  ['other threads µs/call', (r) => r.cpu_us_per_call.other_threads],
];

/** With TAIL_WRITEBACK=1, the disk's cache flushes too: a setting of the disk shows there whatever the CPU does. */
const FLUSH_FIGURES: Array<[name: string, read: (r: TailResult) => number]> = [
  ['disk cache flush p99 ms', (r) => r.block_trace!.flushes.p99_ms],
  ['disk cache flush max ms', (r) => r.block_trace!.flushes.max_ms],
];

/** What this bench reads of tail.bench.ts's result. */
interface TailResult {
  latency_ms: { p50: number; p90: number; p99: number; p999: number };
  cpu_us_per_call: { event_loop_thread: number; other_threads: number };
  errors: number;
  block_trace?: { flushes: { p99_ms: number; max_ms: number } };
}

/** One tail study of `v`, in its own process, as `npm run bench -- tail` runs it in that tree. */
function runTail(v: Variant): TailResult {
  setUp(v);
  // BENCH_QUICK passes through: the tail study then runs 3 s.
  const r = spawnSync(process.execPath, ['--conditions=development', '--import', 'tsx', 'bench/run.ts', 'tail'], {
    cwd: v.tree,
    env: { ...process.env, ...v.env },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`the tail study of ${v.name} (${v.tree}) failed:\n${r.stdout}\n${r.stderr}`);
  const saved = JSON.parse(fs.readFileSync(path.join(v.tree, 'bench', 'results', 'tail.json'), 'utf8')) as { result: TailResult };
  return saved.result;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** Runs the pairs; prints and returns each run's figures and the comparison. */
export default async function pairedBench(): Promise<Record<string, unknown>> {
  const thisTree = path.join(here, '..');
  const bTree = process.env.PAIRED_B_TREE ? path.resolve(process.env.PAIRED_B_TREE) : thisTree;
  const a: Variant = { name: 'A', tree: thisTree, env: parseEnv(process.env.PAIRED_A_ENV), setup: process.env.PAIRED_A_SETUP ?? '' };
  const b: Variant = { name: 'B', tree: bTree, env: parseEnv(process.env.PAIRED_B_ENV), setup: process.env.PAIRED_B_SETUP ?? '' };
  const envText = (env: Record<string, string>) =>
    Object.entries(env)
      .map(([k, x]) => `${k}=${x}`)
      .join(' ');
  const describe = (v: Variant) =>
    (v.tree === thisTree ? 'this tree' : v.tree) +
    (Object.keys(v.env).length ? ` with ${envText(v.env)}` : '') +
    (v.setup ? `, after \`${v.setup}\`` : '');
  if (describe(a) === describe(b))
    throw new Error('paired: B is the same as A; set PAIRED_B_TREE (another checkout), PAIRED_B_ENV or PAIRED_B_SETUP');
  if (!fs.existsSync(path.join(bTree, 'bench', 'tail.bench.ts'))) throw new Error(`paired: ${bTree} has no bench/tail.bench.ts`);
  process.stdout.write(`A: ${describe(a)}\nB: ${describe(b)}\n${PAIRS} pair(s), A B B A …\n`);

  const runs: { A: TailResult[]; B: TailResult[] } = { A: [], B: [] };
  const line = (r: TailResult) => `p50 ${r.latency_ms.p50} / p99 ${r.latency_ms.p99} ms, loop ${r.cpu_us_per_call.event_loop_thread} µs`;
  try {
    for (let i = 0; i < PAIRS; i++) {
      const order = i % 2 === 0 ? [a, b] : [b, a];
      for (const v of order) runs[v.name].push(runTail(v));
      process.stdout.write(`  pair ${i + 1}: A ${line(runs.A[i]!)}; B ${line(runs.B[i]!)}\n`);
    }
  } finally {
    setUp(a);
  }

  const traced = [...runs.A, ...runs.B].every((r) => r.block_trace);
  const comparison = [...FIGURES, ...(traced ? FLUSH_FIGURES : [])].map(([name, read]) => {
    const xa = runs.A.map(read);
    const xb = runs.B.map(read);
    const test = signedRank(xa, xb);
    return {
      figure: name,
      a_median: round2(median(xa)),
      b_median: round2(median(xb)),
      median_difference: round2(median(xb.map((x, i) => x - xa[i]!))),
      b_lower_in: xb.filter((x, i) => x < xa[i]!).length,
      p: Math.round(test.p * 1000) / 1000,
    };
  });
  const rows = comparison.map(
    (c) => `| ${c.figure} | ${c.a_median} | ${c.b_median} | ${c.median_difference} | ${c.b_lower_in} of ${PAIRS} | ${c.p} |`,
  );
  const errors = [...runs.A, ...runs.B].reduce((s, r) => s + r.errors, 0);
  process.stdout.write(
    [
      '',
      '| figure | A median | B median | median of B − A | B lower in | p (signed rank) |',
      '| --- | --- | --- | --- | --- | --- |',
      ...rows,
      `(errors in all runs: ${errors}; a p above 0.05 means this many pairs cannot tell the difference from the machine's noise)`,
    ].join('\n') + '\n',
  );
  return { a: describe(a), b: describe(b), pairs: PAIRS, comparison, runs };
}
