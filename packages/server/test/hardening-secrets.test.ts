/**
 * Issue 8, "Secrets and strict input", on a real app (SQLite and PostgreSQL):
 * - the embed-token client secret rotates (`POST /v1/projects/{id}/client-secret/rotate` and
 *   `countersign projects rotate-client-secret`): the new secret is shown once, tokens signed
 *   with the old one are refused at once or when the grace period ends, on every instance;
 * - the data dir is private whatever the umask (dir 0700, every file 0600, SQLite's -wal/-shm
 *   and the witness material included), and a data dir open to group or others is refused
 *   unless allowed, except the 0755 dir an earlier version made, which is tightened.
 * Time moves by an injected clock, never by sleeping. The CLI side of the data-dir rules is in
 * cli-newcomer.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SignJWT } from 'jose';
import { STORES, freshPostgresDatabase, startApp, tempDir } from './helpers/server.js';
import { assertError, createProject, getWith } from './foundation-helpers.js';
import { runCli } from './proofs-helpers.js';
import { startWitnessApp, type WitnessApp } from './tsa-helpers.js';
import { buildApp } from '../src/app.js';
import { ConfigError, loadConfig, type ServerConfig } from '../src/config.js';

const HOUR = 3600_000;

/** A settable clock for an app. */
function clock(start = Date.now()) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

