/**
 * The proxy's pure pieces: header rules, redaction, the response capture (limit, hash, UTF-8
 * cut at the limit, SSE parsing) and outcome → status mapping.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { canonicalize } from '@countersign/core';
import {
  downstreamResponseHeaders,
  isSecretHeader,
  isStrippedRequestHeader,
  redactHeaders,
  upstreamRequestHeaders,
} from '../src/proxy/headers.js';
import { parseSse, BodyCapture } from '../src/proxy/capture.js';
import { canonicalProxyPayload, statusOf, type ProxyPayload } from '../src/proxy/record.js';
import { OwedOutcomes } from '../src/proxy/owed-outcomes.js';
import { classifyUpstreamError } from '../src/proxy/upstream.js';
import { TargetBlockedError } from '../src/proxy/ssrf.js';

test('request header rules strip ours, agent context, hop-by-hop, framing and forwarding headers in any spelling', () => {
  for (const name of [
    'X-Service-Encryption-Key',
    'x-service-anything',
    'X_SERVICE_AGENT_ID',
    'x-agent-rationale',
    'X-AGENT-TRACE',
    'x_agent_x',
    'Authorization',
    'Proxy-Authorization',
    'Connection',
    'Keep-Alive',
    'TE',
    'Trailer',
    'Transfer-Encoding',
    'Upgrade',
    'Host',
    'Content-Length',
    'Content-Encoding',
    'Expect',
    'Forwarded',
    'Via',
    'X-Forwarded-For',
    'x_forwarded_proto',
    'X-Real-IP',
  ]) {
    assert.equal(isStrippedRequestHeader(name), true, name);
  }
  for (const name of ['Accept', 'Cookie', 'OpenAI-Organization', 'Anthropic-Version', 'X-Request-ID', 'User-Agent', 'X-Agentless']) {
    assert.equal(isStrippedRequestHeader(name), false, name);
  }
});

test('upstream headers: Connection-named dropped, the upstream credential renamed, content-type set only with a body', () => {
  const out = upstreamRequestHeaders(
    {
      connection: 'keep-alive, x-drop-me',
      'x-drop-me': '1',
      'x-keep': '2',
      authorization: 'Bearer key_agent_ours',
      'x-service-upstream-authorization': 'Bearer theirs',
      'content-type': 'application/json; charset=utf-8',
    },
    true,
  );
  assert.deepEqual(out, { 'x-keep': '2', 'content-type': 'application/json; charset=utf-8', authorization: 'Bearer theirs' });
  assert.deepEqual(upstreamRequestHeaders({}, true), { 'content-type': 'application/json' });
  assert.deepEqual(upstreamRequestHeaders({ 'content-type': 'application/json' }, false), {});
});

test('response headers: hop-by-hop and Connection-named removed; content-length dropped when no body can follow', () => {
  const upstream = {
    connection: 'close, x-hop',
    'x-hop': 'a',
    'keep-alive': 't',
    'transfer-encoding': 'chunked',
    'content-length': '5',
    'x-ok': 'b',
  };
  assert.deepEqual(downstreamResponseHeaders(upstream, { bodyless: false }), { 'content-length': '5', 'x-ok': 'b' });
  assert.deepEqual(downstreamResponseHeaders(upstream, { bodyless: true }), { 'x-ok': 'b' });
});

test('redaction keeps names and hides every credential-looking value', () => {
  for (const name of [
    'Authorization',
    'cookie',
    'Set-Cookie',
    'x-api-key',
    'X_Auth_Token',
    'x-amz-security-token',
    'X-Session-Id',
    'x-webhook-signature',
  ]) {
    assert.equal(isSecretHeader(name), true, name);
  }
  assert.equal(isSecretHeader('accept'), false);
  assert.deepEqual(redactHeaders({ Authorization: 'Bearer s', Accept: '*/*', 'set-cookie': ['a=1', 'b=2'], gone: undefined }), {
    authorization: '[REDACTED]',
    accept: '*/*',
    'set-cookie': '[REDACTED]',
  });
});

