/**
 * The process that the instructions benchmark (bench/instructions.bench.ts) runs under callgrind:
 * the Node floor, or Countersign as built (packages/server/dist, what `npm start` runs). It prints
 * one JSON line once it serves, then serves until SIGTERM.
 *
 * The benchmark bundles this file to plain JavaScript with esbuild before valgrind starts it:
 * started through tsx, whose loader runs on a thread of its own, Countersign had not finished
 * starting under valgrind after ten minutes; from the bundle and the build it starts in two.
 * Environment: CALLGRIND_ROLE (floor | countersign), CALLGRIND_UPSTREAM, CALLGRIND_DIST (the
 * server's dist directory), CALLGRIND_DATABASE_URL (PostgreSQL instead of SQLite).
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { serveCountersign } from './serve-countersign.js';
import { startNodeFloor } from './node-floor.js';

const role = process.env.CALLGRIND_ROLE;
const upstream = process.env.CALLGRIND_UPSTREAM!;

/**
 * A module of the server's build; the path is computed so that the bundler leaves it alone. Its
 * type is the one the caller expects (serveCountersign's ServerModules, from the sources).
 */
async function fromDist(file: string): Promise<never> {
  return (await import(pathToFileURL(path.join(process.env.CALLGRIND_DIST!, file)).href)) as never;
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
    { upstream, databaseUrl: process.env.CALLGRIND_DATABASE_URL },
  );
} else {
  throw new Error(`CALLGRIND_ROLE must be floor or countersign, not ${String(role)}`);
}