/** An embed token as `ServiceClient.generateEmbedToken()` signs it, issued at `at` for an hour. */
function embedToken(projectId: string, secret: string, at: number): Promise<string> {
  const iat = Math.floor(at / 1000);
  return new SignJWT({ projectId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setAudience('countersign:embed')
    .setIssuedAt(iat)
    .setExpirationTime(iat + 3600)
    .sign(new TextEncoder().encode(secret));
}

const readLogs = async (w: Pick<WitnessApp, 'app'>, projectId: string, token: string) =>
  getWith(w.app, token, `/v1/projects/${projectId}/logs`);

function rotateSecret(w: Pick<WitnessApp, 'app'>, masterKey: string, projectId: string, body?: unknown) {
  return w.app.inject({
    method: 'POST',
    url: `/v1/projects/${projectId}/client-secret/rotate`,
    headers: { authorization: `Bearer ${masterKey}` },
    ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
  });
}

const projectOf = (w: WitnessApp) =>
  createProject({ app: w.app, masterKey: w.app.ctx.masterKey, config: w.app.ctx.config, url: '', close: w.close });

for (const store of STORES) {
  describe(`client secret rotation (${store})`, () => {
    it('without a grace period, tokens signed with the old secret are refused at once; the new secret works', async () => {
      const c = clock();
      const w = await startWitnessApp({ store, listen: false, now: c.now });
      const master = w.app.ctx.masterKey;
      try {
        const p = await projectOf(w);
        const old = await embedToken(p.projectId, p.clientSecret, c.now());
        assert.equal((await readLogs(w, p.projectId, old)).statusCode, 200);

        const r = await rotateSecret(w, master, p.projectId);
        assert.equal(r.statusCode, 200, r.body);
        const answer = r.json();
        assert.equal(answer.success, true);
        assert.equal(answer.projectId, p.projectId);
        assert.match(answer.clientSecret, /^cs_[0-9A-Za-z]{43}$/);
        assert.notEqual(answer.clientSecret, p.clientSecret);
        assert.equal(answer.oldSecretRevokedAt, new Date(c.now()).toISOString());

        const refused = await readLogs(w, p.projectId, old);
        assertError(refused, 401, 'invalid_api_key');
        assert.match(refused.json().error.message, /signature does not verify/);
        // A token signed with the old secret after the rotation is refused too.
        assertError(await readLogs(w, p.projectId, await embedToken(p.projectId, p.clientSecret, c.now())), 401, 'invalid_api_key');
        const fresh = await embedToken(p.projectId, answer.clientSecret, c.now());
        assert.equal((await readLogs(w, p.projectId, fresh)).statusCode, 200);
      } finally {
        await w.close();
      }
    });

    it('with graceSeconds the old secret verifies until the grace ends, then not; rotating again ends it at once', async () => {
      const c = clock();
      const w = await startWitnessApp({ store, listen: false, now: c.now });
      const master = w.app.ctx.masterKey;
      try {
        const p = await projectOf(w);
        const old = await embedToken(p.projectId, p.clientSecret, c.now());
        const r = await rotateSecret(w, master, p.projectId, { graceSeconds: 600 });
        assert.equal(r.statusCode, 200, r.body);
        assert.equal(r.json().oldSecretRevokedAt, new Date(c.now() + 600_000).toISOString());
        const second = r.json().clientSecret as string;
        assert.equal((await readLogs(w, p.projectId, old)).statusCode, 200, 'old secret inside the grace period');
        assert.equal((await readLogs(w, p.projectId, await embedToken(p.projectId, second, c.now()))).statusCode, 200);
        c.advance(599_000);
        assert.equal((await readLogs(w, p.projectId, old)).statusCode, 200, 'one second before the end');
        c.advance(1_000);
        assertError(await readLogs(w, p.projectId, old), 401, 'invalid_api_key');

        // Another graced rotation, then an immediate one: the graced secret stops at once.
        const third = (await rotateSecret(w, master, p.projectId, { graceSeconds: 3600 })).json().clientSecret as string;
        const bySecond = await embedToken(p.projectId, second, c.now());
        assert.equal((await readLogs(w, p.projectId, bySecond)).statusCode, 200);
        assert.equal((await rotateSecret(w, master, p.projectId, { graceSeconds: 0 })).statusCode, 200);
        assertError(await readLogs(w, p.projectId, bySecond), 401, 'invalid_api_key');
        assertError(await readLogs(w, p.projectId, await embedToken(p.projectId, third, c.now())), 401, 'invalid_api_key');
      } finally {
        await w.close();
      }
    });

    it('needs the master key, a known project and a whole grace period of at most 30 days', async () => {
      const t = await startApp({ store });
      try {
        const p = await createProject(t, 'agent');
        const live = await t.app.inject({
          method: 'POST',
          url: `/v1/projects/${p.projectId}/keys`,
          headers: { authorization: `Bearer ${t.masterKey}` },
          payload: { credentialClass: 'live' },
        });
        const liveKey = live.json().key.apiKey as string;
        assertError(await rotateSecret(t, liveKey, p.projectId), 403, 'wrong_credential_class');
        assertError(await rotateSecret(t, p.apiKey, p.projectId), 403, 'wrong_credential_class');
        const token = await embedToken(p.projectId, p.clientSecret, Date.now());
        assert.notEqual((await rotateSecret(t, token, p.projectId)).statusCode, 200);
        assertError(await rotateSecret(t, t.masterKey, 'prj_live_doesnotexist'), 404, 'not_found');
        for (const graceSeconds of [-1, 30 * 24 * 3600 + 1, 1.5, '60', null]) {
          assertError(await rotateSecret(t, t.masterKey, p.projectId, { graceSeconds }), 400, 'invalid_request');
        }
        assertError(await rotateSecret(t, t.masterKey, p.projectId, { grace: 5 }), 400, 'invalid_request');
        // Nothing above changed the secret.
        assert.equal((await getWith(t.app, token, `/v1/projects/${p.projectId}/logs`)).statusCode, 200);
      } finally {
        await t.close();
      }
    });
  });
}

if (STORES.includes('postgres')) {
  it('two instances on one PostgreSQL: a rotation on one is refused on the other from its next request', async () => {
    const c = clock();
    const databaseUrl = await freshPostgresDatabase();
    const one = await startWitnessApp({ store: 'postgres', databaseUrl, listen: false, now: c.now });
    const masterKey = one.app.ctx.masterKey;
    const two = await startWitnessApp({ store: 'postgres', databaseUrl, listen: false, now: c.now, config: { masterKey } });
    try {
      const p = await projectOf(one);
      const old = await embedToken(p.projectId, p.clientSecret, c.now());
      assert.equal((await readLogs(two, p.projectId, old)).statusCode, 200);
      const graced = await rotateSecret(one, masterKey, p.projectId, { graceSeconds: 60 });
      assert.equal(graced.statusCode, 200, graced.body);
      assert.equal((await readLogs(two, p.projectId, old)).statusCode, 200, 'within the grace on the other instance');
      const next = await embedToken(p.projectId, graced.json().clientSecret, c.now());
      assert.equal((await readLogs(two, p.projectId, next)).statusCode, 200, 'the new secret on the other instance');
      c.advance(60_000);
      assertError(await readLogs(two, p.projectId, old), 401, 'invalid_api_key');
      assert.equal((await rotateSecret(one, masterKey, p.projectId)).statusCode, 200);
      assertError(await readLogs(two, p.projectId, next), 401, 'invalid_api_key');
    } finally {
      await two.close();
      await one.close();
    }
  });
}

it('countersign projects rotate-client-secret prints the new secret once; --grace keeps the old one working', async () => {
  const w = await startWitnessApp({ store: 'sqlite' });
  const masterKey = w.app.ctx.masterKey;
  try {
    const p = await projectOf(w);
    const old = await embedToken(p.projectId, p.clientSecret, Date.now());
    const conn = ['--url', w.url, '--master-key', masterKey];
    const graced = await runCli(['projects', 'rotate-client-secret', p.projectId, '--grace', '3600', ...conn]);
    assert.equal(graced.code, 0, graced.stderr);
    const m = /^clientSecret {2}(cs_[0-9A-Za-z]{43}) {3}\(shown once; tokens signed with the old secret work until (\S+)\)$/m.exec(
      graced.stdout,
    );
    assert.ok(m, graced.stdout);
    assert.ok(Date.parse(m[2]!) > Date.now() + HOUR - 60_000);
    assert.equal((await readLogs(w, p.projectId, old)).statusCode, 200);
    assert.equal((await readLogs(w, p.projectId, await embedToken(p.projectId, m[1]!, Date.now()))).statusCode, 200);

    const now = await runCli(['projects', 'rotate-client-secret', p.projectId, '--json', ...conn]);
    assert.equal(now.code, 0, now.stderr);
    const answer = JSON.parse(now.stdout);
    assert.match(answer.clientSecret, /^cs_/);
    assertError(await readLogs(w, p.projectId, old), 401, 'invalid_api_key');
    const bad = await runCli(['projects', 'rotate-client-secret', p.projectId, '--grace', 'soon', ...conn]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--grace must be a whole number of seconds/);
  } finally {
    await w.close();
  }
});

/** Every directory and file under `dir` with its permission bits (`dir` itself as '.'). */
function modes(dir: string): Map<string, { dir: boolean; mode: number }> {
  const out = new Map<string, { dir: boolean; mode: number }>();
  const walk = (p: string) => {
    const st = fs.statSync(p);
    out.set(path.relative(dir, p) || '.', { dir: st.isDirectory(), mode: st.mode & 0o777 });
    if (st.isDirectory()) for (const n of fs.readdirSync(p)) walk(path.join(p, n));
  };
  walk(dir);
  return out;
}

function assertPrivate(dir: string, mustHave: string[]): void {
  const all = modes(dir);
  for (const name of mustHave) assert.ok(all.has(name), `${name} exists in ${[...all.keys()].join(', ')}`);
  for (const [name, { dir: isDir, mode }] of all) {
    assert.equal(mode.toString(8), (isDir ? 0o700 : 0o600).toString(8), `${name} is ${isDir ? '0700' : '0600'}`);
  }
}

const configFor = (dataDir: string, over: Partial<ServerConfig> = {}): ServerConfig => ({
  ...loadConfig({ dataDir, port: '0', logLevel: 'silent' }, {}),
  ...over,
});

/** Builds the app on `dataDir`, stores one log and makes a proof (so the WAL and witness files exist), closes it. */
async function runOnce(dataDir: string, over: Partial<ServerConfig> = {}): Promise<void> {
  const app = await buildApp(configFor(dataDir, over));
  try {
    const t = { app, masterKey: app.ctx.masterKey, config: app.ctx.config, url: '', close: () => app.close() };
    const p = await createProject(t, 'agent');
    const r = await app.inject({
      method: 'POST',
      url: '/v1/log',
      headers: { authorization: `Bearer ${p.apiKey}`, 'x-service-encryption-key': 'modes key', 'content-type': 'application/json' },
      payload: JSON.stringify({ payload: { a: 1 } }),
    });
    assert.equal(r.statusCode, 201, r.body);
  } finally {
    await app.close();
  }
}

describe('data dir privacy (buildApp)', () => {
  it('a new data dir is 0700 and every file in it 0600, even under umask 000', async () => {
    const dataDir = path.join(tempDir(), 'nested', 'data');
    const before = process.umask(0o000);
    try {
      const app = await buildApp(configFor(dataDir));
      try {
        // While the store is open: the SQLite -wal and -shm files exist now.
        assertPrivate(dataDir, [
          'countersign.db',
          'countersign.db-wal',
          'countersign.db-shm',
          'countersign.lock',
          'master.key',
          'tsa',
          'ledger',
        ]);
      } finally {
        await app.close();
      }
      await runOnce(dataDir);
      assertPrivate(dataDir, ['countersign.db', 'master.key', 'tsa', 'ledger']);
    } finally {
      process.umask(before);
    }
  });

  it('refuses a data dir open to group or others, naming the fix; starts when told sharing is intended', async () => {
    for (const mode of [0o750, 0o705, 0o770, 0o777]) {
      const dataDir = tempDir();
      fs.chmodSync(dataDir, mode);
      await assert.rejects(buildApp(configFor(dataDir)), (e: unknown) => {
        assert.ok(e instanceof ConfigError, String(e));
        assert.match(e.message, new RegExp(`the data directory ${dataDir} is open to .*mode 0${mode.toString(8)}`));
        assert.match(e.message, new RegExp(`chmod 700 ${dataDir}`));
        assert.match(e.message, /--allow-shared-data-dir \(COUNTERSIGN_ALLOW_SHARED_DATA_DIR=1\)/);
        return true;
      });
      assert.deepEqual(fs.readdirSync(dataDir), [], 'nothing was written into the refused dir');
    }
    const shared = tempDir();
    fs.chmodSync(shared, 0o750);
    await runOnce(shared, { allowSharedDataDir: true });
    assert.equal(fs.statSync(shared).mode & 0o777, 0o750, 'an allowed shared dir keeps its mode');
    // Allowing a shared dir never loosens Countersign's own files.
    for (const [name, { dir, mode }] of modes(shared)) if (name !== '.') assert.equal(mode, dir ? 0o700 : 0o600, name);
    assert.equal(loadConfig({}, { COUNTERSIGN_ALLOW_SHARED_DATA_DIR: '1' }).allowSharedDataDir, true);
    assert.equal(loadConfig({}, {}).allowSharedDataDir, false);
    assert.throws(() => loadConfig({}, { COUNTERSIGN_ALLOW_SHARED_DATA_DIR: 'yes' }), ConfigError);
  });

  it('tightens the 0755 dir and 0644 files an earlier version made; refuses one that also holds other files', async () => {
    const dataDir = tempDir();
    await runOnce(dataDir);
    // What an earlier version left under umask 022: the dir 0755, its files 0644.
    for (const [name, { dir }] of modes(dataDir)) fs.chmodSync(path.join(dataDir, name), dir ? 0o755 : 0o644);
    await runOnce(dataDir);
    assertPrivate(dataDir, ['countersign.db', 'master.key', 'tsa', 'ledger']);

    const mixed = tempDir();
    await runOnce(mixed);
    fs.writeFileSync(path.join(mixed, 'notes.txt'), 'not ours');
    fs.chmodSync(mixed, 0o755);
    await assert.rejects(buildApp(configFor(mixed)), ConfigError);
    assert.equal(fs.statSync(mixed).mode & 0o777, 0o755, 'a dir holding other files is not changed');
  });

  it('refuses a data dir path that is a file', async () => {
    const file = path.join(tempDir(), 'not-a-dir');
    fs.writeFileSync(file, '');
    await assert.rejects(buildApp(configFor(file)), /exists but is not a directory/);
  });
});
