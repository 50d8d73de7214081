/**
 * The kernel's write-back of dirty pages, laid beside the tail (`TAIL_WRITEBACK=1` in the tail
 * benchmark): when the kernel's flusher threads wrote pages out, how much, which slow requests
 * were in flight meanwhile, and how long the disk's cache flushes took during and after it.
 *
 * Why: on PostgreSQL the proxy's slow calls came in bursts 5 or ~30 s apart, on no timer of ours
 * (docs/performance-log.md, fifteenth session). Linux writes back every 5 s
 * (`vm.dirty_writeback_centisecs`) the pages dirty for more than 30 s (`vm.dirty_expire_centisecs`),
 * all at once; every commit ends in a cache flush (PostgreSQL's WAL `fdatasync`, SQLite's
 * `fsync`), and a flush that follows such a burst waits until the burst is on stable storage.
 * This records every block request on every core for the whole run (`perf record -a`,
 * tracepoints `block:block_rq_issue` and `block:block_rq_complete`, on CLOCK_MONOTONIC so that
 * the times line up with the load generator's) and groups the writes the flusher threads issued
 * (`kworker`, asynchronous: not a process's own synchronous write) into bursts: a burst ends when
 * no such write was issued for {@link GAP_S}, and lasts until its last request completed.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { canPerfRecord, perfRecord } from './perf-record.js';
import { quantile } from './report.js';
import type { TailEvent } from './tail-attribution.js';

const EVENTS = 'block:block_rq_issue,block:block_rq_complete';
/** Flusher writes further apart than this belong to different bursts, s. */
const GAP_S = 0.2;
/** Bursts smaller than this are left out (a few pages of a log file), bytes. */
const MIN_BURST_BYTES = 1 << 20;
/** A cache flush issued this long after a burst ended still counts as "during" it, s. */
const AFTER_BURST_S = 1;

/** `perf record` of every core, stamped on CLOCK_MONOTONIC (the clock `process.hrtime` reads). */
const RECORD_ALL = ['-a', '-k', 'CLOCK_MONOTONIC'];

/** True when `perf` may open the block tracepoints (root, or a low perf_event_paranoid). */
export function canTraceWriteback(): boolean {
  return canPerfRecord([...RECORD_ALL, '-e', 'block:block_rq_issue']);
}

/**
 * Records every core's block requests for `seconds` (perf on `loadCore`), then reads the trace.
 * Resolves with what it says, or undefined when perf could not run.
 */
export async function traceWriteback(seconds: number, loadCore: string): Promise<BlockTrace | undefined> {
  const epochOffsetMs = Date.now() - Number(process.hrtime.bigint()) / 1e6;
  const file = await perfRecord('writeback', [...RECORD_ALL, '-e', EVENTS], seconds, loadCore);
  return file ? readBlockTrace(file, epochOffsetMs) : undefined;
}

/** One burst of the flusher's writes. */
export interface WritebackBurst {
  /** Epoch ms of its first write request. */
  at: number;
  /** Until its last write request completed, ms. */
  ms: number;
  bytes: number;
}

