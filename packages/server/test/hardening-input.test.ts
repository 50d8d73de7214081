/**
 * Issue 8, "Secrets and strict input": what a hostile or sloppy caller sends is refused in our
 * error shape, or read the one documented way.
 * - bodies are validated without type coercion (querystrings keep it: `limit=50`);
 * - a repeated `X-Service-*` header is 400 on every path;
 * - header values are read as UTF-8 bytes, percent-encoding is not decoded;
 * - ids and labels up to 512 characters are readable back on every path;
 * - every framework refusal (bad URL, over-long segment, oversized headers, malformed HTTP) is
 *   `{success:false,error}`;
 * - `HEAD …/events/stream` ends;
 * - `X-Agent-Rationale` is kept sealed in a plain payload; `X-Service-Agent-ID` alone is no handover.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { request as httpRequest } from 'node:http';
import { deriveEnvelopeKey, openPayload, sealPayload, type Envelope } from '@countersign/core';
import { startApp, type TestApp } from './helpers/server.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';
import { repeatedServiceHeader, serviceHeaderText } from '../src/http/service-headers.js';

const KEY = 'hardening input key';

/** Header bytes as Node would hand them over: the UTF-8 bytes of `text`, one latin1 character each. */
const utf8Bytes = (text: string): string => Buffer.from(text, 'utf8').toString('latin1');

/** Sends raw bytes on a socket and reads the whole answer (the server closes after an error). */
function rawHttp(port: number, bytes: string | Buffer): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), head: text.slice(0, split), body: text.slice(split + 4) });
    });
  });
}

/** Asserts our error shape on a raw answer. */
function assertRawError(r: { status: number; body: string }, status: number, code: string): void {
  assert.equal(r.status, status, r.body);
  const body = JSON.parse(r.body);
  assert.equal(body.success, false);
  assert.equal(body.error.code, code);
  assert.match(body.error.requestId, /^req_/);
}

