/**
 * Named upstreams of the forward mode (DESIGN §4): `/v1/forward/{name}/{rest…}` goes to
 * `{base of name}/{rest…}`. Built-in presets cover the common LLM APIs (all but Anthropic speak
 * the OpenAI wire format, so an OpenAI SDK works against any of them with its base URL changed);
 * operators add or override names with `COUNTERSIGN_UPSTREAMS` (`name=https://base,…`).
 */

/** Built-in presets: name → base URL (no trailing slash). */
export const UPSTREAM_PRESETS: Readonly<Record<string, string>> = Object.freeze({
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  mistral: 'https://api.mistral.ai/v1',
  groq: 'https://api.groq.com/openai/v1',
  together: 'https://api.together.xyz/v1',
  fireworks: 'https://api.fireworks.ai/inference/v1',
  deepseek: 'https://api.deepseek.com',
  openrouter: 'https://openrouter.ai/api/v1',
  xai: 'https://api.x.ai/v1',
  gemini: 'https://generativelanguage.googleapis.com/v1beta/openai',
  perplexity: 'https://api.perplexity.ai',
});

/** What an upstream name may look like (a path segment without surprises). */
export const UPSTREAM_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/**
 * Checks and normalises a base URL: http(s), no query, no fragment, no credentials, no
 * trailing slash. Returns an error message instead of throwing, for config and header alike.
 */
export function normaliseBase(text: string): { base: string } | { error: string } {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return { error: `"${text.slice(0, 200)}" is not a URL` };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return { error: 'the base must be an http or https URL' };
  if (u.search !== '' || u.hash !== '' || text.includes('?') || text.includes('#')) {
    return { error: 'the base must not have a query or fragment' };
  }
  if (u.username !== '' || u.password !== '') return { error: 'the base must not carry credentials' };
  return { base: u.origin + u.pathname.replace(/\/+$/, '') };
}

/**
 * Parses `name=https://base,…` (the `COUNTERSIGN_UPSTREAMS` format).
 * @throws Error naming the bad entry (config.ts turns it into a ConfigError).
 */
export function parseUpstreams(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text) return out;
  for (const entry of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const eq = entry.indexOf('=');
    const name = eq > 0 ? entry.slice(0, eq).trim().toLowerCase() : '';
    if (!UPSTREAM_NAME.test(name)) throw new Error(`upstream entry "${entry}" must be name=https://base with a name of a-z 0-9 _ -`);
    const checked = normaliseBase(entry.slice(eq + 1).trim());
    if ('error' in checked) throw new Error(`upstream "${name}": ${checked.error}`);
    out[name] = checked.base;
  }
  return out;
}

/** The name → base table of one server: presets, then the operator's names (which win). */
export class UpstreamTable {
  readonly #bases: Map<string, string>;

  constructor(operator: Record<string, string>) {
    this.#bases = new Map([...Object.entries(UPSTREAM_PRESETS), ...Object.entries(operator)]);
  }

  /** The base URL of `name`, or undefined. */
  base(name: string): string | undefined {
    return this.#bases.get(name);
  }

  /** Every name, sorted (for the 404 that lists them). */
  names(): string[] {
    return [...this.#bases.keys()].sort();
  }
}
