/**
 * Key lifecycle on a real app (SQLite and PostgreSQL): rotation with a grace period (the old
 * key keeps working until the grace ends, then 401; DELETE ends it at once; the listing says
 * `expiring`), across two instances on one PostgreSQL (a cached old key never outlives the
 * grace, and a revocation reaches the other instance), master key rotation through
 * configuration (`COUNTERSIGN_MASTER_KEY_PREVIOUS[_UNTIL]`) and through the data-dir files
 * (`countersign master-key rotate`) while the server runs, and the CLI's `--grace`.
 * Time moves by an injected clock, never by sleeping.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { generateApiKey } from '@countersign/core';
import { STORES, freshPostgresDatabase, startApp, tempDir, type TestApp } from './helpers/server.js';
import { assertError, createProject, getWith, postLog } from './foundation-helpers.js';
import { runCli, waitUntil } from './proofs-helpers.js';
import { startWitnessApp } from './tsa-helpers.js';
import { loadConfig } from '../src/config.js';
import { rotateMasterKeyFiles } from '../src/cli/master-key.js';
import { parsePreviousMasterKeyFile } from '../src/auth/master-keys.js';

const KEY = 'key lifecycle payload key';
const HOUR = 3600_000;

/** A settable clock for an app. */
function clock(start = Date.now()) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

async function rotate(t: Pick<TestApp, 'app' | 'masterKey'>, projectId: string, keyId: string, body: unknown) {
  return t.app.inject({
    method: 'POST',
    url: `/v1/projects/${projectId}/keys/${keyId}/rotate`,
    headers: { authorization: `Bearer ${t.masterKey}` },
    payload: body as Record<string, unknown>,
  });
}

const logWith = async (t: Pick<TestApp, 'app'>, key: string) =>
  (await postLog(t.app, key, { payload: { step: 1 } }, { 'x-service-encryption-key': KEY })).statusCode;

for (const store of STORES) {
  describe(`project key rotation with a grace period (${store})`, () => {
    it('the old key works until the grace ends, then 401; the listing says expiring, then revoked', async () => {
      const c = clock();
      const w = await startWitnessApp({ store, listen: false, now: c.now });
      const t = { app: w.app, masterKey: w.app.ctx.masterKey };
      try {
        const p = await createProject({ ...w, ...t, config: w.app.ctx.config, url: '', close: w.close }, 'agent');
        assert.equal(await logWith(t, p.apiKey), 201); // cached before the rotation
        const r = await rotate(t, p.projectId, p.keyId, { graceSeconds: 600 });
        assert.equal(r.statusCode, 201, r.body);
        const answer = r.json();
        assert.equal(answer.revokedKeyId, p.keyId);
        assert.equal(answer.oldKeyRevokedAt, new Date(c.now() + 600_000).toISOString());
        const fresh = answer.key.apiKey as string;
        assert.equal(await logWith(t, p.apiKey), 201, 'old key inside the grace period');
        assert.equal(await logWith(t, fresh), 201, 'new key at once');
        const listed = (await getWith(t.app, t.masterKey, `/v1/projects/${p.projectId}/keys`)).json().keys;
        const old = listed.find((k: { id: string }) => k.id === p.keyId);
        assert.equal(old.status, 'expiring');
        assert.equal(old.revokedAt, answer.oldKeyRevokedAt);
        // A key already being rotated away is not rotated again.
        assertError(await rotate(t, p.projectId, p.keyId, {}), 404, 'not_found');

        c.advance(599_000);
        assert.equal(await logWith(t, p.apiKey), 201, 'one second before the end');
        c.advance(1_000);
        const refused = await postLog(t.app, p.apiKey, { payload: {} }, { 'x-service-encryption-key': KEY });
        assertError(refused, 401, 'invalid_api_key');
        assert.equal(await logWith(t, fresh), 201);
        const after = (await getWith(t.app, t.masterKey, `/v1/projects/${p.projectId}/keys`)).json().keys;
        assert.equal(after.find((k: { id: string }) => k.id === p.keyId).status, 'revoked');
      } finally {
        await w.close();
      }
    });

    it('without a grace period the old key fails at once; DELETE ends a grace period at once', async () => {
      const t = await startApp({ store });
      try {
        const a = await createProject(t, 'service');
        assert.equal(await logWith(t, a.apiKey), 201);
        const now = await rotate(t, a.projectId, a.keyId, { graceSeconds: 0 });
        assert.equal(now.statusCode, 201, now.body);
        assert.equal(await logWith(t, a.apiKey), 401);
        assert.equal(await logWith(t, now.json().key.apiKey), 201);

        const b = await createProject(t, 'agent');
        const graced = await rotate(t, b.projectId, b.keyId, { graceSeconds: 3600 });
        assert.equal(await logWith(t, b.apiKey), 201);
        const del = await t.app.inject({
          method: 'DELETE',
          url: `/v1/projects/${b.projectId}/keys/${b.keyId}`,
          headers: { authorization: `Bearer ${t.masterKey}` },
        });
        assert.equal(del.statusCode, 200, del.body);
        assert.equal(del.json().key.status, 'revoked');
        assert.ok(Date.parse(del.json().key.revokedAt) < Date.parse(graced.json().oldKeyRevokedAt));
        assert.equal(await logWith(t, b.apiKey), 401);
      } finally {
        await t.close();
      }
    });

    it('refuses a grace period that is negative, too long or not a whole number', async () => {
      const t = await startApp({ store });
      try {
        const p = await createProject(t, 'agent');
        for (const graceSeconds of [-1, 30 * 24 * 3600 + 1, 1.5, '60']) {
          assertError(await rotate(t, p.projectId, p.keyId, { graceSeconds }), 400, 'invalid_request');
        }
        assert.equal(await logWith(t, p.apiKey), 201, 'a refused rotation changes nothing');
      } finally {
        await t.close();
      }
    });
  });
}

