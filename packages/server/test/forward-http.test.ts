/**
 * Issue 9, "tested with clients nobody here wrote", plain HTTP half: `curl` (spawned, as a user
 * types it) for a JSON POST and an SSE stream (`-N`), and undici's `request` with a multipart
 * FormData body, through forward mode to the fake providers. Bytes both ways, keys where they
 * belong, complete records with `llm.usage`; and the error rules: an unknown upstream name is
 * our 404 listing the names, our errors keep our JSON shape (nothing sent upstream), upstream
 * 4xx/5xx answers pass through byte for byte.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { FormData, Request as UndiciRequest, request } from 'undici';
import { OPENAI_USAGE, chatCompletionChunks, servedModel } from './helpers/fake-provider-bodies.js';
import { formFields } from './helpers/fake-providers.js';
import {
  ANTHROPIC_KEY,
  ANTHROPIC_NAME,
  ENC,
  OPENAI_KEY,
  OPENAI_NAME,
  assertCompleteEntry,
  assertNoKeysInRecord,
  assertNothingOfOurs,
  assertRecordedBytes,
  assertStreamedAsSent,
  now,
  readRecord,
  startForwardHarness,
  type ForwardHarness,
} from './helpers/forward-harness.js';
import { STORES, tempDir } from './helpers/server.js';

/** What a curl run gave: exit code, status, headers (lower-case), the body bytes and when each stdout chunk came. */
interface CurlResult {
  code: number;
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  arrivals: number[];
  stderr: string;
}

/** Runs curl with `args` (plus -sS and -D to a temp file), optionally feeding `stdin`. */
function curl(args: string[], stdin?: Buffer): Promise<CurlResult> {
  const headerFile = path.join(tempDir('countersign-curl-'), 'headers');
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '-D', headerFile, ...args]);
    const chunks: Buffer[] = [];
    const arrivals: number[] = [];
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      arrivals.push(now());
      chunks.push(c);
    });
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      // The last header block is the final answer (a `100 Continue` may come first).
      const blocks = fs
        .readFileSync(headerFile, 'utf8')
        .split('\r\n\r\n')
        .filter((b) => b.trim() !== '');
      const lines = (blocks.at(-1) ?? '').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({ code: code ?? -1, status: Number(lines[0]!.split(' ')[1]), headers, body: Buffer.concat(chunks), arrivals, stderr });
    });
    child.stdin.end(stdin ?? Buffer.alloc(0));
  });
}

/** The bytes undici sends for `form`, with its boundary replaced by the one seen on the wire. */
async function multipartBytes(form: FormData, boundary: string): Promise<Buffer> {
  const r = new UndiciRequest('http://127.0.0.1/', { method: 'POST', body: form });
  const own = /boundary=(.+)$/.exec(String(r.headers.get('content-type')))![1]!;
  const bytes = Buffer.from(await r.arrayBuffer()).toString('latin1');
  return Buffer.from(bytes.replaceAll(own, boundary), 'latin1');
}

