/**
 * How the `llm` summary decides what a call is (proxy/llm): providers by preset, host and path
 * shape, calls that get no summary, fallbacks and error answers, and hostile answers that must
 * never throw and must stay canonical JSON.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalize } from '@countersign/core';
import { summarizeLlmExchange, type LlmExchangeInput } from '../src/proxy/llm/index.js';
import { post, json, chatRequest, chatCompletion, anthropicRequest } from './helpers/llm-exchanges.js';

test('providers: every preset and its host, operator names, and a loopback fake reached by path shape', () => {
  const presets: Array<[string, string]> = [
    ['openai', 'https://api.openai.com/v1'],
    ['mistral', 'https://api.mistral.ai/v1'],
    ['groq', 'https://api.groq.com/openai/v1'],
    ['together', 'https://api.together.xyz/v1'],
    ['fireworks', 'https://api.fireworks.ai/inference/v1'],
    ['deepseek', 'https://api.deepseek.com'],
    ['openrouter', 'https://openrouter.ai/api/v1'],
    ['xai', 'https://api.x.ai/v1'],
    ['gemini', 'https://generativelanguage.googleapis.com/v1beta/openai'],
  ];
  for (const [preset, base] of presets) {
    const url = `${base}/chat/completions`;
    assert.deepEqual(json(url, chatRequest, chatCompletion, { preset })?.provider, preset, preset);
    // The same host without a preset (POST /v1/proxy) is the same vendor.
    assert.deepEqual(json(url, chatRequest, chatCompletion)?.provider, preset, `${preset} by host`);
  }
  assert.equal(json('https://api.anthropic.com/v1/messages', anthropicRequest, {}, { preset: 'anthropic' })?.provider, 'anthropic');
  // Anthropic's OpenAI-compatible endpoint speaks the OpenAI format: the path decides the wire.
  assert.equal(json('https://api.anthropic.com/v1/chat/completions', chatRequest, chatCompletion)?.usage?.totalTokens, 29);
  assert.equal(
    json(
      'https://my-resource.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21',
      chatRequest,
      chatCompletion,
    )?.provider,
    'azure-openai',
  );
  // A loopback fake provider (X-Service-Target-Base) with OpenAI- or Anthropic-shaped paths.
  const fake = json('http://127.0.0.1:43123/v1/chat/completions', chatRequest, chatCompletion);
  assert.equal(fake?.provider, 'openai-compatible:127.0.0.1:43123');
  assert.equal(fake?.usage?.totalTokens, 29);
  assert.equal(json('http://127.0.0.1:43123/chat/completions', chatRequest, chatCompletion)?.api, 'chat.completions');
  assert.equal(json('http://localhost:9000/v1/messages', anthropicRequest, {})?.provider, 'anthropic-compatible:localhost:9000');
  assert.equal(json('http://[::1]:9000/v1/responses', {}, {})?.api, 'responses');
  assert.equal(json('http://127.0.0.1:9000/v1/embeddings', {}, {})?.api, 'embeddings');
  // An operator's upstream name in forward mode names an unknown host.
  assert.equal(
    json('http://10.1.2.3:8000/v1/chat/completions', chatRequest, chatCompletion, { preset: 'vllm' })?.provider,
    'openai-compatible:vllm',
  );
  assert.equal(
    json('http://10.1.2.3:8000/openai/v1/chat/completions', chatRequest, chatCompletion, { preset: 'corp' })?.provider,
    'openai-compatible:corp',
  );
  const models = summarizeLlmExchange({
    method: 'GET',
    url: new URL('https://api.openai.com/v1/models'),
    responseJson: { object: 'list', data: [] },
  });
  assert.deepEqual(models, { provider: 'openai', api: 'models', streamed: false });
  assert.equal(summarizeLlmExchange({ method: 'get', url: new URL('http://127.0.0.1:1/v1/models/gpt-4o') })?.api, 'models');
});

test('calls that are not a recognised LLM API give no summary', () => {
  const none: Array<[string, string]> = [
    ['POST', 'https://api.openai.com/v1/files'],
    ['GET', 'https://api.openai.com/v1/chat/completions'],
    ['POST', 'https://api.openai.com/v1/models'],
    ['POST', 'https://example.com/api/messages'],
    ['POST', 'https://example.com/responses'],
    ['POST', 'https://example.com/embeddings'],
    ['POST', 'https://example.com/v1/widgets'],
    ['GET', 'https://example.com/'],
    ['POST', 'https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent'],
    ['DELETE', 'https://api.anthropic.com/v1/messages'],
  ];
  for (const [method, url] of none)
    assert.equal(summarizeLlmExchange({ method, url: new URL(url), responseJson: chatCompletion }), undefined, `${method} ${url}`);
});

test('model falls back to the request; error answers; time to first token only for streams', () => {
  const error = { error: { message: 'Rate limit reached', type: 'requests', param: null, code: 'rate_limit_exceeded' } };
  const s = json('https://api.openai.com/v1/chat/completions', { ...chatRequest, stream: true }, error, { status: 429 });
  assert.deepEqual(s, { provider: 'openai', api: 'chat.completions', model: 'gpt-4o', streamed: false });
  // Nothing readable in the answer at all (a text body): what the request said.
  const bare = summarizeLlmExchange(post('https://api.anthropic.com/v1/messages', { requestJson: anthropicRequest, status: 502 }));
  assert.deepEqual(bare, { provider: 'anthropic', api: 'messages', model: 'claude-sonnet-4-20250514', streamed: false });
  // A stream recognised by its content type even when no event was captured.
  const empty = summarizeLlmExchange(
    post('https://api.openai.com/v1/chat/completions', { responseContentType: 'Text/Event-Stream', firstChunkMs: 3 }),
  );
  assert.deepEqual(empty, { provider: 'openai', api: 'chat.completions', streamed: true, timeToFirstTokenMs: 3 });
});

test('hostile answers: odd shapes, huge numbers, long strings and broken events never throw and stay canonical JSON', () => {
  const huge = {
    ...chatCompletion,
    model: 'm'.repeat(1_000_000),
    usage: { prompt_tokens: 1e300, completion_tokens: -4, total_tokens: 2 ** 60, prompt_tokens_details: { cached_tokens: '12' } },
  };
  const h = json('https://api.openai.com/v1/chat/completions', chatRequest, huge);
  assert.equal(h?.model?.length, 200);
  assert.equal(h?.usage, undefined);
  const pair = json('https://api.openai.com/v1/chat/completions', { model: 'a'.repeat(199) + '😀' }, undefined);
  assert.equal(pair?.model, 'a'.repeat(199)); // never half a surrogate pair
  let seed = 3;
  const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  const values = (): unknown => {
    const pick = rnd(12);
    if (pick === 0) return null;
    if (pick === 1) return [values(), values()];
    if (pick === 2)
      return {
        usage: values(),
        model: values(),
        choices: values(),
        message: values(),
        response: values(),
        delta: values(),
        type: values(),
      };
    if (pick === 3) return [1e308, -1, 0.5, 2 ** 53, Number.MAX_SAFE_INTEGER][rnd(5)];
    if (pick === 4) return ['', 'x', 'message_start', 'response.completed', 'error', '[DONE]', '{"usage":{'][rnd(7)];
    if (pick === 5)
      return {
        prompt_tokens: values(),
        completion_tokens: values(),
        input_tokens: values(),
        output_tokens: values(),
        total_tokens: values(),
      };
    if (pick === 6) return true;
    if (pick === 7) return { __proto__: values(), constructor: values(), hasOwnProperty: 1 };
    return rnd(100);
  };
  const urls = [
    'https://api.openai.com/v1/chat/completions',
    'https://api.openai.com/v1/responses',
    'https://api.anthropic.com/v1/messages',
    'http://127.0.0.1:1/v1/embeddings',
  ];
  for (let i = 0; i < 3000; i++) {
    const events = Array.from({ length: rnd(5) }, () => {
      const data =
        rnd(3) === 0 ? JSON.stringify(values()) : rnd(2) ? '{"type":"message_delta","usage":{"output_tokens":' : String(values());
      return rnd(4) === 0
        ? (values() as { data: string })
        : { event: ['message_start', 'message_delta', 'response.completed', 'error', undefined][rnd(5)], data };
    });
    const input = {
      method: 'POST',
      url: new URL(urls[rnd(urls.length)]!),
      requestJson: values(),
      responseJson: values(),
      responseEvents: rnd(2) ? events : (values() as LlmExchangeInput['responseEvents']),
      responseContentType: rnd(2) ? 'text/event-stream' : (values() as string),
      firstChunkMs: values() as number,
    } as LlmExchangeInput;
    const summary = summarizeLlmExchange(input);
    assert.ok(summary !== undefined);
    assert.doesNotThrow(() => canonicalize(summary));
    for (const n of Object.values(summary.usage ?? {})) assert.ok(Number.isSafeInteger(n) && n >= 0);
  }
  // A caller passing a URL string or an odd method does not break it either.
  assert.equal(summarizeLlmExchange({ method: 'POST', url: 'https://api.openai.com/v1/embeddings' as unknown as URL })?.api, 'embeddings');
  assert.equal(summarizeLlmExchange({ method: 'POST', url: 'not a url' as unknown as URL }), undefined);
  assert.equal(
    summarizeLlmExchange({ method: undefined as unknown as string, url: new URL('https://api.openai.com/v1/embeddings') }),
    undefined,
  );
});