if (STORES.includes('postgres')) {
  it('two instances on one PostgreSQL: a cached old key lives exactly as long as its grace, and DELETE reaches the other instance', async () => {
    const c = clock();
    const databaseUrl = await freshPostgresDatabase();
    const one = await startWitnessApp({ store: 'postgres', databaseUrl, listen: false, now: c.now });
    const two = await startWitnessApp({
      store: 'postgres',
      databaseUrl,
      listen: false,
      now: c.now,
      config: { masterKey: one.app.ctx.masterKey },
    });
    const t1 = { app: one.app, masterKey: one.app.ctx.masterKey };
    const t2 = { app: two.app, masterKey: one.app.ctx.masterKey };
    try {
      const p = await createProject({ ...one, ...t1, config: one.app.ctx.config, url: '', close: one.close }, 'agent');
      assert.equal(await logWith(t2, p.apiKey), 201); // instance two caches the key for 30 s
      // Instance two's key cache hears NOTIFY before this handler (handlers run in order).
      const heard = new Promise<void>((resolve) => {
        const off = two.app.ctx.store.notifier.on('countersign_keys', () => {
          off();
          resolve();
        });
      });
      const r = await rotate(t1, p.projectId, p.keyId, { graceSeconds: 5 });
      assert.equal(r.statusCode, 201, r.body);
      await heard;
      // Instance two re-reads the key: still good within the grace, cached no longer than it.
      assert.equal(await logWith(t2, p.apiKey), 201);
      c.advance(5_000);
      // Its cache entry, however fresh, ends with the grace period.
      assert.equal(await logWith(t2, p.apiKey), 401);
      assert.equal(await logWith(t1, p.apiKey), 401);

      // A second key: rotated with a long grace on one, then revoked on one; two refuses it soon.
      const added = await one.app.inject({
        method: 'POST',
        url: `/v1/projects/${p.projectId}/keys`,
        headers: { authorization: `Bearer ${t1.masterKey}` },
        payload: { credentialClass: 'service' },
      });
      const k = added.json().key as { id: string; apiKey: string };
      assert.equal((await rotate(t1, p.projectId, k.id, { graceSeconds: 3600 })).statusCode, 201);
      assert.equal(await logWith(t2, k.apiKey), 201);
      await one.app.inject({
        method: 'DELETE',
        url: `/v1/projects/${p.projectId}/keys/${k.id}`,
        headers: { authorization: `Bearer ${t1.masterKey}` },
      });
      // NOTIFY is asynchronous: wait for instance two to hear it (not a timing assertion).
      await waitUntil('instance two refuses the revoked key', async () => (await logWith(t2, k.apiKey)) === 401);
    } finally {
      await two.close();
      await one.close();
    }
  });
}

