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
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { closeOnSigterm } from './close-on-sigterm.js';
import { startNodeFloor } from './node-floor.js';

const role = process.env.CALLGRIND_ROLE;
const upstream = process.env.CALLGRIND_UPSTREAM!;

/** A module of the server's build; the path is computed so that the bundler leaves it alone. */
async function fromDist<T>(file: string): Promise<T> {
  return (await import(pathToFileURL(path.join(process.env.CALLGRIND_DIST!, file)).href)) as T;
}

if (role === 'floor') {
  const url = await startNodeFloor(upstream);
  process.on('SIGTERM', () => process.exit(0));
  process.stdout.write(JSON.stringify({ url }) + '\n');
} else if (role === 'countersign') {
  type Gc = typeof import('../../packages/server/src/serving-gc.js');
  type AppModule = typeof import('../../packages/server/src/app.js');
  type ConfigModule = typeof import('../../packages/server/src/config.js');
  type IssueModule = typeof import('../../packages/server/src/projects/issue.js');
  // As `countersign serve` does before it builds the app.
  (await fromDist<Gc>('serving-gc.js')).tuneGarbageCollectionForServing();
  const { buildApp } = await fromDist<AppModule>('app.js');
  const { loadConfig } = await fromDist<ConfigModule>('config.js');
  const { issueKey, newProject } = await fromDist<IssueModule>('projects/issue.js');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-callgrind-'));
  const app = await buildApp({
    ...loadConfig({ dataDir, port: '0', logLevel: 'silent', roles: 'ingest,management' }, {}),
    databaseUrl: process.env.CALLGRIND_DATABASE_URL || undefined,
    allowTargets: [new URL(upstream).host],
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const now = Date.now();
  const project = newProject('instructions bench', now);
  const key = issueKey(project.id, 'agent', null, now);
  await app.ctx.store.projects.createWithKey(project, key.row);
  closeOnSigterm(app, dataDir);
  process.stdout.write(JSON.stringify({ url, apiKey: key.apiKey }) + '\n');
} else {
  throw new Error(`CALLGRIND_ROLE must be floor or countersign, not ${String(role)}`);
}
