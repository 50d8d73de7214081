/**
 * `npm run bench -- sse-phases`: where the time to a stream's first event goes when the server is
 * idle, step by step inside the proxy (issue 10's "SSE first event" goal). The direct call, the
 * Node floor and Countersign (SQLite; SSE_PHASES_STORE=postgres with DATABASE_URL: PostgreSQL)
 * are called in turn, one stream at a time (50 events, as the proxy benchmark's SSE scenario),
 * on the proxy benchmark's cores; the floor and Countersign run with the phase probe preloaded
 * (bench/proxy/sse-phases-probe.ts: diagnostics channels only, nothing patched), which stamps
 * each call's steps from the request's head to the destination's first bytes.
 *
 * Reported: the caller's time to the first event for each target (p50, p90) and, for the floor
 * and Countersign, the CPU per stream of the process (all threads; the whole stream, its record
 * included), the median of each phase, and of the two stretches outside the probe's window:
 * from the caller's send until the server has the request's head, and from the destination's first
 * bytes in until the caller has the event (the caller's side, the sockets, the proxy's write). Those
 * two compare the caller's clock with the proxy's: both are epochs of one host, whose difference
 * moves time from one stretch to the other but not their sum. The destination runs on the caller's
 * core, and a burst of events after the first can keep the caller waiting on the run queue, which
 * the last stretch shows (docs/performance.md); so the default stream's destination writes the 49
 * events after the first together, and SSE_PHASES_STREAM=/sse?n=50 measures with the burst.
 *
 * Knobs: SSE_PHASES_CALLS (default 400 per target), SSE_PHASES_WARM (warm-up calls per target,
 * default 2,000 of one event each, then 30 of the measured stream), SSE_PHASES_DOOR=forward
 * (forward mode instead of `POST /v1/proxy`), SSE_PHASES_STORE=postgres, SSE_PHASES_STREAM (the
 * upstream's path, default `/sse?n=50&rest=together`; e.g. `/sse?n=3&delay=5` for a destination
 * that idles after its first event, `/llm-stream/chat/completions?n=500` for an OpenAI chat
 * stream, asked for with a POST as an SDK does), PROXY_BENCH_CS_FLAGS (extra Node flags for
 * Countersign, e.g. `--perf-basic-prof` to profile it), BENCH_QUICK=1 (40 calls). About a minute.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshDatabaseOffCore } from './proxy/pin-postgres.js';
import { CORES, COUNTERSIGN_FLAGS, cpuSeconds, pinSelf, startRole, type Child } from './proxy/children.js';
import { clientFor, FIRST_EVENT_STREAM, forwardDoorCall, proxyDoorCall, sseStream, type CallSpec } from './proxy/load.js';
import { medianMs, medianPhases, medianToFirstChunk, percentileMs, type PhaseStamps } from './proxy/sse-phases-probe.js';

const QUICK = process.env.BENCH_QUICK === '1';
const CALLS = Number(process.env.SSE_PHASES_CALLS ?? (QUICK ? 40 : 400));
/**
 * Warm-up streams per target before the measured ones, with the stream cut to one event (then 30
 * of the measured stream). V8 in every process here (the caller's, the destination's and both
 * proxies') is still optimizing for the first few thousand calls: after 30 calls an idle call's
 * first event took 2-3 times as long as after 3,000, the direct call's too (twentieth session).
 */
const WARM = Number(process.env.SSE_PHASES_WARM ?? (QUICK ? 5 : 2000));
const FORWARD = process.env.SSE_PHASES_DOOR === 'forward';
const POSTGRES = process.env.SSE_PHASES_STORE === 'postgres';
const STREAM = process.env.SSE_PHASES_STREAM ?? FIRST_EVENT_STREAM;
/** A chat stream (`/llm-stream/chat/completions?n=`) is asked for as an SDK does: a POST with a chat body. */
const CHAT_BODY = /\/chat\/completions\b/.test(STREAM)
  ? JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hello' }] })
  : undefined;

/** The stream asked of `origin` directly (the destination itself, or the floor that passes it on). */
function plainStreamCall(origin: string): CallSpec {
  if (CHAT_BODY === undefined) return { origin, path: STREAM, method: 'GET', headers: {} };
  return { origin, path: STREAM, method: 'POST', headers: { 'content-type': 'application/json' }, body: CHAT_BODY };
}
const ENC = 'bench-encryption-key';
const probe = path.join(path.dirname(fileURLToPath(import.meta.url)), 'proxy', 'sse-phases-probe.ts');

/** One target: its SSE call and, for a proxy, the file its probe writes. */
interface Target {
  name: string;
  call: CallSpec;
  phasesFile?: string;
  /** The proxy's process, whose CPU per stream is reported. */
  pid?: number;
}

/** Reads a probe's file: one call's stamps per line. */
function readStamps(file: string): PhaseStamps[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as PhaseStamps);
}

