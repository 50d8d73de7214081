import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseApiKey } from '@countersign/core';
import { STORES, startApp } from './helpers/server.js';
import { addKey, assertError, createProject, getWith, postLog } from './foundation-helpers.js';

const KEY_HEX = 'k'.repeat(40);
const plain = (id?: string) => ({ ...(id ? { id } : {}), actor: 'a', action: 'x', payload: { q: 1 } });

for (const store of STORES) {
  test(`projects and keys on ${store}`, async (s) => {
    const t = await startApp({ store });
    const master = { authorization: `Bearer ${t.masterKey}` };
    try {
      await s.test('POST /v1/projects answers the spec 2.4 record plus clientSecret', async () => {
        const r = await t.app.inject({
          method: 'POST',
          url: '/v1/projects',
          headers: master,
          payload: { name: 'demo', credentialClass: 'agent', credentialLabel: 'ci' },
        });
        assert.equal(r.statusCode, 201);
        const body = r.json();
        assert.equal(body.success, true);
        assert.match(body.project.id, /^prj_live_[0-9A-Za-z]{20}$/);
        assert.match(body.project.apiKey, /^key_agent_/);
        assert.equal(parseApiKey(body.project.apiKey).credentialClass, 'agent');
        assert.equal(body.project.apiKeyPrefix, body.project.apiKey.slice(0, 'key_agent_'.length + 8));
        assert.equal(body.project.credentialClass, 'agent');
        assert.match(body.project.clientSecret, /^cs_/);
        assert.match(body.project.keyId, /^kid_/);
      });

      await s.test('only the master key administers', async () => {
        const p = await createProject(t, 'agent');
        const live = await addKey(t, p.projectId, 'live');
        for (const key of [p.apiKey, live.apiKey]) {
          const r = await t.app.inject({
            method: 'POST',
            url: '/v1/projects',
            headers: { authorization: `Bearer ${key}` },
            payload: { name: 'x', credentialClass: 'agent' },
          });
          assertError(r, 403, 'wrong_credential_class');
          assertError(await getWith(t.app, key, `/v1/projects/${p.projectId}/keys`), 403, 'wrong_credential_class');
        }
        assertError(
          await t.app.inject({ method: 'POST', url: '/v1/projects', payload: { name: 'x', credentialClass: 'agent' } }),
          401,
          'missing_api_key',
        );
        const wrongMaster = 'key_master_' + 'A'.repeat(38);
        assertError(
          await t.app.inject({
            method: 'POST',
            url: '/v1/projects',
            headers: { authorization: `Bearer ${wrongMaster}` },
            payload: { name: 'x', credentialClass: 'agent' },
          }),
          401,
          'invalid_api_key',
        );
      });

      await s.test('bad project bodies are 400 with a catalogue code', async () => {
        for (const payload of [
          {},
          { name: 'x' },
          { name: 'x', credentialClass: 'master' },
          { name: 'x', credentialClass: 'agent', extra: 1 },
          { name: '', credentialClass: 'agent' },
        ]) {
          assertError(await t.app.inject({ method: 'POST', url: '/v1/projects', headers: master, payload }), 400, 'invalid_request');
        }
      });

      await s.test('keys: create, list without secrets, rotate with class, revoke', async () => {
        const p = await createProject(t, 'service');
        const added = await addKey(t, p.projectId, 'human');
        const list = await getWith(t.app, t.masterKey, `/v1/projects/${p.projectId}/keys`);
        assert.equal(list.statusCode, 200);
        assert.equal(list.json().keys.length, 2);
        assert.ok(!list.body.includes(p.apiKey) && !list.body.includes(added.apiKey), 'list must not show key text');
        assert.ok(!/keyHash|key_hash/.test(list.body));

        // The key works, then rotation to another class kills it at once.
        assert.equal((await postLog(t.app, added.apiKey, plain(), { 'x-service-encryption-key': KEY_HEX })).statusCode, 201);
        const rot = await t.app.inject({
          method: 'POST',
          url: `/v1/projects/${p.projectId}/keys/${added.keyId}/rotate`,
          headers: master,
          payload: { credentialClass: 'agent' },
        });
        assert.equal(rot.statusCode, 201, rot.body);
        const fresh = rot.json().key;
        assert.match(fresh.apiKey, /^key_agent_/);
        assert.equal(fresh.rotatedFrom, added.keyId);
        assertError(await postLog(t.app, added.apiKey, plain(), { 'x-service-encryption-key': KEY_HEX }), 401, 'invalid_api_key');
        assert.equal((await postLog(t.app, fresh.apiKey, plain(), { 'x-service-encryption-key': KEY_HEX })).statusCode, 201);
        // Rotating a dead key is 404; rotating without a body keeps the class.
        assertError(
          await t.app.inject({
            method: 'POST',
            url: `/v1/projects/${p.projectId}/keys/${added.keyId}/rotate`,
            headers: master,
            payload: {},
          }),
          404,
          'not_found',
        );
        const rot2 = await t.app.inject({ method: 'POST', url: `/v1/projects/${p.projectId}/keys/${fresh.id}/rotate`, headers: master });
        assert.equal(rot2.statusCode, 201, rot2.body);
        assert.equal(rot2.json().key.credentialClass, 'agent');

        // Revoke: the key fails at once, on ingest and on reads; revoking again is idempotent.
        const live = await addKey(t, p.projectId, 'live');
        assert.equal((await getWith(t.app, live.apiKey, `/v1/projects/${p.projectId}/logs`)).statusCode, 200);
        const del = await t.app.inject({ method: 'DELETE', url: `/v1/projects/${p.projectId}/keys/${live.keyId}`, headers: master });
        assert.equal(del.statusCode, 200);
        assert.equal(del.json().key.status, 'revoked');
        assertError(await getWith(t.app, live.apiKey, `/v1/projects/${p.projectId}/logs`), 401, 'invalid_api_key');
        assertError(await getWith(t.app, live.apiKey, `/v1/projects/${p.projectId}/events`), 401, 'invalid_api_key');
        assert.equal(
          (await t.app.inject({ method: 'DELETE', url: `/v1/projects/${p.projectId}/keys/${live.keyId}`, headers: master })).statusCode,
          200,
        );
        assertError(
          await t.app.inject({ method: 'DELETE', url: `/v1/projects/${p.projectId}/keys/kid_nope`, headers: master }),
          404,
          'not_found',
        );
        assertError(await getWith(t.app, t.masterKey, `/v1/projects/prj_live_nope/keys`), 404, 'not_found');
        // A key of one project cannot be revoked through another project's path.
        const other = await createProject(t, 'agent');
        assertError(
          await t.app.inject({ method: 'DELETE', url: `/v1/projects/${other.projectId}/keys/${p.keyId}`, headers: master }),
          404,
          'not_found',
        );
      });

      await s.test('a forged key with the wrong class prefix for its hash is refused', async () => {
        assertError(await postLog(t.app, 'key_agent_' + 'x'.repeat(38), plain()), 401, 'invalid_api_key');
        assertError(await postLog(t.app, 'key_agent_short', plain()), 401, 'invalid_api_key');
        assertError(await postLog(t.app, 'Basic abc', plain()), 401, 'missing_api_key');
      });
    } finally {
      await t.close();
    }
  });
}
