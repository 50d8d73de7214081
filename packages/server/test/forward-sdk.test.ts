/**
 * Issue 9, "tested with clients nobody here wrote": the real `openai` npm package goes through
 * forward mode with only `baseURL` and default headers changed, against a fake OpenAI on
 * loopback. Chat completions and the Responses API (whole and streamed), embeddings, the models
 * list, a file upload and an audio transcription (multipart); through an operator-defined
 * upstream name and through X-Service-Target-Base. Each call: bodies byte for byte both ways,
 * the provider key at the provider and nothing of ours, `X-Service-Log-ID`, a complete record
 * read back with a live key and opened, with `llm.usage` equal to the fake's numbers, plain
 * timing, SSE timing kept, a receipt when asked, and upstream errors passed through untouched.
 * The Anthropic SDK is in forward-sdk-anthropic.test.ts; curl and undici in forward-http.test.ts.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import OpenAI, { toFile } from 'openai';
import { verifyReceipt } from '@countersign/core';
import { OPENAI_USAGE, chatCompletionChunks, responsesEvents, servedModel } from './helpers/fake-provider-bodies.js';
import { formFields } from './helpers/fake-providers.js';
import {
  ENC,
  OPENAI_KEY,
  OPENAI_NAME,
  assertCompleteEntry,
  assertHeadersThrough,
  assertNoKeysInRecord,
  assertNothingOfOurs,
  assertRecordedBytes,
  assertStreamedAsSent,
  capturingFetch,
  now,
  readRecord,
  sha,
  startForwardHarness,
  type ForwardHarness,
} from './helpers/forward-harness.js';
import { STORES } from './helpers/server.js';
import { fetchTrust, waitForReceipt } from './proofs-helpers.js';

const RUN = 'run-openai-sdk';
/** What an agent framework's client adds: a sealed rationale (an envelope of the client's; opaque here). */
const RATIONALE = 'v1.sealed-rationale-from-the-agent-framework';

type Via = 'preset' | 'name' | 'target-base';

