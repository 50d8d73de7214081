/**
 * The load balancer of the fleet test: Debian's nginx running `deploy/nginx/countersign.conf`
 * (the file operators deploy, placeholders filled in) in a private prefix, in the foreground,
 * with TLS from a throwaway self-signed certificate made by openssl.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { tempDir } from '../helpers/server.js';

/** Debian's nginx binary. */
export const NGINX = '/usr/sbin/nginx';
const TEMPLATE = fileURLToPath(new URL('../../../../deploy/nginx/countersign.conf', import.meta.url));

/** Whether the test can run: skip without nginx, unless CI requires it (then fail). */
export function nginxMissing(): { skip: string | false; fail?: string } {
  if (fs.existsSync(NGINX)) return { skip: false };
  if (process.env.COUNTERSIGN_REQUIRE_NGINX === '1')
    return { skip: false, fail: `COUNTERSIGN_REQUIRE_NGINX=1 but ${NGINX} is missing: apt-get install -y nginx` };
  return { skip: `${NGINX} is missing (apt-get install -y nginx; CI sets COUNTERSIGN_REQUIRE_NGINX=1)` };
}

/** A free TCP port on loopback (bound, then released). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A running balancer. */
export interface Balancer {
  url: string;
  /** A dispatcher that trusts the balancer's certificate. */
  dispatcher: Agent;
  proc: ChildProcess;
  stop: () => Promise<void>;
}

/** Renders the deploy template for `instances` (host:port) and starts nginx on `port` (default: a free one). */
export async function startBalancer(instances: string[], port?: number): Promise<Balancer> {
  const prefix = tempDir('cs-nginx-');
  fs.chmodSync(prefix, 0o755);
  const cert = path.join(prefix, 'cert.pem');
  const key = path.join(prefix, 'key.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert,
  ], { stdio: 'ignore' }); // prettier-ignore
  port ??= await freePort();
  const values: Record<string, string> = {
    NGINX_USER: process.getuid?.() === 0 ? 'root' : (process.env.USER ?? 'nobody'),
    PREFIX: prefix,
    LISTEN: `127.0.0.1:${port}`,
    TLS_CERT: cert,
    TLS_KEY: key,
    UPSTREAM_SERVERS: instances.map((i) => `server ${i} max_fails=1 fail_timeout=2s;`).join('\n    '),
  };
  // Placeholders are filled outside comments (the header comment names them all), like envsubst would.
  const conf = fs
    .readFileSync(TEMPLATE, 'utf8')
    .split('\n')
    .map((line) =>
      line.trimStart().startsWith('#')
        ? line
        : line.replace(/\$\{([A-Z_]+)\}/g, (_, name: string) => {
            if (!(name in values)) throw new Error(`deploy/nginx/countersign.conf: no value for \${${name}}`);
            return values[name]!;
          }),
    )
    .join('\n');
  const confFile = path.join(prefix, 'nginx.conf');
  fs.writeFileSync(confFile, conf);
  // The configuration must pass nginx's own check before it runs.
  execFileSync(NGINX, ['-t', '-q', '-p', prefix, '-c', confFile, '-e', 'stderr'], { stdio: 'pipe' });
  const proc = spawn(NGINX, ['-p', prefix, '-c', confFile, '-e', 'stderr', '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const dispatcher = new Agent({ connect: { ca: fs.readFileSync(cert, 'utf8') }, connections: 64 });
  const url = `https://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
    try {
      const r = await request(url + '/healthz', { dispatcher });
      await r.body.text();
      if (r.statusCode === 200) break;
    } catch {
      /* not up yet */
    }
    if (i > 100) throw new Error(`nginx did not answer /healthz: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const stop = async () => {
    await dispatcher.close().catch(() => undefined);
    if (proc.exitCode !== null) return;
    const gone = new Promise<void>((r) => proc.once('exit', () => r()));
    proc.kill('SIGQUIT');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  };
  return { url, dispatcher, proc, stop };
}
