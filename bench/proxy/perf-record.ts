/**
 * `perf record` for the benchmarks' traces (send-path.ts, loop-profile.ts): whether it may run
 * here, and a recording of a few seconds with perf itself pinned to the load core (on the proxy's
 * core it would take the proxy's time).
 */
import { spawn, spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { pinned } from './children.js';

/** True when `perf record` with these options (events, call graphs) may run here. */
export function canPerfRecord(options: readonly string[]): boolean {
  return spawnSync('perf', ['record', '-q', '-o', '/dev/null', ...options, '--', 'true']).status === 0;
}

/**
 * Records with `options` for `seconds`, perf pinned to `loadCore`. Resolves with the data file
 * (named after `name`, in the temporary directory), or undefined when perf could not run.
 */
export function perfRecord(name: string, options: readonly string[], seconds: number, loadCore: string): Promise<string | undefined> {
  const file = path.join(os.tmpdir(), `${name}-${process.pid}-${Date.now()}.data`);
  const [cmd, args] = pinned(loadCore, 'perf', ['record', '-q', '-o', file, ...options, '--', 'sleep', String(seconds)]);
  const perf = spawn(cmd, args, { stdio: 'ignore' });
  return new Promise((resolve) => {
    perf.once('error', () => resolve(undefined));
    perf.once('exit', (code) => resolve(code === 0 ? file : undefined));
  });
}
