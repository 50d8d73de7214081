/**
 * What a scavenge (V8's young-generation collection) spends its pause on, from the lines that
 * `node --trace-gc-nvp` writes for each one (`gc=s`, then `key=value` pairs, times in ms).
 *
 * Why this exists: at 1,000 proxied calls a second a scavenge came every ~100 ms and held the
 * event loop 1.8 ms, but copying the survivors (what the pause is usually taken to be) was only
 * 0.2 ms of it; freeing the memory blocks of the typed arrays and buffers that died since the
 * previous one (`scavenge.sweep_array_buffers`) was 1.0 ms, the weak callbacks of native
 * objects (`heap.external_weak_global_handles`) 0.2 ms (docs/performance-log.md, 2026-11-27 day).
 * With `--single-threaded-gc` that sweeping happens inside the pause rather than beside it.
 */

/** Average per scavenge, ms (and KB survived). */
export interface ScavengePhases {
  scavenges: number;
  pause_ms: number;
  /** Freeing dead array buffers' backing stores. */
  array_buffer_sweep_ms: number;
  /** Weak callbacks of native objects (crypto handles, …) whose JavaScript side died. */
  external_weak_handles_ms: number;
  /** Copying the survivors. */
  copy_ms: number;
  roots_ms: number;
  survived_kb: number;
}

/** Each figure's `--trace-gc-nvp` key, and what its value is divided by (bytes to KB). */
const PHASES: Record<Exclude<keyof ScavengePhases, 'scavenges'>, [key: string, divisor: number]> = {
  pause_ms: ['pause', 1],
  array_buffer_sweep_ms: ['scavenge.sweep_array_buffers', 1],
  external_weak_handles_ms: ['heap.external_weak_global_handles', 1],
  copy_ms: ['scavenge.parallel', 1],
  roots_ms: ['scavenge.roots', 1],
  survived_kb: ['new_space_survived', 1024],
};

/** Averages the scavenges of a `--trace-gc-nvp` output; undefined when it has none. */
export function scavengePhases(traceGcNvp: string): ScavengePhases | undefined {
  const rows = traceGcNvp
    .split('\n')
    .filter((l) => /\bgc=s\b/.test(l))
    .map((l) => new Map(l.split(/\s+/).flatMap((kv) => (kv.includes('=') ? [kv.split('=', 2) as [string, string]] : []))));
  if (rows.length === 0) return undefined;
  const out = { scavenges: rows.length } as ScavengePhases;
  for (const [field, [key, divisor]] of Object.entries(PHASES) as Array<[keyof typeof PHASES, [string, number]]>) {
    const sum = rows.reduce((a, r) => a + (Number(r.get(key)) || 0), 0);
    out[field] = Math.round((sum / rows.length / divisor) * 100) / 100;
  }
  return out;
}

/** One line for a report. */
export function describeScavengePhases(p: ScavengePhases): string {
  return (
    `scavenge phases (--trace-gc-nvp, ${p.scavenges} scavenges): pause ${p.pause_ms} ms on average = ` +
    `freeing dead array buffers ${p.array_buffer_sweep_ms} + native objects' weak callbacks ${p.external_weak_handles_ms} + ` +
    `copying survivors ${p.copy_ms} + roots ${p.roots_ms} (+ the rest); ${p.survived_kb} KB survived each`
  );
}
