/**
 * What the side panel shows of a proxied call: the request and response halves of the sealed
 * record, and for an LLM call the proxy's `llm` summary (provider, model, tokens, finish
 * reason) with the messages read from the request body and the answer's text. Pure, tested in
 * Node; everything is read defensively since a payload is whatever was sealed.
 */

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One message of a conversation, as shown. */
export interface ChatMessage {
  role: string;
  text: string;
}

/** The LLM facts of a payload. */
export interface LlmView {
  provider?: string;
  api?: string;
  model?: string;
  streamed?: boolean;
  finishReason?: string;
  usage?: Record<string, number>;
  timeToFirstTokenMs?: number;
  messages: ChatMessage[];
  answer?: string;
}

/** Text of a message content: a string, or the text parts of a content array. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((p) => (typeof p === 'string' ? p : isObject(p) ? (typeof p.text === 'string' ? p.text : `[${String(p.type ?? 'part')}]`) : ''))
      .filter(Boolean)
      .join('\n');
  }
  return content === undefined || content === null ? '' : JSON.stringify(content);
}

/** The request body the proxy recorded (`body`, or `bodyText` parsed when it is JSON). */
export function recordedBody(half: unknown): unknown {
  if (!isObject(half)) return undefined;
  if (half.body !== undefined) return half.body;
  if (typeof half.bodyText === 'string') {
    try {
      return JSON.parse(half.bodyText);
    } catch {
      return half.bodyText;
    }
  }
  return undefined;
}

/** The LLM view of a decrypted payload, or undefined when it has no `llm` member and no messages. */
export function llmView(payload: Json): LlmView | undefined {
  const llm = isObject(payload.llm) ? payload.llm : undefined;
  const req = recordedBody(payload.request);
  const res = recordedBody(payload.response);
  const messages: ChatMessage[] = [];
  if (isObject(req)) {
    if (req.system !== undefined) messages.push({ role: 'system', text: textOf(req.system) });
    const list = Array.isArray(req.messages) ? req.messages : Array.isArray(req.input) ? req.input : [];
    for (const m of list) if (isObject(m)) messages.push({ role: String(m.role ?? 'user'), text: textOf(m.content) });
    if (typeof req.input === 'string') messages.push({ role: 'user', text: req.input });
    if (typeof req.prompt === 'string') messages.push({ role: 'user', text: req.prompt });
  }
  if (!llm && messages.length === 0) return undefined;
  const view: LlmView = { messages };
  if (llm) {
    for (const k of ['provider', 'api', 'model', 'finishReason'] as const) if (typeof llm[k] === 'string') view[k] = llm[k] as string;
    if (typeof llm.streamed === 'boolean') view.streamed = llm.streamed;
    if (typeof llm.timeToFirstTokenMs === 'number') view.timeToFirstTokenMs = llm.timeToFirstTokenMs;
    if (isObject(llm.usage)) {
      view.usage = Object.fromEntries(Object.entries(llm.usage).filter((e): e is [string, number] => typeof e[1] === 'number'));
    }
  }
  if (!view.model && isObject(req) && typeof req.model === 'string') view.model = req.model;
  const answer = answerText(res);
  if (answer) view.answer = answer;
  return view;
}

/** The answer's text: OpenAI chat choices, Anthropic content blocks, Responses output. */
function answerText(res: unknown): string | undefined {
  if (!isObject(res)) return undefined;
  if (Array.isArray(res.choices)) {
    const texts = res.choices.map((c) => (isObject(c) ? (isObject(c.message) ? textOf(c.message.content) : textOf(c.text)) : ''));
    return texts.filter(Boolean).join('\n---\n') || undefined;
  }
  if (Array.isArray(res.content)) return textOf(res.content) || undefined;
  if (typeof res.output_text === 'string') return res.output_text;
  if (Array.isArray(res.output)) {
    return (
      res.output
        .map((o) => (isObject(o) && Array.isArray(o.content) ? textOf(o.content) : ''))
        .filter(Boolean)
        .join('\n') || undefined
    );
  }
  return undefined;
}
