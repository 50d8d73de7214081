/**
 * The `llm` member of a proxy record: what a call to a recognised LLM API was (provider, API,
 * model, streamed or not, token usage, finish reason, time to first token), read from the
 * request and the answer as captured. Pure and total: any input, however hostile, gives a
 * summary of what could be read, or undefined for a call that is not a recognised LLM API.
 * docs/proxy.md ("LLM calls") describes the member.
 */
import { anthropicJson, anthropicStream } from './anthropic.js';
import { openAiJson, openAiStream, responsesJson, responsesStream } from './openai.js';
import { detectLlmApi } from './providers.js';
import { member, text, type AnswerFacts, type LlmUsage } from './read.js';

export type { LlmUsage } from './read.js';
export { detectLlmApi, type DetectedLlmApi, type LlmWire } from './providers.js';

/** What the proxy knows of one exchange. */
export interface LlmExchangeInput {
  /** Forward-mode upstream name when the call went through one (a preset such as `openai`, or an operator's name). */
  preset?: string;
  method: string;
  /** The upstream URL actually called. */
  url: URL;
  /** The parsed request body when it was JSON. */
  requestJson?: unknown;
  status?: number;
  responseContentType?: string;
  /** The parsed JSON answer, when complete and JSON. */
  responseJson?: unknown;
  /** SSE events as captured (the capture may be truncated at 2 MB). */
  responseEvents?: Array<{ event?: string; data: string }>;
  /** Request start → response headers, ms. */
  firstByteMs?: number;
  /** Request start → first body chunk, ms. */
  firstChunkMs?: number;
}

/** The `llm` member of a proxy record. */
export interface LlmSummary {
  /** The vendor (`openai`, `anthropic`, `mistral`, …) or `openai-compatible:<name>` / `anthropic-compatible:<name>` (providers.ts). */
  provider: string;
  /** `chat.completions`, `completions`, `responses`, `embeddings`, `messages`, `messages.count_tokens` or `models`. */
  api: 'chat.completions' | 'responses' | 'embeddings' | 'messages' | 'completions' | 'models' | string;
  /** The model the answer names, else the one the request asked for. */
  model?: string;
  /** True when the answer was an event stream (`text/event-stream`). */
  streamed: boolean;
  usage?: LlmUsage;
  /** `finish_reason` (chat, completions), `stop_reason` (Anthropic), the response `status` or incomplete reason (Responses), `error` for a stream's error event. */
  finishReason?: string;
  /**
   * Streams only: request start → first body chunk (`firstChunkMs`). An approximation from
   * above the wire: the first chunk is the first event, which for OpenAI carries the role and
   * for Anthropic `message_start`, a few ms before the first token; no per-event time is kept.
   */
  timeToFirstTokenMs?: number;
}

/** Reads the answer of an API in its wire format into `facts` (filled as it goes). */
function readAnswer(api: string, wire: string, streamed: boolean, input: LlmExchangeInput, facts: AnswerFacts): void {
  if (wire === 'anthropic') {
    if (streamed) anthropicStream(input.responseEvents, facts);
    else anthropicJson(input.responseJson, facts);
  } else if (api === 'responses') {
    if (streamed) responsesStream(input.responseEvents, facts);
    else responsesJson(input.responseJson, facts);
  } else if (api !== 'models') {
    if (streamed) openAiStream(input.responseEvents, facts);
    else openAiJson(input.responseJson, facts);
  }
}

/**
 * The `llm` summary of an exchange with a recognised LLM API, or undefined for any other call.
 * Never throws: on input it cannot read it returns what it had read so far.
 */
export function summarizeLlmExchange(input: LlmExchangeInput): LlmSummary | undefined {
  let summary: LlmSummary;
  let wire: string;
  try {
    const url = input.url instanceof URL ? input.url : new URL(String(input.url));
    const detected = detectLlmApi(typeof input.preset === 'string' ? input.preset : undefined, String(input.method), url);
    if (detected === undefined) return undefined;
    wire = detected.wire;
    const contentType = typeof input.responseContentType === 'string' ? input.responseContentType.toLowerCase() : '';
    const streamed =
      contentType.startsWith('text/event-stream') || (Array.isArray(input.responseEvents) && input.responseEvents.length > 0);
    summary = { provider: detected.provider, api: detected.api, streamed };
  } catch {
    return undefined;
  }
  try {
    const requested = text(member(input.requestJson, 'model'));
    if (requested !== undefined) summary.model = requested;
    const ttft = input.firstChunkMs;
    if (summary.streamed && typeof ttft === 'number' && Number.isFinite(ttft) && ttft >= 0) summary.timeToFirstTokenMs = ttft;
  } catch {
    // Keep what was read: a summary is never worth losing the record over.
  }
  const facts: AnswerFacts = {};
  try {
    readAnswer(summary.api, wire, summary.streamed, input, facts);
  } catch {
    // As above: the facts read before the failure still count.
  }
  if (facts.model !== undefined) summary.model = facts.model;
  if (facts.usage !== undefined) summary.usage = facts.usage;
  if (facts.finishReason !== undefined) summary.finishReason = facts.finishReason;
  return summary;
}
