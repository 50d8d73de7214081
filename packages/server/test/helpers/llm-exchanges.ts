/**
 * Shared fixtures for the `llm` summary suites (proxy-llm-*.test.ts): exchanges built the way the
 * proxy hands them to summarizeLlmExchange, from a JSON answer or from an event stream parsed by
 * capture.ts's parseSse, and the request and answer shapes published in the OpenAI and Anthropic
 * API references that more than one suite reads.
 */
import { parseSse } from '../../src/proxy/capture.js';
import { summarizeLlmExchange, type LlmExchangeInput } from '../../src/proxy/llm/index.js';

export const sse = (...events: Array<[string | undefined, unknown]>): string =>
  events
    .map(([name, data]) => (name ? `event: ${name}\n` : '') + `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`)
    .join('');

export const post = (url: string, extra: Partial<LlmExchangeInput> = {}): LlmExchangeInput => ({
  method: 'POST',
  url: new URL(url),
  status: 200,
  ...extra,
});
export const json = (url: string, requestJson: unknown, responseJson: unknown, extra: Partial<LlmExchangeInput> = {}) =>
  summarizeLlmExchange(
    post(url, { requestJson, responseJson, responseContentType: 'application/json', firstByteMs: 812, firstChunkMs: 815, ...extra }),
  );
export const stream = (url: string, requestJson: unknown, text: string, extra: Partial<LlmExchangeInput> = {}) =>
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

export const chatRequest = { model: 'gpt-4o', messages: [{ role: 'user', content: 'Say hello' }] };
export const chatCompletion = {
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

export const anthropicRequest = {
  model: 'claude-sonnet-4-20250514',
  max_tokens: 1024,
  messages: [{ role: 'user', content: 'Hello, Claude' }],
};
