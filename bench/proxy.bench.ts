/**
 * The proxy's overhead, direct vs proxied, in one invocation. The loopback upstream and the
 * Countersign server (SQLite store, write-ahead on, every call recorded) each run in their own
 * child process, as in production; this process only generates load and measures:
 *
 * - 1 KB JSON at fixed rates (200 and 1,000 req/s, open loop) → added latency p50/p99 and TTFB;
 * - 1 KB JSON at saturation (closed loop, 64 in flight) → max throughput ratio;
 * - SSE, 200 events → first-event overhead and whole-stream overhead;
 * - a 20 MB body (and a 200 KB one as the small baseline) → peak RSS growth of the server process.
 *
 * Run: `npm run bench -- proxy`. The same file is the entry point of the two children
 * (PROXY_BENCH_ROLE=upstream|server).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

const self = fileURLToPath(import.meta.url);
const ROLE = process.env.PROXY_BENCH_ROLE;
const ENC = 'bench-encryption-key';
const RATE_SECONDS = Number(process.env.PROXY_BENCH_SECONDS ?? 5);

// ---------------------------------------------------------------- child roles

if (ROLE === 'upstream') {
  const { startUpstream } = await import('../packages/server/test/helpers/upstreams.js');
  const up = await startUpstream({ record: false });
  process.stdout.write(JSON.stringify({ url: up.url, hostPort: up.hostPort }) + '\n');
} else if (ROLE === 'server') {
  const { buildApp } = await import('../packages/server/src/app.js');
  const { loadConfig } = await import('../packages/server/src/config.js');
  const { makeProjectKey } = await import('../packages/server/test/helpers/upstreams.js');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-proxy-bench-'));
  const config = {
    ...loadConfig({ dataDir, port: '0', logLevel: 'silent', roles: 'ingest,management' }, {}),
    databaseUrl: undefined,
    allowTargets: [process.env.PROXY_BENCH_ALLOW!],
  };
  const app = await buildApp(config);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const { apiKey } = await makeProjectKey(app, 'agent');
  process.on('SIGTERM', () => void app.close().finally(() => process.exit(0)));
  process.stdout.write(JSON.stringify({ url, apiKey }) + '\n');
}

// ---------------------------------------------------------------- measurement helpers

interface Child {
  proc: ChildProcess;
  info: Record<string, string>;
}

async function startChild(role: string, extraEnv: Record<string, string> = {}): Promise<Child> {
  const prof =
    process.env.PROXY_BENCH_PROFILE === role ? ['--cpu-prof', '--cpu-prof-dir=' + path.join(os.tmpdir(), 'proxy-bench-prof')] : [];
  const proc = spawn(process.execPath, ['--conditions=development', '--import', 'tsx', ...prof, self], {
    env: { ...process.env, PROXY_BENCH_ROLE: role, ...extraEnv },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const info = await new Promise<Record<string, string>>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line) as Record<string, string>);
    });
    proc.on('exit', (code) => reject(new Error(`${role} exited with ${code}`)));
  });
  return { proc, info };
}

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const ms = (x: number) => Math.round(x * 1000) / 1000;

/** One call; returns [ms to response headers, ms to the end of the body]. */
type Caller = () => Promise<[number, number]>;

function caller(pool: Pool, pathName: string, headers: Record<string, string>, body: string | undefined): Caller {
  return async () => {
    const t0 = performance.now();
    const r = await pool.request({ path: pathName, method: body === undefined ? 'GET' : 'POST', headers, body });
    const t1 = performance.now();
    for await (const _ of r.body) void _;
    if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
    return [t1 - t0, performance.now() - t0];
  };
}

/** Open loop at `rate` req/s for `seconds`: sends on schedule whatever the answers do. */
async function fixedRate(call: Caller, rate: number, seconds: number): Promise<{ total: number[]; ttfb: number[]; errors: number }> {
  const total: number[] = [];
  const ttfb: number[] = [];
  let errors = 0;
  const n = rate * seconds;
  const inflight: Promise<void>[] = [];
  const start = performance.now();
  let sent = 0;
  while (sent < n) {
    const due = Math.min(n, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
    for (; sent < due; sent++) {
      inflight.push(
        call().then(
          ([h, t]) => {
            ttfb.push(h);
            total.push(t);
          },
          () => void errors++,
        ),
      );
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(inflight);
  return { total: total.sort((a, b) => a - b), ttfb: ttfb.sort((a, b) => a - b), errors };
}

/** Closed loop with `concurrency` callers for `seconds`; returns requests per second. */
async function saturate(call: Caller, concurrency: number, seconds: number): Promise<number> {
  let done = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        await call();
        done++;
      }
    }),
  );
  return done / seconds;
}

