/**
 * Reading OpenAI-format answers (OpenAI and every OpenAI-compatible API): chat completions and
 * legacy completions (JSON, or chunks with the usage chunk of `stream_options.include_usage`),
 * the Responses API (JSON, or its typed events, where `response.completed`, `.incomplete` or
 * `.failed` carries the final response with its usage) and embeddings.
 */
import { count, eventJson, events, member, obj, text, usageOf, type AnswerFacts, type LlmUsage } from './read.js';

/** Chat/completions usage: `prompt_tokens` (cached included), `completion_tokens`, `total_tokens`. */
function chatUsage(v: unknown): LlmUsage | undefined {
  if (obj(v) === undefined) return undefined;
  const input = count(member(v, 'prompt_tokens'));
  const output = count(member(v, 'completion_tokens'));
  const u: LlmUsage = {};
  if (input !== undefined) u.inputTokens = input;
  if (output !== undefined) u.outputTokens = output;
  const cached = count(member(member(v, 'prompt_tokens_details'), 'cached_tokens'));
  if (cached !== undefined) u.cachedTokens = cached;
  const total = count(member(v, 'total_tokens'));
  if (total !== undefined) u.totalTokens = total;
  return usageOf(u, [input, output]);
}

/** Responses usage: `input_tokens` (cached included), `output_tokens`, `total_tokens`. */
function responsesUsage(v: unknown): LlmUsage | undefined {
  if (obj(v) === undefined) return undefined;
  const input = count(member(v, 'input_tokens'));
  const output = count(member(v, 'output_tokens'));
  const u: LlmUsage = {};
  if (input !== undefined) u.inputTokens = input;
  if (output !== undefined) u.outputTokens = output;
  const cached = count(member(member(v, 'input_tokens_details'), 'cached_tokens'));
  if (cached !== undefined) u.cachedTokens = cached;
  const total = count(member(v, 'total_tokens'));
  if (total !== undefined) u.totalTokens = total;
  return usageOf(u, [input, output]);
}

/** The finish reason of the first choice that has one (`n > 1` answers have several). */
function choicesFinish(choices: unknown): string | undefined {
  if (!Array.isArray(choices)) return undefined;
  for (const c of choices as unknown[]) {
    const reason = text(member(c, 'finish_reason'));
    if (reason !== undefined) return reason;
  }
  return undefined;
}

/** A complete chat/completions/embeddings JSON answer. */
export function openAiJson(answer: unknown, facts: AnswerFacts = {}): AnswerFacts {
  const model = text(member(answer, 'model'));
  if (model !== undefined) facts.model = model;
  const usage = chatUsage(member(answer, 'usage'));
  if (usage !== undefined) facts.usage = usage;
  const finish = choicesFinish(member(answer, 'choices'));
  if (finish !== undefined) facts.finishReason = finish;
  return facts;
}

// Only chunks that can carry what we want are parsed: a stream of 2 MB is mostly token deltas.
const USAGE_CHUNK = /"usage"\s*:\s*\{/;
const FINISH_CHUNK = /"finish_reason"\s*:\s*"/;

/** A chat/completions stream: model from the first chunk, finish reason and usage (the last seen). */
export function openAiStream(list: unknown, facts: AnswerFacts = {}): AnswerFacts {
  for (const { data } of events(list)) {
    const wanted = facts.model === undefined || USAGE_CHUNK.test(data) || FINISH_CHUNK.test(data);
    if (!wanted) continue;
    const chunk = eventJson(data);
    if (obj(chunk) === undefined) continue;
    if (facts.model === undefined) {
      const model = text(member(chunk, 'model'));
      if (model !== undefined) facts.model = model;
    }
    const finish = choicesFinish(member(chunk, 'choices'));
    if (finish !== undefined) facts.finishReason = finish;
    const usage = chatUsage(member(chunk, 'usage'));
    if (usage !== undefined) facts.usage = usage;
  }
  return facts;
}

/** A Responses API response object (the JSON answer, or the one a terminal event carries). */
function responseObject(response: unknown, facts: AnswerFacts): void {
  const model = text(member(response, 'model'));
  if (model !== undefined) facts.model = model;
  const usage = responsesUsage(member(response, 'usage'));
  if (usage !== undefined) facts.usage = usage;
  // `status` says how it ended; an incomplete one says why (max_output_tokens, content_filter).
  const status = text(member(response, 'status'));
  const why = status === 'incomplete' ? text(member(member(response, 'incomplete_details'), 'reason')) : undefined;
  const finish = why ?? status;
  if (finish !== undefined) facts.finishReason = finish;
}

/** A complete Responses API JSON answer. */
export function responsesJson(answer: unknown, facts: AnswerFacts = {}): AnswerFacts {
  responseObject(answer, facts);
  return facts;
}

/** Lifecycle events (their `response` is the response object so far); deltas are skipped. */
const LIFECYCLE = /^response\.(created|queued|in_progress|completed|incomplete|failed)$/;
const LIFECYCLE_DATA = /"type"\s*:\s*"response\.(created|queued|in_progress|completed|incomplete|failed)"/;

/** A Responses API event stream: the last lifecycle event's response object wins. */
export function responsesStream(list: unknown, facts: AnswerFacts = {}): AnswerFacts {
  for (const { event, data } of events(list)) {
    if (event !== undefined ? !LIFECYCLE.test(event) && event !== 'error' : !LIFECYCLE_DATA.test(data) && !data.includes('"error"'))
      continue;
    const parsed = eventJson(data);
    const type = text(member(parsed, 'type')) ?? event;
    if (type === 'error') {
      facts.finishReason = 'error';
      continue;
    }
    if (type === undefined || !LIFECYCLE.test(type)) continue;
    responseObject(member(parsed, 'response'), facts);
  }
  return facts;
}
