/**
 * The answers of the fake OpenAI and Anthropic servers (fake-providers.ts): bodies shaped as the
 * providers' public API references show them (ids, objects, usage members, SSE event names), with
 * fixed token counts a test can compare against the record's `llm.usage`. Every count is
 * distinct, so a summary that reads the wrong member cannot pass by accident.
 */

/** OpenAI usage numbers of each fake answer (chat `*_tokens`, Responses `input/output_tokens`). */
export const OPENAI_USAGE = {
  chat: { input: 19, output: 10, cached: 6, total: 29 },
  chatStream: { input: 21, output: 7, cached: 4, total: 28 },
  responses: { input: 36, output: 87, cached: 12, total: 123 },
  responsesStream: { input: 40, output: 9, cached: 3, total: 49 },
  embeddings: { input: 8, total: 8 },
} as const;

/** Anthropic usage numbers: `input_tokens` excludes the cache reads and writes, as the API documents. */
export const ANTHROPIC_USAGE = {
  message: { input: 2095, output: 503, cacheRead: 1000, cacheWrite: 17 },
  /** message_start carries input and cache numbers with output_tokens 1; message_delta the final output count. */
  stream: { input: 25, startOutput: 1, output: 15, cacheRead: 10, cacheWrite: 5 },
} as const;

const CREATED = 1741569952;

/** The model an OpenAI answer names: the dated snapshot of the requested alias, as the API answers. */
export const servedModel = (requested: string): string => `${requested}-2025-04-14`;

/** `POST /v1/chat/completions`, not streamed. */
export function chatCompletion(model: string): unknown {
  const u = OPENAI_USAGE.chat;
  return {
    id: 'chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT',
    object: 'chat.completion',
    created: CREATED,
    model: servedModel(model),
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: 'Hello! How can I assist you today?', refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: {
      prompt_tokens: u.input,
      completion_tokens: u.output,
      total_tokens: u.total,
      prompt_tokens_details: { cached_tokens: u.cached, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    },
    service_tier: 'default',
    system_fingerprint: 'fp_44709d6fcb',
  };
}

/** `POST /v1/chat/completions` with `stream: true`: SSE frames, the usage chunk only when asked for. */
export function chatCompletionChunks(model: string, includeUsage: boolean): string[] {
  const u = OPENAI_USAGE.chatStream;
  const base = {
    id: 'chatcmpl-123',
    object: 'chat.completion.chunk',
    created: CREATED,
    model: servedModel(model),
    system_fingerprint: 'fp_44709d6fcb',
  };
  const chunk = (delta: unknown, finish: string | null) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {}),
  });
  const frames = [
    chunk({ role: 'assistant', content: '', refusal: null }, null),
    chunk({ content: 'Hello' }, null),
    chunk({ content: ' there' }, null),
    chunk({ content: '!' }, null),
    chunk({}, 'stop'),
  ];
  if (includeUsage) {
    frames.push({
      ...base,
      choices: [],
      usage: {
        prompt_tokens: u.input,
        completion_tokens: u.output,
        total_tokens: u.total,
        prompt_tokens_details: { cached_tokens: u.cached, audio_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
      },
    } as never);
  }
  return [...frames.map((f) => `data: ${JSON.stringify(f)}\n\n`), 'data: [DONE]\n\n'];
}

