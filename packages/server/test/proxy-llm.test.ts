/**
 * The `llm` summary of proxied LLM calls (proxy/llm): provider and API detection, usage, model,
 * finish reason and time to first token from JSON answers and from event streams captured the
 * way the proxy captures them (capture.ts's parseSse over the SSE text). Fixtures follow the
 * shapes published in the OpenAI and Anthropic API references.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalize } from '@countersign/core';
import { parseSse } from '../src/proxy/capture.js';
import { summarizeLlmExchange, type LlmExchangeInput } from '../src/proxy/llm/index.js';

const sse = (...events: Array<[string | undefined, unknown]>): string =>
  events
    .map(([name, data]) => (name ? `event: ${name}\n` : '') + `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`)
    .join('');

const post = (url: string, extra: Partial<LlmExchangeInput> = {}): LlmExchangeInput => ({
  method: 'POST',
  url: new URL(url),
  status: 200,
  ...extra,
});
const json = (url: string, requestJson: unknown, responseJson: unknown, extra: Partial<LlmExchangeInput> = {}) =>
  summarizeLlmExchange(
    post(url, { requestJson, responseJson, responseContentType: 'application/json', firstByteMs: 812, firstChunkMs: 815, ...extra }),
  );
const stream = (url: string, requestJson: unknown, text: string, extra: Partial<LlmExchangeInput> = {}) =>
  summarizeLlmExchange(
    post(url, {
      requestJson,
      responseEvents: parseSse(text),
      responseContentType: 'text/event-stream; charset=utf-8',
      firstByteMs: 240,
      firstChunkMs: 245,
      ...extra,
    }),
  );

const chatRequest = { model: 'gpt-4o', messages: [{ role: 'user', content: 'Say hello' }] };
const chatCompletion = {
  id: 'chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT',
  object: 'chat.completion',
  created: 1741569952,
  model: 'gpt-4o-2024-08-06',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: 'Hello! How can I assist you today?', refusal: null, annotations: [] },
      logprobs: null,
      finish_reason: 'stop',
    },
  ],
  usage: {
    prompt_tokens: 19,
    completion_tokens: 10,
    total_tokens: 29,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  },
  service_tier: 'default',
  system_fingerprint: 'fp_fc9f1d7035',
};
const chunk = (choices: unknown[], usage: unknown = null) => ({
  id: 'chatcmpl-123',
  object: 'chat.completion.chunk',
  created: 1694268190,
  model: 'gpt-4o-mini-2024-07-18',
  system_fingerprint: 'fp_44709d6fcb',
  choices,
  usage,
});
const chatStream = sse(
  [undefined, chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }])],
  [undefined, chunk([{ index: 0, delta: { content: 'Hello' }, logprobs: null, finish_reason: null }])],
  [undefined, chunk([{ index: 0, delta: { content: '!' }, logprobs: null, finish_reason: null }])],
  [undefined, chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }])],
  [undefined, chunk([], { prompt_tokens: 1200, completion_tokens: 2, total_tokens: 1202, prompt_tokens_details: { cached_tokens: 1024 } })],
  [undefined, '[DONE]'],
);

test('OpenAI chat completions: JSON answer', () => {
  assert.deepEqual(json('https://api.openai.com/v1/chat/completions', chatRequest, chatCompletion), {
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-4o-2024-08-06',
    streamed: false,
    usage: { inputTokens: 19, outputTokens: 10, cachedTokens: 0, totalTokens: 29 },
    finishReason: 'stop',
  });
});

test('OpenAI chat completions: stream with stream_options.include_usage, and without', () => {
  const request = { ...chatRequest, stream: true, stream_options: { include_usage: true } };
  assert.deepEqual(stream('https://api.openai.com/v1/chat/completions', request, chatStream), {
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-4o-mini-2024-07-18',
    streamed: true,
    usage: { inputTokens: 1200, outputTokens: 2, cachedTokens: 1024, totalTokens: 1202 },
    finishReason: 'stop',
    timeToFirstTokenMs: 245,
  });
  // Without include_usage there is no usage chunk; the rest is still read.
  const withoutUsage = chatStream
    .split('\n\n')
    .filter((e) => !e.includes('"choices":[]'))
    .join('\n\n');
  const s = stream('https://api.openai.com/v1/chat/completions', { ...chatRequest, stream: true }, withoutUsage);
  assert.equal(s?.usage, undefined);
  assert.equal(s?.finishReason, 'stop');
  // Some compatible servers end with a usage chunk whose choices are null.
  const vllm = sse(
    [undefined, chunk([{ index: 0, delta: { content: 'x' }, finish_reason: 'length' }])],
    [undefined, { ...chunk([]), choices: null, usage: { prompt_tokens: 5, completion_tokens: 16, total_tokens: 21 } }],
  );
  assert.deepEqual(
    stream('http://10.0.0.5:8000/v1/chat/completions', { model: 'meta-llama/Llama-3.1-8B-Instruct', stream: true }, vllm)?.usage,
    {
      inputTokens: 5,
      outputTokens: 16,
      totalTokens: 21,
    },
  );
});

test('OpenAI legacy completions and embeddings', () => {
  const completion = {
    id: 'cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7',
    object: 'text_completion',
    created: 1589478378,
    model: 'gpt-3.5-turbo-instruct',
    choices: [{ text: '\n\nThis is indeed a test', index: 0, logprobs: null, finish_reason: 'length' }],
    usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
  };
  const c = json('https://api.openai.com/v1/completions', { model: 'gpt-3.5-turbo-instruct', prompt: 'Say this is a test' }, completion);
  assert.deepEqual(c, {
    provider: 'openai',
    api: 'completions',
    model: 'gpt-3.5-turbo-instruct',
    streamed: false,
    usage: { inputTokens: 5, outputTokens: 7, totalTokens: 12 },
    finishReason: 'length',
  });
  const embedding = {
    object: 'list',
    data: [{ object: 'embedding', embedding: [0.0023064255, -0.009327292, -0.0028842222], index: 0 }],
    model: 'text-embedding-3-small',
    usage: { prompt_tokens: 8, total_tokens: 8 },
  };
  const e = json('https://api.openai.com/v1/embeddings', { model: 'text-embedding-3-small', input: 'The food was delicious' }, embedding);
  assert.deepEqual(e, {
    provider: 'openai',
    api: 'embeddings',
    model: 'text-embedding-3-small',
    streamed: false,
    usage: { inputTokens: 8, totalTokens: 8 },
  });
});

const response = (status: string, usage: unknown, extra: Record<string, unknown> = {}) => ({
  id: 'resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b',
  object: 'response',
  created_at: 1741476542,
  status,
  error: null,
  incomplete_details: null,
  model: 'gpt-4.1-2025-04-14',
  output: [],
  usage,
  ...extra,
});
const responsesUsage = {
  input_tokens: 36,
  input_tokens_details: { cached_tokens: 12 },
  output_tokens: 87,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: 123,
};

test('OpenAI Responses API: JSON answer, an incomplete one, and a retrieved one', () => {
  const request = { model: 'gpt-4.1', input: 'Tell me a three sentence bedtime story about a unicorn.' };
  assert.deepEqual(json('https://api.openai.com/v1/responses', request, response('completed', responsesUsage)), {
    provider: 'openai',
    api: 'responses',
    model: 'gpt-4.1-2025-04-14',
    streamed: false,
    usage: { inputTokens: 36, outputTokens: 87, cachedTokens: 12, totalTokens: 123 },
    finishReason: 'completed',
  });
  const incomplete = response('incomplete', responsesUsage, { incomplete_details: { reason: 'max_output_tokens' } });
  assert.equal(json('https://api.openai.com/v1/responses', request, incomplete)?.finishReason, 'max_output_tokens');
  const retrieved = summarizeLlmExchange({
    method: 'GET',
    url: new URL('https://api.openai.com/v1/responses/resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b'),
    responseJson: response('completed', responsesUsage),
  });
  assert.equal(retrieved?.usage?.totalTokens, 123);
});

test('OpenAI Responses API: event stream, with and without event names', () => {
  const created = response('in_progress', null);
  const events: Array<[string, unknown]> = [
    ['response.created', { type: 'response.created', sequence_number: 0, response: created }],
    ['response.in_progress', { type: 'response.in_progress', sequence_number: 1, response: created }],
    [
      'response.output_item.added',
      {
        type: 'response.output_item.added',
        sequence_number: 2,
        output_index: 0,
        item: { id: 'msg_1', type: 'message', status: 'in_progress', role: 'assistant', content: [] },
      },
    ],
    [
      'response.output_text.delta',
      {
        type: 'response.output_text.delta',
        sequence_number: 3,
        item_id: 'msg_1',
        output_index: 0,
        content_index: 0,
        delta: 'Once upon a "response.completed" time',
      },
    ],
    [
      'response.output_text.done',
      {
        type: 'response.output_text.done',
        sequence_number: 4,
        item_id: 'msg_1',
        output_index: 0,
        content_index: 0,
        text: 'Once upon a time',
      },
    ],
    ['response.completed', { type: 'response.completed', sequence_number: 5, response: response('completed', responsesUsage) }],
  ];
  const expected = {
    provider: 'openai',
    api: 'responses',
    model: 'gpt-4.1-2025-04-14',
    streamed: true,
    usage: { inputTokens: 36, outputTokens: 87, cachedTokens: 12, totalTokens: 123 },
    finishReason: 'completed',
    timeToFirstTokenMs: 245,
  };
  assert.deepEqual(stream('https://api.openai.com/v1/responses', { model: 'gpt-4.1', stream: true }, sse(...events)), expected);
  const unnamed = sse(...events.map(([, data]): [undefined, unknown] => [undefined, data]));
  assert.deepEqual(stream('https://api.openai.com/v1/responses', { model: 'gpt-4.1', stream: true }, unnamed), expected);
  // Cut before the end (2 MB capture): the model is known, the usage is not.
  const cut = stream('https://api.openai.com/v1/responses', { stream: true }, sse(...events.slice(0, 4)));
  assert.equal(cut?.model, 'gpt-4.1-2025-04-14');
  assert.equal(cut?.usage, undefined);
  assert.equal(cut?.finishReason, 'in_progress');
  const failed = sse(events[0]!, [
    'error',
    { type: 'error', code: 'server_error', message: 'The server had an error', sequence_number: 1 },
  ]);
  assert.equal(stream('https://api.openai.com/v1/responses', {}, failed)?.finishReason, 'error');
});

const anthropicRequest = { model: 'claude-sonnet-4-20250514', max_tokens: 1024, messages: [{ role: 'user', content: 'Hello, Claude' }] };

test('Anthropic messages: JSON answer with cache reads and writes', () => {
  const message = {
    id: 'msg_013Zva2CMHLNnXjNJJKqJ2EF',
    type: 'message',
    role: 'assistant',
    model: 'claude-sonnet-4-20250514',
    content: [{ type: 'text', text: 'Hi! My name is Claude.' }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: {
      input_tokens: 2095,
      cache_creation_input_tokens: 100,
      cache_read_input_tokens: 1800,
      output_tokens: 503,
      service_tier: 'standard',
    },
  };
  assert.deepEqual(json('https://api.anthropic.com/v1/messages', anthropicRequest, message), {
    provider: 'anthropic',
    api: 'messages',
    model: 'claude-sonnet-4-20250514',
    streamed: false,
    // inputTokens is Anthropic's uncached input; the total adds cache writes and reads.
    usage: { inputTokens: 2095, outputTokens: 503, cachedTokens: 1800, totalTokens: 2095 + 100 + 1800 + 503 },
    finishReason: 'end_turn',
  });
  const counted = json('https://api.anthropic.com/v1/messages/count_tokens', anthropicRequest, { input_tokens: 2095 });
  assert.deepEqual(counted, {
    provider: 'anthropic',
    api: 'messages.count_tokens',
    model: 'claude-sonnet-4-20250514',
    streamed: false,
    usage: { inputTokens: 2095, totalTokens: 2095 },
  });
});

test('Anthropic messages: event stream (message_start, then the last message_delta)', () => {
  const text = sse(
    [
      'message_start',
      {
        type: 'message_start',
        message: {
          id: 'msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY',
          type: 'message',
          role: 'assistant',
          content: [],
          model: 'claude-sonnet-4-20250514',
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 25, cache_read_input_tokens: 10, cache_creation_input_tokens: 0, output_tokens: 1 },
        },
      },
    ],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
    ['ping', { type: 'ping' }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: '!' } }],
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    ['message_delta', { type: 'message_delta', delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { output_tokens: 9 } }],
    ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 15 } }],
    ['message_stop', { type: 'message_stop' }],
  );
  assert.deepEqual(stream('https://api.anthropic.com/v1/messages', { ...anthropicRequest, stream: true }, text), {
    provider: 'anthropic',
    api: 'messages',
    model: 'claude-sonnet-4-20250514',
    streamed: true,
    usage: { inputTokens: 25, outputTokens: 15, cachedTokens: 10, totalTokens: 50 },
    finishReason: 'end_turn',
    timeToFirstTokenMs: 245,
  });
  const overloaded = sse(
    ['message_start', { type: 'message_start', message: { model: 'claude-3-5-haiku-20241022', usage: { input_tokens: 7 } } }],
    ['error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }],
  );
  const o = stream('https://api.anthropic.com/v1/messages', anthropicRequest, overloaded);
  assert.deepEqual([o?.model, o?.finishReason, o?.usage], ['claude-3-5-haiku-20241022', 'error', { inputTokens: 7, totalTokens: 7 }]);
});

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