for (const store of STORES) {
  describe(`curl and undici through forward mode (${store})`, () => {
    let h: ForwardHarness;
    before(async () => {
      h = await startForwardHarness(store);
    });
    after(() => h.close());

    const ours = () => ['-H', `X-Service-Key: ${h.agentKey}`, '-H', `X-Service-Encryption-Key: ${ENC}`, '-H', 'X-Service-Run-ID: run-curl'];

    test('curl: a JSON POST through an upstream name, bytes both ways, a complete record with llm.usage', async () => {
      const body = Buffer.from('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello from curl ✓"}],"temperature":0.7}');
      const r = await curl(
        [
          ...ours(),
          '-H',
          `Authorization: Bearer ${OPENAI_KEY}`,
          '-H',
          'Content-Type: application/json',
          '--data-binary',
          '@-',
          `${h.t.url}/v1/forward/${OPENAI_NAME}/chat/completions`,
        ],
        body,
      );
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.status, 200);
      const ex = h.openai.last();
      assert.equal(ex.request.url, '/v1/chat/completions');
      assert.deepEqual(ex.request.body, body);
      assert.deepEqual(r.body, ex.body());
      assert.equal(ex.request.headers.authorization, `Bearer ${OPENAI_KEY}`);
      assert.match(String(ex.request.headers['user-agent']), /^curl\//);
      assertNothingOfOurs(h, ex);
      assert.equal(r.headers['x-request-id'], ex.responseHeaders['x-request-id']);
      const { entry, payload } = await readRecord(h, r.headers['x-service-log-id']);
      assertCompleteEntry(entry, 200);
      assert.equal(entry.traceId, 'run-curl');
      assertRecordedBytes(payload, body, r.body, 200);
      assertNoKeysInRecord(h, payload, OPENAI_KEY);
      assert.deepEqual(payload.request.body, JSON.parse(body.toString()));
      assert.deepEqual(payload.llm, {
        provider: `openai-compatible:${OPENAI_NAME}`,
        api: 'chat.completions',
        model: servedModel('gpt-4o-mini'),
        streamed: false,
        usage: { inputTokens: 19, outputTokens: 10, cachedTokens: 6, totalTokens: 29 },
        finishReason: 'stop',
      });
    });

    test('curl -N: an SSE stream via X-Service-Target-Base arrives event by event, byte for byte', async () => {
      const body = Buffer.from(
        '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"stream"}],"stream":true,"stream_options":{"include_usage":true}}',
      );
      const r = await curl(
        [
          ...ours(),
          '-N',
          '-H',
          `X-Service-Target-Base: ${h.openai.url}/v1`,
          '-H',
          `Authorization: Bearer ${OPENAI_KEY}`,
          '-H',
          'Content-Type: application/json',
          '--data-binary',
          '@-',
          `${h.t.url}/v1/forward/chat/completions`,
        ],
        body,
      );
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.status, 200);
      assert.match(r.headers['content-type']!, /^text\/event-stream/);
      const ex = h.openai.last();
      assert.equal(ex.request.url, '/v1/chat/completions');
      assert.deepEqual(ex.request.body, body);
      assert.deepEqual(r.body, ex.body());
      assert.equal(r.body.toString(), chatCompletionChunks('gpt-4o-mini', true).join(''));
      assertNothingOfOurs(h, ex);
      assertStreamedAsSent(r.arrivals, ex);
      const { entry, payload } = await readRecord(h, r.headers['x-service-log-id']);
      assertCompleteEntry(entry, 200);
      assertRecordedBytes(payload, body, r.body, 200);
      assert.equal(payload.response.events.at(-1).data, '[DONE]');
      const u = OPENAI_USAGE.chatStream;
      const { timeToFirstTokenMs, ...llm } = payload.llm;
      assert.deepEqual(llm, {
        provider: `openai-compatible:${h.openai.hostPort}`,
        api: 'chat.completions',
        model: servedModel('gpt-4o-mini'),
        streamed: true,
        usage: { inputTokens: u.input, outputTokens: u.output, cachedTokens: u.cached, totalTokens: u.total },
        finishReason: 'stop',
      });
      assert.equal(typeof timeToFirstTokenMs, 'number');
    });

    test('undici request with a multipart FormData body (an audio transcription): audio bytes exact both ways', async () => {
      const audio = randomBytes(700 * 1024);
      const form = new FormData();
      form.append('model', 'gpt-4o-transcribe');
      form.append('response_format', 'json');
      form.append('file', new Blob([audio], { type: 'audio/mpeg' }), 'speech.mp3');
      const r = await request(`${h.t.url}/v1/forward/${OPENAI_NAME}/audio/transcriptions`, {
        method: 'POST',
        headers: { 'x-service-key': h.agentKey, 'x-service-encryption-key': ENC, authorization: `Bearer ${OPENAI_KEY}` },
        body: form,
      });
      const answer = Buffer.from(await r.body.arrayBuffer());
      assert.equal(r.statusCode, 200, answer.toString());
      const ex = h.openai.last();
      await ex.done;
      assert.deepEqual(answer, ex.body());
      const contentType = String(ex.request.headers['content-type']);
      const boundary = /^multipart\/form-data; boundary=(.+)$/.exec(contentType)?.[1];
      assert.ok(boundary, contentType);
      assert.deepEqual(ex.request.body, await multipartBytes(form, boundary), 'the multipart body arrived as undici wrote it');
      const fields = await formFields(ex.request);
      assert.equal(fields.get('model'), 'gpt-4o-transcribe');
      const file = fields.get('file');
      assert.ok(typeof file === 'object');
      assert.deepEqual(file.bytes, audio);
      assert.equal(file.name, 'speech.mp3');
      assertNothingOfOurs(h, ex);
      const { entry, payload } = await readRecord(h, r.headers['x-service-log-id'] as string);
      assertCompleteEntry(entry, 200);
      assertRecordedBytes(payload, ex.request.body, answer, 200);
      assert.equal(payload.request.truncated, false);
      assert.deepEqual(payload.response.body, JSON.parse(answer.toString()));
    });

    test('curl -F: a 1.5 MB audio upload (curl sends Expect: 100-continue) arrives whole; the answer byte for byte', async () => {
      const audio = randomBytes(1536 * 1024);
      const file = path.join(tempDir('countersign-curl-upload-'), 'speech.wav');
      fs.writeFileSync(file, audio);
      const r = await curl([
        ...ours(),
        '-H',
        `Authorization: Bearer ${OPENAI_KEY}`,
        '-F',
        `file=@${file};type=audio/wav`,
        '-F',
        'model=whisper-1',
        `${h.t.url}/v1/forward/${OPENAI_NAME}/audio/transcriptions`,
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.status, 200, r.body.toString());
      const ex = h.openai.last();
      assert.deepEqual(r.body, ex.body());
      assert.equal(ex.request.headers.expect, undefined, 'Expect is between curl and us, not for the provider');
      const part = (await formFields(ex.request)).get('file');
      assert.ok(typeof part === 'object');
      assert.deepEqual(part.bytes, audio);
      assert.equal(part.name, 'speech.wav');
      assertNothingOfOurs(h, ex);
      const { entry, payload } = await readRecord(h, r.headers['x-service-log-id']);
      assertCompleteEntry(entry, 200);
      assertRecordedBytes(payload, ex.request.body, r.body, 200);
    });

    test('an unknown upstream name is our 404 listing the names; nothing goes upstream', async () => {
      const before = h.openai.exchanges.length + h.anthropic.exchanges.length;
      const r = await curl([...ours(), '-H', `Authorization: Bearer ${OPENAI_KEY}`, `${h.t.url}/v1/forward/no-such-provider/v1/models`]);
      assert.equal(r.status, 404);
      assert.match(r.headers['content-type']!, /^application\/json/);
      const body = JSON.parse(r.body.toString());
      assert.equal(body.success, false);
      assert.equal(body.error.code, 'unknown_upstream');
      assert.match(body.error.requestId, /^req_/);
      for (const name of ['openai', 'anthropic', OPENAI_NAME, ANTHROPIC_NAME])
        assert.ok(body.error.message.includes(name), `${name} listed`);
      assert.equal(h.openai.exchanges.length + h.anthropic.exchanges.length, before);
    });

    test('our errors keep our JSON shape (no key, a live key, no encryption key); nothing goes upstream', async () => {
      const before = h.openai.exchanges.length;
      const url = `${h.t.url}/v1/forward/${OPENAI_NAME}/chat/completions`;
      const json = ['-H', 'Content-Type: application/json', '--data-binary', '{"model":"gpt-4o-mini","messages":[]}'];
      const cases: Array<[string[], number, string]> = [
        [['-H', `Authorization: Bearer ${OPENAI_KEY}`], 401, 'missing_api_key'],
        [['-H', `X-Service-Key: key_agent_notarealkey`, '-H', `X-Service-Encryption-Key: ${ENC}`], 401, 'invalid_api_key'],
        [['-H', `X-Service-Key: ${h.liveKey}`, '-H', `X-Service-Encryption-Key: ${ENC}`], 403, 'wrong_credential_class'],
        [['-H', `X-Service-Key: ${h.agentKey}`], 400, 'missing_encryption_key'],
      ];
      for (const [headers, status, code] of cases) {
        const r = await curl([...headers, ...json, url]);
        assert.equal(r.status, status, r.body.toString());
        assert.match(r.headers['content-type']!, /^application\/json/);
        const body = JSON.parse(r.body.toString());
        assert.deepEqual(Object.keys(body).sort(), ['error', 'success']);
        assert.equal(body.success, false);
        assert.equal(body.error.code, code);
        assert.equal(typeof body.error.message, 'string');
        assert.match(body.error.requestId, /^req_/);
      }
      assert.equal(h.openai.exchanges.length, before);
    });

    test('a human key with an X-Agent-* header is a handover; X-Service-Agent-ID alone is not', async () => {
      const url = `${h.t.url}/v1/forward/${OPENAI_NAME}/models`;
      const human = [
        '-H',
        `X-Service-Key: ${h.humanKey}`,
        '-H',
        `X-Service-Encryption-Key: ${ENC}`,
        '-H',
        `Authorization: Bearer ${OPENAI_KEY}`,
      ];
      const handover = await curl([...human, '-H', 'X-Agent-Rationale: v1.sealed-by-the-agent', url]);
      const label = await curl([...human, '-H', 'X-Service-Agent-ID: alice-cli', url]);
      assert.equal(handover.status, 200);
      assert.equal(label.status, 200);
      const a = await readRecord(h, handover.headers['x-service-log-id']);
      assert.equal(a.entry.actorType, 'human');
      assert.equal(a.entry.credentialHandoverDetected, true);
      assert.equal(a.payload.agentRationale, 'v1.sealed-by-the-agent');
      const b = await readRecord(h, label.headers['x-service-log-id']);
      assert.equal(b.entry.actor, 'alice-cli');
      assert.equal(b.entry.credentialHandoverDetected, false);
      for (const ex of h.openai.exchanges.slice(-2)) assertNothingOfOurs(h, ex);
    });

    test('upstream 4xx and 5xx answers pass through byte for byte, and are complete records', async () => {
      const wrongKey = await curl([...ours(), '-H', 'Authorization: Bearer sk-wrong', `${h.t.url}/v1/forward/${OPENAI_NAME}/models`]);
      const tooMany = await curl([
        ...ours(),
        '-H',
        `Authorization: Bearer ${OPENAI_KEY}`,
        '-H',
        'Content-Type: application/json',
        '--data-binary',
        '{"model":"fail-429","messages":[]}',
        `${h.t.url}/v1/forward/${OPENAI_NAME}/chat/completions`,
      ]);
      const overloaded = await request(`${h.t.url}/v1/forward/${ANTHROPIC_NAME}/v1/messages`, {
        method: 'POST',
        headers: {
          'x-service-key': h.agentKey,
          'x-service-encryption-key': ENC,
          'x-api-key': ANTHROPIC_KEY,
          'anthropic-version': '2023-06-01',
          'content-type': 'application/json',
        },
        body: '{"model":"fail-529","max_tokens":1,"messages":[]}',
      });
      const overloadedBody = Buffer.from(await overloaded.body.arrayBuffer());
      const seen: Array<[number, Buffer, Record<string, unknown>, number]> = [
        [wrongKey.status, wrongKey.body, wrongKey.headers, 401],
        [tooMany.status, tooMany.body, tooMany.headers, 429],
        [overloaded.statusCode, overloadedBody, overloaded.headers, 529],
      ];
      const exchanges = [...h.openai.exchanges.slice(-2), h.anthropic.last()];
      for (const [i, [status, body, headers, expected]] of seen.entries()) {
        const ex = exchanges[i]!;
        assert.equal(status, expected);
        assert.equal(ex.status, expected);
        assert.deepEqual(body, ex.body(), `the ${expected} body passed through untouched`);
        assert.equal(headers['content-type'], ex.responseHeaders['content-type']);
        const { entry, payload } = await readRecord(h, headers['x-service-log-id'] as string);
        assertCompleteEntry(entry, expected);
        assertRecordedBytes(payload, ex.request.body, body, expected);
      }
      assert.equal(JSON.parse(overloadedBody.toString()).error.type, 'overloaded_error');
      assert.equal(h.anthropic.last().request.headers['x-api-key'], ANTHROPIC_KEY);
      assertNoKeysInRecord(h, (await readRecord(h, overloaded.headers['x-service-log-id'] as string)).payload, ANTHROPIC_KEY);
    });
  });
}
