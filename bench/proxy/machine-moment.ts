/**
 * The machine's moment, in prices that no code of ours is in: on this shared VM the Node floor's
 * CPU per call has ranged from 37 to 372 µs between runs, and every figure of a run moves with it.
 * This says which prices moved. A short Node script, pinned to the core it is asked about, times:
 *
 * - `computeNs`: one step of a plain integer loop (the core's speed for JavaScript that stays in
 *   the JIT's code: no system call, no wake-up);
 * - `syscallUs`: one `fs.fstatSync` of /dev/null (a system call and back, through Node's binding);
 * - `wakeUs`: what a wake-up from idle adds to the CPU time charged for a fixed piece of work,
 *   when that work is done 1,000 times a second on a timer instead of back to back. On this VM an
 *   idle virtual CPU halts, and both the halt and the wake-up go through the hypervisor; the time
 *   that costs is charged to the guest's thread. A call at a fixed rate pays it whenever the core
 *   went idle before it, which is much of why a call costs 2-3× at 1,000 req/s what it costs at
 *   saturation (docs/performance.md);
 * - `roundTripUs`: one message to a worker thread and its answer, both threads on that core (the
 *   shape of Countersign's hand-off to its writer thread: two switches, and no halt, since one of
 *   the two threads always runs).
 *
 * On 2026-11-28 the proxy core read, at a slow moment (14:25-14:28 UTC, six probes), a loop step
 * of 0.72-0.95 ns, a system call of 1.3-1.8 µs, a wake-up of 65-122 µs and a round trip of 42-61
 * µs; at a fast one (15:31-17:28 UTC), 0.41-0.43 ns, 0.80-0.90 µs, 24-31 µs and 25-26 µs
 * (docs/performance.md, "What a wake-up costs").
 */
import { spawn } from 'node:child_process';
import { pinned } from './children.js';

/** The prices of {@link measureMachineMoment}. */
export interface MachineMoment {
  computeNs: number;
  syscallUs: number;
  wakeUs: number;
  roundTripUs: number;
}

/** Sizes of the probe's samples; the defaults take ~5 s, {@link QUICK_PROBE} well under one. */
export interface ProbeSizes {
  loopSteps: number;
  syscalls: number;
  pacedUnits: number;
  roundTrips: number;
}

const FULL_PROBE: ProbeSizes = { loopSteps: 2e8, syscalls: 2e5, pacedUnits: 3000, roundTrips: 2000 };
/** Small samples, for the tests and BENCH_QUICK runs: the figures are rough. */
export const QUICK_PROBE: ProbeSizes = { loopSteps: 2e6, syscalls: 2e3, pacedUnits: 50, roundTrips: 50 };

/**
 * The probe's script, run with `node --input-type=module -e`: it prints one JSON line. The paced
 * part runs a unit of 20,000 loop steps (8-19 µs, as fast as the core is) on a timer due every
 * millisecond; its CPU per unit minus the same unit's back to back is the wake-up's price.
 */
function probeScript(s: ProbeSizes): string {
  return `
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
const cpu = () => { const u = process.cpuUsage(); return u.user + u.system; };
// In a function, so that the JIT compiles it as a whole (a loop at module scope runs slower).
const loop = (n) => { let y = 0; for (let i = 0; i < n; i++) y = (y + i * 7) | 0; return y; };
const unit = () => loop(20000);
let x = loop(1e5), t = performance.now();
x ^= loop(${s.loopSteps});
const computeNs = ((performance.now() - t) * 1e6) / ${s.loopSteps};
const fd = fs.openSync('/dev/null', 'r');
t = performance.now();
for (let i = 0; i < ${s.syscalls}; i++) fs.fstatSync(fd);
const syscallUs = ((performance.now() - t) * 1e3) / ${s.syscalls};
for (let i = 0; i < 2000; i++) x ^= unit();
let c = cpu();
for (let i = 0; i < ${s.pacedUnits * 4}; i++) x ^= unit();
const backToBack = (cpu() - c) / ${s.pacedUnits * 4};
c = cpu();
await new Promise((done) => {
  const start = performance.now(); let n = 0;
  const tick = () => { x ^= unit(); if (++n >= ${s.pacedUnits}) return done(); setTimeout(tick, Math.max(0, start + n - performance.now())); };
  tick();
});
const wakeUs = (cpu() - c) / ${s.pacedUnits} - backToBack;
// The worker is CommonJS: without execArgv of its own it would inherit --input-type=module.
const w = new Worker("require('node:worker_threads').parentPort.on('message', (m) => require('node:worker_threads').parentPort.postMessage(m))", { eval: true, execArgv: [] });
await new Promise((r) => w.once('online', r));
const ask = (i) => new Promise((r) => { w.once('message', r); w.postMessage(i); });
for (let i = 0; i < 100; i++) await ask(i);
t = performance.now();
for (let i = 0; i < ${s.roundTrips}; i++) await ask(i);
const roundTripUs = ((performance.now() - t) * 1e3) / ${s.roundTrips};
await w.terminate();
console.log(JSON.stringify({ computeNs, syscallUs, wakeUs, roundTripUs, x }));
`;
}

/**
 * Runs the probe on `core` (unpinned where `taskset` is missing), with {@link QUICK_PROBE}'s
 * samples in a BENCH_QUICK run unless told otherwise.
 */
export async function measureMachineMoment(
  core: string,
  sizes: ProbeSizes = process.env.BENCH_QUICK === '1' ? QUICK_PROBE : FULL_PROBE,
): Promise<MachineMoment> {
  const [cmd, args] = pinned(core, process.execPath, ['--input-type=module', '-e', probeScript(sizes)]);
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((resolve, reject) => child.once('error', reject).once('close', resolve));
  if (code !== 0) throw new Error(`the machine-moment probe exited with ${code}: ${out}`);
  const { computeNs, syscallUs, wakeUs, roundTripUs } = JSON.parse(out.trim().split('\n').pop()!) as MachineMoment;
  return { computeNs, syscallUs, wakeUs, roundTripUs };
}

/** One line for a benchmark's report. */
export function formatMoment(m: MachineMoment): string {
  return (
    `loop step ${m.computeNs.toFixed(2)} ns, system call ${m.syscallUs.toFixed(2)} µs, ` +
    `wake-up from idle ${m.wakeUs.toFixed(0)} µs of CPU, thread round trip ${m.roundTripUs.toFixed(0)} µs`
  );
}