/** A request with repeated headers (Node's client sends an array value as separate lines). */
function withHeaders(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string | string[]>,
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('strict input', () => {
  let t: TestApp;
  let p: Awaited<ReturnType<typeof fullProject>>;
  let port: number;
  before(async () => {
    t = await startApp({ listen: true });
    p = await fullProject(t);
    port = Number(new URL(t.url).port);
  });
  after(() => t.close());

  const read = async (id: string) => {
    const r = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/${encodeURIComponent(id)}`);
    assert.equal(r.statusCode, 200, r.body);
    return r.json().log;
  };

  test('bodies are not coerced: a string for a boolean, a number for a string, an array for a string are 400 naming the field', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ payload: {}, requestProof: 'true' }, /requestProof/],
      [{ payload: {}, actor: 5 }, /actor/],
      [{ payload: {}, traceId: ['run-1'] }, /traceId/],
      [{ logs: [{ payload: {}, requestProof: 1 }] }, /requestProof/],
    ];
    for (const [body, field] of cases) {
      const r = await postLog(t.app, p.agent, body, { 'x-service-encryption-key': KEY });
      assertError(r, 400, 'invalid_request');
      assert.match(r.json().error.message, field);
    }
    // The same on /v1/proxy (before any record or forwarding) and on the projects API.
    const proxy = await t.app.inject({
      method: 'POST',
      url: '/v1/proxy',
      headers: { authorization: `Bearer ${p.agent}`, 'content-type': 'application/json', 'x-service-encryption-key': KEY },
      payload: JSON.stringify({ target: ['http://example.com/'], payload: {} }),
    });
    assertError(proxy, 400, 'invalid_request');
    assert.match(proxy.json().error.message, /target/);
    const proof = await t.app.inject({
      method: 'POST',
      url: '/v1/proxy',
      headers: { authorization: `Bearer ${p.agent}`, 'content-type': 'application/json', 'x-service-encryption-key': KEY },
      payload: JSON.stringify({ target: 'http://example.com/', payload: {}, requestProof: 'true' }),
    });
    assertError(proof, 400, 'invalid_request');
    assert.match(proof.json().error.message, /requestProof/);
    const project = await t.app.inject({
      method: 'POST',
      url: '/v1/projects',
      headers: { authorization: `Bearer ${t.masterKey}` },
      payload: { name: 5, credentialClass: 'agent' },
    });
    assertError(project, 400, 'invalid_request');
  });

  test('querystrings, params and headers keep their coercion (limit=50, handover=true)', async () => {
    for (const q of ['limit=50', 'limit=1&handover=false', 'handover=true']) {
      const r = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?${q}`);
      assert.equal(r.statusCode, 200, `${q}: ${r.body}`);
    }
    assert.equal((await getWith(t.app, p.live, `/v1/projects/${p.projectId}/events?limit=2`)).statusCode, 200);
    assertError(await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?limit=abc`), 400, 'invalid_request');
    assertError(await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?limit=501`), 400, 'invalid_request');
  });

  test('repeatedServiceHeader finds a repeat of ours in any case, and ignores repeats of other headers', () => {
    assert.equal(repeatedServiceHeader(['Host', 'x', 'Accept', 'a', 'Accept', 'b']), undefined);
    assert.equal(repeatedServiceHeader(['X-Service-Agent-ID', 'a', 'X-Service-Action', 'b', 'X-Service-Run-ID', 'c']), undefined);
    assert.equal(repeatedServiceHeader(['X-Service-Encryption-Key', 'a', 'x-service-encryption-key', 'b']), 'x-service-encryption-key');
    assert.equal(repeatedServiceHeader(['x-service-a', '1', 'x-service-b', '2', 'X-SERVICE-B', '3']), 'x-service-b');
    assert.equal(repeatedServiceHeader(['X-Agent-Rationale', 'a', 'x-agent-rationale', 'b']), 'x-agent-rationale');
    assert.equal(repeatedServiceHeader(['X-Agent-Tool', 'a', 'x-agent-tool', 'b']), undefined);
  });

  test('a repeated X-Service-* header is 400 invalid_request on every path, naming the header and nothing else', async () => {
    const logBody = JSON.stringify({ payload: { a: 1 } });
    const twoKeys = { 'X-Service-Encryption-Key': ['first-key', 'second-key'] };
    const onLog = await withHeaders(
      port,
      'POST',
      '/v1/log',
      { authorization: `Bearer ${p.agent}`, 'content-type': 'application/json', ...twoKeys },
      logBody,
    );
    assertRawError(onLog, 400, 'invalid_request');
    assert.match(JSON.parse(onLog.body).error.message, /X-Service-Encryption-Key/);
    assert.ok(!onLog.body.includes('first-key') && !onLog.body.includes('second-key'), 'values are never echoed');
    const proxy = await withHeaders(
      port,
      'POST',
      '/v1/proxy',
      {
        authorization: `Bearer ${p.agent}`,
        'content-type': 'application/json',
        'X-Service-Encryption-Key': 'k',
        'X-Service-Agent-ID': ['a', 'b'],
      },
      JSON.stringify({ target: 'http://example.com/', payload: {} }),
    );
    assertRawError(proxy, 400, 'invalid_request');
    // Before authentication, on reads and on unauthenticated paths too.
    assertRawError(
      await withHeaders(port, 'GET', `/v1/projects/${p.projectId}/logs`, { 'X-Service-Run-ID': ['r1', 'r2'] }),
      400,
      'invalid_request',
    );
    assertRawError(await withHeaders(port, 'GET', '/healthz', { 'x-service-action': ['a', 'b'] }), 400, 'invalid_request');
    // Nothing was stored.
    const list = (await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?limit=500`)).json().logs as Array<{ actor: string }>;
    assert.ok(!list.some((l) => l.actor === 'a, b'));
    // Different headers of ours, each once, and repeated headers that are not ours, pass.
    const ok = await withHeaders(
      port,
      'POST',
      '/v1/log',
      {
        authorization: `Bearer ${p.agent}`,
        'content-type': 'application/json',
        'X-Service-Encryption-Key': KEY,
        'X-Service-Agent-ID': 'one',
        'X-Custom': ['1', '2'],
      },
      logBody,
    );
    assert.equal(ok.status, 201, ok.body);
  });

  test('header values are read as UTF-8 bytes; bytes that are not UTF-8 are 400; percent-encoding is kept as sent', async () => {
    const r = await postLog(
      t.app,
      p.agent,
      { payload: {} },
      {
        'x-service-encryption-key': KEY,
        'x-service-agent-id': utf8Bytes('agent-é中'),
        'x-service-run-id': utf8Bytes('run-ü-🚀'),
        'x-service-action': 'act%C3%A9',
      },
    );
    assert.equal(r.statusCode, 201, r.body);
    const log = await read(r.json().id);
    assert.equal(log.actor, 'agent-é中');
    assert.equal(log.traceId, 'run-ü-🚀');
    assert.equal(log.action, 'act%C3%A9', 'a percent-encoded value is stored as sent');
    // Readable back by that trace id, in a path and as a filter.
    const trace = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/traces/${encodeURIComponent('run-ü-🚀')}`);
    assert.equal(trace.statusCode, 200, trace.body);
    assert.deepEqual(
      trace.json().logs.map((l: { id: string }) => l.id),
      [log.id],
    );
    const bad = await postLog(t.app, p.agent, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-service-agent-id': 'agent-\xff\xfe' });
    assertError(bad, 400, 'invalid_request');
    assert.match(bad.json().error.message, /X-Service-Agent-ID is not valid UTF-8/);
    // The encryption key is read the same way: a UTF-8 key sent as bytes opens with the same string.
    const keyed = await postLog(t.app, p.agent, { payload: { k: 1 } }, { 'x-service-encryption-key': utf8Bytes('clé-secrète') });
    assert.equal(keyed.statusCode, 201, keyed.body);
    const env = (await read(keyed.json().id)).payload as Envelope;
    assert.equal((await openPayload(env, await deriveEnvelopeKey('clé-secrète'), keyed.json().id)).k, 1);
  });

  test('serviceHeaderText: absent, ASCII, UTF-8 and invalid bytes', () => {
    assert.equal(serviceHeaderText({}, 'x-service-agent-id'), undefined);
    assert.equal(serviceHeaderText({ 'x-service-agent-id': 'plain' }, 'x-service-agent-id'), 'plain');
    assert.equal(serviceHeaderText({ 'x-service-agent-id': utf8Bytes('中') }, 'x-service-agent-id'), '中');
    assert.throws(() => serviceHeaderText({ 'x-service-agent-id': '\xc3' }, 'x-service-agent-id'), { code: 'invalid_request' });
  });

  test('ids and labels of 512 characters are accepted and read back on every path; 513 are refused', async () => {
    const traceAscii = 't'.repeat(512);
    const traceWide = '中'.repeat(512);
    const id = 'L' + 'x'.repeat(511);
    const a = await postLog(
      t.app,
      p.agent,
      { id, traceId: traceAscii, actor: 'a'.repeat(512), payload: {} },
      { 'x-service-encryption-key': KEY },
    );
    assert.equal(a.statusCode, 201, a.body);
    const b = await postLog(t.app, p.agent, { traceId: traceWide, payload: {} }, { 'x-service-encryption-key': KEY });
    assert.equal(b.statusCode, 201, b.body);
    assert.equal((await read(id)).traceId, traceAscii);
    for (const [trace, logId] of [
      [traceAscii, id],
      [traceWide, b.json().id],
    ] as const) {
      const r = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/traces/${encodeURIComponent(trace)}`);
      assert.equal(r.statusCode, 200, r.body.slice(0, 300));
      assert.deepEqual(
        r.json().logs.map((l: { id: string }) => l.id),
        [logId],
      );
      const listed = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?traceId=${encodeURIComponent(trace)}`);
      assert.equal(listed.statusCode, 200, listed.body.slice(0, 300));
      assert.equal(listed.json().logs.length, 1);
    }
    // The proof path takes the same ids (404: this log did not ask for a proof, not 414).
    assertError(await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/${id}/proof`), 404, 'not_found');
    assertError(
      await postLog(t.app, p.agent, { traceId: 't'.repeat(513), payload: {} }, { 'x-service-encryption-key': KEY }),
      400,
      'invalid_request',
    );
    assertError(await postLog(t.app, p.agent, { id: id + 'y', payload: {} }, { 'x-service-encryption-key': KEY }), 400, 'invalid_request');
    assertError(await getWith(t.app, p.live, `/v1/projects/${p.projectId}/traces/${'t'.repeat(513)}`), 400, 'invalid_request');
  });

  test('framework errors answer in our shape: bad URL, over-long path segment, oversized headers, malformed HTTP', async () => {
    const live = `Authorization: Bearer ${p.live}\r\n`;
    // A path segment longer than the router takes (414), and one that does not decode (400).
    const long = await rawHttp(
      port,
      `GET /v1/projects/${p.projectId}/traces/${'t'.repeat(3000)} HTTP/1.1\r\nHost: x\r\n${live}Connection: close\r\n\r\n`,
    );
    assertRawError(long, 414, 'uri_too_long');
    const badUrl = await rawHttp(
      port,
      `GET /v1/projects/${p.projectId}/traces/%E0%A4%A HTTP/1.1\r\nHost: x\r\n${live}Connection: close\r\n\r\n`,
    );
    assertRawError(badUrl, 400, 'invalid_request');
    // Headers over Node's 16 KB limit: refused by the parser before a request exists.
    const big = await rawHttp(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`);
    assertRawError(big, 431, 'headers_too_large');
    // Bytes that are not HTTP.
    assertRawError(await rawHttp(port, 'NOT HTTP AT ALL\r\n\r\n'), 400, 'invalid_request');
    // A bad Content-Length on a JSON route (Fastify's content-type parser).
    const cl = await rawHttp(
      port,
      `POST /v1/log HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${p.agent}\r\nContent-Type: application/json\r\nContent-Length: abc\r\nConnection: close\r\n\r\n{}`,
    );
    assertRawError(cl, 400, 'invalid_request');
  });

  test('HEAD on the event stream answers the headers and ends', { timeout: 20_000 }, async () => {
    const head = await withHeaders(port, 'HEAD', `/v1/projects/${p.projectId}/events/stream`, { authorization: `Bearer ${p.live}` });
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
    const r = await t.app.inject({
      method: 'HEAD',
      url: `/v1/projects/${p.projectId}/events/stream`,
      headers: { authorization: `Bearer ${p.live}` },
    });
    assert.equal(r.statusCode, 200);
    assert.match(String(r.headers['content-type']), /^text\/event-stream/);
    // The same checks as GET.
    assert.equal(
      (
        await t.app.inject({
          method: 'HEAD',
          url: `/v1/projects/${p.projectId}/events/stream`,
          headers: { authorization: `Bearer ${p.agent}` },
        })
      ).statusCode,
      403,
    );
  });

  test('X-Agent-Rationale is sealed inside a plain payload as agentRationale; retries stay idempotent', async () => {
    const rationale = 'sealed-by-the-client-abc123';
    const id = 'rationale-plain-00001';
    const r = await postLog(
      t.app,
      p.agent,
      { id, payload: { step: 1 } },
      { 'x-service-encryption-key': KEY, 'x-agent-rationale': rationale },
    );
    assert.equal(r.statusCode, 201, r.body);
    const log = await read(id);
    const opened = await openPayload(log.payload as Envelope, await deriveEnvelopeKey(KEY), id);
    assert.equal(opened.agentRationale, rationale);
    assert.equal(opened.step, 1);
    const row = await t.app.ctx.store.logs.get(p.projectId, id);
    assert.ok(!JSON.stringify(row).includes(rationale), 'never in the clear');
    const again = await postLog(
      t.app,
      p.agent,
      { id, payload: { step: 1 } },
      { 'x-service-encryption-key': KEY, 'x-agent-rationale': rationale },
    );
    assert.equal(again.statusCode, 200, again.body);
    assert.equal(again.json().duplicate, true);
    assertError(
      await postLog(t.app, p.agent, { id, payload: { step: 1 } }, { 'x-service-encryption-key': KEY }),
      409,
      'idempotency_conflict',
    );
    // A payload's own, different agentRationale is not overwritten silently.
    assertError(
      await postLog(
        t.app,
        p.agent,
        { payload: { agentRationale: 'other' } },
        { 'x-service-encryption-key': KEY, 'x-agent-rationale': rationale },
      ),
      400,
      'invalid_request',
    );
    // A client envelope is stored as sent; the header is not kept in the clear.
    const envId = 'rationale-envelope-0001';
    const envelope = await sealPayload({ agent: { rationale: 'inside' } }, await deriveEnvelopeKey(KEY), envId);
    const e = await postLog(t.app, p.agent, { id: envId, payload: envelope }, { 'x-agent-rationale': rationale });
    assert.equal(e.statusCode, 201, e.body);
    const stored = await t.app.ctx.store.logs.get(p.projectId, envId);
    assert.deepEqual(JSON.parse(stored!.payload), envelope);
    assert.ok(!JSON.stringify(stored).includes(rationale));
  });

  test('X-Service-Agent-ID alone with a human key is the actor label, not a handover', async () => {
    const r = await postLog(t.app, p.human, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-service-agent-id': 'alice-cli' });
    assert.equal(r.statusCode, 201, r.body);
    const log = await read(r.json().id);
    assert.equal(log.actor, 'alice-cli');
    assert.equal(log.credentialHandoverDetected, false);
    const events = (await getWith(t.app, p.live, `/v1/projects/${p.projectId}/events`)).json().events as Array<{ logId: string }>;
    assert.ok(!events.some((e) => e.logId === log.id));
  });
});

