/**
 * Bad input never yields a 500 or a crash: malformed JSON, wrong content types, missing,
 * malformed, unknown and revoked keys, oversized bodies, unknown fields, bad envelopes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deriveEnvelopeKey, sealPayload } from '@countersign/core';
import { STORES, startApp } from './helpers/server.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';

const KEY = 'bad-input-key';

for (const store of STORES) {
  test(`bad input is refused cleanly on ${store}`, async (s) => {
    const t = await startApp({ store, config: { bodyLimit: 64 * 1024, maxBatchLogs: 10 } });
    const p = await fullProject(t);
    try {
      await s.test('malformed JSON and empty bodies', async () => {
        for (const raw of ['{', '{"payload":', 'nul', '"just a string"', '[]', '123', 'null']) {
          const r = await postLog(t.app, p.agent, raw, { 'x-service-encryption-key': KEY });
          assert.ok(r.statusCode === 400, `${raw} → ${r.statusCode}`);
          assert.ok(['invalid_json', 'invalid_request'].includes(r.json().error.code), r.body);
        }
        const empty = await t.app.inject({
          method: 'POST',
          url: '/v1/log',
          headers: { authorization: `Bearer ${p.agent}`, 'content-type': 'application/json' },
        });
        assertError(empty, 400, 'invalid_json');
        const noType = await t.app.inject({ method: 'POST', url: '/v1/log', headers: { authorization: `Bearer ${p.agent}` } });
        assert.equal(noType.statusCode, 400, noType.body);
      });

      await s.test('wrong content types are 415', async () => {
        for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
          const r = await t.app.inject({
            method: 'POST',
            url: '/v1/log',
            headers: { authorization: `Bearer ${p.agent}`, 'content-type': type },
            payload: 'payload=1',
          });
          assertError(r, 415, 'unsupported_media_type');
        }
        const proj = await t.app.inject({
          method: 'POST',
          url: '/v1/projects',
          headers: { authorization: `Bearer ${t.masterKey}`, 'content-type': 'text/plain' },
          payload: 'x',
        });
        assertError(proj, 415, 'unsupported_media_type');
      });

      await s.test('missing, malformed, unknown and revoked keys', async () => {
        const body = { payload: { a: 1 } };
        assertError(await postLog(t.app, undefined, body), 401, 'missing_api_key');
        for (const key of [
          'nope',
          'key_agent_',
          'key_robot_' + 'a'.repeat(38),
          'key_agent_' + 'a'.repeat(38),
          p.agent.slice(0, -1) + (p.agent.endsWith('A') ? 'B' : 'A'),
          'é'.repeat(10),
        ]) {
          const r = await postLog(t.app, key, body);
          assert.equal(r.statusCode, 401, `${key}: ${r.body}`);
          assert.ok(!r.body.includes(key) || key.length < 12, 'a key is not echoed');
        }
        for (const auth of ['Bearer', 'Bearer ', 'Token abc', 'Bearer a b', 'x'.repeat(5000)]) {
          const r = await t.app.inject({
            method: 'POST',
            url: '/v1/log',
            headers: { authorization: auth, 'content-type': 'application/json' },
            payload: '{}',
          });
          assert.equal(r.statusCode, 401, `${auth.slice(0, 20)}: ${r.body}`);
        }
      });

      await s.test('oversized bodies are 413', async () => {
        const big = { payload: { blob: 'x'.repeat(100 * 1024) } };
        assertError(await postLog(t.app, p.agent, big, { 'x-service-encryption-key': KEY }), 413, 'payload_too_large');
        const many = { logs: Array.from({ length: 11 }, () => ({ payload: {} })) };
        assertError(await postLog(t.app, p.agent, many, { 'x-service-encryption-key': KEY }), 413, 'payload_too_large');
        const proj = await t.app.inject({
          method: 'POST',
          url: '/v1/projects',
          headers: { authorization: `Bearer ${t.masterKey}`, 'content-type': 'application/json' },
          payload: JSON.stringify({ name: 'x'.repeat(100 * 1024), credentialClass: 'agent' }),
        });
        assertError(proj, 413, 'payload_too_large');
      });

      await s.test('unknown and mistyped fields are 400', async () => {
        const cases: unknown[] = [
          { payload: {}, extra: 1 },
          { logs: [{ payload: {} }], extra: 1 },
          { logs: [{ payload: {}, what: 1 }] },
          { payload: [] },
          { payload: 'text' },
          { payload: {}, actor: '' },
          { payload: {}, actor: 'x'.repeat(513) },
          { payload: {}, id: 'short' },
          { payload: {}, id: 'has spaces in it but long enough' },
          { payload: {}, occurredAt: 'yesterday' },
          { payload: {}, metadata: { big: 'x'.repeat(5000) } },
          { payload: {}, metadata: [] },
          { payload: {}, payloadHash: 'abc' },
          { payload: {}, payloadHash: 'a'.repeat(64) },
          { logs: 'nope' },
          {},
        ];
        for (const body of cases) {
          const r = await postLog(t.app, p.agent, body, { 'x-service-encryption-key': KEY });
          assertError(r, 400, 'invalid_request');
        }
        assertError(
          await postLog(t.app, p.agent, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-service-agent-id': 'x'.repeat(513) }),
          400,
          'invalid_request',
        );
      });

      await s.test('bad envelopes are 400 invalid_envelope; a plain payload without a key is 400 missing_encryption_key', async () => {
        const good = await sealPayload({ a: 1 }, await deriveEnvelopeKey(KEY), 'env-bad-input-0001');
        const bad: unknown[] = [
          { ...good, v: 2 },
          { ...good, alg: 'none' },
          { ...good, iv: 'AAAA' },
          { ...good, tag: '!!' },
          { ...good, kid: '' },
          { ...good, extra: 1 },
          { alg: 'A256GCM', ct: 'abc' },
        ];
        for (const payload of bad)
          assertError(await postLog(t.app, p.agent, { id: 'env-bad-input-0001', payload }), 400, 'invalid_envelope');
        assertError(await postLog(t.app, p.agent, { payload: good }), 400, 'invalid_request');
        assertError(await postLog(t.app, p.agent, { payload: { prompt: 'hi' } }), 400, 'missing_encryption_key');
        assertError(await postLog(t.app, p.agent, { payload: {} }, { 'x-service-encryption-key': '' }), 400, 'missing_encryption_key');
      });

      await s.test('read paths with bad parameters', async () => {
        for (const url of [
          `/v1/projects/${p.projectId}/logs/x`,
          `/v1/projects/${p.projectId}/logs?limit=abc`,
          `/v1/projects/${p.projectId}/logs?actorType=robot`,
          `/v1/projects/${p.projectId}/logs?handover=maybe`,
          `/v1/projects/${p.projectId}/events?cursor=c1.zzzz`,
          `/v1/projects/${p.projectId}/logs?cursor=${'c1.' + 'A'.repeat(60)}`,
        ]) {
          const r = await getWith(t.app, p.live, url);
          assert.equal(r.statusCode, 400, `${url}: ${r.body}`);
        }
        const sse = await t.app.inject({
          method: 'GET',
          url: `/v1/projects/${p.projectId}/events/stream`,
          headers: { authorization: `Bearer ${p.live}`, 'last-event-id': 'abc' },
        });
        assertError(sse, 400, 'invalid_request');
        assertError(await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/${'x'.repeat(20)}`), 404, 'not_found');
        const health = await getWith(t.app, undefined, '/healthz');
        assert.equal(health.statusCode, 200, 'the server is still healthy');
      });
    } finally {
      await t.close();
    }
  });
}
