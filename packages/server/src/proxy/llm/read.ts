/**
 * Defensive readers for LLM answers. Everything an upstream sends is untrusted: any JSON shape,
 * numbers past 2^53, strings of megabytes, events that are not JSON. These helpers return
 * undefined for anything that is not what a field should be, and never throw.
 */

/** The token counts of one exchange, as the summary records them. */
export interface LlmUsage {
  inputTokens?: number;
  outputTokens?: number;
  cachedTokens?: number;
  totalTokens?: number;
}

/** What an answer said (every member optional: a hostile or cut answer may say little). */
export interface AnswerFacts {
  model?: string;
  usage?: LlmUsage;
  finishReason?: string;
}

/** Longest model name or finish reason kept (an upstream could send a megabyte of it). */
const MAX_TEXT = 200;

/** `v` when it is a plain JSON object (not an array, not null). */
export function obj(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** The member `key` of `v` when `v` is an object (own members only: JSON never has others). */
export function member(v: unknown, key: string): unknown {
  const o = obj(v);
  return o !== undefined && Object.prototype.hasOwnProperty.call(o, key) ? o[key] : undefined;
}

/** A non-empty string, cut to {@link MAX_TEXT} characters (never inside a surrogate pair). */
export function text(v: unknown): string | undefined {
  if (typeof v !== 'string' || v === '') return undefined;
  if (v.length <= MAX_TEXT) return v;
  const cut = v.charCodeAt(MAX_TEXT - 1) >= 0xd800 && v.charCodeAt(MAX_TEXT - 1) <= 0xdbff ? MAX_TEXT - 1 : MAX_TEXT;
  return v.slice(0, cut);
}

/** A token count: a non-negative safe integer, else undefined (1e300, -1, 2.5 and "12" are not counts). */
export function count(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined;
}

/** The parsed `data` of one SSE event, or undefined when it is not JSON (`[DONE]`, a cut tail). */
export function eventJson(data: unknown): unknown {
  if (typeof data !== 'string' || data === '' || data === '[DONE]') return undefined;
  try {
    return JSON.parse(data) as unknown;
  } catch {
    return undefined;
  }
}

/** The events as captured, skipping anything that is not `{event?, data}`. */
export function* events(list: unknown): Generator<{ event: string | undefined; data: string }> {
  if (!Array.isArray(list)) return;
  for (const e of list as unknown[]) {
    const data = member(e, 'data');
    if (typeof data !== 'string') continue;
    const event = member(e, 'event');
    yield { event: typeof event === 'string' ? event : undefined, data };
  }
}

/**
 * The usage with only the counts that were read; `totalTokens`, when the provider gave none, is
 * the sum of `parts` (the counts that make up the whole for that API) if any was read.
 */
export function usageOf(usage: LlmUsage, parts: Array<number | undefined>): LlmUsage | undefined {
  const out: LlmUsage = {};
  if (usage.inputTokens !== undefined) out.inputTokens = usage.inputTokens;
  if (usage.outputTokens !== undefined) out.outputTokens = usage.outputTokens;
  if (usage.cachedTokens !== undefined) out.cachedTokens = usage.cachedTokens;
  if (usage.totalTokens !== undefined) out.totalTokens = usage.totalTokens;
  else if (parts.some((p) => p !== undefined)) {
    const sum = parts.reduce<number>((a, p) => a + (p ?? 0), 0);
    if (Number.isSafeInteger(sum)) out.totalTokens = sum;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