for (const store of STORES) {
  describe(`the openai SDK through forward mode (${store})`, () => {
    let h: ForwardHarness;
    before(async () => {
      h = await startForwardHarness(store);
    });
    after(() => h.close());

    /**
     * An SDK client changed only in baseURL and default headers (and a fetch that keeps copies).
     * `via`: the `openai` preset (overridden to the fake), an operator's own name, or X-Service-Target-Base.
     */
    const client = (via: Via, extra: Record<string, string> = {}, apiKey = OPENAI_KEY) => {
      const cap = capturingFetch();
      const base = { preset: '/v1/forward/openai', name: `/v1/forward/${OPENAI_NAME}`, 'target-base': '/v1/forward' }[via];
      const sdk = new OpenAI({
        apiKey,
        baseURL: h.t.url + base,
        defaultHeaders: {
          'X-Service-Key': h.agentKey,
          'X-Service-Encryption-Key': ENC,
          'X-Service-Run-ID': RUN,
          'X-Service-Agent-ID': 'billing-agent',
          'X-Service-Action': 'llm.call',
          'X-Agent-Rationale': RATIONALE,
          ...(via === 'target-base' ? { 'X-Service-Target-Base': `${h.openai.url}/v1` } : {}),
          ...extra,
        },
        fetch: cap.fetch,
        maxRetries: 0,
      });
      return { sdk, cap };
    };

    /** The llm.provider of a call (docs/proxy.md): the vendor for its preset, else `openai-compatible:<name or host:port>`. */
    const provider = (via: Via) =>
      ({ preset: 'openai', name: `openai-compatible:${OPENAI_NAME}`, 'target-base': `openai-compatible:${h.openai.hostPort}` })[via];

    /** The record's `llm` member, whole (time to first token: a number on streams only). */
    const assertLlm = (llm: Record<string, unknown> | undefined, expected: Record<string, unknown>) => {
      assert.ok(llm, 'the record of a recognised LLM API call holds llm');
      const { timeToFirstTokenMs, ...rest } = llm;
      assert.deepEqual(rest, expected);
      if (expected.streamed === true) assert.ok(typeof timeToFirstTokenMs === 'number' && timeToFirstTokenMs >= 0);
      else assert.equal(timeToFirstTokenMs, undefined);
    };

    /** The checks every successful call shares; returns the record. */
    const checkExchange = async (cap: ReturnType<typeof capturingFetch>, path: string, status = 200, providerKey = OPENAI_KEY) => {
      const call = cap.last();
      const ex = h.openai.last();
      await ex.done;
      assert.equal(ex.request.url, path);
      assert.equal(ex.request.method, call.method);
      assert.deepEqual(ex.request.body, call.body, 'the provider received exactly the bytes the SDK sent');
      const received = await call.received;
      assert.deepEqual(received, ex.body(), 'the SDK received exactly the bytes the provider sent');
      assert.equal(call.status, status);
      assert.equal(ex.request.headers.authorization, `Bearer ${providerKey}`, 'the provider key reached the provider');
      assertNothingOfOurs(h, ex);
      assertHeadersThrough(call.headers, ex.request.headers);
      for (const name of ['content-type', 'x-request-id', 'openai-processing-ms']) {
        assert.equal(call.responseHeaders.get(name), ex.responseHeaders[name], `answer header ${name} came back unchanged`);
      }
      const rec = await readRecord(h, call.responseHeaders.get('x-service-log-id'));
      assertCompleteEntry(rec.entry, status);
      assert.equal(rec.entry.traceId, RUN);
      assert.equal(rec.entry.actor, 'billing-agent');
      assert.equal(rec.entry.action, 'llm.call');
      assert.equal(rec.entry.actorType, 'agent');
      assert.equal(rec.entry.credentialHandoverDetected, false, 'an agent key with agent context is no handover');
      assert.equal(rec.payload.agentRationale, RATIONALE, 'X-Agent-Rationale is kept, sealed, in the record');
      assertRecordedBytes(rec.payload, ex.request.body, received, status);
      assertNoKeysInRecord(h, rec.payload, providerKey);
      return { call, ex, received, ...rec };
    };

    test('chat.completions, not streamed, via an operator-defined upstream name', async () => {
      const { sdk, cap } = client('name');
      const answer = await sdk.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello!' }] });
      assert.equal(answer.choices[0]!.message.content, 'Hello! How can I assist you today?');
      assert.equal(answer.usage?.total_tokens, OPENAI_USAGE.chat.total);
      const { payload } = await checkExchange(cap, '/v1/chat/completions');
      assert.deepEqual(payload.request.body, JSON.parse(cap.last().body.toString()));
      assert.deepEqual(payload.response.body, answer);
      assertLlm(payload.llm, {
        provider: provider('name'),
        api: 'chat.completions',
        model: servedModel('gpt-4o-mini'),
        streamed: false,
        usage: { inputTokens: 19, outputTokens: 10, cachedTokens: 6, totalTokens: 29 },
        finishReason: 'stop',
      });
    });

    test('chat.completions streamed (stream_options.include_usage) via the openai preset: events as sent, usage from the last chunk', async () => {
      const { sdk, cap } = client('preset');
      const stream = await sdk.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'Say hello' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const times: number[] = [];
      let text = '';
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        times.push(now());
        text += chunk.choices[0]?.delta.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      assert.equal(text, 'Hello there!');
      assert.equal(usage?.total_tokens, OPENAI_USAGE.chatStream.total);
      const { ex, payload } = await checkExchange(cap, '/v1/chat/completions');
      assertStreamedAsSent(times, ex);
      const frames = chatCompletionChunks('gpt-4o-mini', true);
      assert.deepEqual(
        payload.response.events.map((e: { data: string }) => `data: ${e.data}\n\n`),
        frames,
      );
      assertLlm(payload.llm, {
        provider: 'openai',
        api: 'chat.completions',
        model: servedModel('gpt-4o-mini'),
        streamed: true,
        usage: { inputTokens: 21, outputTokens: 7, cachedTokens: 4, totalTokens: 28 },
        finishReason: 'stop',
      });
      assert.ok(payload.llm.timeToFirstTokenMs <= payload.timings.totalMs);
    });

    test('Responses API, not streamed, via X-Service-Target-Base', async () => {
      const { sdk, cap } = client('target-base');
      const answer = await sdk.responses.create({ model: 'gpt-4.1', input: 'Tell me a three sentence bedtime story about a unicorn.' });
      assert.equal(answer.output_text, 'Under a silver moon, a unicorn dreamed of stars.');
      const { payload } = await checkExchange(cap, '/v1/responses');
      assert.equal(payload.request.target, `${h.openai.url}/v1/responses`);
      assertLlm(payload.llm, {
        provider: provider('target-base'),
        api: 'responses',
        model: servedModel('gpt-4.1'),
        streamed: false,
        usage: { inputTokens: 36, outputTokens: 87, cachedTokens: 12, totalTokens: 123 },
        finishReason: 'completed',
      });
    });

    test('Responses API streamed: named events as sent, usage from response.completed', async () => {
      const { sdk, cap } = client('name');
      const stream = await sdk.responses.create({ model: 'gpt-4.1', input: 'Say hi', stream: true });
      const times: number[] = [];
      const types: string[] = [];
      for await (const event of stream) {
        times.push(now());
        types.push(event.type);
      }
      assert.equal(types.at(-1), 'response.completed');
      const { ex, payload } = await checkExchange(cap, '/v1/responses');
      assertStreamedAsSent(times, ex);
      assert.equal(payload.response.events.length, responsesEvents('gpt-4.1').length);
      assert.deepEqual(
        payload.response.events.map((e: { event?: string }) => e.event),
        types,
      );
      assertLlm(payload.llm, {
        provider: provider('name'),
        api: 'responses',
        model: servedModel('gpt-4.1'),
        streamed: true,
        usage: { inputTokens: 40, outputTokens: 9, cachedTokens: 3, totalTokens: 49 },
        finishReason: 'completed',
      });
    });

    test('embeddings via the openai preset (the SDK asks for base64 and decodes it)', async () => {
      const { sdk, cap } = client('preset');
      const answer = await sdk.embeddings.create({ model: 'text-embedding-3-small', input: ['The food was delicious', 'and the waiter'] });
      assert.equal(answer.data.length, 2);
      assert.equal(answer.data[0]!.embedding.length, 8);
      const { payload } = await checkExchange(cap, '/v1/embeddings');
      assert.equal(JSON.parse(cap.last().body.toString()).encoding_format, 'base64');
      assertLlm(payload.llm, {
        provider: 'openai',
        api: 'embeddings',
        model: 'text-embedding-3-small',
        streamed: false,
        usage: { inputTokens: OPENAI_USAGE.embeddings.input, totalTokens: OPENAI_USAGE.embeddings.total },
      });
    });

    test('models list: a GET without a body', async () => {
      const { sdk, cap } = client('target-base');
      const ids: string[] = [];
      for await (const m of sdk.models.list()) ids.push(m.id);
      assert.deepEqual(ids, ['gpt-4.1', 'gpt-4o-mini', 'text-embedding-3-small']);
      const { ex, payload } = await checkExchange(cap, '/v1/models');
      assertLlm(payload.llm, { provider: provider('target-base'), api: 'models', streamed: false });
      assert.equal(ex.request.method, 'GET');
      assert.equal(ex.request.body.length, 0);
      assert.equal(ex.request.headers['content-length'], undefined);
      assert.equal(ex.request.headers['transfer-encoding'], undefined);
    });

    test('a file upload: the multipart body byte for byte, boundary and all', async () => {
      const { sdk, cap } = client('name');
      const lines = Array.from({ length: 200 }, (_, i) =>
        JSON.stringify({
          messages: [
            { role: 'user', content: `q${i} ✓` },
            { role: 'assistant', content: `a${i}` },
          ],
        }),
      );
      const file = Buffer.from(lines.join('\n') + '\n');
      const answer = await sdk.files.create({
        file: await toFile(file, 'train.jsonl', { type: 'application/jsonl' }),
        purpose: 'fine-tune',
      });
      assert.equal(answer.bytes, file.length);
      assert.equal(answer.filename, 'train.jsonl');
      const { ex, payload } = await checkExchange(cap, '/v1/files');
      assert.equal(payload.llm, undefined, 'a file upload is plain HTTP, not an LLM call');
      assert.match(String(ex.request.headers['content-type']), /^multipart\/form-data; boundary=/);
      const part = (await formFields(ex.request)).get('file');
      assert.ok(typeof part === 'object');
      assert.deepEqual(part.bytes, file);
    });

    test('an audio transcription: binary audio inside multipart, unchanged', async () => {
      const { sdk, cap } = client('target-base');
      const audio = Buffer.concat([Buffer.from('RIFF\x24\x00\x01\x00WAVEfmt ', 'latin1'), randomBytes(256 * 1024)]);
      const answer = await sdk.audio.transcriptions.create({
        file: await toFile(audio, 'speech.wav', { type: 'audio/wav' }),
        model: 'gpt-4o-transcribe',
      });
      assert.match(answer.text, new RegExp(`${audio.length} bytes heard`));
      const { ex, payload } = await checkExchange(cap, '/v1/audio/transcriptions');
      const part = (await formFields(ex.request)).get('file');
      assert.ok(typeof part === 'object');
      assert.deepEqual(part.bytes, audio);
      assert.equal(part.type, 'audio/wav');
      assert.equal(payload.request.truncated, false);
    });

    test('a gzip-compressed JSON answer (as the real API sends to fetch, which accepts gzip) still yields llm.usage', async () => {
      const { sdk, cap } = client('preset');
      h.openai.options.gzipJson = true;
      try {
        const answer = await sdk.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello, gzip' }] });
        assert.equal(answer.usage?.total_tokens, OPENAI_USAGE.chat.total);
      } finally {
        h.openai.options.gzipJson = false;
      }
      const call = cap.last();
      const ex = h.openai.last();
      assert.match(String(ex.request.headers['accept-encoding']), /gzip/);
      assert.equal(ex.responseHeaders['content-encoding'], 'gzip');
      assert.equal(call.responseHeaders.get('content-encoding'), 'gzip', 'the encoding header came back unchanged');
      assert.deepEqual(await call.received, gunzipSync(ex.body()), 'the SDK decoded exactly the bytes the provider compressed');
      const { entry, payload } = await readRecord(h, call.responseHeaders.get('x-service-log-id'));
      assertCompleteEntry(entry, 200);
      assert.equal(payload.response.sha256, sha(ex.body()), 'the record pins the bytes as they were sent (compressed)');
      assertLlm(payload.llm, {
        provider: 'openai',
        api: 'chat.completions',
        model: servedModel('gpt-4o-mini'),
        streamed: false,
        usage: { inputTokens: 19, outputTokens: 10, cachedTokens: 6, totalTokens: 29 },
        finishReason: 'stop',
      });
    });

    test('X-Service-Request-Proof: true gets a receipt within a few windows, and it verifies', async () => {
      const { sdk, cap } = client('preset', { 'X-Service-Request-Proof': 'true' });
      await sdk.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'prove it' }] });
      const { entry, payload } = await checkExchange(cap, '/v1/chat/completions');
      assert.equal(entry.requestProof, true);
      const receipt = await waitForReceipt(h.t.app, h.liveKey, h.projectId, entry.id, 20_000);
      assert.equal(receipt.logId, entry.id);
      assert.equal(receipt.payloadHash, entry.payloadHash);
      const trust = await fetchTrust(h.t.app);
      const report = await verifyReceipt({
        payload,
        receipt,
        trust: { tsaRoots: trust.tsaRootsPem, ledgerPublicKey: trust.ledgerPublicKeyPem },
        offline: true,
        now: new Date(),
      });
      assert.ok(report.ok, JSON.stringify(report.steps));
    });

    test('upstream errors reach the SDK untouched: a wrong provider key (401) and a 503', async () => {
      const wrong = client('name', {}, 'sk-wrong-provider-key');
      await assert.rejects(
        wrong.sdk.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
        (e: unknown) => e instanceof OpenAI.AuthenticationError && e.status === 401 && e.code === 'invalid_api_key',
      );
      const denied = await checkExchange(wrong.cap, '/v1/chat/completions', 401, 'sk-wrong-provider-key');
      assert.equal(denied.payload.response.body.error.code, 'invalid_api_key');
      assertLlm(denied.payload.llm, { provider: provider('name'), api: 'chat.completions', model: 'gpt-4o-mini', streamed: false });

      const { sdk, cap } = client('target-base');
      await assert.rejects(
        sdk.chat.completions.create({ model: 'fail-503', messages: [{ role: 'user', content: 'hi' }] }),
        (e: unknown) => e instanceof OpenAI.InternalServerError && e.status === 503 && e.type === 'server_error',
      );
      await checkExchange(cap, '/v1/chat/completions', 503);
    });
  });
}
