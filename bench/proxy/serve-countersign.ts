/**
 * A benchmark's Countersign process (built-roles.ts from the build, as the benchmarks run it;
 * roles.ts from the sources through tsx with PROXY_BENCH_FROM=src): the server's modules come
 * from the caller, so both start it the same way: tuned as `countersign serve` tunes it, one
 * project and agent key, one JSON line on stdout once it serves, and on SIGTERM the app closed
 * and its data directory removed.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

type ServingGc = typeof import('../../packages/server/src/serving-gc.js');
type AppModule = typeof import('../../packages/server/src/app.js');
type ConfigModule = typeof import('../../packages/server/src/config.js');
type IssueModule = typeof import('../../packages/server/src/projects/issue.js');

/** The server's modules, from src or from dist. */
export interface ServerModules {
  gc: ServingGc;
  app: AppModule;
  config: ConfigModule;
  issue: IssueModule;
}

/** Where the process proxies to, and what it runs. */
export interface ServeOptions {
  upstream: string;
  /** PostgreSQL instead of the embedded SQLite. */
  databaseUrl?: string;
  /** COUNTERSIGN_ROLES (default ingest,management). */
  roles?: string;
}

/** This process's COUNTERSIGN_* variables: the server's settings (config.ts). */
function serverSettings(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('COUNTERSIGN_')));
}

/** Starts Countersign, prints `{url, apiKey, dataDir}` once it listens, and serves until SIGTERM. */
export async function serveCountersign(m: ServerModules, o: ServeOptions): Promise<void> {
  // As `countersign serve` does before it builds the app.
  m.gc.tuneGarbageCollectionForServing();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-bench-'));
  const app = await m.app.buildApp({
    // The server's own settings (COUNTERSIGN_*) pass through, to compare one against another
    // (e.g. COUNTERSIGN_NATIVE_SEAL=off); the benchmark's flags win over them.
    ...m.config.loadConfig({ dataDir, port: '0', logLevel: 'silent', roles: o.roles ?? 'ingest,management' }, serverSettings()),
    databaseUrl: o.databaseUrl || undefined,
    allowTargets: [new URL(o.upstream).host],
    // Forward mode's name for the upstream (`/v1/forward/bench/…`), for PROXY_BENCH_DOOR=forward.
    upstreams: { bench: o.upstream },
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const now = Date.now();
  const project = m.issue.newProject('benchmark', now);
  const key = m.issue.issueKey(project.id, 'agent', null, now);
  await app.ctx.store.projects.createWithKey(project, key.row);
  process.on('SIGTERM', () => {
    void app
      .close()
      .catch(() => undefined)
      .finally(() => {
        fs.rmSync(dataDir, { recursive: true, force: true });
        process.exit(0);
      });
  });
  process.stdout.write(JSON.stringify({ url, apiKey: key.apiKey, dataDir }) + '\n');
}
