/**
 * Issue 9, "tested with clients nobody here wrote", Anthropic half: the real `@anthropic-ai/sdk`
 * goes through forward mode with only `baseURL` and default headers changed, against a fake
 * Anthropic on loopback: messages whole and streamed (message_start / content_block_delta /
 * message_delta / message_stop, usage split between message_start and message_delta), the
 * models list, the provider key as the SDK's bearer token and as `x-api-key`, and an upstream
 * error passed through untouched. The same checks as forward-sdk.test.ts (the OpenAI half).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { ANTHROPIC_USAGE, anthropicEvents } from './helpers/fake-provider-bodies.js';
import {
  ANTHROPIC_KEY,
  ANTHROPIC_NAME,
  ENC,
  assertCompleteEntry,
  assertHeadersThrough,
  assertNoKeysInRecord,
  assertNothingOfOurs,
  assertRecordedBytes,
  assertStreamedAsSent,
  capturingFetch,
  now,
  readRecord,
  startForwardHarness,
  type ForwardHarness,
} from './helpers/forward-harness.js';
import { STORES } from './helpers/server.js';

const RUN = 'run-anthropic-sdk';
const MODEL = 'claude-sonnet-4-6';

/**
 * The llm.usage the record should hold for Anthropic's numbers (docs/proxy.md, "LLM calls"): the
 * provider's own counts, so `inputTokens` is the uncached input only, `cachedTokens` the cache
 * reads, and `totalTokens` (not reported by Anthropic) input + cache writes + cache reads + output.
 */
function expectedUsage(u: { input: number; output: number; cacheRead: number; cacheWrite: number }) {
  return {
    inputTokens: u.input,
    outputTokens: u.output,
    cachedTokens: u.cacheRead,
    totalTokens: u.input + u.cacheWrite + u.cacheRead + u.output,
  };
}

