/**
 * A serving process runs with V8's allocation-site pretenuring off (src/serving-gc.ts): the
 * decisions it made at startup sent each call's short-lived objects to the old generation and
 * brought a full GC every few seconds under load. V8 prints its pretenuring statistics at every
 * scavenge under `--trace-pretenuring-statistics`; with the setting applied it has none to print.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVING_NODE_FLAGS } from '../src/serving-gc.js';
import { tempDir } from './helpers/server.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const bin = path.join(repoRoot, 'packages/server/bin/countersign.js');
const DECISION = /pretenuring:/;

/** Runs node (tsx, development condition) under the pretenuring trace; resolves with its stdout. */
function traced(args: string[], o: { until?: RegExp; onMatch?: (proc: ReturnType<typeof spawn>) => void } = {}): Promise<string> {
  const env: NodeJS.ProcessEnv = { ...process.env, COUNTERSIGN_LOG_LEVEL: 'silent' };
  for (const k of ['DATABASE_URL', 'COUNTERSIGN_DATABASE_URL', 'COUNTERSIGN_MASTER_KEY', 'COUNTERSIGN_PORT']) delete env[k];
  const proc = spawn(process.execPath, ['--trace-pretenuring-statistics', '--conditions=development', '--import', 'tsx', ...args], {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  let matched = false;
  proc.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
    if (!matched && o.until?.test(out)) {
      matched = true;
      o.onMatch?.(proc);
    }
  });
  return new Promise((resolve) => proc.on('exit', () => resolve(out)));
}

// Objects from one site that all outlive several scavenges: what makes V8 tenure a site.
const WORKLOAD = `
const keep = [];
const make = (i) => ({ a: i, b: 'x' + i, c: [i] });
for (let r = 0; r < 20; r++) for (let i = 0; i < 100000; i++) keep.push(make(i));
console.log('done', keep.length);
`;

function script(tune: boolean): string {
  const gc = path.join(repoRoot, 'packages/server/src/serving-gc.ts');
  return `${tune ? `const { tuneGarbageCollectionForServing } = await import(${JSON.stringify(gc)}); tuneGarbageCollectionForServing();` : ''}${WORKLOAD}`;
}

describe('serving GC settings', () => {
  it('without the setting V8 makes pretenuring decisions; with it, none', async () => {
    const plain = await traced(['--input-type=module', '-e', script(false)]);
    assert.match(plain, /done 2000000/);
    assert.match(plain, DECISION, 'the workload makes V8 consider tenuring (else this test proves nothing)');
    const tuned = await traced(['--input-type=module', '-e', script(true)]);
    assert.match(tuned, /done 2000000/);
    assert.doesNotMatch(tuned, DECISION);
  });

  it('countersign serve applies it before the app is built', async () => {
    // Building the app is where V8 made its decisions (51 lines of them between the master key
    // message, printed just before the setting is applied, and the banner, without the setting).
    const dataDir = tempDir('serving-gc');
    const out = await traced([bin, 'serve', '--port', '0', '--data-dir', dataDir, '--log-level', 'silent'], {
      until: /listening on http/,
      onMatch: (proc) => proc.kill('SIGTERM'),
    });
    const keyMessage = out.search(/A master key was generated/);
    assert.ok(keyMessage >= 0, out);
    const building = out.slice(keyMessage);
    assert.match(building, /listening on http/);
    assert.doesNotMatch(building, DECISION);
  });

  it('npm start and the systemd unit start node with the flags V8 reads only at startup', () => {
    const start = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts
      .start;
    const unit = fs.readFileSync(path.join(repoRoot, 'deploy/systemd/countersign.service'), 'utf8');
    const execStart = /^ExecStart=(.*)$/m.exec(unit)![1]!;
    // The flags between `node` and the script, in any order.
    const nodeFlags = (command: string) => /node((?: --[\w-]+)*) \S*countersign\.js serve/.exec(command)?.[1]!.trim().split(' ') ?? [];
    for (const flag of SERVING_NODE_FLAGS) {
      assert.ok(nodeFlags(start).includes(flag), `npm start: ${start}`);
      assert.ok(nodeFlags(execStart).includes(flag), `systemd: ${execStart}`);
    }
  });
});
