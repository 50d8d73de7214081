/**
 * What the benchmarks run of Countersign: its build, as `npm start` runs it (packages/server/dist),
 * started from plain JavaScript (built-roles.ts bundled by esbuild), unless PROXY_BENCH_FROM=src.
 * Through tsx the measured process also ran tsx's loader thread and esbuild's output (a `__name`
 * call around every function made, closures per call included): 2-4 % more event-loop CPU per
 * call at 1,000 req/s (docs/performance-log.md, sixth session). The build is brought up to date
 * (`tsc -b`, a fraction of a second when it already is) before the first bundle, so a benchmark
 * never measures a stale build.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, '..', '..');

/** True when the benchmarks run Countersign and the floor from the sources through tsx (PROXY_BENCH_FROM=src). */
export const FROM_SOURCES = process.env.PROXY_BENCH_FROM === 'src';

/** The entry point of the built roles (TypeScript; {@link bundled} makes it runnable). */
export const BUILT_ROLES = path.join(here, 'built-roles.ts');

/** This tree's server build. */
export const THIS_DIST = path.join(root, 'packages', 'server', 'dist');

let builtOnce = false;

/** Runs `tsc -b` over the packages the server needs, once per benchmark process. */
function ensureBuilt(): void {
  if (builtOnce) return;
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-b', 'packages/core', 'packages/client', 'packages/server'], {
    cwd: root,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`the build failed (tsc -b):\n${r.stdout}${r.stderr}`);
  builtOnce = true;
}

const bundles = new Map<string, Promise<string>>();

/**
 * `entry` (a TypeScript file of bench/) bundled to plain JavaScript, its npm imports left as
 * imports: written under node_modules/.cache so that they resolve from the project's
 * node_modules. Once per file and benchmark process.
 */
export function bundled(entry: string): Promise<string> {
  let out = bundles.get(entry);
  if (!out) {
    ensureBuilt();
    const outfile = path.join(root, 'node_modules', '.cache', 'countersign-bench', path.basename(entry).replace(/\.ts$/, '.mjs'));
    out = build({
      entryPoints: [entry],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      outfile,
      logLevel: 'error',
    }).then(() => outfile);
    bundles.set(entry, out);
  }
  return out;
}