describe('master key rotation', () => {
  const keysOf = (t: Pick<TestApp, 'app'>, key: string, projectId = 'prj_live_none') =>
    getWith(t.app, key, `/v1/projects/${projectId}/keys`);

  it('configuration: the previous key works until COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL, the new one at once', async () => {
    const c = clock();
    const oldKey = generateApiKey('master');
    const newKey = generateApiKey('master');
    const until = new Date(c.now() + HOUR).toISOString();
    const config = loadConfig(
      { dataDir: tempDir(), masterKey: newKey },
      { COUNTERSIGN_MASTER_KEY_PREVIOUS: oldKey, COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL: until },
    );
    assert.deepEqual(config.masterKeyPrevious, { key: oldKey, until: Date.parse(until) });
    const w = await startWitnessApp({ store: 'sqlite', listen: false, now: c.now, config });
    try {
      // 404 for an unknown project means the master key was accepted.
      assertError(await keysOf(w, newKey), 404, 'not_found');
      assertError(await keysOf(w, oldKey), 404, 'not_found');
      c.advance(HOUR);
      const refused = await keysOf(w, oldKey);
      assertError(refused, 401, 'invalid_api_key');
      assert.match(refused.json().error.message, /grace period is over/);
      assertError(await keysOf(w, newKey), 404, 'not_found');
      assertError(await keysOf(w, generateApiKey('master')), 401, 'invalid_api_key');
    } finally {
      await w.close();
    }
  });

  it('configuration mistakes are refused at start', () => {
    const dataDir = tempDir();
    assert.throws(() => loadConfig({ dataDir }, { COUNTERSIGN_MASTER_KEY_PREVIOUS: 'nope' }), /COUNTERSIGN_MASTER_KEY_PREVIOUS must be/);
    assert.throws(
      () =>
        loadConfig(
          { dataDir },
          { COUNTERSIGN_MASTER_KEY_PREVIOUS: generateApiKey('master'), COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL: 'soon' },
        ),
      /ISO 8601/,
    );
    assert.throws(() => loadConfig({ dataDir }, { COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL: '2030-01-01T00:00:00Z' }), /needs/);
  });

  it('data-dir files: `countersign master-key rotate` takes effect in a running server, no restart; restart keeps the grace', async () => {
    const c = clock();
    const dataDir = tempDir();
    const first = await startWitnessApp({ store: 'sqlite', dataDir, listen: false, now: c.now });
    const oldKey = first.app.ctx.masterKey;
    let newKey: string;
    try {
      const p = await createProject({ ...first, masterKey: oldKey, config: first.app.ctx.config, url: '', close: first.close }, 'agent');
      const cli = await runCli(['master-key', 'rotate', '--data-dir', dataDir, '--grace', '7200', '--json']);
      assert.equal(cli.code, 0, cli.stderr);
      const printed = JSON.parse(cli.stdout) as { masterKey: string; previousUntil: string };
      newKey = printed.masterKey;
      assert.match(newKey, /^key_master_/);
      assert.equal(fs.readFileSync(path.join(dataDir, 'master.key'), 'utf8').trim(), newKey);
      const previous = parsePreviousMasterKeyFile(fs.readFileSync(path.join(dataDir, 'master.key.previous'), 'utf8'));
      assert.equal(previous.key, oldKey);
      assert.equal(new Date(previous.until!).toISOString(), printed.previousUntil);
      assert.equal(fs.statSync(path.join(dataDir, 'master.key')).mode & 0o777, 0o600);
      // The running server accepts the new key at once and the old one still.
      assert.equal((await keysOf(first, newKey, p.projectId)).statusCode, 200);
      assert.equal((await keysOf(first, oldKey, p.projectId)).statusCode, 200);
    } finally {
      await first.close();
    }
    // After a restart both still work (the grace is in the file), until it ends.
    const second = await startWitnessApp({ store: 'sqlite', dataDir, listen: false, now: c.now });
    try {
      assert.equal(second.app.ctx.masterKey, newKey);
      assertError(await keysOf(second, newKey), 404, 'not_found');
      assertError(await keysOf(second, oldKey), 404, 'not_found');
      // The clock of the files is the wall clock; move this app's clock past the end of the grace.
      c.advance(3 * HOUR);
      assertError(await keysOf(second, oldKey), 401, 'invalid_api_key');
      assertError(await keysOf(second, newKey), 404, 'not_found');
    } finally {
      await second.close();
    }
  });

  it('rotating files twice keeps only the latest previous key; a missing master.key is an error', () => {
    const dataDir = tempDir();
    assert.throws(() => rotateMasterKeyFiles(dataDir, 60), /no .*master\.key to rotate/);
    fs.writeFileSync(path.join(dataDir, 'master.key'), generateApiKey('master') + '\n');
    const a = rotateMasterKeyFiles(dataDir, 60, 1_000);
    const b = rotateMasterKeyFiles(dataDir, 60, 2_000);
    const previous = parsePreviousMasterKeyFile(fs.readFileSync(path.join(dataDir, 'master.key.previous'), 'utf8'));
    assert.equal(previous.key, a.key);
    assert.equal(previous.until, 62_000);
    assert.equal(fs.readFileSync(path.join(dataDir, 'master.key'), 'utf8').trim(), b.key);
  });
});

describe('CLI: projects rotate-key --grace', () => {
  it('rotates with a grace period through the API and says until when the old key works', async () => {
    const t = await startApp({ store: 'sqlite', listen: true });
    try {
      const p = await createProject(t, 'agent');
      const r = await runCli([
        'projects',
        'rotate-key',
        p.projectId,
        p.keyId,
        '--grace',
        '120',
        '--url',
        t.url,
        '--master-key',
        t.masterKey,
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`key_agent_\\S+ +\\(shown once; ${p.keyId} works until \\d{4}-\\d\\d-\\d\\dT`));
      assert.equal(await logWith(t, p.apiKey), 201);
      const bad = await runCli([
        'projects',
        'rotate-key',
        p.projectId,
        p.keyId,
        '--grace',
        'soon',
        '--url',
        t.url,
        '--master-key',
        t.masterKey,
      ]);
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /--grace must be a whole number/);
    } finally {
      await t.close();
    }
  });
});
