/**
 * `npm run bench`: runs every `bench/*.bench.ts` (or those whose name contains an argument) one
 * after another in this process and prints each one's report. Every benchmark measures a
 * baseline in the same run (e.g. direct call vs proxied call) and reports ratios, so figures
 * are comparable across machines. Results are also written to bench/results/<name>.json. The
benchmarks in ON_REQUEST run only when named (`npm run bench -- soak`, `npm run bench -- paired`).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** What a benchmark module exports as default. */
export type Benchmark = () => Promise<Record<string, unknown>>;

const here = path.dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
/**
 * Run only when named: they take as long as their knobs say (soak: 15 minutes by default), and
 * paired compares this tree with a variant that must be named (bench/paired.bench.ts).
 */
const ON_REQUEST = ['soak', 'paired'];
const files = fs
  .readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => (filters.length === 0 ? !ON_REQUEST.includes(f.replace(/\.bench\.ts$/, '')) : filters.some((s) => f.includes(s))))
  .sort();
fs.mkdirSync(path.join(here, 'results'), { recursive: true });
for (const file of files) {
  const name = file.replace(/\.bench\.ts$/, '');
  process.stdout.write(`\n=== ${name} ===\n`);
  const mod = (await import(pathToFileURL(path.join(here, file)).href)) as { default: Benchmark };
  const started = Date.now();
  const result = await mod.default();
  fs.writeFileSync(
    path.join(here, 'results', `${name}.json`),
    JSON.stringify({ at: new Date().toISOString(), ms: Date.now() - started, result }, null, 2),
  );
}
process.exit(0);
