/**
 * Lays the slow requests of an open-loop run beside what the process logged (bench/proxy/stall-log.ts):
 * GC pauses, event-loop stalls and SQLite checkpoints; and, when traced, the kernel's write-back
 * bursts (writeback-trace.ts). A stall of the proxy shows in the
 * latencies as an onset (a request over the slow mark right after one well under it) followed by
 * requests whose latency falls by a millisecond per millisecond: counting onsets, not slow
 * requests, counts the stalls themselves. Each onset is charged to every event that overlaps the
 * window from its due time to its answer; one that overlaps none is "unexplained" (the
 * load generator and the upstream share the other core and have stalls of their own: the
 * direct call's p99, TAIL_DIRECT=1, is that part).
 */

/** An event of the stall log. */
export interface TailEvent {
  what: 'gc' | 'stall' | 'checkpoint' | 'writeback';
  kind?: string;
  /** Epoch ms. */
  at: number;
  ms: number;
  /** A checkpoint's frames in the WAL when it ran. */
  frames?: number;
}

/** What the slow requests' onsets overlapped. */
export interface Attribution {
  onsets: number;
  /** Onsets per overlapping cause (an onset may count under several). */
  by: Record<string, number>;
  unexplained: number;
}

/** The cause name of an event: GC pauses by kind, checkpoints by thread. */
function causeOf(e: TailEvent): string {
  if (e.what === 'gc') return e.kind === 'scavenge' ? 'scavenge' : 'major GC';
  if (e.what === 'checkpoint') return `checkpoint (${e.kind?.split(' ')[0] ?? '?'})`;
  if (e.what === 'writeback') return 'kernel write-back';
  return 'event-loop stall';
}

/**
 * @param samples [due epoch ms, latency ms] per answered request, in any order.
 * @param slowMs the slow mark; an onset follows a request under half of it.
 */
export function attributeOnsets(samples: Array<[number, number]>, events: TailEvent[], slowMs: number): Attribution {
  const by: Record<string, number> = {};
  let onsets = 0;
  let unexplained = 0;
  samples = [...samples].sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < samples.length; i++) {
    const [due, ms] = samples[i]!;
    if (ms <= slowMs || samples[i - 1]![1] >= slowMs / 2) continue;
    onsets++;
    const causes = new Set(events.filter((e) => e.at <= due + ms && e.at + e.ms >= due - 1).map(causeOf));
    if (causes.size === 0) unexplained++;
    for (const c of causes) by[c] = (by[c] ?? 0) + 1;
  }
  return { onsets, by, unexplained };
}
