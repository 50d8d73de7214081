/**
 * Where the proxy's tail latency comes from: one Countersign process (SQLite, or PostgreSQL with
 * TAIL_STORE=postgres and DATABASE_URL) pinned to the proxy core like in the proxy benchmark,
 * driven open loop at one fixed rate, every request's due time and latency kept, while the
 * process logs its own GC pauses and event-loop stalls (bench/proxy/stall-log.ts). Reports the
 * latency percentiles; how many slow requests (over 5 ms) were in flight during a pause or stall
 * of 10 ms or more; GC pauses by kind; and the CPU per call of each of the process's threads
 * (the event loop's and the rest: writer, checkpoints, GC helpers).
 *
 * Slow requests' onsets are charged to the events they overlap (bench/proxy/tail-attribution.ts).
 *
 * Run: `npm run bench -- tail` (about half a minute). Knobs: TAIL_RATE (default 1000 req/s),
 * TAIL_SECONDS (default 15), TAIL_WARMUP (seconds at the rate before measuring, default 10:
 * V8 optimizes for the first ~5,000 calls; twentieth session),
 * TAIL_STORE (sqlite | postgres), TAIL_DOOR=forward (forward mode instead of `POST /v1/proxy`),
 * PROXY_BENCH_CS_FLAGS (extra Node flags for the Countersign process, e.g. `--single-threaded-gc`),
 * TAIL_DIRECT=1 (call the upstream directly, same harness: the load generator's and upstream's own tail), TAIL_TARGET=floor
 * (the bare Node.js proxy in Countersign's place: the floor's CPU per call at this rate), TAIL_PROOF=1
 * (every call asks for a proof; the process runs the proof batcher), TAIL_DUMP=file
 * (writes the samples, the events and, with TAIL_BATCHES=1, the store's batches as JSON, for a closer look), PROXY_BENCH_SPIN=1 (see load.ts),
 * TAIL_GC_PHASES=1 (the Countersign process runs with `--trace-gc-nvp`; reports what its scavenges
 * spend their pauses on, bench/proxy/scavenge-phases.ts), TAIL_SEND_PATH=1 (traces the event
 * loop's socket writes for a few seconds mid-run with `perf`: how long each took in the kernel,
 * by whether the load core was idle, bench/proxy/send-path.ts), TAIL_PROFILE=1 (samples the event
 * loop with `perf record -g` for a few seconds mid-run, the process under `--perf-basic-prof`, and
 * charges each sample to a part of the call: bench/proxy/loop-profile.ts), TAIL_BATCHES=1 (the store writer's
 * batches: queue, backend time, rows, and those of the slow requests, bench/proxy/store-batches.ts),
 * TAIL_WRITEBACK=1 (traces the disk's requests for the whole run with `perf`: when the kernel's
 * flusher wrote dirty pages back, the slow onsets during it, and the disk's cache flushes during
 * and after it against the others, bench/proxy/writeback-trace.ts).
 * On a local PostgreSQL it also reports what the database's backends spent per call. Before the
 * run it probes the proxy core's prices (bench/proxy/machine-moment.ts) and reports a bound on
 * what the call's wake-ups cost at that moment, and after it the share of each core's time the
 * hypervisor took during the measured seconds (steal, bench/proxy/steal.ts).
 * Countersign and the floor run as built unless PROXY_BENCH_FROM=src (bench/proxy/built.ts).
 * The stall log preloaded into them ticks every 5 ms and watches GC: it costs the event loop
 * ~10-30 µs per call at 1,000 req/s, so the CPU figures here are a little above the proxy
 * benchmark's, which runs without it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshDatabaseOffCore } from './proxy/pin-postgres.js';
import { formatMoment, measureMachineMoment } from './proxy/machine-moment.js';
import { coreTicks, formatSteal, stealPercent } from './proxy/steal.js';
import { CORES, COUNTERSIGN_FLAGS, pinSelf, startRole, threadCounters, type Child } from './proxy/children.js';
import { clientFor, forwardDoorCall, openLoop, pctMs, plainJsonCall, proxyDoorCall, REQUEST_BODY, type CallSpec } from './proxy/load.js';
import { describeScavengePhases, scavengePhases } from './proxy/scavenge-phases.js';
import { canTraceSendPath, describeSendPath, sendPathReport, traceSendPath } from './proxy/send-path.js';
import { canProfileLoop, describeLoopProfile, loopProfileReport, recordLoop } from './proxy/loop-profile.js';
import { batchReport, describeBatches, readBatches, watchPostgresBackends } from './proxy/store-batches.js';
import { attributeOnsets, type TailEvent } from './proxy/tail-attribution.js';
import { canTraceWriteback, describeBlockTrace, traceWriteback, writebackEvents } from './proxy/writeback-trace.js';

const RATE = Number(process.env.TAIL_RATE ?? 1000);
const SECONDS = Number(process.env.TAIL_SECONDS ?? (process.env.BENCH_QUICK === '1' ? 3 : 15));
const STORE = process.env.TAIL_STORE === 'postgres' ? 'postgres' : 'sqlite';
const DIRECT = process.env.TAIL_DIRECT === '1';
// TAIL_TARGET=floor: the Node floor (bench/proxy/node-floor.ts) in Countersign's place, same core,
// same harness: what a bare Node.js proxy costs per call at this rate.
const FLOOR = process.env.TAIL_TARGET === 'floor';
// TAIL_PROOF=1: every call asks for a proof receipt, and the process runs the proof batcher
// (roles proofs, tsa, ledger: embedded TSA and ledger), so each 5-s window's claim is in the run.
const PROOF = process.env.TAIL_PROOF === '1';
const GC_PHASES = process.env.TAIL_GC_PHASES === '1';
const SEND_PATH = process.env.TAIL_SEND_PATH === '1';
const PROFILE = process.env.TAIL_PROFILE === '1';
const WARMUP_S = Number(process.env.TAIL_WARMUP ?? (process.env.BENCH_QUICK === '1' ? 1 : 10));
const BATCHES = process.env.TAIL_BATCHES === '1';
const WRITEBACK = process.env.TAIL_WRITEBACK === '1';
// TAIL_DOOR=forward: Countersign through forward mode (the SDK drop-in) instead of POST /v1/proxy.
const FORWARD = process.env.TAIL_DOOR === 'forward';
const SLOW_MS = 5;
const BIG_EVENT_MS = 10;
const stallLog = path.join(path.dirname(fileURLToPath(import.meta.url)), 'proxy', 'stall-log.ts');

const round1 = (ms: number) => Math.round(ms * 10) / 10;

/** The `/v1/proxy` call with `requestProof: true` when TAIL_PROOF is set. */
function proofAsked(call: CallSpec): CallSpec {
  if (!PROOF) return call;
  return { ...call, body: JSON.stringify({ ...(JSON.parse(call.body as string) as object), requestProof: true }) };
}