export default async function ssePhases(): Promise<Record<string, unknown>> {
  if (POSTGRES && !process.env.DATABASE_URL) throw new Error('SSE_PHASES_STORE=postgres needs DATABASE_URL');
  pinSelf();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sse-phases-'));
  const children: Child[] = [];
  const drops: Array<() => Promise<void>> = [];
  try {
    const upstream = await startRole('upstream', 'upstream', CORES.load);
    children.push(upstream);
    const upUrl = upstream.info.url!;
    const phasesFileOf = (name: string) => path.join(dir, `${name}.jsonl`);
    const withProbe = (name: string) => ({ PROXY_BENCH_UPSTREAM: upUrl, PROXY_BENCH_PHASES_FILE: phasesFileOf(name) });
    const floor = await startRole('floor', 'floor', CORES.proxy, withProbe('floor'), ['--import', probe]);
    children.push(floor);
    let database: Record<string, string> = {};
    if (POSTGRES) {
      const db = await freshDatabaseOffCore(process.env.DATABASE_URL!, CORES.load);
      drops.push(db.drop);
      database = { PROXY_BENCH_DATABASE_URL: db.url };
    }
    const cs = await startRole('countersign', 'countersign', CORES.proxy, { ...withProbe('countersign'), ...database }, [
      ...COUNTERSIGN_FLAGS,
      '--import',
      probe,
    ]);
    children.push(cs);
    const csUrl = cs.info.url!;
    const targets: Target[] = [
      { name: 'direct', call: plainStreamCall(upUrl) },
      {
        name: 'floor',
        call: plainStreamCall(floor.info.url!),
        phasesFile: phasesFileOf('floor'),
        pid: floor.proc.pid!,
      },
      {
        name: 'countersign',
        call: FORWARD
          ? forwardDoorCall(csUrl, cs.info.apiKey!, ENC, STREAM, CHAT_BODY)
          : proxyDoorCall(csUrl, cs.info.apiKey!, ENC, upUrl + STREAM),
        phasesFile: phasesFileOf('countersign'),
        pid: cs.proc.pid!,
      },
    ];
    const pools = targets.map((t) => clientFor(t.call));
    process.stdout.write(
      `${CALLS} streams per target, one at a time, in turn; Countersign on ${POSTGRES ? 'PostgreSQL' : 'SQLite'} through ${FORWARD ? 'forward mode' : '/v1/proxy'}\n`,
    );
    // The stream's length is its `n=`: in the path, or in `/v1/proxy`'s body (the target).
    const cut = (text: string) => text.replace(/([?&]n=)\d+/, (_, head: string) => head + '1');
    const oneEvent = (c: CallSpec): CallSpec => ({ ...c, path: cut(c.path), ...(c.body === undefined ? {} : { body: cut(c.body) }) });
    const warmCalls = targets.map((t) => oneEvent(t.call));
    for (let i = 0; i < WARM; i++) for (const [j, call] of warmCalls.entries()) await sseStream(pools[j]!, call);
    for (let i = 0; i < Math.min(WARM, 30); i++) for (const [j, t] of targets.entries()) await sseStream(pools[j]!, t.call);
    for (const t of targets) if (t.phasesFile) fs.rmSync(t.phasesFile, { force: true });
    const streams = targets.map(() => [] as Array<{ sentAt: number; firstAt: number } | undefined>);
    // Each proxy's CPU (all its threads) over the measured streams: the whole stream's cost, its
    // events and its record included, at one stream at a time.
    const cpuBefore = targets.map((t) => (t.pid ? cpuSeconds(t.pid) : 0));
    for (let i = 0; i < CALLS; i++)
      for (const [j, t] of targets.entries()) streams[j]!.push(await sseStream(pools[j]!, t.call).catch(() => undefined));
    const cpuPerStreamUs = targets.map((t, j) => (t.pid ? Math.round(((cpuSeconds(t.pid) - cpuBefore[j]!) * 1e6) / CALLS) : NaN));
    const errors = streams.flat().filter((x) => x === undefined).length;
    const out: Record<string, unknown> = {
      calls: CALLS,
      door: FORWARD ? 'forward' : 'proxy',
      store: POSTGRES ? 'postgres' : 'sqlite',
      errors,
    };
    for (const [j, t] of targets.entries()) {
      const ok = streams[j]!.filter((x) => x !== undefined);
      const xs = ok.map((x) => x.firstAt - x.sentAt);
      const q = (p: number) => percentileMs(xs, p);
      const stamps = t.phasesFile ? readStamps(t.phasesFile) : [];
      const phases = medianPhases(stamps);
      const inside = medianToFirstChunk(stamps);
      // Outside the probe's window, by the two processes' clocks (one host; their epochs may differ
      // by a few µs, which moves time between the two figures but not their sum): the caller's
      // request until the server has its head, and the first bytes until the caller has the event.
      const paired = stamps.length === CALLS && ok.length === CALLS;
      const before = paired ? medianMs(stamps.map((c, i) => c.request! - streams[j]![i]!.sentAt)) : NaN;
      const afterward = paired ? medianMs(stamps.map((c, i) => streams[j]![i]!.firstAt - (c.firstChunk ?? NaN))) : NaN;
      out[t.name] = {
        first_event_p50_ms: q(0.5),
        first_event_p90_ms: q(0.9),
        ...(t.phasesFile
          ? { inside_p50_ms: inside, before_head_p50_ms: before, after_first_bytes_p50_ms: afterward, cpu_us_per_stream: cpuPerStreamUs[j] }
          : {}),
        phases,
      };
      process.stdout.write(`${t.name}: first event p50 ${q(0.5)} ms, p90 ${q(0.9)} ms\n`);
      if (!t.phasesFile) continue;
      process.stdout.write(`  ${before.toFixed(3)} ms  until the server has the request's head\n`);
      for (const p of phases) process.stdout.write(`  ${p.median_ms.toFixed(3)} ms  ${p.phase}: ${p.what} (${p.calls} calls)\n`);
      process.stdout.write(`  ${afterward.toFixed(3)} ms  from the first bytes in to the caller's first event\n`);
      process.stdout.write(`  (from the head to the first bytes in: ${inside} ms)\n`);
      process.stdout.write(`  CPU per stream, all its threads: ${cpuPerStreamUs[j]} µs\n`);
    }
    if (errors > 0) process.stdout.write(`errors: ${errors}\n`);
    return out;
  } finally {
    for (const c of children.reverse()) await c.stop();
    for (const d of drops) await d();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
