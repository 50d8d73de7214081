/**
 * The README's walk-through and its proxy-and-proof block, run as written (issue "Drop-in
 * gateway", a newcomer's first ten minutes): each fenced block after a `<!-- readme-test: … -->`
 * marker is taken from README.md and run with bash from the repository root, as the README
 * says, against a real server on an ephemeral port. The reader's settings come in through the
 * variables the README itself names (`COUNTERSIGN_URL`, `COUNTERSIGN_DATA_DIR`). One thing is
 * replaced: the proxied call's target, `https://api.openai.com/…`, becomes a fake OpenAI on
 * loopback (admitted with `allowTargets`, as the README's `--allow-targets` says), so no test
 * sends traffic to OpenAI. What the issue found is checked on the way: the proof is the
 * proxied call's own (`X-Service-Log-ID`), `payload.json` exists before `countersign verify`,
 * and nothing is written into the repository.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.js';
import { startApp, tempDir, type TestApp } from './helpers/server.js';
import { startOpenAiFake, type FakeProvider } from './helpers/fake-providers.js';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.join(here, '..', '..', '..');
const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
const OPENAI_TARGET = 'https://api.openai.com/v1/chat/completions';

/** The fenced block that follows `<!-- readme-test: name -->`. */
function snippet(name: string): string {
  const at = readme.indexOf(`<!-- readme-test: ${name} -->`);
  assert.notEqual(at, -1, `README.md has no readme-test: ${name} marker`);
  const m = /```[a-z]*\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m, `no code block after the ${name} marker`);
  return m[1]!;
}

/** The files the walk-through writes; none may appear in the repository root (other suites may write elsewhere). */
const WALK_FILES = ['project.json', 'log.json', 'answer.json', 'call.json', 'payload.json', 'receipt.json', 'walkthrough'];
const inRoot = () => WALK_FILES.filter((f) => fs.existsSync(path.join(repoRoot, f)));

let fake: FakeProvider;
let t: TestApp;
let env: NodeJS.ProcessEnv;

before(async () => {
  // The README's placeholder provider key, as its UTF-8 bytes reach a Node server (read as latin1).
  fake = await startOpenAiFake({ apiKey: Buffer.from('sk-upstream…', 'utf8').toString('latin1'), gapMs: 0 });
  const base = loadConfig({ dataDir: '.', port: '0', logLevel: 'silent' }, {});
  t = await startApp({ listen: true, config: { proofWindowMs: 1000, allowTargets: [...base.allowTargets, fake.hostPort] } });
  // The reader's data dir holds the master key `npm start` printed; here, the test app's.
  const dataDir = tempDir('countersign-readme-data-');
  fs.writeFileSync(path.join(dataDir, 'master.key'), t.masterKey + '\n', { mode: 0o600 });
  env = { ...process.env, COUNTERSIGN_URL: t.url, COUNTERSIGN_DATA_DIR: dataDir };
});

after(async () => {
  await t?.close();
  await fake?.close();
});

test('the walk-through and the proxy-and-proof block run as written, end to end, writing nothing into the repository', async () => {
  const proof = snippet('proof');
  assert.equal(proof.split(OPENAI_TARGET).length, 2, 'the proof block proxies to OpenAI exactly once');
  // set -e: a step that fails stops the script, as it would stop a reader.
  const script = [
    'set -euo pipefail',
    snippet('walkthrough'),
    proof.replace(OPENAI_TARGET, `${fake.url}/v1/chat/completions`),
    'echo "CALL_ID=$CALL_ID"',
    'echo "W=$W"',
  ].join('\n');
  const before = inRoot();
  const { stdout, stderr } = await run('bash', ['-c', script], { env, cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 });
  assert.deepEqual(inRoot(), before, 'the walk-through wrote nothing into the repository root');

  // Step 5 decrypted the log the walk-through sent.
  assert.match(stdout, /amount: 120/, stderr);
  assert.match(stdout, /customer: 'ACME'/);
  // The proxied call went through to the (fake) provider and its answer was kept.
  const callId = /CALL_ID=(log_\S+)/.exec(stdout)?.[1];
  assert.ok(callId, `no CALL_ID in:\n${stdout}\n${stderr}`);
  const dir = /W=(\S+)/.exec(stdout)?.[1];
  assert.ok(dir && !path.resolve(dir).startsWith(path.resolve(repoRoot) + path.sep), `the files landed outside the repository: ${dir}`);
  assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'answer.json'), 'utf8')).object, 'chat.completion');
  // The receipt is the proxied call's own, and it was sealed before verify read it.
  const receipt = JSON.parse(fs.readFileSync(path.join(dir, 'receipt.json'), 'utf8'));
  assert.equal(receipt.logId ?? receipt.receipt?.logId, callId, JSON.stringify(receipt).slice(0, 300));
  // payload.json was written (by the block's own decrypt step) before countersign verify.
  const payload = JSON.parse(fs.readFileSync(path.join(dir, 'payload.json'), 'utf8'));
  assert.equal(payload.outcome, 'complete');
  assert.equal(payload.llm?.provider, `openai-compatible:${fake.hostPort}`);
  assert.match(stdout, /VERIFIED: every step passed/, stderr);
  fs.rmSync(dir, { recursive: true, force: true });
});