/** Runs the study; prints and returns its figures. */
export default async function tailBench(): Promise<Record<string, unknown>> {
  if (STORE === 'postgres' && !process.env.DATABASE_URL) throw new Error('TAIL_STORE=postgres needs DATABASE_URL');
  if (SEND_PATH && !canTraceSendPath())
    throw new Error('TAIL_SEND_PATH=1 needs perf (linux-perf) and permission to trace (root, or perf_event_paranoid -1)');
  if (PROFILE && !canProfileLoop())
    throw new Error('TAIL_PROFILE=1 needs perf (linux-perf) and permission to record (root, or perf_event_paranoid -1)');
  if (WRITEBACK && !canTraceWriteback())
    throw new Error('TAIL_WRITEBACK=1 needs perf (linux-perf) and permission to trace (root, or perf_event_paranoid -1)');
  pinSelf();
  // The proxy core's prices (machine-moment.ts), before anything runs on it.
  const moment = await measureMachineMoment(CORES.proxy);
  const children: Child[] = [];
  const stallFile = path.join(os.tmpdir(), `proxy-tail-${process.pid}.jsonl`);
  const batchFile = path.join(os.tmpdir(), `proxy-tail-batches-${process.pid}.jsonl`);
  const db = STORE === 'postgres' ? await freshDatabaseOffCore(process.env.DATABASE_URL!, CORES.load) : undefined;
  try {
    const upstream = await startRole('upstream', 'upstream', CORES.load);
    children.push(upstream);
    const env: Record<string, string> = { PROXY_BENCH_UPSTREAM: upstream.info.url!, PROXY_BENCH_STALL_FILE: stallFile };
    if (db) env.PROXY_BENCH_DATABASE_URL = db.url;
    if (BATCHES) env.PROXY_BENCH_BATCH_FILE = batchFile;
    if (PROOF) env.PROXY_BENCH_ROLES = 'ingest,management,proofs,tsa,ledger';
    const cs = FLOOR
      ? await startRole('floor', 'floor', CORES.proxy, env, [...(PROFILE ? ['--perf-basic-prof'] : []), '--import', stallLog])
      : await startRole('countersign', 'countersign', CORES.proxy, env, [
          ...COUNTERSIGN_FLAGS,
          ...(GC_PHASES ? ['--trace-gc-nvp'] : []),
          ...(PROFILE ? ['--perf-basic-prof'] : []),
          '--import',
          stallLog,
        ]);
    children.push(cs);
    const spec = DIRECT
      ? plainJsonCall(upstream.info.url!)
      : FLOOR
        ? plainJsonCall(cs.info.url!)
        : FORWARD
          ? forwardDoorCall(cs.info.url!, cs.info.apiKey!, 'tail-key', '/json', REQUEST_BODY)
          : proofAsked(proxyDoorCall(cs.info.url!, cs.info.apiKey!, 'tail-key', upstream.info.url + '/json'));
    const pool = clientFor(spec);
    await openLoop(pool, spec, RATE, WARMUP_S); // JIT, pools, pages
    const pid = cs.proc.pid!;
    const from = Date.now();
    const cpu0 = threadCounters(pid);
    const ticks0 = coreTicks();
    const database = db?.pinned ? await watchPostgresBackends(db.url) : undefined;
    const traceFrom = cs.output().length;
    const samples: Array<[number, number]> = [];
    // The send-path trace covers a few seconds from a third of the run on, once pools are warm.
    const traceSeconds = Math.max(1, Math.min(3, Math.floor(SECONDS / 3)));
    let trace: Promise<string | undefined> | undefined;
    const traceTimer = SEND_PATH ? setTimeout(() => (trace = traceSendPath(traceSeconds, CORES.load)), (SECONDS * 1000) / 3) : undefined;
    let profiling: Promise<string | undefined> | undefined;
    const profileTimer = PROFILE
      ? setTimeout(() => (profiling = recordLoop(pid, traceSeconds, CORES.load)), (SECONDS * 1000) / 3)
      : undefined;
    // The write-back trace spans the whole run and a second past it (its answers' completions).
    const writeback = WRITEBACK ? traceWriteback(SECONDS + 1, CORES.load) : undefined;
    const run = await openLoop(pool, spec, RATE, SECONDS, (due, us) => samples.push([due, us / 1000]));
    clearTimeout(traceTimer);
    clearTimeout(profileTimer);
    const cpu1 = threadCounters(pid);
    const steal = stealPercent(ticks0, coreTicks(), CORES);
    const databaseCost = database?.stop(run.ok);
    const traced = await trace;
    const sendPath = traced ? sendPathReport(traced, pid, CORES.load, traceSeconds, RATE * traceSeconds) : undefined;
    const profiled = await profiling;
    const loopProfile = profiled ? loopProfileReport(profiled, traceSeconds) : undefined;
    const scavenges = GC_PHASES ? scavengePhases(cs.output().slice(traceFrom)) : undefined;
    await pool.close();
    if (BATCHES) await new Promise((r) => setTimeout(r, 300)); // the stall log writes its batches five times a second
    const batchEvents = BATCHES ? readBatches(batchFile, from) : undefined;
    const batches = batchEvents ? batchReport(batchEvents, samples, SLOW_MS) : undefined;

    const blocks = await writeback;
    const events: TailEvent[] = fs
      .readFileSync(stallFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as TailEvent)
      .filter((e) => e.at >= from)
      .concat(writebackEvents(blocks));
    const big = events.filter((e) => e.what !== 'writeback' && e.ms >= BIG_EVENT_MS);
    if (process.env.TAIL_DUMP) fs.writeFileSync(process.env.TAIL_DUMP, JSON.stringify({ samples, events, batches: batchEvents }));
    const onsets = attributeOnsets(samples, events, SLOW_MS);
    const checkpoints: Record<string, { count: number; p50_ms: number; max_ms: number }> = {};
    for (const kind of new Set(events.filter((e) => e.what === 'checkpoint').map((e) => e.kind!))) {
      const ms = events
        .filter((e) => e.what === 'checkpoint' && e.kind === kind)
        .map((e) => e.ms)
        .sort((a, b) => a - b);
      checkpoints[kind] = { count: ms.length, p50_ms: round1(ms[ms.length >> 1]!), max_ms: round1(ms[ms.length - 1]!) };
    }
    // Each writer's closing pass is followed by a commit that restarts the WAL, so the frames it
    // found are the frames written since the previous one: their sum is what the run wrote.
    const walFrames = events
      .filter((e) => e.what === 'checkpoint' && e.kind?.startsWith('writer'))
      .reduce((a, e) => a + (e.frames ?? 0), 0);
    const slow = samples.filter(([, ms]) => ms > SLOW_MS);
    // In flight during a big pause or stall: the event started before the answer came back and ended after the request was due.
    const nearBig = slow.filter(([due, ms]) => big.some((e) => e.at <= due + ms && e.at + e.ms >= due)).length;
    const gc: Record<string, { count: number; total_ms: number; max_ms: number }> = {};
    for (const e of events.filter((x) => x.what === 'gc')) {
      const g = (gc[e.kind!] ??= { count: 0, total_ms: 0, max_ms: 0 });
      g.count++;
      g.total_ms = Math.round((g.total_ms + e.ms) * 10) / 10;
      g.max_ms = Math.max(g.max_ms, Math.round(e.ms * 10) / 10);
    }
    const stalls = events.filter((e) => e.what === 'stall');
    const perCall = (s: number) => Math.round((s / Math.max(1, run.ok)) * 1e6);
    // Per thread: the event loop, then the others by their names (the store's threads name
    // themselves, e.g. cs-sqlite-write; Node's own are all "node", summed): CPU seconds and
    // wake-ups (sleeps ended) over the run. On these VMs a wake-up costs tens of µs.
    const used: Record<string, { cpu: number; wakeUps: number }> = {};
    for (const [tid, t] of cpu1) {
      const before = cpu0.get(tid) ?? { cpuSeconds: 0, wakeUps: 0 };
      const row = (used[tid === pid ? 'event loop' : t.name] ??= { cpu: 0, wakeUps: 0 });
      row.cpu += t.cpuSeconds - before.cpuSeconds;
      row.wakeUps += t.wakeUps - before.wakeUps;
    }
    const mainCpu = used['event loop']?.cpu ?? 0;
    const others = Object.values(used).reduce((a, r) => a + r.cpu, 0) - mainCpu;
    const threads = Object.fromEntries(
      Object.entries(used).map(([name, r]) => [
        name,
        { cpu_us: perCall(r.cpu), wake_ups: Math.round((r.wakeUps / Math.max(1, run.ok)) * 100) / 100 },
      ]),
    );
    // A bound on what the call's wake-ups cost: each priced as a wake-up from idle (the probe's).
    // Those woken by another thread of the process while the core was busy cost less (the probe's
    // round trip), so the true figure is below this one.
    const wakeUpsPerCall = Object.values(threads).reduce((a, t) => a + t.wake_ups, 0);
    const out = {
      store: DIRECT ? 'direct' : FLOOR ? 'floor' : STORE,
      rate: RATE,
      seconds: SECONDS,
      countersign_node_flags: COUNTERSIGN_FLAGS,
      answered: run.ok,
      errors: run.errors,
      latency_ms: {
        p50: pctMs(run.total, 50),
        p90: pctMs(run.total, 90),
        p99: pctMs(run.total, 99),
        p999: pctMs(run.total, 99.9),
        max: pctMs(run.total, 100),
      },
      slow_requests: slow.length,
      slow_in_flight_during_big_pause: nearBig,
      slow_onsets: onsets,
      gc_pauses: gc,
      checkpoints,
      wal_frames_per_call: Math.round((walFrames / Math.max(1, run.ok)) * 10) / 10,
      event_loop_stalls: {
        count: stalls.length,
        total_ms: Math.round(stalls.reduce((a, e) => a + e.ms, 0)),
        max_ms: Math.round(Math.max(0, ...stalls.map((e) => e.ms)) * 10) / 10,
      },
      scavenge_phases: scavenges,
      cpu_us_per_call: {
        event_loop_thread: perCall(mainCpu),
        other_threads: perCall(others),
        share_of_core: Math.round(((mainCpu + others) / SECONDS) * 100) / 100,
      },
      per_call_by_thread: threads,
      machine_moment: moment,
      steal_percent: steal,
      wake_ups_per_call: Math.round(wakeUpsPerCall * 100) / 100,
      database_backends_per_call: databaseCost,
      store_batches: batches,
      send_path: sendPath,
      loop_profile: loopProfile,
      block_trace: blocks,
    };
    const l = out.latency_ms;
    process.stdout.write(
      [
        `${DIRECT ? 'Direct call (no proxy)' : FLOOR ? 'Node floor' : `Countersign ${STORE}${FORWARD ? ' (forward mode)' : ''}${db?.pinned ? ' (PostgreSQL on the load core)' : ''}`}, ${RATE} req/s for ${SECONDS} s${COUNTERSIGN_FLAGS.length ? ` (${COUNTERSIGN_FLAGS.join(' ')})` : ''}: p50 ${l.p50} / p90 ${l.p90} / p99 ${l.p99} / p99.9 ${l.p999} / max ${l.max} ms, ${run.errors} errors`,
        `slow (> ${SLOW_MS} ms): ${slow.length}; of them in flight during a GC pause or loop stall of ${BIG_EVENT_MS} ms or more: ${nearBig}`,
        `slow onsets (stalls): ${onsets.onsets}; overlapping ${Object.entries(onsets.by)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')}; none of these ${onsets.unexplained}`,
        `checkpoints: ${Object.entries(checkpoints)
          .map(([k, c]) => `${k} ${c.count}× (p50 ${c.p50_ms} ms, max ${c.max_ms})`)
          .join('; ')}${walFrames > 0 ? `; WAL frames per call ${out.wal_frames_per_call}` : ''}`,
        `GC pauses: ${Object.entries(gc)
          .map(([k, g]) => `${k} ${g.count}× (total ${g.total_ms} ms, max ${g.max_ms})`)
          .join('; ')}`,
        `event-loop stalls ≥ 5 ms: ${out.event_loop_stalls.count} (total ${out.event_loop_stalls.total_ms} ms, max ${out.event_loop_stalls.max_ms} ms)`,
        `CPU per call: event-loop thread ${out.cpu_us_per_call.event_loop_thread} µs, other threads ${out.cpu_us_per_call.other_threads} µs; ${out.cpu_us_per_call.share_of_core} of the core`,
        `per call, by thread (CPU µs, wake-ups): ${Object.entries(threads)
          .filter(([, t]) => t.cpu_us > 0 || t.wake_ups >= 0.01)
          .map(([name, t]) => `${name} ${t.cpu_us} µs, ${t.wake_ups}`)
          .join('; ')}`,
        `taken by the hypervisor during the measured seconds (steal): ${formatSteal(steal)}`,
        `the proxy core's prices: ${formatMoment(moment)}; so the call's ${out.wake_ups_per_call} wake-ups, each at that price, ≤ ${Math.round(wakeUpsPerCall * moment.wakeUs)} µs of its ${out.cpu_us_per_call.event_loop_thread + out.cpu_us_per_call.other_threads}`,
        ...(databaseCost
          ? [`PostgreSQL's backends (load core), per call: CPU ${databaseCost.cpu_us} µs, waiting for the core ${databaseCost.wait_us} µs`]
          : []),
        ...(batches ? [describeBatches(batches, run.ok)] : BATCHES ? ['store batches: none published'] : []),
        ...(scavenges ? [describeScavengePhases(scavenges)] : []),
        ...(blocks ? [describeBlockTrace(blocks, from)] : WRITEBACK ? ['kernel write-back: the perf trace did not run'] : []),
        ...(sendPath ? [describeSendPath(sendPath)] : SEND_PATH ? ['socket writes: the perf trace did not run'] : []),
        ...(loopProfile
          ? [describeLoopProfile(loopProfile, out.cpu_us_per_call.event_loop_thread)]
          : PROFILE
            ? ['event loop profile: perf did not run']
            : []),
      ].join('\n') + '\n',
    );
    return out;
  } finally {
    for (const c of children.reverse()) await c.stop().catch(() => undefined);
    await db?.drop();
    fs.rmSync(stallFile, { force: true });
    fs.rmSync(batchFile, { force: true });
  }
}
