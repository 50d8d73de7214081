/**
 * The benchmarks' Node floor and Countersign processes as they ship: this file is bundled to
 * plain JavaScript (built.ts) and imports the server's build (packages/server/dist, what `npm
 * start` runs), so nothing of tsx (its loader thread, esbuild's `__name` helpers around every
 * function) is in the measured process. The proxy and tail benchmarks start these two roles
 * from here unless PROXY_BENCH_FROM=src (then roles.ts runs them from the sources through tsx);
 * the instructions benchmark runs this under callgrind, where tsx's loader thread had not
 * finished starting Countersign after ten minutes. It prints one JSON line once it serves, then
 * serves until SIGTERM.
 *
 * Environment: PROXY_BENCH_ROLE (floor | countersign), PROXY_BENCH_UPSTREAM, PROXY_BENCH_DIST (the
 * server's dist directory), PROXY_BENCH_DATABASE_URL (PostgreSQL instead of SQLite),
 * PROXY_BENCH_ROLES (Countersign's roles).
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { serveCountersign } from './serve-countersign.js';
import { startNodeFloor } from './node-floor.js';

const role = process.env.PROXY_BENCH_ROLE;
const upstream = process.env.PROXY_BENCH_UPSTREAM!;

/**
 * A module of the server's build; the path is computed so that the bundler leaves it alone. Its
 * type is the one the caller expects (serveCountersign's ServerModules, from the sources).
 */
async function fromDist(file: string): Promise<never> {
  return (await import(pathToFileURL(path.join(process.env.PROXY_BENCH_DIST!, file)).href)) as never;
}

if (role === 'floor') {
  const url = await startNodeFloor(upstream);
  process.on('SIGTERM', () => process.exit(0));
  process.stdout.write(JSON.stringify({ url }) + '\n');
} else if (role === 'countersign') {
  await serveCountersign(
    {
      gc: await fromDist('serving-gc.js'),
      app: await fromDist('app.js'),
      config: await fromDist('config.js'),
      issue: await fromDist('projects/issue.js'),
    },
    { upstream, databaseUrl: process.env.PROXY_BENCH_DATABASE_URL, roles: process.env.PROXY_BENCH_ROLES },
  );
} else {
  throw new Error(`PROXY_BENCH_ROLE must be floor or countersign, not ${String(role)}`);
}
