/**
 * The processes of the proxy benchmark, each pinned to a core with `taskset`: the upstream and
 * this load generator on the load core, every proxy under test (Node floor, nginx, Countersign)
 * on the proxy core, so that each proxy's figures are what one core does. Plus what is read
 * from /proc about them (CPU time of all threads, RSS).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVING_NODE_FLAGS } from '../../packages/server/src/serving-gc.js';
import { BUILT_ROLES, bundled, FROM_SOURCES, THIS_DIST } from './built.js';

const rolesFile = path.join(path.dirname(fileURLToPath(import.meta.url)), 'roles.ts');

/** Cores: PROXY_BENCH_LOAD_CORE (load generator + upstream, default 0) and PROXY_BENCH_PROXY_CORE (default 1). */
export const CORES = {
  load: process.env.PROXY_BENCH_LOAD_CORE ?? '0',
  proxy: process.env.PROXY_BENCH_PROXY_CORE ?? (os.cpus().length > 1 ? '1' : '0'),
};

/** Extra Node flags for the Countersign processes (PROXY_BENCH_CS_FLAGS, space-separated). */
export const COUNTERSIGN_FLAGS = (process.env.PROXY_BENCH_CS_FLAGS ?? '').split(' ').filter(Boolean);

/** True when `taskset` is there to pin with (Linux util-linux). */
export const CAN_PIN = spawnSync('taskset', ['-V']).status === 0;

/** Pins this process (every thread) to the load core. */
export function pinSelf(): void {
  if (CAN_PIN) spawnSync('taskset', ['-a', '-p', '-c', CORES.load, String(process.pid)], { stdio: 'ignore' });
}

/** A running child and the JSON line it printed. */
export interface Child {
  name: string;
  proc: ChildProcess;
  info: Record<string, string>;
  /** Everything the process wrote to stdout so far (its first line is `info`; V8's traces follow). */
  output(): string;
  stop(): Promise<void>;
}

/** The command line that runs `command` on `core` (through `taskset`), or as it is where nothing can pin. */
export function pinned(core: string, command: string, args: string[]): [string, string[]] {
  return CAN_PIN ? ['taskset', ['-c', core, command, ...args]] : [command, args];
}

