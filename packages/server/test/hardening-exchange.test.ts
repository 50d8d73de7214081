/**
 * Issue "Hardening", the exchange itself: a record is never left incomplete by what the upstream
 * or the caller sends, and `/v1/proxy` forwards the exact bytes of its `payload` member.
 * - upstream JSON that JavaScript cannot represent (1e400, 20,000-deep arrays) is recorded
 *   complete, as text, with the SHA-256 of the bytes;
 * - payloads nested deeper than 256 levels are refused with 400 json_too_deep before any record;
 * - 64-bit ids, `-0`, duplicate keys and bad UTF-8 reach the upstream byte for byte, and the
 *   record says exactly what was sent;
 * - an upstream cannot speak in our header namespace.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request } from 'undici';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import { decryptRecord, makeProjectKey, waitFor } from './helpers/upstreams.js';
import { startScriptedUpstream, type ScriptedUpstream } from './helpers/scripted-upstream.js';

const ENC = 'hardening-exchange-key';
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

for (const store of STORES) {
  describe(`exchange hardening on ${store}`, () => {
    let t: TestApp;
    let up: ScriptedUpstream;
    let projectId: string;
    let apiKey: string;

    /** POST /v1/proxy with a raw body (bytes exactly as given). */
    const raw = async (body: Buffer | string, headers: Record<string, string> = {}) => {
      const r = await request(t.url + '/v1/proxy', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, 'x-service-encryption-key': ENC, ...headers },
        body,
      });
      const buf = Buffer.from(await r.body.arrayBuffer());
      return { status: r.statusCode, headers: r.headers, body: buf, logId: r.headers['x-service-log-id'] as string | undefined };
    };
    const record = async (logId: string) => {
      const row = await waitFor(async () => {
        const r = await t.app.ctx.store.logs.get(projectId, logId);
        return r && r.status !== 'pending' ? r : undefined;
      });
      return { row, payload: (await decryptRecord(row.payload, ENC, logId)) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
    };
    const countLogs = async () => (await t.app.ctx.store.logs.list(projectId, {}, 1000)).length;

    before(async () => {
      up = await startScriptedUpstream();
      t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort] } });
      ({ projectId, apiKey } = await makeProjectKey(t.app, 'agent'));
    });
    after(async () => {
      await t.close();
      await up.close();
    });

    test('an upstream JSON answer with 1e400 is passed on whole and recorded complete, as text with its SHA-256', async () => {
      const answer = '{"n":1e400,"id":9007199254740993}';
      up.answer('/huge-number', { headers: { 'content-type': 'application/json' }, body: answer });
      const r = await raw(JSON.stringify({ target: up.url + '/huge-number', payload: {} }));
      assert.equal(r.status, 200);
      assert.equal(r.body.toString(), answer);
      const { row, payload } = await record(r.logId!);
      assert.equal(row.status, 'complete');
      assert.equal(payload.response.bodyText, answer);
      assert.equal(payload.response.body, undefined);
      assert.equal(payload.response.sha256, sha(answer));
    });

    test('an upstream answer of arrays nested 20,000 deep is recorded complete, as text', async () => {
      const answer = '['.repeat(20000) + ']'.repeat(20000);
      up.answer('/deep', { headers: { 'content-type': 'application/json' }, body: answer });
      const r = await raw(JSON.stringify({ target: up.url + '/deep', payload: {} }));
      assert.equal(r.status, 200);
      assert.equal(r.body.length, answer.length);
      const { row, payload } = await record(r.logId!);
      assert.equal(row.status, 'complete');
      assert.equal(payload.response.bodyText, answer);
    });

    test('an upstream answer with duplicate keys is recorded as the text it is', async () => {
      const answer = '{"a":1,"a":2}';
      up.answer('/dup', { headers: { 'content-type': 'application/json' }, body: answer });
      const r = await raw(JSON.stringify({ target: up.url + '/dup', payload: {} }));
      const { payload } = await record(r.logId!);
      assert.equal(payload.response.bodyText, answer);
    });

    test('a payload nested deeper than 256 levels is 400 json_too_deep on /v1/proxy and /v1/log, with nothing recorded or sent', async () => {
      const before = await countLogs();
      const sent = up.requests.length;
      for (const depth of [300, 6000, 20000]) {
        const deep = '['.repeat(depth) + ']'.repeat(depth);
        const r = await raw(`{"target":"${up.url}/echo","payload":{"x":${deep}}}`);
        assert.equal(r.status, 400, `depth ${depth}`);
        assert.equal(JSON.parse(r.body.toString()).error.code, 'json_too_deep');
        assert.match(JSON.parse(r.body.toString()).error.message, /256/);
        const log = await request(t.url + '/v1/log', {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, 'x-service-encryption-key': ENC },
          body: `{"payload":{"a":1},"metadata":{"m":${deep}}}`,
        });
        assert.equal(log.statusCode, 400);
        assert.equal(((await log.body.json()) as any).error.code, 'json_too_deep'); // eslint-disable-line @typescript-eslint/no-explicit-any
      }
      // 255 levels inside the body (the body object adds one) are accepted.
      const ok = await raw(`{"target":"${up.url}/echo","payload":{"x":${'['.repeat(254) + ']'.repeat(254)}}}`);
      assert.equal(ok.status, 200);
      assert.equal(await countLogs(), before + 1);
      assert.equal(up.requests.length, sent + 1);
    });

    test('the exact bytes of payload go upstream: 64-bit ids, -0, duplicate keys, exponents, whitespace', async () => {
      const payload = '{ "id": 9007199254740993, "z": -0, "k": 1, "k": 2, "e": 1E+2, "s": "\\u00e9" }';
      const r = await raw(`{"target":"${up.url}/echo","payload":${payload},"requestProof":false}`);
      assert.equal(r.status, 200);
      const seen = up.requests.at(-1)!;
      assert.equal(seen.body.toString(), payload);
      const { payload: rec } = await record(r.logId!);
      // Not representable exactly as JSON values: recorded as the text that was sent.
      assert.equal(rec.request.bodyText, payload);
      assert.equal(rec.request.body, undefined);
      assert.equal(rec.request.sha256, sha(payload));
      assert.equal(rec.request.bytes, Buffer.byteLength(payload));
    });

    test('a lossless payload is recorded as JSON, with the SHA-256 of the exact bytes sent', async () => {
      const payload = '{"b": [1, 2.5, "x"],  "a": {"n": null}}';
      const r = await raw(`{"target":"${up.url}/echo","payload":${payload}}`);
      assert.equal(up.requests.at(-1)!.body.toString(), payload);
      const { payload: rec } = await record(r.logId!);
      assert.deepEqual(rec.request.body, { b: [1, 2.5, 'x'], a: { n: null } });
      assert.equal(rec.request.sha256, sha(payload));
    });

    test('bytes that are not UTF-8 inside the payload go upstream as sent and are recorded as base64', async () => {
      const payload = Buffer.concat([Buffer.from('{"s":"'), Buffer.from([0xff, 0xfe, 0x41]), Buffer.from('"}')]);
      const body = Buffer.concat([Buffer.from(`{"target":"${up.url}/echo","payload":`), payload, Buffer.from('}')]);
      const r = await raw(body);
      assert.equal(r.status, 200);
      assert.deepEqual(up.requests.at(-1)!.body, payload);
      const { payload: rec } = await record(r.logId!);
      assert.equal(rec.request.bodyBase64, payload.toString('base64'));
      assert.equal(rec.request.sha256, sha(payload));
    });

    test('a body with two payload members is refused before anything is recorded', async () => {
      const before = await countLogs();
      const r = await raw(`{"target":"${up.url}/echo","payload":{"a":1},"payload":{"b":2}}`);
      assert.equal(r.status, 400);
      assert.equal(JSON.parse(r.body.toString()).error.code, 'invalid_request');
      assert.equal(await countLogs(), before);
    });

    test('X-Service-* headers of an upstream answer never reach the caller', async () => {
      up.answer('/forged', {
        headers: { 'content-type': 'text/plain', 'x-service-log-id': 'log_forged', 'X-Service-Anything': 'x', 'x-other': 'kept' },
        body: 'hi',
      });
      const r = await raw(JSON.stringify({ target: up.url + '/forged', payload: {} }));
      assert.equal(r.status, 200);
      assert.notEqual(r.logId, 'log_forged');
      assert.match(r.logId!, /^log_/);
      assert.equal(r.headers['x-service-anything'], undefined);
      assert.equal(r.headers['x-other'], 'kept');
    });

    test('the entry carries the upstream status and timing in the clear', async () => {
      up.answer('/teapot', { status: 418, headers: { 'content-type': 'text/plain' }, body: 'short and stout' });
      const r = await raw(JSON.stringify({ target: up.url + '/teapot', payload: {} }));
      assert.equal(r.status, 418);
      const { row } = await record(r.logId!);
      assert.equal(row.upstreamStatus, 418);
      assert.ok(row.firstByteMs! >= 0 && row.durationMs! >= row.firstByteMs!);
      const read = await t.app.inject({
        method: 'GET',
        url: `/v1/projects/${projectId}/logs/${r.logId}`,
        headers: { authorization: `Bearer ${await liveKey()}` },
      });
      const entry = read.json().log;
      assert.equal(entry.upstreamStatus, 418);
      assert.equal(typeof entry.durationMs, 'number');
    });

    let live: string | undefined;
    const liveKey = async () => {
      if (live) return live;
      const { addKey } = await import('./helpers/upstreams.js');
      live = await addKey(t.app, projectId, 'live');
      return live;
    };
  });
}