test('a request that arrives while the server closes is 503 not_ready in our shape', async () => {
  const t = await startApp({ listen: true });
  const p = await fullProject(t);
  const socket = net.connect(Number(new URL(t.url).port), '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  let text = '';
  socket.on('data', (c: Buffer) => (text += c.toString('utf8')));
  const ended = new Promise((r) => socket.once('close', r));
  // A first request is in flight (its body not yet whole), so the connection is busy, not idle.
  const body = JSON.stringify({ payload: { a: 1 } });
  const started = new Promise((r) => t.app.server.once('request', r));
  socket.write(
    `POST /v1/log HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${p.agent}\r\nX-Service-Encryption-Key: ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
  );
  await started;
  const closing = t.app.close();
  // Fastify closes the listener after its preClose hooks: from then on the server is closing.
  while (t.app.server.listening) await new Promise((r) => setImmediate(r));
  // The rest of the first request, and a second one pipelined behind it.
  socket.write(body.slice(5) + 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await ended;
  await closing;
  assert.match(text, /^HTTP\/1\.1 201 /);
  const second = text.slice(text.indexOf('HTTP/1.1', 10));
  assert.match(second, /^HTTP\/1\.1 503 /);
  const answer = JSON.parse(second.slice(second.indexOf('\r\n\r\n') + 4));
  assert.equal(answer.success, false);
  assert.equal(answer.error.code, 'not_ready');
  assert.match(answer.error.requestId, /^req_/);
});