/** Time to the first SSE event and to the end of the stream, ms. */
async function sse(pool: Pool, pathName: string, headers: Record<string, string>, body: string | undefined): Promise<[number, number]> {
  const t0 = performance.now();
  const r = await pool.request({ path: pathName, method: body === undefined ? 'GET' : 'POST', headers, body });
  let first = 0;
  let seen = '';
  for await (const chunk of r.body) {
    if (first === 0) {
      seen += String(chunk);
      if (seen.includes('\n\n')) first = performance.now() - t0;
    }
  }
  return [first, performance.now() - t0];
}

// ---------------------------------------------------------------- the benchmark

/** Runs every scenario; prints a table and returns the figures. */
export default async function proxyBench(): Promise<Record<string, unknown>> {
  const upstream = await startChild('upstream');
  const server = await startChild('server', { PROXY_BENCH_ALLOW: upstream.info.hostPort! });
  const upUrl = upstream.info.url!;
  const direct = new Pool(upUrl, { connections: 128 });
  const proxied = new Pool(server.info.url!, { connections: 128 });
  const proxyHeaders = {
    authorization: `Bearer ${server.info.apiKey}`,
    'content-type': 'application/json',
    'x-service-encryption-key': ENC,
  };
  const proxyBody = (p: string) => JSON.stringify({ target: upUrl + p, payload: { model: 'm', prompt: 'hello' } });
  const json = {
    direct: caller(direct, '/json', {}, undefined),
    proxied: caller(proxied, '/v1/proxy', proxyHeaders, proxyBody('/json')),
  };
  const out: Record<string, unknown> = {};
  // Other work on the machine skews every figure; say how busy it was.
  const loadBefore = os.loadavg()[0]!;
  try {
    // Warm up both paths (JIT, pools, SQLite pages).
    await fixedRate(json.direct, 500, 2);
    await fixedRate(json.proxied, 500, 2);

    for (const rate of [200, 1000]) {
      // Warm each path up at the rate about to be measured: a step up in rate makes both pools
      // open connections and the JIT see new shapes, a one-off transient (tens of ms for the
      // first half second) that is not the steady-state overhead this scenario reports.
      await fixedRate(json.direct, rate, 2);
      await fixedRate(json.proxied, rate, 2);
      const d = await fixedRate(json.direct, rate, RATE_SECONDS);
      const p = await fixedRate(json.proxied, rate, RATE_SECONDS);
      out[`json_${rate}rps`] = {
        requests: p.total.length,
        errors: d.errors + p.errors,
        direct_p50_ms: ms(pct(d.total, 50)),
        proxied_p50_ms: ms(pct(p.total, 50)),
        added_p50_ms: ms(pct(p.total, 50) - pct(d.total, 50)),
        direct_p99_ms: ms(pct(d.total, 99)),
        proxied_p99_ms: ms(pct(p.total, 99)),
        added_p99_ms: ms(pct(p.total, 99) - pct(d.total, 99)),
        ttfb_added_p50_ms: ms(pct(p.ttfb, 50) - pct(d.ttfb, 50)),
        ttfb_added_p99_ms: ms(pct(p.ttfb, 99) - pct(d.ttfb, 99)),
      };
    }

    // CPU per call is far less sensitive than latency to other load on the machine: it is what a
    // core can do, so it bounds throughput whatever else runs.
    const upPid = upstream.proc.pid!;
    const srvPid = server.proc.pid!;
    let cpu0 = cpuSeconds(upPid);
    let t0 = performance.now();
    const directRps = await saturate(json.direct, 64, RATE_SECONDS);
    const directCpuUs = ((cpuSeconds(upPid) - cpu0) / (directRps * ((performance.now() - t0) / 1000))) * 1e6;
    cpu0 = cpuSeconds(srvPid);
    const upCpu0 = cpuSeconds(upPid);
    t0 = performance.now();
    const proxiedRps = await saturate(json.proxied, 64, RATE_SECONDS);
    const calls = proxiedRps * ((performance.now() - t0) / 1000);
    const serverCpuUs = ((cpuSeconds(srvPid) - cpu0) / calls) * 1e6;
    const upCpuUs = ((cpuSeconds(upPid) - upCpu0) / calls) * 1e6;
    out.json_saturation = {
      direct_rps: Math.round(directRps),
      proxied_rps: Math.round(proxiedRps),
      throughput_ratio: ms(proxiedRps / directRps),
      upstream_cpu_us_per_call: Math.round(directCpuUs),
      proxy_server_cpu_us_per_call: Math.round(serverCpuUs),
      upstream_cpu_us_per_proxied_call: Math.round(upCpuUs),
      proxy_calls_per_cpu_second: Math.round(1e6 / serverCpuUs),
    };

    // One call at a time: no queueing, so the difference is the proxy's own path.
    const seq = async (call: Caller, n: number) => {
      const total: number[] = [];
      for (let i = 0; i < n; i++) total.push((await call())[1]);
      return total.sort((a, b) => a - b);
    };
    const sd = await seq(json.direct, 1000);
    const sp = await seq(json.proxied, 1000);
    out.json_sequential = {
      direct_p50_ms: ms(pct(sd, 50)),
      proxied_p50_ms: ms(pct(sp, 50)),
      added_min_ms: ms(sp[0]! - sd[0]!),
      added_p50_ms: ms(pct(sp, 50) - pct(sd, 50)),
      added_p99_ms: ms(pct(sp, 99) - pct(sd, 99)),
    };

    const sseRuns = 40;
    const ssed: Array<[number, number]> = [];
    const ssep: Array<[number, number]> = [];
    for (let i = 0; i < sseRuns; i++) {
      ssed.push(await sse(direct, '/sse?n=200', {}, undefined));
      ssep.push(await sse(proxied, '/v1/proxy', proxyHeaders, proxyBody('/sse?n=200')));
    }
    const col = (runs: Array<[number, number]>, i: 0 | 1) => runs.map((r) => r[i]).sort((a, b) => a - b);
    out.sse_200_events = {
      runs: sseRuns,
      first_event_direct_p50_ms: ms(pct(col(ssed, 0), 50)),
      first_event_proxied_p50_ms: ms(pct(col(ssep, 0), 50)),
      first_event_added_min_ms: ms(col(ssep, 0)[0]! - col(ssed, 0)[0]!),
      first_event_added_p50_ms: ms(pct(col(ssep, 0), 50) - pct(col(ssed, 0), 50)),
      first_event_added_p99_ms: ms(pct(col(ssep, 0), 99) - pct(col(ssed, 0), 99)),
      whole_stream_added_p50_ms: ms(pct(col(ssep, 1), 50) - pct(col(ssed, 1), 50)),
    };

    const pid = srvPid;
    const memory = async (bytes: number, times: number) => {
      const before = rssBytes(pid);
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 5);
      const t0 = performance.now();
      for (let i = 0; i < times; i++) await caller(proxied, '/v1/proxy', proxyHeaders, proxyBody(`/big?bytes=${bytes}`))();
      const seconds = (performance.now() - t0) / 1000;
      clearInterval(sampler);
      return {
        rssBeforeMiB: before / 2 ** 20,
        peakGrowthMiB: (peak - before) / 2 ** 20,
        mibPerSecond: (bytes * times) / 2 ** 20 / seconds,
      };
    };
    // Above 2 MB the record keeps a 2 MB capture whatever the size, so flat memory means the
    // 20 MB body grows the server no more than a 3 MB one does.
    const small = await memory(200 * 1024, 5);
    const capped = await memory(3 * 1024 * 1024, 5);
    const big = await memory(20 * 1024 * 1024, 5);
    t0 = performance.now();
    for (let i = 0; i < 5; i++) await caller(direct, `/big?bytes=${20 * 1024 * 1024}`, {}, undefined)();
    const directMiBs = (5 * 20) / ((performance.now() - t0) / 1000);
    out.body_20mb = {
      server_rss_before_mib: ms(big.rssBeforeMiB),
      peak_rss_growth_200kb_mib: ms(small.peakGrowthMiB),
      peak_rss_growth_3mb_mib: ms(capped.peakGrowthMiB),
      peak_rss_growth_20mb_mib: ms(big.peakGrowthMiB),
      proxied_mib_per_s: ms(big.mibPerSecond),
      direct_mib_per_s: ms(directMiBs),
    };
    out.machine = { cpus: os.cpus().length, load_1min_before: ms(loadBefore), load_1min_after: ms(os.loadavg()[0]!) };
  } finally {
    await direct.close();
    await proxied.close();
    server.proc.kill('SIGTERM');
    upstream.proc.kill('SIGTERM');
  }

  for (const [name, figures] of Object.entries(out)) {
    process.stdout.write(`\n${name}\n`);
    for (const [k, v] of Object.entries(figures as Record<string, unknown>)) process.stdout.write(`  ${k.padEnd(30)} ${String(v)}\n`);
  }
  return out;
}

if (ROLE === undefined && process.argv[1] === self) {
  await proxyBench();
  process.exit(0);
}
