/**
 * The time the hypervisor gave this VM's cores to someone else ("steal", the eighth column of
 * each core's line in /proc/stat). On the shared VMs these benchmarks run on it reached half of a
 * core's time within minutes and decided which of two interleaved runs was faster
 * (docs/performance-log.md, forty-first session), so every run reports it beside its figures.
 */
import fs from 'node:fs';

/** Per core: ticks stolen and ticks in all, as /proc/stat counts them (USER_HZ, 100 a second). */
export type CoreTicks = Map<number, { steal: number; total: number }>;

/** The counters now, or undefined where /proc/stat is missing or has no steal column. */
export function coreTicks(): CoreTicks | undefined {
  let text: string;
  try {
    text = fs.readFileSync('/proc/stat', 'utf8');
  } catch {
    return undefined;
  }
  const ticks: CoreTicks = new Map();
  for (const line of text.split('\n')) {
    const m = /^cpu(\d+) (.*)$/.exec(line);
    if (!m) continue;
    const fields = m[2]!.trim().split(/\s+/).map(Number);
    if (fields.length < 8) return undefined;
    // user nice system idle iowait irq softirq steal (guest time is already inside user).
    ticks.set(Number(m[1]), { steal: fields[7]!, total: fields.slice(0, 8).reduce((a, b) => a + b, 0) });
  }
  return ticks.size > 0 ? ticks : undefined;
}

/** Share of each named core's time that was stolen between two readings, in % (one decimal). */
export function stealPercent(
  before: CoreTicks | undefined,
  after: CoreTicks | undefined,
  cores: Record<string, string>,
): Record<string, number> {
  const out: Record<string, number> = {};
  if (!before || !after) return out;
  for (const [name, core] of Object.entries(cores)) {
    const a = before.get(Number(core));
    const b = after.get(Number(core));
    if (!a || !b || b.total <= a.total) continue;
    out[name] = Math.round((1000 * (b.steal - a.steal)) / (b.total - a.total)) / 10;
  }
  return out;
}

/** "proxy core 3.1 %, load core 12.0 %", or a note that the machine does not say. */
export function formatSteal(percent: Record<string, number>): string {
  const parts = Object.entries(percent).map(([name, p]) => `${name} core ${p.toFixed(1)} %`);
  return parts.length > 0 ? parts.join(', ') : 'not reported by this machine';
}