test('header verdicts stay right once a flood of new names has filled their memo', () => {
  // The memo of header-name verdicts is bounded (headers.ts): names past its bound are worked
  // out each time, so a caller or upstream sending endless new names changes no answer.
  for (let i = 0; i < 2000; i++) {
    assert.equal(isStrippedRequestHeader(`x-junk-${i}`), false);
    assert.equal(isSecretHeader(`x-junk-${i}`), false);
    upstreamRequestHeaders({ connection: `keep-alive, x-junk-${i}` }, true);
  }
  assert.equal(isStrippedRequestHeader('X-Service-Never-Seen'), true);
  assert.equal(isStrippedRequestHeader('x_agent_never_seen'), true);
  assert.equal(isSecretHeader('X-Never-Seen-Token'), true);
  assert.equal(isStrippedRequestHeader('x-' + 'a'.repeat(100)), false);
  assert.deepEqual(upstreamRequestHeaders({ connection: 'x-never-seen-hop', 'x-never-seen-hop': '1', 'x-keep': '2' }, false), {
    'x-keep': '2',
  });
});

test('the capture keeps at most its limit, but counts and hashes every byte', () => {
  const cap = new BodyCapture(10);
  const all = Buffer.from('0123456789abcdefghij');
  cap.add(all.subarray(0, 7));
  cap.add(all.subarray(7, 13));
  cap.add(all.subarray(13));
  const body = cap.finish('text/plain', undefined);
  assert.equal(body.bytes, 20);
  assert.equal(body.sha256, createHash('sha256').update(all).digest('hex'));
  assert.equal(body.truncated, true);
  assert.equal(body.bodyText, '0123456789');
});

test('the hash covers every byte however the chunks meet the limit (whole, exactly at it, past it)', () => {
  const all = Buffer.from('x'.repeat(100) + '0123456789abcdefghij'.repeat(10));
  const want = createHash('sha256').update(all).digest('hex');
  for (const limit of [all.length, all.length + 1, 100, 120, 50, 1]) {
    for (const size of [1, 7, 20, 100, all.length]) {
      const cap = new BodyCapture(limit);
      for (let at = 0; at < all.length; at += size) cap.add(all.subarray(at, at + size));
      const body = cap.finish('text/plain', undefined);
      assert.equal(body.sha256, want, `limit ${limit}, chunks of ${size}`);
      assert.equal(body.bytes, all.length);
      assert.equal(body.truncated, all.length > limit);
      assert.equal(body.bodyText, all.subarray(0, limit).toString());
    }
  }
});

test('a multi-byte character cut by the limit does not turn the capture into base64', () => {
  const cap = new BodyCapture(5);
  cap.add(Buffer.from('abcd✓✓', 'utf8')); // ✓ is 3 bytes: the limit falls inside the first one
  const body = cap.finish('text/plain', undefined);
  assert.equal(body.bodyText, 'abcd');
  assert.equal(body.truncated, true);
});

test('JSON, text, binary, compressed and empty bodies are recorded in the right form', () => {
  const json = new BodyCapture();
  json.add(Buffer.from('{"a":[1,2]}'));
  assert.deepEqual(json.finish('application/vnd.api+json', undefined).body, { a: [1, 2] });
  const badJson = new BodyCapture();
  badJson.add(Buffer.from('{nope'));
  assert.equal(badJson.finish('application/json', undefined).bodyText, '{nope');
  const bin = new BodyCapture();
  bin.add(Buffer.from([0xff, 0xfe, 0x00]));
  assert.equal(bin.finish('application/octet-stream', undefined).bodyBase64, '//4A');
  const gz = new BodyCapture();
  gz.add(Buffer.from('looks like text'));
  assert.equal(gz.finish('application/json', 'gzip').bodyBase64, Buffer.from('looks like text').toString('base64'));
  const empty = new BodyCapture().finish('application/json', undefined);
  assert.deepEqual(Object.keys(empty).sort(), ['bytes', 'sha256', 'truncated']);
});

test('SSE parsing follows the event-stream rules', () => {
  const text =
    ': comment\nevent: delta\nid: 7\ndata: {"a":1}\n\ndata: line one\ndata: line two\n\r\ndata:no-space\n\ndata: tail without blank line';
  assert.deepEqual(parseSse(text), [
    { event: 'delta', id: '7', data: '{"a":1}' },
    { data: 'line one\nline two' },
    { data: 'no-space' },
    { data: 'tail without blank line' },
  ]);
  assert.equal(parseSse(text, true).length, 3, 'a truncated tail may be cut, so it is dropped');
});

test('SSE parsing reads LF, CRLF and CR line ends alike (LF alone takes the fast split)', () => {
  const lf = ': c\nevent: delta\nid: 7\ndata: {"a":1}\n\ndata: one\ndata: two\n\ndata:x\n\n';
  const expected = [{ event: 'delta', id: '7', data: '{"a":1}' }, { data: 'one\ntwo' }, { data: 'x' }];
  assert.deepEqual(parseSse(lf), expected);
  assert.deepEqual(parseSse(lf.replaceAll('\n', '\r\n')), expected);
  assert.deepEqual(parseSse(lf.replaceAll('\n', '\r')), expected);
  // One CR anywhere puts the whole text on the three-way split: mixed ends still parse.
  assert.deepEqual(parseSse(lf.replace('\n\n', '\r\n\r\n')), expected);
});

