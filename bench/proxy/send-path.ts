/**
 * How long the proxy's socket writes take inside the kernel (`TAIL_SEND_PATH=1` in the tail
 * benchmark), told apart by what the load core was doing when each began.
 *
 * A write on loopback runs the receiver's TCP input on the writer's core and wakes the reader,
 * here the upstream or the load generator on the other core: on these VMs that wake-up is an
 * interrupt sent through the hypervisor, and it is most of the write's time. Countersign's writes
 * measured ~3× the Node floor's for the same bytes to the same peer, whether the load core was
 * running a task or idle (docs/performance-log.md, "2026-11-27 (fifth session)"). This records the
 * `writev` system calls of the proxy's event loop and the scheduler's switches on every core with
 * `perf record` (tracepoints; needs `perf` and permission to trace), then pairs each call's entry
 * and exit and looks up whether the load core was idle at its entry.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { canPerfRecord, perfRecord } from './perf-record.js';
import { quantile } from './report.js';

/** Duration figures of one group of writes, µs. */
export interface WriteTimes {
  n: number;
  mean_us: number;
  p50_us: number;
  p90_us: number;
}

/** What {@link sendPathReport} returns. */
export interface SendPathReport {
  seconds: number;
  writes_per_call: number;
  all: WriteTimes;
  load_core_busy: WriteTimes;
  load_core_idle: WriteTimes;
}

const EVENTS = 'sched:sched_switch,syscalls:sys_enter_writev,syscalls:sys_exit_writev';

/** True when `perf` is installed and may open the tracepoints (root, or a low perf_event_paranoid). */
export function canTraceSendPath(): boolean {
  return canPerfRecord(['-e', 'syscalls:sys_enter_writev']);
}

/** Runs `perf record` of every core for `seconds` (perf on `loadCore`). Resolves with the data file, or undefined. */
export function traceSendPath(seconds: number, loadCore: string): Promise<string | undefined> {
  return perfRecord('send-path', ['-a', '-e', EVENTS], seconds, loadCore);
}

function times(us: number[]): WriteTimes {
  const r1 = (x: number) => Math.round(x * 10) / 10;
  const mean = us.length ? us.reduce((a, b) => a + b, 0) / us.length : 0;
  return { n: us.length, mean_us: r1(mean), p50_us: r1(quantile(us, 0.5)), p90_us: r1(quantile(us, 0.9)) };
}

/**
 * Reads the trace: the `writev` calls of thread `tid` (the proxy's event loop), each with whether
 * `loadCore` was running a task (anything but the idle task) when it began. `calls` is the number
 * of proxied calls the trace spans, for writes per call. The data file is removed.
 */
export function sendPathReport(file: string, tid: number, loadCore: string, seconds: number, calls: number): SendPathReport {
  const script = spawnSync('perf', ['script', '-i', file, '-F', 'tid,cpu,time,event,trace'], { encoding: 'utf8', maxBuffer: 1 << 30 });
  fs.rmSync(file, { force: true });
  const running = new Map<number, string>(); // core → pid on it ('0': idle)
  const load = Number(loadCore);
  const me = String(tid);
  let entered: { at: number; loadIdle: boolean } | undefined;
  const busy: number[] = [];
  const idle: number[] = [];
  for (const line of script.stdout.split('\n')) {
    const m = /^\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$/.exec(line);
    if (!m) continue;
    const [, who, core, time, event, trace] = m;
    if (event === 'sched:sched_switch') {
      running.set(Number(core), /next_pid=(\d+)/.exec(trace!)?.[1] ?? '?');
    } else if (who === me && event === 'syscalls:sys_enter_writev') {
      entered = { at: Number(time), loadIdle: running.get(load) === '0' };
    } else if (who === me && event === 'syscalls:sys_exit_writev' && entered) {
      (entered.loadIdle ? idle : busy).push((Number(time) - entered.at) * 1e6);
      entered = undefined;
    }
  }
  const n = busy.length + idle.length;
  return {
    seconds,
    writes_per_call: Math.round((n / Math.max(1, calls)) * 100) / 100,
    all: times([...busy, ...idle]),
    load_core_busy: times(busy),
    load_core_idle: times(idle),
  };
}

/** One line for the tail benchmark's report. */
export function describeSendPath(r: SendPathReport): string {
  const t = (w: WriteTimes) => `${w.n} writes, mean ${w.mean_us} / p50 ${w.p50_us} / p90 ${w.p90_us} µs`;
  return (
    `socket writes (writev) of the event loop, ${r.seconds} s traced: ${r.writes_per_call} per call; all ${t(r.all)}; ` +
    `load core running a task: ${t(r.load_core_busy)}; load core idle: ${t(r.load_core_idle)}`
  );
}
