/**
 * Preloaded (`--import`) into a process under the tail benchmark (bench/tail.bench.ts): writes
 * one JSON line per GC pause of at least 1 ms, per event-loop stall of at least 5 ms and per
 * SQLite checkpoint (the store publishes them on a diagnostics channel), with its wall-clock
 * start (epoch ms), to PROXY_BENCH_STALL_FILE, so that slow requests can be laid beside what the
 * process was doing when they were due. With PROXY_BENCH_BATCH_FILE it also writes every batch
 * the store's writer settled (store-batches.ts), gathered and written five times a second rather
 * than one write each: there are over a thousand a second.
 */
import { subscribe } from 'node:diagnostics_channel';
import fs from 'node:fs';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { CHECKPOINT_CHANNEL, STORE_BATCH_CHANNEL } from '../../packages/server/src/store/diagnostics-channels.js';
import type { CheckpointEvent } from '../../packages/server/src/store/sqlite-checkpointer.js';

const file = process.env.PROXY_BENCH_STALL_FILE;
const TICK_MS = 5;

if (file) {
  const origin = performance.timeOrigin;
  const kinds: Record<number, string> = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
    [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak-callbacks',
  };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.duration < 1) continue;
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? 0;
      const name = kinds[kind] ?? String(kind);
      // The old generation's size after a major GC says how much a full mark has to walk.
      const heap = name === 'scavenge' ? {} : { heapMB: Math.round(process.memoryUsage().heapUsed / 1e6) };
      fs.appendFileSync(file, JSON.stringify({ what: 'gc', kind: name, at: origin + e.startTime, ms: e.duration, ...heap }) + '\n');
    }
  }).observe({ entryTypes: ['gc'] });
  subscribe(CHECKPOINT_CHANNEL, (m) => {
    const e = m as CheckpointEvent;
    if (!e.busy)
      fs.appendFileSync(
        file,
        JSON.stringify({ what: 'checkpoint', kind: `${e.by} ${e.mode}`, at: e.at, ms: e.ms, frames: e.log, copied: e.copied }) + '\n',
      );
  });
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    const late = now - last - TICK_MS;
    if (late >= 5) fs.appendFileSync(file, JSON.stringify({ what: 'stall', at: origin + last, ms: late }) + '\n');
    last = now;
  }, TICK_MS).unref();
}

const batchFile = process.env.PROXY_BENCH_BATCH_FILE;
if (batchFile) {
  let lines: string[] = [];
  subscribe(STORE_BATCH_CHANNEL, (e) => lines.push(JSON.stringify(e)));
  setInterval(() => {
    if (lines.length === 0) return;
    fs.appendFileSync(batchFile, lines.join('\n') + '\n');
    lines = [];
  }, 200).unref();
}
