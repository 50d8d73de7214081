/**
 * The `llm` summary of Anthropic Messages calls (proxy/llm): JSON answers with cache reads and
 * writes, and event streams from message_start to the last message_delta, in the shapes of the
 * Anthropic API reference (helpers/llm-exchanges.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sse, json, stream, anthropicRequest } from './helpers/llm-exchanges.js';

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
