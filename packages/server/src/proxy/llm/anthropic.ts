/**
 * Reading Anthropic Messages answers: the JSON message, or its event stream, where
 * `message_start` carries the model and the input side of the usage and each `message_delta`
 * the stop reason and the cumulative usage so far (the last one is the total).
 *
 * Anthropic counts cache reads and cache writes apart from `input_tokens`. The summary keeps the
 * provider's own numbers: `inputTokens` = `input_tokens` (uncached input only, unlike OpenAI's
 * `prompt_tokens`), `cachedTokens` = `cache_read_input_tokens`, and `totalTokens` (which
 * Anthropic does not report) = input + cache writes + cache reads + output.
 */
import { count, eventJson, events, member, obj, text, usageOf, type AnswerFacts, type LlmUsage } from './read.js';

/** The raw counts of an Anthropic `usage` object, each when present and valid. */
interface RawUsage {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheWrite?: number;
}

function rawUsage(v: unknown, into: RawUsage): void {
  if (obj(v) === undefined) return;
  const input = count(member(v, 'input_tokens'));
  if (input !== undefined) into.input = input;
  const output = count(member(v, 'output_tokens'));
  if (output !== undefined) into.output = output;
  const cacheRead = count(member(v, 'cache_read_input_tokens'));
  if (cacheRead !== undefined) into.cacheRead = cacheRead;
  const cacheWrite = count(member(v, 'cache_creation_input_tokens'));
  if (cacheWrite !== undefined) into.cacheWrite = cacheWrite;
}

function summaryUsage(raw: RawUsage): LlmUsage | undefined {
  const u: LlmUsage = {};
  if (raw.input !== undefined) u.inputTokens = raw.input;
  if (raw.output !== undefined) u.outputTokens = raw.output;
  if (raw.cacheRead !== undefined) u.cachedTokens = raw.cacheRead;
  return usageOf(u, [raw.input, raw.cacheWrite, raw.cacheRead, raw.output]);
}

/** A complete Messages JSON answer (or `count_tokens`, whose answer is `{input_tokens}`). */
export function anthropicJson(answer: unknown, facts: AnswerFacts = {}): AnswerFacts {
  const model = text(member(answer, 'model'));
  if (model !== undefined) facts.model = model;
  const raw: RawUsage = {};
  rawUsage(member(answer, 'usage'), raw);
  // count_tokens answers the count at the top level.
  const counted = count(member(answer, 'input_tokens'));
  if (counted !== undefined && raw.input === undefined) raw.input = counted;
  const usage = summaryUsage(raw);
  if (usage !== undefined) facts.usage = usage;
  const stop = text(member(answer, 'stop_reason'));
  if (stop !== undefined) facts.finishReason = stop;
  return facts;
}

const WANTED = new Set(['message_start', 'message_delta', 'error']);
const WANTED_DATA = /"type"\s*:\s*"(message_start|message_delta|error)"/;

/** A Messages event stream. */
export function anthropicStream(list: unknown, facts: AnswerFacts = {}): AnswerFacts {
  const raw: RawUsage = {};
  for (const { event, data } of events(list)) {
    if (event !== undefined ? !WANTED.has(event) : !WANTED_DATA.test(data)) continue;
    const parsed = eventJson(data);
    const type = text(member(parsed, 'type')) ?? event;
    if (type === 'message_start') {
      const message = member(parsed, 'message');
      const model = text(member(message, 'model'));
      if (model !== undefined) facts.model = model;
      rawUsage(member(message, 'usage'), raw);
    } else if (type === 'message_delta') {
      const stop = text(member(member(parsed, 'delta'), 'stop_reason'));
      if (stop !== undefined) facts.finishReason = stop;
      // Cumulative counts: each delta's members replace the earlier ones.
      rawUsage(member(parsed, 'usage'), raw);
    } else if (type === 'error') {
      facts.finishReason = 'error';
    }
  }
  const usage = summaryUsage(raw);
  if (usage !== undefined) facts.usage = usage;
  return facts;
}
