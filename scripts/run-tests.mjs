#!/usr/bin/env node
// Runs every test file (packages/*/test/**/*.test.ts, bench excluded) with Node's own test
// runner on the TypeScript sources (the "development" export condition + tsx).
// Usage: node scripts/run-tests.mjs [substring-filter ...]
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

const filters = process.argv.slice(2);
const files = [];
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === 'node_modules' || name === 'dist') continue;
    if (statSync(p).isDirectory()) walk(p);
    else if (p.endsWith('.test.ts')) files.push(p);
  }
};
for (const pkg of readdirSync('packages')) {
  try {
    walk(join('packages', pkg, 'test'));
  } catch {
    /* package without tests */
  }
}
const selected = files.sort().filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)));
if (selected.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const args = ['--conditions=development', '--import', 'tsx', '--test', '--test-reporter=spec', '--test-concurrency=2', ...selected];
const r = spawnSync(process.execPath, args, {
  stdio: 'inherit',
  env: { ...process.env, COUNTERSIGN_LOG_LEVEL: process.env.COUNTERSIGN_LOG_LEVEL ?? 'silent' },
});
process.exit(r.status ?? 1);
