/**
 * The packages as people install them. `npm pack` of @countersign/core and @countersign/client
 * (their prepack builds dist and writes the published manifest), the tarballs installed with
 * npm into a fresh project outside the repository, and a plain `node` script there (no tsx, no
 * export conditions) that seals a log against a REAL server, reads it back, waits for its proof
 * and verifies it with trust from the environment. A TypeScript consumer type-checks against
 * the shipped .d.ts. And no installed dependency refuses the oldest Node we declare.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startServer, type ClientTestServer } from './helpers/server.js';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..', '..', '..');
// npm beside this node (its usual place), else whatever `npm` is on PATH.
const npmBeside = path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
const npmCommand: [string, string[]] = fs.existsSync(npmBeside) ? [process.execPath, [npmBeside]] : ['npm', []];

/** The environment of a user's shell: none of the npm_* variables of the runner that started us. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k) && !k.startsWith('COUNTERSIGN_')) env[k] = v;
  return { ...env, ...extra };
}

/** Runs npm (the one beside this node) in `cwd`. */
function npm(args: string[], cwd: string) {
  return run(npmCommand[0], [...npmCommand[1], ...args], { cwd, env: userEnv(), encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
}

interface PackResult {
  name: string;
  filename: string;
  files: Array<{ path: string }>;
}

const SCRIPT = `
import { ServiceClient } from '@countersign/client';

const client = new ServiceClient({ apiKey: process.env.API_KEY, encryptionKey: 'installed package key', endpoint: process.env.ENDPOINT, flushOnExit: false });
const id = await client.log({ action: 'package.check', requestProof: true, payload: { from: 'a fresh project' } });
await client.flush();
const reader = client.reader({ projectId: process.env.PROJECT_ID, readKey: process.env.LIVE_KEY });
const log = await reader.getLog(id);
let answer = await reader.getProof(id);
for (let i = 0; i < 150 && answer.status !== 'sealed'; i++) {
  await new Promise((r) => setTimeout(r, 200));
  answer = await reader.getProof(id);
}
// Trust from COUNTERSIGN_TSA_ROOTS / COUNTERSIGN_LEDGER_KEY: the spec's two-argument form.
const verified = await ServiceClient.verifyProof(log.decryptedPayload, answer);
const altered = await ServiceClient.verifyProof({ ...log.decryptedPayload, payload: { from: 'elsewhere' } }, answer);
await client.shutdown();
console.log(JSON.stringify({ envelope: log.payload.alg, decrypted: log.decryptedPayload.payload, status: answer.status, verified, altered }));
`;

const CONSUMER_TS = `
import { ServiceClient, isClientError, type ProofTrustConfig } from '@countersign/client';
import { payloadHashHex } from '@countersign/core';

const trust: ProofTrustConfig = { tsaRoots: '-----BEGIN CERTIFICATE-----', ledgerKey: '-----BEGIN PUBLIC KEY-----' };
ServiceClient.configureTrust(trust);
const hash: string = payloadHashHex({ a: 1 });
const client = new ServiceClient({ apiKey: 'key_service_x', encryptionKey: 'k' });
const id: Promise<string> = client.log({ action: 'a', payload: { hash } });
// @ts-expect-error the types are real: action must be a string
void client.log({ action: 42, payload: {} });
export { id, isClientError };
`;

describe('installable packages', () => {
  let work: string;
  let srv: ClientTestServer;
  const tarballs: Record<string, string> = {};
  let packed: PackResult[];

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-install-'));
    srv = await startServer({ config: { proofWindowMs: 1000 } });
  });
  after(async () => {
    await srv.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('npm pack builds both packages and leaves the repository manifests as they were', async () => {
    const manifests = ['core', 'client'].map((p) => path.join(repoRoot, 'packages', p, 'package.json'));
    const before = manifests.map((m) => fs.readFileSync(m, 'utf8'));
    const r = await npm(['pack', '-w', '@countersign/core', '-w', '@countersign/client', '--pack-destination', work, '--json'], repoRoot);
    packed = JSON.parse(r.stdout) as PackResult[];
    for (const p of packed) tarballs[p.name] = path.join(work, p.filename);
    assert.deepEqual(Object.keys(tarballs).sort(), ['@countersign/client', '@countersign/core']);
    assert.deepEqual(
      manifests.map((m) => fs.readFileSync(m, 'utf8')),
      before,
    );
    for (const p of packed) {
      const files = p.files.map((f) => f.path);
      for (const f of ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts'])
        assert.ok(files.includes(f), `${p.name} ships ${f}`);
      assert.ok(!files.some((f) => /tsbuildinfo|\.test\.|^test\//.test(f)), `${p.name} ships no build state or tests: ${files}`);
    }
  });

  it('the published manifests point at dist, without the repository-only development condition', async () => {
    for (const [name, tgz] of Object.entries(tarballs)) {
      const r = await run('tar', ['-xOzf', tgz, 'package/package.json'], { encoding: 'utf8' });
      const m = JSON.parse(r.stdout) as Record<string, unknown> & { exports: Record<string, Record<string, string>> };
      assert.deepEqual(m.exports['.'], { types: './dist/index.d.ts', default: './dist/index.js' }, name);
      assert.equal(m.types, './dist/index.d.ts');
      assert.equal(m.main, './dist/index.js');
      assert.equal(m.type, 'module');
      assert.equal(m.license, 'Apache-2.0');
      assert.deepEqual(m.engines, { node: '>=20.19' });
      assert.match((m.repository as { url: string }).url, /^git\+https:\/\//);
      assert.deepEqual(m.publishConfig, { access: 'public' });
    }
  });

  it('installs into a fresh project outside the repository and seals, reads and verifies a log there', async () => {
    const project = path.join(work, 'app');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    await npm(
      ['install', '--prefer-offline', '--no-audit', '--no-fund', tarballs['@countersign/core']!, tarballs['@countersign/client']!],
      project,
    );
    const installed = path.join(project, 'node_modules', '@countersign');
    assert.ok(!fs.lstatSync(path.join(installed, 'core')).isSymbolicLink(), 'a real copy, not a link into the repository');
    assert.ok(!fs.existsSync(path.join(installed, 'client', 'node_modules', '@countersign')), 'one copy of core, the packed one');

    fs.writeFileSync(path.join(project, 'seal.mjs'), SCRIPT);
    const trust = (await (await fetch(srv.url + '/v1/proofs/trust')).json()) as { tsaRootsPem: string; ledgerPublicKeyPem: string };
    fs.writeFileSync(path.join(project, 'tsa-roots.pem'), trust.tsaRootsPem);
    const r = await run(process.execPath, ['seal.mjs'], {
      cwd: project,
      encoding: 'utf8',
      env: userEnv({
        ENDPOINT: srv.url,
        API_KEY: srv.project.keys.service,
        PROJECT_ID: srv.project.id,
        LIVE_KEY: srv.project.keys.live,
        COUNTERSIGN_TSA_ROOTS: path.join(project, 'tsa-roots.pem'),
        COUNTERSIGN_LEDGER_KEY: trust.ledgerPublicKeyPem,
      }),
    });
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.deepEqual(out, {
      envelope: 'A256GCM',
      decrypted: { from: 'a fresh project' },
      status: 'sealed',
      verified: true,
      altered: false,
    });
  });

  it('a TypeScript project type-checks against the shipped declarations', async () => {
    const project = path.join(work, 'app');
    fs.writeFileSync(path.join(project, 'consumer.ts'), CONSUMER_TS);
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          types: [],
          lib: ['ES2023', 'DOM'],
        },
        files: ['consumer.ts'],
      }),
    );
    const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = await run(process.execPath, [tsc, '-p', '.', '--extendedDiagnostics', '--traceResolution'], {
      cwd: project,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    }).catch((e: { stdout: string }) =>
      assert.fail(
        `tsc failed:\n${e.stdout
          .split('\n')
          .filter((l) => /error TS/.test(l))
          .join('\n')}`,
      ),
    );
    // Resolved to the package's dist declarations, not to any source file.
    assert.match(
      r.stdout,
      /'@countersign\/client' was successfully resolved to '[^']*node_modules\/@countersign\/client\/dist\/index\.d\.ts'/,
    );
    assert.match(r.stdout, /'@countersign\/core' was successfully resolved to '[^']*node_modules\/@countersign\/core\/dist\/index\.d\.ts'/);
  });
});

describe('Node engines', () => {
  it('every installed dependency accepts the oldest Node we declare (no EBADENGINE on install)', () => {
    const require = createRequire(import.meta.url);
    const semver = require('semver') as {
      satisfies(version: string, range: string): boolean;
      minVersion(range: string): { version: string };
    };
    const root = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
    const oldest = semver.minVersion(root.engines.node).version;
    const lock = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { engines?: { node?: string } | string[] }>;
    };
    const refusing = Object.entries(lock.packages)
      .filter(([, m]) => m.engines && !Array.isArray(m.engines) && m.engines.node && !semver.satisfies(oldest, m.engines.node))
      .map(([p, m]) => `${p} wants node ${(m.engines as { node: string }).node}`);
    assert.deepEqual(refusing, [], `the oldest supported Node, ${oldest}, is refused by`);
  });

  it('light-my-request (Fastify inject) works with the cookie version pinned for Node 20', async () => {
    const { default: Fastify } = await import('fastify');
    const app = Fastify();
    app.get('/', async (req) => ({ cookie: req.headers.cookie }));
    const r = await app.inject({ url: '/', cookies: { session: 'a b', theme: 'dark' } });
    assert.deepEqual(r.json(), { cookie: 'session=a%20b; theme=dark' });
    await app.close();
  });
});
