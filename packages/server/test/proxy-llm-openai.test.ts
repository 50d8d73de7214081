/**
 * The `llm` summary of OpenAI calls (proxy/llm): chat completions (JSON and streamed, with and
 * without usage), legacy completions, embeddings and the Responses API, from fixtures in the
 * shapes of the OpenAI API reference (helpers/llm-exchanges.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { summarizeLlmExchange } from '../src/proxy/llm/index.js';
import { sse, json, stream, chatRequest, chatCompletion } from './helpers/llm-exchanges.js';

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
