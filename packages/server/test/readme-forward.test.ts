/**
 * The README's forward-mode snippets, run as written (issue "Drop-in gateway", a newcomer's
 * first ten minutes): the fenced block after each `<!-- readme-test: node|curl -->` marker is
 * taken from README.md unchanged and run against a real server whose `openai` upstream name
 * points at a fake OpenAI on loopback (operator names override presets), with the environment
 * variables the README tells the reader to set. The Python snippet is not run here: no Python
 * `openai` package can be installed on these machines (PyPI is out of reach).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.js';
import { startApp, type TestApp } from './helpers/server.js';
import { decryptRecord, makeProjectKey } from './helpers/upstreams.js';
import { startOpenAiFake, type FakeProvider } from './helpers/fake-providers.js';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const readme = fs.readFileSync(path.join(here, '..', '..', '..', 'README.md'), 'utf8');
const ENC = 'a key string only you keep';
const OPENAI_KEY = 'sk-readme-fake-0123456789';

/** The fenced block that follows `<!-- readme-test: name -->`. */
function snippet(name: string): string {
  const at = readme.indexOf(`<!-- readme-test: ${name} -->`);
  assert.notEqual(at, -1, `README.md has no readme-test: ${name} marker`);
  const m = /```[a-z]*\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m, `no code block after the ${name} marker`);
  return m[1]!;
}

let fake: FakeProvider;
let t: TestApp;
let env: NodeJS.ProcessEnv;
let projectId: string;
// The Node snippet imports `openai`: it runs from a folder inside the repository so that the
// package resolves, and is removed afterwards.
const workDir = fs.mkdtempSync(path.join(here, '.readme-run-'));

before(async () => {
  fake = await startOpenAiFake({ apiKey: OPENAI_KEY, gapMs: 5 });
  const base = loadConfig({ dataDir: '.', port: '0', logLevel: 'silent' }, {});
  t = await startApp({
    listen: true,
    config: { allowTargets: [...base.allowTargets, fake.hostPort], upstreams: { openai: `${fake.url}/v1` } },
  });
  const key = await makeProjectKey(t.app, 'agent');
  projectId = key.projectId;
  env = {
    ...process.env,
    COUNTERSIGN_URL: t.url,
    COUNTERSIGN_KEY: key.apiKey,
    COUNTERSIGN_ENCRYPTION_KEY: ENC,
    OPENAI_API_KEY: OPENAI_KEY,
  };
});

after(async () => {
  fs.rmSync(workDir, { recursive: true, force: true });
  await t?.close();
  await fake?.close();
});

async function recordOf(logId: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 100; i++) {
    const row = await t.app.ctx.store.logs.get(projectId, logId);
    if (row && row.status !== 'pending') {
      assert.equal(row.status, 'complete');
      return decryptRecord(row.payload, ENC, logId);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`record ${logId} not complete`);
}

test('the Node snippet (openai SDK) goes through forward mode unchanged and is recorded', async () => {
  const file = path.join(workDir, 'snippet.mjs');
  fs.writeFileSync(file, snippet('node'));
  const { stdout } = await run(process.execPath, [file], { env, cwd: workDir });
  const logId = /recorded as (\S+)/.exec(stdout)?.[1];
  assert.ok(logId?.startsWith('log_'), stdout);
  assert.equal(fake.last().request.headers.authorization, `Bearer ${OPENAI_KEY}`, 'the provider key reached the provider');
  assert.equal(fake.last().request.headers['x-service-key'], undefined, 'our key did not');
  const payload = await recordOf(logId!);
  assert.equal((payload.llm as { provider: string }).provider, 'openai');
});

test('the curl snippet goes through forward mode and shows the log id', async () => {
  const { stdout } = await run('bash', ['-c', snippet('curl')], { env, cwd: workDir });
  const logId = /x-service-log-id:\s*(\S+)/i.exec(stdout)?.[1];
  assert.ok(logId, stdout);
  assert.match(stdout, /"chat.completion"/);
  await recordOf(logId);
});