/** A Responses API `response` object. */
function responseObject(
  model: string,
  status: 'in_progress' | 'completed',
  text: string,
  usage: { input: number; output: number; cached: number; total: number } | null,
) {
  return {
    id: 'resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b',
    object: 'response',
    created_at: CREATED,
    status,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: servedModel(model),
    output:
      status === 'completed'
        ? [
            {
              type: 'message',
              id: 'msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b',
              status: 'completed',
              role: 'assistant',
              content: [{ type: 'output_text', text, annotations: [] }],
            },
          ]
        : [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1.0,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1.0,
    truncation: 'disabled',
    usage: usage && {
      input_tokens: usage.input,
      input_tokens_details: { cached_tokens: usage.cached },
      output_tokens: usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.total,
    },
    user: null,
    metadata: {},
  };
}

/** `POST /v1/responses`, not streamed. */
export function responsesAnswer(model: string): unknown {
  return responseObject(model, 'completed', 'Under a silver moon, a unicorn dreamed of stars.', OPENAI_USAGE.responses);
}

/** `POST /v1/responses` with `stream: true`: named events, usage in `response.completed`. */
export function responsesEvents(model: string): string[] {
  const itemId = 'msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b';
  const events: Array<Record<string, unknown>> = [
    { type: 'response.created', response: responseObject(model, 'in_progress', '', null) },
    { type: 'response.in_progress', response: responseObject(model, 'in_progress', '', null) },
    {
      type: 'response.output_item.added',
      output_index: 0,
      item: { id: itemId, type: 'message', status: 'in_progress', content: [], role: 'assistant' },
    },
    {
      type: 'response.content_part.added',
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', annotations: [], text: '' },
    },
    { type: 'response.output_text.delta', item_id: itemId, output_index: 0, content_index: 0, delta: 'Hi', logprobs: [] },
    { type: 'response.output_text.delta', item_id: itemId, output_index: 0, content_index: 0, delta: ' there', logprobs: [] },
    { type: 'response.output_text.done', item_id: itemId, output_index: 0, content_index: 0, text: 'Hi there', logprobs: [] },
    {
      type: 'response.content_part.done',
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', annotations: [], text: 'Hi there' },
    },
    {
      type: 'response.output_item.done',
      output_index: 0,
      item: {
        id: itemId,
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hi there', annotations: [] }],
      },
    },
    { type: 'response.completed', response: responseObject(model, 'completed', 'Hi there', OPENAI_USAGE.responsesStream) },
  ];
  return events.map((e, i) => `event: ${String(e.type)}\ndata: ${JSON.stringify({ ...e, sequence_number: i })}\n\n`);
}

/** `POST /v1/embeddings`: floats, or base64 little-endian float32 when `encoding_format` is base64 (the SDK's default). */
export function embeddingsAnswer(model: string, inputs: string[], base64: boolean): unknown {
  const data = inputs.map((text, index) => {
    const v = Float32Array.from({ length: 8 }, (_, i) => Math.fround(((text.length + 1) * (i + 1)) / 1024 - 0.01));
    const embedding = base64 ? Buffer.from(v.buffer).toString('base64') : Array.from(v);
    return { object: 'embedding', index, embedding };
  });
  return {
    object: 'list',
    data,
    model,
    usage: { prompt_tokens: OPENAI_USAGE.embeddings.input, total_tokens: OPENAI_USAGE.embeddings.total },
  };
}

/** `GET /v1/models` (OpenAI). */
export const OPENAI_MODELS = {
  object: 'list',
  data: [
    { id: 'gpt-4.1', object: 'model', created: 1744316542, owned_by: 'system' },
    { id: 'gpt-4o-mini', object: 'model', created: 1721172741, owned_by: 'system' },
    { id: 'text-embedding-3-small', object: 'model', created: 1705948997, owned_by: 'system' },
  ],
};

/** `POST /v1/files`: the file object for the uploaded part. */
export function fileObject(filename: string, bytes: number, purpose: string): unknown {
  return {
    id: 'file-abc123',
    object: 'file',
    bytes,
    created_at: 1677610602,
    filename,
    purpose,
    status: 'processed',
    expires_at: null,
    status_details: null,
  };
}

/** `POST /v1/audio/transcriptions` (gpt-4o-transcribe style, with token usage). */
export function transcriptionAnswer(audioBytes: number): unknown {
  return {
    text: `Imagine the wildest idea that you've ever had (${audioBytes} bytes heard).`,
    usage: {
      type: 'tokens',
      input_tokens: 14,
      input_token_details: { text_tokens: 0, audio_tokens: 14 },
      output_tokens: 45,
      total_tokens: 59,
    },
  };
}

/** An OpenAI error body for `status`. */
export function openAiError(status: number, message?: string): unknown {
  const type =
    status === 401 ? 'invalid_request_error' : status === 429 ? 'requests' : status >= 500 ? 'server_error' : 'invalid_request_error';
  const code = status === 401 ? 'invalid_api_key' : status === 429 ? 'rate_limit_exceeded' : null;
  const text =
    message ??
    (status === 429
      ? 'Rate limit reached for gpt-4o-mini in organization org-123 on requests per min (RPM): Limit 3, Used 3, Requested 1.'
      : status >= 500
        ? 'The server had an error while processing your request. Sorry about that!'
        : 'Invalid request.');
  return { error: { message: text, type, param: null, code } };
}

/** `POST /v1/messages`, not streamed. */
export function anthropicMessage(model: string): unknown {
  const u = ANTHROPIC_USAGE.message;
  return {
    id: 'msg_013Zva2CMHLNnXjNJJKqJ2EF',
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text: 'Hi! My name is Claude.' }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: {
      input_tokens: u.input,
      cache_creation_input_tokens: u.cacheWrite,
      cache_read_input_tokens: u.cacheRead,
      output_tokens: u.output,
      service_tier: 'standard',
    },
  };
}

/** `POST /v1/messages` with `stream: true`: the documented event flow, ping included. */
export function anthropicEvents(model: string): string[] {
  const u = ANTHROPIC_USAGE.stream;
  const events: Array<[string, unknown]> = [
    [
      'message_start',
      {
        type: 'message_start',
        message: {
          id: 'msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY',
          type: 'message',
          role: 'assistant',
          content: [],
          model,
          stop_reason: null,
          stop_sequence: null,
          usage: {
            input_tokens: u.input,
            cache_creation_input_tokens: u.cacheWrite,
            cache_read_input_tokens: u.cacheRead,
            output_tokens: u.startOutput,
          },
        },
      },
    ],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
    ['ping', { type: 'ping' }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: '!' } }],
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    [
      'message_delta',
      { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: u.output } },
    ],
    ['message_stop', { type: 'message_stop' }],
  ];
  return events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
}

/** `GET /v1/models` (Anthropic). */
export const ANTHROPIC_MODELS = {
  data: [
    { type: 'model', id: 'claude-sonnet-4-6', display_name: 'Claude Sonnet 4.6', created_at: '2026-02-17T00:00:00Z' },
    { type: 'model', id: 'claude-haiku-4-5-20251001', display_name: 'Claude Haiku 4.5', created_at: '2025-10-01T00:00:00Z' },
  ],
  has_more: false,
  first_id: 'claude-sonnet-4-6',
  last_id: 'claude-haiku-4-5-20251001',
};

/** An Anthropic error body (`authentication_error`, `overloaded_error`, …). */
export function anthropicError(status: number, message?: string): unknown {
  const type =
    status === 401
      ? 'authentication_error'
      : status === 429
        ? 'rate_limit_error'
        : status === 529
          ? 'overloaded_error'
          : status >= 500
            ? 'api_error'
            : 'invalid_request_error';
  const text = message ?? (status === 401 ? 'invalid x-api-key' : status === 529 ? 'Overloaded' : 'Internal server error');
  return { type: 'error', error: { type, message: text }, request_id: 'req_011CSHoEeqs5C35K2UUqR7Fy' };
}
