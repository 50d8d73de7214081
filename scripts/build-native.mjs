#!/usr/bin/env node
// Builds the server's native seal (packages/server/native, src/native-seal.ts; docs/performance.md,
// "Design now") with node-gyp against this Node's own headers. The addon is an accelerator: where no
// compiler is at hand the build says so and the server seals with Node's cipher instead (same
// bytes). COUNTERSIGN_REQUIRE_NATIVE_SEAL=1 (CI) makes a failed build an error. Skips the build
// when the addon is newer than its sources.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

const dir = join('packages', 'server', 'native');
const addon = join(dir, 'build', 'Release', 'countersign_seal.node');
const sources = ['seal.c', 'binding.gyp'].map((f) => join(dir, f));
const required = process.env.COUNTERSIGN_REQUIRE_NATIVE_SEAL === '1';

const fresh = existsSync(addon) && sources.every((s) => statSync(s).mtimeMs <= statSync(addon).mtimeMs);
if (!fresh) {
  // npm names its own node-gyp in npm_config_node_gyp for scripts; outside npm, the one beside it.
  const prefix = dirname(dirname(process.execPath));
  const gyp =
    process.env.npm_config_node_gyp ?? join(prefix, 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  // This Node's own headers (no download): npm's nodedir setting, else the installation's include/node.
  const nodedir = process.env.npm_config_nodedir || (existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? prefix : undefined);
  const args = [gyp, 'rebuild', '--directory', dir, ...(nodedir ? [`--nodedir=${nodedir}`] : [])];
  const r = spawnSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (r.status !== 0) {
    if (r.stderr) console.error(r.stderr);
    const why = r.error ? r.error.message : `node-gyp exited with ${r.status}`;
    console.error(`native seal not built (${why}): the server seals with Node's cipher instead`);
    process.exit(required ? 1 : 0);
  }
}