for (const store of STORES) {
  describe(`the Anthropic SDK through forward mode (${store})`, () => {
    let h: ForwardHarness;
    before(async () => {
      h = await startForwardHarness(store);
    });
    after(() => h.close());

    /**
     * An SDK client changed only in baseURL and default headers, through the `anthropic` preset
     * (overridden to the fake) or an operator's own name. `keyAs: 'x-api-key'` gives the provider
     * key as a default header instead of the SDK's own bearer token.
     */
    const client = (via: 'preset' | 'name', keyAs: 'sdk' | 'x-api-key' = 'sdk', key = ANTHROPIC_KEY) => {
      const cap = capturingFetch();
      const sdk = new Anthropic({
        apiKey: keyAs === 'sdk' ? key : null,
        baseURL: `${h.t.url}/v1/forward/${via === 'preset' ? 'anthropic' : ANTHROPIC_NAME}`,
        defaultHeaders: {
          'X-Service-Key': h.agentKey,
          'X-Service-Encryption-Key': ENC,
          'X-Service-Run-ID': RUN,
          ...(keyAs === 'x-api-key' ? { 'x-api-key': key } : {}),
        },
        fetch: cap.fetch,
        maxRetries: 0,
      });
      return { sdk, cap };
    };

    /** The record's `llm` member, whole (time to first token: a number on streams only). */
    const assertLlm = (llm: Record<string, unknown> | undefined, expected: Record<string, unknown>) => {
      assert.ok(llm, 'the record of a recognised LLM API call holds llm');
      const { timeToFirstTokenMs, ...rest } = llm;
      assert.deepEqual(rest, expected);
      if (expected.streamed === true) assert.ok(typeof timeToFirstTokenMs === 'number' && timeToFirstTokenMs >= 0);
      else assert.equal(timeToFirstTokenMs, undefined);
    };

    const checkExchange = async (cap: ReturnType<typeof capturingFetch>, path: string, status = 200, key = ANTHROPIC_KEY) => {
      const call = cap.last();
      const ex = h.anthropic.last();
      await ex.done;
      assert.equal(ex.request.url, path);
      assert.equal(ex.request.method, call.method);
      assert.deepEqual(ex.request.body, call.body, 'the provider received exactly the bytes the SDK sent');
      const received = await call.received;
      assert.deepEqual(received, ex.body(), 'the SDK received exactly the bytes the provider sent');
      assert.equal(call.status, status);
      const presented = ex.request.headers['x-api-key'] ?? String(ex.request.headers.authorization).replace(/^Bearer /, '');
      assert.equal(presented, key, 'the provider key reached the provider');
      assert.equal(ex.request.headers['anthropic-version'], call.headers.get('anthropic-version'));
      assertNothingOfOurs(h, ex);
      assertHeadersThrough(call.headers, ex.request.headers);
      for (const name of ['content-type', 'request-id', 'anthropic-organization-id']) {
        assert.equal(call.responseHeaders.get(name), ex.responseHeaders[name], `answer header ${name} came back unchanged`);
      }
      const rec = await readRecord(h, call.responseHeaders.get('x-service-log-id'));
      assertCompleteEntry(rec.entry, status);
      assert.equal(rec.entry.traceId, RUN);
      assertRecordedBytes(rec.payload, ex.request.body, received, status);
      assertNoKeysInRecord(h, rec.payload, key);
      return { call, ex, received, ...rec };
    };

    test('messages, not streamed, via an operator-defined name: bytes both ways, the bearer provider key through, usage recorded', async () => {
      const { sdk, cap } = client('name');
      const message = await sdk.messages.create({ model: MODEL, max_tokens: 1024, messages: [{ role: 'user', content: 'Hello, Claude' }] });
      assert.deepEqual(message.content, [{ type: 'text', text: 'Hi! My name is Claude.' }]);
      assert.equal(cap.last().headers.get('authorization'), `Bearer ${ANTHROPIC_KEY}`);
      const { payload } = await checkExchange(cap, '/v1/messages');
      assert.deepEqual(payload.request.body, JSON.parse(cap.last().body.toString()));
      assert.deepEqual(payload.response.body, message);
      assertLlm(payload.llm, {
        provider: `anthropic-compatible:${ANTHROPIC_NAME}`,
        api: 'messages',
        model: MODEL,
        streamed: false,
        usage: expectedUsage(ANTHROPIC_USAGE.message),
        finishReason: 'end_turn',
      });
    });

    test('messages streamed via the anthropic preset, key in x-api-key: events as sent, usage from message_start and message_delta', async () => {
      const { sdk, cap } = client('preset', 'x-api-key');
      const stream = await sdk.messages.create({
        model: MODEL,
        max_tokens: 1024,
        messages: [{ role: 'user', content: 'Hello' }],
        stream: true,
      });
      const times: number[] = [];
      const types: string[] = [];
      let text = '';
      for await (const event of stream) {
        times.push(now());
        types.push(event.type);
        if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
      }
      assert.equal(text, 'Hello!');
      assert.deepEqual(types, [
        'message_start',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ]);
      assert.equal(cap.last().headers.get('authorization'), null);
      const { ex, payload } = await checkExchange(cap, '/v1/messages');
      assert.equal(ex.request.headers['x-api-key'], ANTHROPIC_KEY);
      assertStreamedAsSent(times, ex);
      assert.deepEqual(
        payload.response.events.map((e: { event?: string; data: string }) => `event: ${e.event}\ndata: ${e.data}\n\n`),
        anthropicEvents(MODEL),
      );
      assertLlm(payload.llm, {
        provider: 'anthropic',
        api: 'messages',
        model: MODEL,
        streamed: true,
        usage: expectedUsage(ANTHROPIC_USAGE.stream),
        finishReason: 'end_turn',
      });
    });

    test('a client that stops reading mid-stream: the provider connection closes, the record is interrupted', async () => {
      const { sdk, cap } = client('preset');
      const stream = await sdk.messages.create({
        model: MODEL,
        max_tokens: 1024,
        messages: [{ role: 'user', content: 'Hello' }],
        stream: true,
      });
      for await (const event of stream) {
        assert.equal(event.type, 'message_start');
        break; // the SDK aborts its request
      }
      const ex = h.anthropic.last();
      await ex.done;
      assert.ok(ex.chunks.length < anthropicEvents(MODEL).length, 'the provider stopped being read before its stream ended');
      const logId = cap.last().responseHeaders.get('x-service-log-id');
      let rec = await readRecord(h, logId);
      for (let i = 0; i < 100 && rec.entry.status === 'pending'; i++) {
        await new Promise((r) => setTimeout(r, 50));
        rec = await readRecord(h, logId);
      }
      assert.equal(rec.entry.status, 'interrupted');
      assert.equal(rec.entry.upstreamStatus, 200);
      assert.equal(rec.payload.outcome, 'client_disconnected');
      assert.equal(rec.payload.response.events[0].event, 'message_start');
      assert.equal(rec.payload.llm.streamed, true);
      assert.equal(rec.payload.llm.usage.inputTokens, ANTHROPIC_USAGE.stream.input);
    });

    test('models list via the anthropic preset: a GET without a body', async () => {
      const { sdk, cap } = client('preset');
      const ids: string[] = [];
      for await (const m of sdk.models.list()) ids.push(m.id);
      assert.deepEqual(ids, ['claude-sonnet-4-6', 'claude-haiku-4-5-20251001']);
      const { ex, payload } = await checkExchange(cap, '/v1/models');
      assertLlm(payload.llm, { provider: 'anthropic', api: 'models', streamed: false });
      assert.equal(ex.request.method, 'GET');
      assert.equal(ex.request.body.length, 0);
    });

    test('upstream errors reach the SDK untouched: a wrong key (401) and overloaded (529)', async () => {
      const wrong = client('name', 'x-api-key', 'sk-ant-wrong');
      await assert.rejects(
        wrong.sdk.messages.create({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
        (e: unknown) => e instanceof Anthropic.AuthenticationError && e.status === 401,
      );
      const denied = await checkExchange(wrong.cap, '/v1/messages', 401, 'sk-ant-wrong');
      assert.equal(denied.payload.response.body.error.type, 'authentication_error');

      const { sdk, cap } = client('preset');
      await assert.rejects(
        sdk.messages.create({ model: 'fail-529', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
        (e: unknown) => e instanceof Anthropic.APIError && e.status === 529,
      );
      const overloaded = await checkExchange(cap, '/v1/messages', 529);
      assert.equal(overloaded.payload.response.body.error.type, 'overloaded_error');
    });
  });
}