test('outcomes map to record statuses and upstream errors to outcomes', () => {
  assert.equal(statusOf('complete'), 'complete');
  assert.equal(statusOf('client_disconnected'), 'interrupted');
  assert.equal(statusOf('server_shutdown'), 'interrupted');
  for (const o of [
    'target_blocked',
    'upstream_unreachable',
    'upstream_reset',
    'connect_timeout',
    'first_byte_timeout',
    'idle_timeout',
  ] as const) {
    assert.equal(statusOf(o), 'failed');
  }
  const coded = (code: string) => Object.assign(new Error(code), { code });
  assert.equal(classifyUpstreamError(coded('UND_ERR_CONNECT_TIMEOUT')), 'connect_timeout');
  assert.equal(classifyUpstreamError(coded('UND_ERR_HEADERS_TIMEOUT')), 'first_byte_timeout');
  assert.equal(classifyUpstreamError(coded('UND_ERR_BODY_TIMEOUT')), 'idle_timeout');
  assert.equal(classifyUpstreamError(coded('ECONNRESET')), 'upstream_reset');
  assert.equal(classifyUpstreamError(coded('UND_ERR_SOCKET')), 'upstream_reset');
  assert.equal(classifyUpstreamError(coded('ECONNREFUSED')), 'upstream_unreachable');
  assert.equal(classifyUpstreamError(new TargetBlockedError('x')), 'target_blocked');
});

test('a proxy record composed with the request half serialized once is byte for byte its RFC 8785 text', () => {
  const request = {
    method: 'POST',
    target: 'https://api.example/v1/chat?x=1',
    headers: { 'content-type': 'application/json', authorization: '[REDACTED]', 'x-é': ['a', 'b'] },
    body: { prompt: 'hé "quoted" \u2028', n: [1, 2.5, -0, 1e21], nested: { z: null, a: true, '10': 1, '9': 2 } },
  };
  const base: ProxyPayload = { nonce: 'n'.repeat(32), source: 'proxy', via: 'proxy', outcome: 'pending', request };
  const variants: ProxyPayload[] = [
    base,
    { ...base, outcome: 'complete', timings: { firstByteMs: 0.5, totalMs: 1.25 } },
    {
      ...base,
      outcome: 'complete',
      response: { status: 200, headers: { 'content-type': 'text/event-stream' }, bytes: 10, sha256: 'ab'.repeat(32), truncated: false },
      timings: { totalMs: 3 },
    },
    { ...base, outcome: 'target_blocked', timings: { totalMs: 0.1 }, error: 'blocked "x"' },
    { ...base, outcome: 'upstream_unreachable', error: undefined, timings: { totalMs: 0.1 } },
  ];
  const requestJcs = canonicalize(request);
  for (const p of variants) assert.equal(canonicalProxyPayload(p, requestJcs), canonicalize(p));
});

test('owed outcomes: kept within a byte bound, written in order, held while the store still fails', async () => {
  let down = true;
  const written: string[] = [];
  const owed = new OwedOutcomes(
    {
      complete: async (ref) => {
        if (down) throw new Error('Connection terminated unexpectedly');
        written.push(`${ref.projectId}/${ref.id}/${ref.seq}`);
        return ref.id !== 'log_sealed';
      },
    },
    10,
  );
  const c = (payload: string) => ({ status: 'complete' as const, payload, payloadHash: null, completedAt: 1 });
  const ref = (id: string, seq: number) => ({ projectId: 'prj_a', id, seq });
  assert.equal(owed.add(ref('log_a', 7), c('1234')), true);
  assert.equal(owed.add(ref('log_sealed', 8), c('1234')), true);
  assert.equal(owed.add(ref('log_big', 9), c('123')), false, 'over the bound: not kept');
  assert.deepEqual(await owed.retry(), { written: 0, refused: 0, left: 2 });
  down = false;
  assert.deepEqual(await owed.retry(), { written: 1, refused: 1, left: 0 });
  assert.deepEqual(written, ['prj_a/log_a/7', 'prj_a/log_sealed/8'], 'each written with the row it names');
  assert.equal(owed.add(ref('log_big', 9), c('123')), true, 'room again once written');
});