/** Starts a role of roles.ts on `core`; resolves with the JSON line it prints once ready. */
export async function startRole(
  name: string,
  role: string,
  core: string,
  env: Record<string, string> = {},
  nodeFlags: string[] = [],
): Promise<Child> {
  // Countersign starts as `npm start` starts it (packages/server/src/serving-gc.ts).
  const serving = role === 'countersign' ? SERVING_NODE_FLAGS : [];
  // Countersign and the floor run as built (built.ts); the upstream, on the load core, from the sources.
  const asBuilt = (role === 'countersign' || role === 'floor') && !FROM_SOURCES;
  const [cmd, args] = asBuilt
    ? pinned(core, process.execPath, [
        ...serving,
        // A preload given as TypeScript (the tail benchmark's stall log) is bundled like the roles.
        ...(await Promise.all(nodeFlags.map((f) => (f.endsWith('.ts') ? bundled(f) : f)))),
        await bundled(BUILT_ROLES),
      ])
    : pinned(core, process.execPath, ['--conditions=development', '--import', 'tsx', ...serving, ...nodeFlags, rolesFile]);
  const proc = spawn(cmd, args, {
    env: { ...process.env, PROXY_BENCH_DIST: THIS_DIST, ...env, PROXY_BENCH_ROLE: role },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = readyLine(proc, name);
  const info = await ready.info;
  return { name, proc, info, output: ready.output, stop: () => stopProcess(proc) };
}

/**
 * The JSON line a benchmark child prints once it serves (the first line of its stdout that starts
 * with `{`), and all it printed so far; `why` adds to the error when it exits first.
 */
export function readyLine(
  proc: ChildProcess,
  name: string,
  why: () => string = () => '',
): { info: Promise<Record<string, string>>; output: () => string } {
  let out = '';
  const info = new Promise<Record<string, string>>((resolve, reject) => {
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line) as Record<string, string>);
    });
    proc.once('exit', (code) => reject(new Error(`${name} exited with ${code}${why()}`)));
  });
  return { info, output: () => out };
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stopProcess(proc: ChildProcess, graceMs = 10_000): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** A free loopback port (bound and released: nginx cannot be told "any port"). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function waitForPort(port: number, proc: ChildProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (proc.exitCode !== null) throw new Error(`nginx exited with ${proc.exitCode}`);
    const ok = await new Promise<boolean>((r) => {
      const c = net.connect(port, '127.0.0.1', () => (c.destroy(), r(true)));
      c.on('error', () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('nginx did not start listening');
}

/** The nginx binary, when installed. */
export const NGINX = ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/bin/nginx'].find((p) => fs.existsSync(p));

/**
 * nginx as a reverse proxy in front of `upstream`: one process (`master_process off`), upstream
 * keepalive, no buffering (SSE passes event by event, as with the other proxies), no access log.
 */
export async function startNginx(upstream: string, core: string): Promise<Child> {
  if (!NGINX) throw new Error('nginx is not installed');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proxy-bench-nginx-'));
  const port = await freePort();
  const up = new URL(upstream);
  fs.writeFileSync(
    path.join(dir, 'nginx.conf'),
    `pid ${dir}/nginx.pid;
error_log ${dir}/error.log error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  upstream bench_upstream {
    server ${up.hostname}:${up.port};
    keepalive 128;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://bench_upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`,
  );
  const [cmd, args] = pinned(core, NGINX, [
    '-p',
    dir,
    '-e',
    path.join(dir, 'error.log'),
    '-c',
    path.join(dir, 'nginx.conf'),
    '-g',
    'daemon off; master_process off;',
  ]);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  await waitForPort(port, proc);
  return {
    name: 'nginx',
    proc,
    output: () => '',
    info: { url: `http://127.0.0.1:${port}` },
    stop: async () => {
      await stopProcess(proc);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** CPU seconds (user + system, every thread, live or exited) a process has used so far (Linux /proc). */
export function cpuSeconds(pid: number): number {
  return statCpuSeconds(`/proc/${pid}/stat`);
}

/**
 * {@link cpuSeconds} split into the process's own code (user) and the kernel's work for it
 * (system: its system calls, page faults, the scheduler's switches). Callgrind counts only the
 * first, so this says how much of a CPU ratio the instructions benchmark cannot see.
 */
export function cpuSplitSeconds(pid: number): { user: number; system: number } {
  return statCpuSplit(`/proc/${pid}/stat`);
}

function statCpuSeconds(file: string): number {
  const { user, system } = statCpuSplit(file);
  return user + system;
}

/** utime and stime of a /proc stat file, in seconds (they are in USER_HZ, 100, ticks). */
function statCpuSplit(file: string): { user: number; system: number } {
  const text = fs.readFileSync(file, 'utf8');
  // The fields after the command name, which may hold spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}

/** Resident set size of a process, bytes. */
export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Size of a file, 0 when absent. */
export function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

/** One thread's counters (Linux /proc): its name, CPU seconds, and how often it went to sleep and was woken again. */
export interface ThreadCounters {
  name: string;
  cpuSeconds: number;
  /** `voluntary_ctxt_switches`: each is a sleep (epoll, futex, I/O wait) followed by a wake-up. */
  wakeUps: number;
}

/** {@link ThreadCounters} of each thread of a process, by thread id. */
export function threadCounters(pid: number): Map<number, ThreadCounters> {
  const out = new Map<number, ThreadCounters>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const dir = `/proc/${pid}/task/${tid}`;
      const woke = /voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`${dir}/status`, 'utf8'));
      out.set(Number(tid), {
        name: fs.readFileSync(`${dir}/comm`, 'utf8').trim(),
        cpuSeconds: statCpuSeconds(`${dir}/stat`),
        wakeUps: woke ? Number(woke[1]) : 0,
      });
    } catch {
      /* the thread ended meanwhile */
    }
  }
  return out;
}
