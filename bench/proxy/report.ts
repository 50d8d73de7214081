/**
 * Figures of the proxy benchmark: per target and scenario, the median over rounds; latency
 * added over the direct call of the same round; ratios to the Node floor and to nginx; and the
 * printed table.
 */
import type { LatencyFigures } from './load.js';

/** What one target measured in one round of one fixed rate. */
export interface RateFigures extends LatencyFigures {
  ttfb_p50_ms: number;
  added_p50_ms: number;
  added_p99_ms: number;
  achieved_rps: number;
  errors: number;
  /** CPU of the measured process per call over the run (the proxy; for `direct`, the upstream). */
  cpu_us_per_call: number;
}

/** Saturation with a fixed number of connections, closed loop. */
export interface SaturationFigures {
  rps: number;
  errors: number;
  cpu_us_per_call: number;
  /** The kernel's part of `cpu_us_per_call` (system time: system calls, faults, switches). */
  system_us_per_call: number;
  /** Share of one core the measured process used during the run. */
  cpu_cores: number;
}

/** SSE: time to the first event and to the end of the stream. */
export interface SseFigures {
  runs: number;
  errors: number;
  first_p50_ms: number;
  first_p99_ms: number;
  first_added_p50_ms: number;
  first_added_p99_ms: number;
  whole_added_p50_ms: number;
}

/** Everything one target measured (medians over rounds). */
export interface TargetFigures {
  label: string;
  rates: Record<string, RateFigures>;
  saturation?: SaturationFigures;
  sse?: SseFigures;
  /** Countersign on SQLite: the -wal file. */
  wal?: { peak_mib: number; end_mib: number; after_idle_mib: number; db_mib: number };
  /** Each round's fixed-rate figures, in order (the medians above are taken over these). */
  rounds?: Array<Record<string, RateFigures>>;
}

/** The `q` quantile (0-1) of `values` in any order, by the nearest rank below; 0 when there are none. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;
}

const r3 = (x: number) => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : x);

/** Median of each numeric field over rounds (rounds have the same shape). */
export function medianOf<T extends object>(rounds: T[]): T {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(rounds[0]!)) {
    const values = rounds.map((r) => (r as Record<string, unknown>)[k]);
    if (typeof values[0] !== 'number') {
      out[k] = values[0];
      continue;
    }
    const sorted = (values as number[]).filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
    out[k] = sorted.length === 0 ? NaN : r3(sorted[Math.floor((sorted.length - 1) / 2)]!);
  }
  return out as T;
}

/** Ratios of each target's figures to a reference target's (a ratio of added latency, throughput, CPU). */
export function ratios(all: Record<string, TargetFigures>, ref: string): Record<string, Record<string, number>> {
  const base = all[ref];
  if (!base) return {};
  const out: Record<string, Record<string, number>> = {};
  const div = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || b === 0 ? NaN : r3(a / b));
  for (const [name, t] of Object.entries(all)) {
    if (name === 'direct' || name === ref) continue;
    const row: Record<string, number> = {};
    for (const rate of Object.keys(t.rates)) {
      row[`added_p50_${rate}`] = div(t.rates[rate]?.added_p50_ms, base.rates[rate]?.added_p50_ms);
      row[`added_p99_${rate}`] = div(t.rates[rate]?.added_p99_ms, base.rates[rate]?.added_p99_ms);
      row[`cpu_per_call_${rate}`] = div(t.rates[rate]?.cpu_us_per_call, base.rates[rate]?.cpu_us_per_call);
    }
    row.saturation_throughput = div(t.saturation?.rps, base.saturation?.rps);
    row.saturation_cpu_per_call = div(t.saturation?.cpu_us_per_call, base.saturation?.cpu_us_per_call);
    row.saturation_user_cpu_per_call = div(userUs(t.saturation), userUs(base.saturation));
    row.sse_first_added_p50 = div(t.sse?.first_added_p50_ms, base.sse?.first_added_p50_ms);
    out[name] = row;
  }
  return out;
}

/** CPU µs per call in the process's own code (what callgrind counts); undefined without a run. */
function userUs(s: SaturationFigures | undefined): number | undefined {
  return s === undefined ? undefined : s.cpu_us_per_call - s.system_us_per_call;
}

function cell(v: number | undefined, digits = 2): string {
  if (v === undefined || Number.isNaN(v)) return '–';
  return v.toFixed(digits);
}

/** The table printed at the end of a run. */
export function table(all: Record<string, TargetFigures>, rates: number[], connections: number): string {
  const head = [
    'target',
    ...rates.map((r) => `${r}/s +p50/+p99 ms`),
    `sat ${connections}c req/s`,
    'CPU µs/call (sat; kernel)',
    'SSE 1st +p50 ms',
    'WAL MiB peak/end',
  ];
  const rows = Object.entries(all).map(([name, t]) => [
    name === 'direct' ? 'direct (absolute)' : t.label,
    ...rates.map((r) => {
      const f = t.rates[String(r)];
      if (!f) return '–';
      const [a, b] = name === 'direct' ? [f.p50_ms, f.p99_ms] : [f.added_p50_ms, f.added_p99_ms];
      return `${cell(a)} / ${cell(b)}${f.errors > 0 ? ` (${f.errors} err)` : ''}`;
    }),
    t.saturation ? String(Math.round(t.saturation.rps)) : '–',
    t.saturation ? `${Math.round(t.saturation.cpu_us_per_call)}; ${cell(t.saturation.system_us_per_call, 0)}` : '–',
    t.sse ? cell(name === 'direct' ? t.sse.first_p50_ms : t.sse.first_added_p50_ms) : '–',
    t.wal ? `${cell(t.wal.peak_mib, 1)}/${cell(t.wal.end_mib, 1)}` : '',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => '| ' + cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** The ratio block printed under the table. */
export function ratioLines(rel: Record<string, Record<string, number>>, refLabel: string): string {
  return Object.entries(rel)
    .map(
      ([name, r]) =>
        `${name} / ${refLabel}: added p50@1000 ×${cell(r.added_p50_1000)}, p99@1000 ×${cell(r.added_p99_1000)}, ` +
        `throughput ×${cell(r.saturation_throughput)}, CPU/call ×${cell(r.saturation_cpu_per_call)} (without the kernel's ×${cell(r.saturation_user_cpu_per_call)}), SSE first ×${cell(r.sse_first_added_p50)}`,
    )
    .join('\n');
}

/**
 * The spread behind the medians: each round's added p50 / p99 at `rate`, per target. On a shared
 * VM one round can differ from the next by more than a change under test; read a verdict with it.
 */
export function roundLines(all: Record<string, TargetFigures>, rate: number): string {
  return Object.entries(all)
    .filter(([name, t]) => name !== 'direct' && t.rounds && t.rounds.length > 1)
    .map(([, t]) => {
      const each = t.rounds!.map((r) => r[String(rate)]).map((f) => (f ? `${cell(f.added_p50_ms)} / ${cell(f.added_p99_ms)}` : '–'));
      return `${t.label}, added p50 / p99 at ${rate}/s by round: ${each.join('; ')} ms`;
    })
    .join('\n');
}
