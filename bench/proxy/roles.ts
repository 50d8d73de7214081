/**
 * Entry point of the proxy benchmark's child processes (PROXY_BENCH_ROLE) from the sources
 * through tsx: the loopback upstream always; the Node floor and Countersign (SQLite, or
 * PostgreSQL when PROXY_BENCH_DATABASE_URL is set) only with PROXY_BENCH_FROM=src, since they
 * otherwise run as built (built-roles.ts, built.ts). Each prints one JSON line describing itself
 * on stdout, then serves until SIGTERM.
 */
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
  const { serveCountersign } = await import('./serve-countersign.js');
  await serveCountersign(
    {
      gc: await import('../../packages/server/src/serving-gc.js'),
      app: await import('../../packages/server/src/app.js'),
      config: await import('../../packages/server/src/config.js'),
      issue: await import('../../packages/server/src/projects/issue.js'),
    },
    {
      upstream: process.env.PROXY_BENCH_UPSTREAM!,
      databaseUrl: process.env.PROXY_BENCH_DATABASE_URL,
      roles: process.env.PROXY_BENCH_ROLES,
    },
  );
}
