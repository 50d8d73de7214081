/**
 * Forward mode (`/v1/forward/{upstream}/{rest…}`, DESIGN §4) with plain HTTP clients against
 * scripted loopback upstreams: routing (names, presets, X-Service-Target-Base), whose headers go
 * where, any method and body byte for byte both ways, and records as complete as `/v1/proxy`'s.
 * The real OpenAI and Anthropic SDKs are driven in forward-sdk.test.ts.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import { FormData, request } from 'undici';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import { addKey, decryptRecord, makeProjectKey, waitFor } from './helpers/upstreams.js';
import { startScriptedUpstream, type ScriptedUpstream } from './helpers/scripted-upstream.js';

const ENC = 'forward-mode-key';
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

for (const store of STORES) {
  describe(`forward mode on ${store}`, () => {
    let t: TestApp;
    let up: ScriptedUpstream;
    let projectId: string;
    let apiKey: string;

    const ours = (extra: Record<string, string> = {}) => ({ 'x-service-key': apiKey, 'x-service-encryption-key': ENC, ...extra });
    const call = async (
      path: string,
      init: { method?: string; headers?: Record<string, string>; body?: Buffer | string | FormData } = {},
    ) => {
      const r = await request(t.url + path, {
        method: (init.method ?? 'GET') as 'GET',
        headers: init.headers ?? ours(),
        body: init.body ?? null,
      });
      const body = Buffer.from(await r.body.arrayBuffer());
      return { status: r.statusCode, headers: r.headers, body, logId: r.headers['x-service-log-id'] as string | undefined };
    };
    const record = async (logId: string) => {
      const row = await waitFor(async () => {
        const r = await t.app.ctx.store.logs.get(projectId, logId);
        return r && r.status !== 'pending' ? r : undefined;
      });
      return { row, payload: (await decryptRecord(row.payload, ENC, logId)) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
    };

    before(async () => {
      up = await startScriptedUpstream();
      t = await startApp({
        store,
        listen: true,
        config: { allowTargets: [up.hostPort], upstreams: { fake: `${up.url}/api/v1` }, proofWindowMs: 200 },
      });
      ({ projectId, apiKey } = await makeProjectKey(t.app, 'agent'));
    });
    after(async () => {
      await t.close();
      await up.close();
    });

    test('a named upstream: path and query appended to its base, provider headers through, ours stripped', async () => {
      const body = '{"model":"m","messages":[{"role":"user","content":"hi"}]}';
      const r = await call('/v1/forward/fake/chat/completions?api-version=2&x=%2F', {
        method: 'POST',
        headers: ours({
          'content-type': 'application/json',
          authorization: 'Bearer sk-provider',
          'x-api-key': 'provider-key-2',
          'x-service-run-id': 'run-fwd',
          'x-agent-rationale': 'sealed-rationale',
          'x-custom': 'kept',
        }),
        body,
      });
      assert.equal(r.status, 200);
      assert.match(r.logId!, /^log_/);
      const seen = up.requests.at(-1)!;
      assert.equal(seen.url, '/api/v1/chat/completions?api-version=2&x=%2F');
      assert.equal(seen.method, 'POST');
      assert.equal(seen.body.toString(), body);
      assert.equal(seen.headers.authorization, 'Bearer sk-provider');
      assert.equal(seen.headers['x-api-key'], 'provider-key-2');
      assert.equal(seen.headers['x-custom'], 'kept');
      assert.equal(seen.headers['content-length'], String(Buffer.byteLength(body)));
      for (const name of Object.keys(seen.headers)) assert.ok(!/^x-(service|agent)-/.test(name), `${name} reached the upstream`);
      assert.ok(!JSON.stringify(seen.headers).includes(apiKey));
      const { row, payload } = await record(r.logId!);
      assert.equal(row.status, 'complete');
      assert.equal(row.traceId, 'run-fwd');
      assert.equal(row.source, 'proxy');
      assert.equal(payload.via, 'forward');
      assert.equal(payload.request.target, `${up.url}/api/v1/chat/completions?api-version=2&x=%2F`);
      assert.deepEqual(payload.request.body, JSON.parse(body));
      assert.equal(payload.request.sha256, sha(body));
      assert.equal(payload.request.headers.authorization, '[REDACTED]');
      assert.equal(payload.agentRationale, 'sealed-rationale');
      assert.equal(row.upstreamStatus, 200);
    });

    test('X-Service-Target-Base wins over a name, and an unknown name is 404 listing the names', async () => {
      const r = await call('/v1/forward/fake/x/y', { headers: ours({ 'x-service-target-base': `${up.url}/other/` }) });
      assert.equal(r.status, 200);
      assert.equal(up.requests.at(-1)!.url, '/other/fake/x/y');
      const unknown = await call('/v1/forward/nope/x');
      assert.equal(unknown.status, 404);
      const err = JSON.parse(unknown.body.toString()).error;
      assert.equal(err.code, 'unknown_upstream');
      for (const name of ['openai', 'anthropic', 'mistral', 'groq', 'fake']) assert.match(err.message, new RegExp(`\\b${name}\\b`));
      const bad = await call('/v1/forward/x', { headers: ours({ 'x-service-target-base': 'ftp://example.com' }) });
      assert.equal(bad.status, 400);
    });

    test('our key only in X-Service-Key: none, a live key or our key in Authorization are refused, nothing sent', async () => {
      const sent = up.requests.length;
      const none = await call('/v1/forward/fake/a', { headers: { authorization: `Bearer ${apiKey}`, 'x-service-encryption-key': ENC } });
      assert.equal(none.status, 401);
      assert.equal(JSON.parse(none.body.toString()).error.code, 'missing_api_key');
      const live = await addKey(t.app, projectId, 'live');
      const liveCall = await call('/v1/forward/fake/a', { headers: { 'x-service-key': live, 'x-service-encryption-key': ENC } });
      assert.equal(liveCall.status, 403);
      const noEnc = await call('/v1/forward/fake/a', { headers: { 'x-service-key': apiKey } });
      assert.equal(noEnc.status, 400);
      assert.equal(JSON.parse(noEnc.body.toString()).error.code, 'missing_encryption_key');
      assert.equal(up.requests.length, sent);
    });

    test('multipart uploads and binary bodies go upstream byte for byte; answers come back byte for byte', async () => {
      const audio = randomBytes(300_000);
      const form = new FormData();
      form.append('model', 'whisper-1');
      form.append('file', new Blob([audio], { type: 'audio/wav' }), 'a.wav');
      up.answer('/api/v1/audio/transcriptions', { headers: { 'content-type': 'application/octet-stream' }, body: audio });
      const r = await call('/v1/forward/fake/audio/transcriptions', { method: 'POST', body: form });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, audio);
      const seen = up.requests.at(-1)!;
      assert.match(String(seen.headers['content-type']), /^multipart\/form-data; boundary=/);
      assert.ok(seen.body.includes(audio));
      const { payload } = await record(r.logId!);
      assert.equal(payload.request.sha256, sha(seen.body));
      assert.equal(payload.request.bytes, seen.body.length);
      assert.equal(payload.response.sha256, sha(audio));
      assert.equal(payload.response.bodyBase64, audio.toString('base64'));

      const zipped = gzipSync(Buffer.from('{"a":1}'));
      const z = await call('/v1/forward/fake/gz', {
        method: 'PUT',
        headers: ours({ 'content-type': 'application/json', 'content-encoding': 'gzip' }),
        body: zipped,
      });
      assert.equal(z.status, 200);
      assert.deepEqual(up.requests.at(-1)!.body, zipped);
      assert.equal(up.requests.at(-1)!.headers['content-encoding'], 'gzip');
    });

    test('a large streamed body: capture truncated at 2 MB, hash and size over the whole stream', async () => {
      const big = randomBytes(5 * 1024 * 1024 + 7);
      const r = await call('/v1/forward/fake/upload', {
        method: 'POST',
        headers: ours({ 'content-type': 'application/octet-stream' }),
        body: big,
      });
      assert.equal(r.status, 200);
      assert.deepEqual(up.requests.at(-1)!.body, big);
      const { payload } = await record(r.logId!);
      assert.equal(payload.request.truncated, true);
      assert.equal(payload.request.bytes, big.length);
      assert.equal(payload.request.sha256, sha(big));
    });

    test('a body of declared length is in the write-ahead record; a chunked one joins it with the outcome', async () => {
      up.answer('/api/v1/held', { headers: { 'content-type': 'text/plain' }, body: ['one ', 'two'], gapMs: 400 });
      /** Sends `body`, and reads the record while the upstream holds the answer open. */
      const pendingThenFinal = async (body: string | Readable, headers: Record<string, string>) => {
        const before = up.requests.length;
        const answer = request(t.url + '/v1/forward/fake/held', { method: 'POST', headers: ours(headers), body });
        const r = await answer;
        const logId = r.headers['x-service-log-id'] as string;
        await waitFor(() => (up.requests.length > before ? true : undefined));
        const row = await t.app.ctx.store.logs.get(projectId, logId);
        assert.equal(row?.status, 'pending', 'the answer is still streaming');
        const pending = (await decryptRecord(row!.payload, ENC, logId)) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
        assert.equal(await r.body.text(), 'one two');
        return { pending, final: (await record(logId)).payload };
      };
      const json = JSON.stringify({ model: 'm', n: 12345678901234567890n.toString(), list: [1, 2, 3] });
      const known = await pendingThenFinal(json, { 'content-type': 'application/json' });
      // Read before anything was written, as POST /v1/proxy reads its payload: the pending record
      // already holds the request exactly as the finished one states it.
      assert.deepEqual(known.pending.request.body, JSON.parse(json));
      assert.equal(known.pending.request.sha256, sha(json));
      assert.deepEqual(known.final.request, known.pending.request);
      assert.deepEqual(up.requests.at(-1)!.body, Buffer.from(json));
      assert.equal(up.requests.at(-1)!.headers['content-length'], String(Buffer.byteLength(json)));

      const chunked = await pendingThenFinal(Readable.from([Buffer.from('{"a":'), Buffer.from('1}')]), {
        'content-type': 'application/json',
      });
      // Streamed as it arrived: the body is known only once it has gone, so the outcome brings it.
      assert.equal(chunked.pending.request.bytes, undefined);
      assert.deepEqual(chunked.final.request.body, { a: 1 });
      assert.equal(chunked.final.request.bytes, 7);
      assert.deepEqual(up.requests.at(-1)!.body, Buffer.from('{"a":1}'));
    });

    test('a caller that goes away before its body is complete leaves no record and sends nothing', async () => {
      const before = up.requests.length;
      const u = new URL(t.url);
      const socket = net.connect(Number(u.port), u.hostname);
      await new Promise((r) => socket.once('connect', r));
      const head = [
        'POST /v1/forward/fake/cut HTTP/1.1',
        `Host: ${u.host}`,
        ...Object.entries(ours({ 'content-type': 'application/json', 'content-length': '1000' })).map(([k, v]) => `${k}: ${v}`),
        '',
        '{"half":',
      ];
      socket.write(head.join('\r\n'));
      await waitFor(() => (t.app.admission.inFlight.calls > 0 ? true : undefined));
      const rows = (await t.app.ctx.store.logs.list(projectId, {}, 100000)).length;
      socket.destroy();
      await waitFor(() => (t.app.admission.inFlight.calls === 0 ? true : undefined));
      assert.equal(up.requests.length, before, 'nothing went upstream');
      assert.equal((await t.app.ctx.store.logs.list(projectId, {}, 100000)).length, rows, 'no record was written');
      const after = await call('/v1/forward/fake/ok', { method: 'POST', headers: ours(), body: 'fine' });
      assert.equal(after.status, 200);
    });

    test('any method: DELETE, GET with a query, HEAD keeps the upstream Content-Length', async () => {
      up.answer('/api/v1/thing', { headers: { 'content-type': 'text/plain' }, body: '12345' });
      const del = await call('/v1/forward/fake/thing', { method: 'DELETE' });
      assert.equal(del.status, 200);
      assert.equal(up.requests.at(-1)!.method, 'DELETE');
      const head = await call('/v1/forward/fake/thing', { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.headers['content-length'], '5');
      assert.equal(head.body.length, 0);
      assert.equal(up.requests.at(-1)!.method, 'HEAD');
    });

    test('SSE passes event by event and is recorded as events', async () => {
      const events = ['data: {"n":1}\n\n', 'data: {"n":2}\n\n', 'data: [DONE]\n\n'];
      up.answer('/api/v1/stream', { headers: { 'content-type': 'text/event-stream' }, body: events, gapMs: 150 });
      const r = await request(t.url + '/v1/forward/fake/stream', {
        method: 'POST',
        headers: ours({ 'content-type': 'application/json' }),
        body: '{}',
      });
      const arrivals: number[] = [];
      const start = Date.now();
      for await (const _chunk of r.body) arrivals.push(Date.now() - start);
      assert.ok(arrivals.length >= 2, 'events arrive in several chunks');
      assert.ok(arrivals[0]! < arrivals.at(-1)! - 100, 'the first event arrives well before the last');
      const { payload } = await record(r.headers['x-service-log-id'] as string);
      assert.deepEqual(
        payload.response.events.map((e: { data: string }) => e.data),
        ['{"n":1}', '{"n":2}', '[DONE]'],
      );
    });

    test('X-Service-Request-Proof asks for a receipt; dot segments and a bad proof flag are 400', async () => {
      const r = await call('/v1/forward/fake/p', { headers: ours({ 'x-service-request-proof': 'true' }) });
      const { row } = await record(r.logId!);
      assert.equal(row.requestProof, true);
      assert.equal((await call('/v1/forward/fake/p', { headers: ours({ 'x-service-request-proof': 'yes' }) })).status, 400);
      // WHATWG URL clients (fetch, undici) resolve dot segments before sending; node:http sends the path as given.
      // The URL parser also reads `\` as `/` in http(s) URLs (`…/v1/..\x` is `…/x`), and Node lets it through.
      const dotted = ['/v1/forward/fake/a/%2e%2e/b', '/v1/forward/fake/a/../b', '/v1/forward/fake/./b', '/v1/forward/fake/a/.%2E/b'];
      for (const path of [...dotted, '/v1/forward/fake/a/..\\b', '/v1/forward/fake/a\\..\\..\\b', '/v1/forward/fake/a/..']) {
        assert.equal(await rawStatus(t.url, path, ours()), 400, path);
      }
      // Dots that are not a whole segment are a name like any other.
      for (const path of ['/v1/forward/fake/a/...', '/v1/forward/fake/a/..b/c.', '/v1/forward/fake/v1.2/x']) {
        assert.equal(await rawStatus(t.url, path, ours()), 200, path);
      }
    });

    test('a blocked destination is 403 target_blocked, recorded, and nothing is sent', async () => {
      const r = await call('/v1/forward/x', { headers: ours({ 'x-service-target-base': 'http://169.254.169.254/latest' }) });
      assert.equal(r.status, 403);
      assert.equal(JSON.parse(r.body.toString()).error.code, 'target_blocked');
      const { row } = await record(r.logId!);
      assert.equal(row.status, 'failed');
    });

    test('upstream errors pass through untouched; ours keep our JSON shape', async () => {
      const err = '{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}';
      up.answer('/api/v1/denied', { status: 401, headers: { 'content-type': 'application/json' }, body: err });
      const r = await call('/v1/forward/fake/denied');
      assert.equal(r.status, 401);
      assert.equal(r.body.toString(), err);
      const { row } = await record(r.logId!);
      assert.equal(row.status, 'complete');
      assert.equal(row.upstreamStatus, 401);
    });
  });
}

/** Status of a GET sent with node:http, which keeps the path exactly as written. */
function rawStatus(base: string, path: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(base + '/', { method: 'GET', path, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}
