/**
 * `countersign serve` in a child process (the real CLI on the TypeScript sources), for tests
 * that need a whole server process: its RSS, its event loop under attack, kill -9.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tempDir } from './server.js';

const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'index.ts');

/** A running child server. */
export interface ChildServer {
  proc: ChildProcess;
  url: string;
  /** SIGTERM, then SIGKILL after 5 s; resolves when the process is gone. */
  stop: () => Promise<void>;
}

/**
 * Starts `countersign serve --port 0` on SQLite in a fresh data dir with the default budgets
 * (inherited `COUNTERSIGN_MAX_INFLIGHT*` and `DATABASE_URL` are dropped), `env` added, and
 * `args` appended; resolves with its URL once it listens.
 */
export async function serveChild(masterKey: string, args: string[], env: Record<string, string> = {}): Promise<ChildServer> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, COUNTERSIGN_MASTER_KEY: masterKey, COUNTERSIGN_LOG_LEVEL: 'silent' };
  for (const k of Object.keys(childEnv)) if (k.startsWith('COUNTERSIGN_MAX_INFLIGHT') || k === 'DATABASE_URL') delete childEnv[k];
  Object.assign(childEnv, env);
  const argv = [
    '--conditions=development',
    '--import',
    'tsx',
    cli,
    'serve',
    '--port',
    '0',
    '--data-dir',
    tempDir(),
    '--log-level',
    'silent',
  ];
  const proc = spawn(process.execPath, [...argv, ...args], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    proc.on('exit', (code) => reject(new Error(`countersign serve exited with ${code}: ${err || out}`)));
  });
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise<void>((r) => proc.once('exit', () => r()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  };
  return { proc, url, stop };
}

/** Resident set size of a process, MB (Linux /proc). */
export function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) / 1024;
}