/** Cache-flush durations (issue to the next flush completed), ms. */
export interface FlushTimes {
  n: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

/** What the trace says. */
export interface BlockTrace {
  /** The flusher's bursts of at least {@link MIN_BURST_BYTES}. */
  bursts: WritebackBurst[];
  /** Every flush of the run. */
  flushes: FlushTimes;
  /** Flushes issued during a burst or within {@link AFTER_BURST_S} after it. */
  flushesDuringBursts: FlushTimes;
  flushesOtherwise: FlushTimes;
}

/** Reads the trace (and removes it). */
function readBlockTrace(file: string, epochOffsetMs: number): BlockTrace {
  const script = spawnSync('perf', ['script', '-i', file, '-F', 'comm,time,event,trace'], { encoding: 'utf8', maxBuffer: 1 << 30 });
  fs.rmSync(file, { force: true });
  return blockTraceOf(script.stdout, epochOffsetMs);
}

/**
 * What the text of `perf script -F comm,time,event,trace` over the block tracepoints says, times
 * moved from CLOCK_MONOTONIC seconds to epoch ms by `epochOffsetMs`.
 */
export function blockTraceOf(perfScript: string, epochOffsetMs: number): BlockTrace {
  const flusherWrites = new Map<string, number>(); // "sector+count" of a request in flight → its burst's index
  const all: Array<{ first: number; lastIssue: number; lastDone: number; bytes: number }> = [];
  const flushIssued: number[] = [];
  const flushDone: number[] = [];
  for (const line of perfScript.split('\n')) {
    // "kworker/1:1H-kb  2532.205321:  block:block_rq_issue: 254,0 W 4194304 () 58007552 + 8192 …"
    // "node  2306.671818:  block:block_rq_complete: 254,0 W () 62659352 + 320 …" (a completion
    // runs in whatever context the interrupt found)
    const m = /^\s*(\S+)\s+([\d.]+):\s+block:block_rq_(issue|complete): \S+ (\S+) (?:(\d+) )?\(\) (\d+) \+ (\d+)/.exec(line);
    if (!m) continue;
    const [, comm, time, what, rwbs, bytes, sector, count] = m;
    const t = Number(time);
    if (rwbs === 'FF') {
      (what === 'issue' ? flushIssued : flushDone).push(t);
      continue;
    }
    if (!rwbs!.includes('W') || rwbs!.includes('S')) continue; // writes, not a process's own synchronous ones
    const key = `${sector}+${count}`;
    if (what === 'issue') {
      if (!comm!.startsWith('kworker')) continue;
      let last = all[all.length - 1];
      if (!last || t - last.lastIssue > GAP_S) all.push((last = { first: t, lastIssue: t, lastDone: t, bytes: 0 }));
      last.lastIssue = t;
      last.bytes += Number(bytes);
      flusherWrites.set(key, all.length - 1);
    } else {
      const k = flusherWrites.get(key);
      if (k === undefined) continue;
      flusherWrites.delete(key);
      all[k]!.lastDone = Math.max(all[k]!.lastDone, t);
    }
  }
  const big = all
    .filter((b) => b.bytes >= MIN_BURST_BYTES)
    .map((b) => ({ from: b.first, to: Math.max(b.lastIssue, b.lastDone), bytes: b.bytes }));
  // The block layer merges flushes that wait together into one, so a flush's time is from its
  // issue to the next flush completed.
  const during: number[] = [];
  const otherwise: number[] = [];
  let next = 0;
  for (const issued of flushIssued) {
    while (next < flushDone.length && flushDone[next]! < issued) next++;
    if (next === flushDone.length) break;
    const ms = (flushDone[next]! - issued) * 1000;
    (big.some((b) => issued >= b.from && issued <= b.to + AFTER_BURST_S) ? during : otherwise).push(ms);
  }
  return {
    bursts: big.map((b) => ({ at: b.from * 1000 + epochOffsetMs, ms: (b.to - b.from) * 1000, bytes: b.bytes })),
    flushes: flushTimes([...during, ...otherwise]),
    flushesDuringBursts: flushTimes(during),
    flushesOtherwise: flushTimes(otherwise),
  };
}

function flushTimes(ms: number[]): FlushTimes {
  const r2 = (x: number) => Math.round(x * 100) / 100;
  return {
    n: ms.length,
    p50_ms: r2(quantile(ms, 0.5)),
    p99_ms: r2(quantile(ms, 0.99)),
    max_ms: r2(quantile(ms, 1)),
  };
}

/** The bursts as events of the tail's attribution (tail-attribution.ts). */
export function writebackEvents(trace: BlockTrace | undefined): TailEvent[] {
  return (trace?.bursts ?? []).map((b) => ({ what: 'writeback', at: b.at, ms: b.ms }));
}

/** Two lines for the tail benchmark's report: the bursts, from the run's start, and the flushes. */
export function describeBlockTrace(trace: BlockTrace, runStartMs: number): string {
  const mb = (b: number) => Math.round(b / 1e5) / 10;
  const f = (t: FlushTimes) => `${t.n}, p50 ${t.p50_ms} / p99 ${t.p99_ms} / max ${t.max_ms} ms`;
  return [
    `kernel write-back bursts (≥ 1 MB): ${trace.bursts.length}` +
      trace.bursts.map((b) => `; ${Math.round((b.at - runStartMs) / 100) / 10} s: ${mb(b.bytes)} MB in ${Math.round(b.ms)} ms`).join(''),
    `disk cache flushes: ${f(trace.flushes)}; issued during a burst or ${AFTER_BURST_S} s after: ${f(trace.flushesDuringBursts)}; otherwise: ${f(trace.flushesOtherwise)}`,
  ].join('\n');
}
