/**
 * Entry point of the proxy benchmark's child processes (PROXY_BENCH_ROLE): the loopback
 * upstream, the Node floor, and Countersign (SQLite, or PostgreSQL when PROXY_BENCH_DATABASE_URL
 * is set). Each prints one JSON line describing itself on stdout, then serves until SIGTERM.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const role = process.env.PROXY_BENCH_ROLE;

if (role === 'upstream') {
  const { startUpstream } = await import('../../packages/server/test/helpers/upstreams.js');
  const up = await startUpstream({ record: false });
  process.on('SIGTERM', () => process.exit(0));
  process.stdout.write(JSON.stringify({ url: up.url, hostPort: up.hostPort }) + '\n');
} else if (role === 'floor') {
  const { startNodeFloor } = await import('./node-floor.js');
  const url = await startNodeFloor(process.env.PROXY_BENCH_UPSTREAM!);
  process.on('SIGTERM', () => process.exit(0));
  process.stdout.write(JSON.stringify({ url }) + '\n');
} else if (role === 'countersign') {
  // As `countersign serve` does before it builds the app.
  const { tuneGarbageCollectionForServing } = await import('../../packages/server/src/serving-gc.js');
  tuneGarbageCollectionForServing();
  const { buildApp } = await import('../../packages/server/src/app.js');
  const { loadConfig } = await import('../../packages/server/src/config.js');
  const { makeProjectKey } = await import('../../packages/server/test/helpers/upstreams.js');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-proxy-bench-'));
  const upstream = process.env.PROXY_BENCH_UPSTREAM!;
  const config = {
    ...loadConfig({ dataDir, port: '0', logLevel: 'silent', roles: process.env.PROXY_BENCH_ROLES ?? 'ingest,management' }, {}),
    databaseUrl: process.env.PROXY_BENCH_DATABASE_URL || undefined,
    allowTargets: [new URL(upstream).host],
    // Forward mode's name for the upstream (`/v1/forward/bench/…`), for PROXY_BENCH_DOOR=forward.
    upstreams: { bench: upstream },
  };
  const app = await buildApp(config);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const { apiKey } = await makeProjectKey(app, 'agent');
  const { closeOnSigterm } = await import('./close-on-sigterm.js');
  closeOnSigterm(app, dataDir);
  process.stdout.write(JSON.stringify({ url, apiKey, dataDir }) + '\n');
}
