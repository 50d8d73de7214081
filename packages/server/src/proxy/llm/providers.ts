/**
 * Which LLM API a proxied call went to: the provider (from the forward-mode preset, else the
 * upstream host), the API (from the path and method) and the wire format its answer uses.
 *
 * Provider names: the vendor for a known preset or host (`openai`, `anthropic`, `mistral`,
 * `groq`, `together`, `fireworks`, `deepseek`, `openrouter`, `xai`, `gemini`, `perplexity`,
 * `azure-openai`); otherwise `openai-compatible:<name>` or `anthropic-compatible:<name>` after
 * the wire format, where `<name>` is the operator's upstream name in forward mode, else the
 * upstream `host[:port]` (so a self-hosted vLLM or a loopback fake provider is still summarised).
 */

/** The answer format of an API: OpenAI's (chat, completions, responses, embeddings) or Anthropic's. */
export type LlmWire = 'openai' | 'anthropic';

/** What {@link detectLlmApi} recognised. */
export interface DetectedLlmApi {
  provider: string;
  api: string;
  wire: LlmWire;
}

/** Upstream hosts of the built-in presets (upstreams.ts), and the vendor each one is. */
const HOSTS: ReadonlyMap<string, string> = new Map([
  ['api.openai.com', 'openai'],
  ['api.anthropic.com', 'anthropic'],
  ['api.mistral.ai', 'mistral'],
  ['api.groq.com', 'groq'],
  ['api.together.xyz', 'together'],
  ['api.together.ai', 'together'],
  ['api.fireworks.ai', 'fireworks'],
  ['api.deepseek.com', 'deepseek'],
  ['openrouter.ai', 'openrouter'],
  ['api.x.ai', 'xai'],
  ['generativelanguage.googleapis.com', 'gemini'],
  ['api.perplexity.ai', 'perplexity'],
]);

/** Preset names that are vendors (the built-in forward-mode presets). */
const VENDOR_PRESETS: ReadonlySet<string> = new Set(HOSTS.values());

interface Endpoint {
  /** Matches the end of the path (after any base path such as `/v1`, `/openai/v1`, `/api/v1`). */
  pattern: RegExp;
  /** The same endpoint as it must appear at an unknown host (stricter: a `/v1/` segment). */
  unknownHost: RegExp;
  method: 'GET' | 'POST';
  api: string;
  wire: LlmWire;
}

// Order matters: the first match wins (chat/completions before completions).
const ENDPOINTS: readonly Endpoint[] = [
  { pattern: /\/chat\/completions$/, unknownHost: /\/chat\/completions$/, method: 'POST', api: 'chat.completions', wire: 'openai' },
  { pattern: /\/completions$/, unknownHost: /\/v1\/completions$/, method: 'POST', api: 'completions', wire: 'openai' },
  { pattern: /\/responses$/, unknownHost: /\/v1\/responses$/, method: 'POST', api: 'responses', wire: 'openai' },
  // Retrieving a stored response answers the same response object.
  { pattern: /\/responses\/resp_[\w-]+$/, unknownHost: /\/v1\/responses\/resp_[\w-]+$/, method: 'GET', api: 'responses', wire: 'openai' },
  { pattern: /\/embeddings$/, unknownHost: /\/v1\/embeddings$/, method: 'POST', api: 'embeddings', wire: 'openai' },
  { pattern: /\/messages$/, unknownHost: /\/v1\/messages$/, method: 'POST', api: 'messages', wire: 'anthropic' },
  {
    pattern: /\/messages\/count_tokens$/,
    unknownHost: /\/v1\/messages\/count_tokens$/,
    method: 'POST',
    api: 'messages.count_tokens',
    wire: 'anthropic',
  },
  { pattern: /\/models(?:\/[^/]+)?$/, unknownHost: /\/v1\/models(?:\/[^/]+)?$/, method: 'GET', api: 'models', wire: 'openai' },
];

/** The vendor of an upstream host, if it is a known one. */
function vendorOfHost(hostname: string): string | undefined {
  const host = hostname.toLowerCase();
  return HOSTS.get(host) ?? (host.endsWith('.openai.azure.com') ? 'azure-openai' : undefined);
}

/**
 * Recognises an LLM API call by preset, host, path and method; undefined for anything else
 * (recorded as plain HTTP).
 */
export function detectLlmApi(preset: string | undefined, method: string, url: URL): DetectedLlmApi | undefined {
  const vendor = preset !== undefined && VENDOR_PRESETS.has(preset) ? preset : vendorOfHost(url.hostname);
  const known = vendor !== undefined || preset !== undefined;
  const path = url.pathname.replace(/\/+$/, '');
  const verb = method.toUpperCase();
  for (const e of ENDPOINTS) {
    if (e.method !== verb || !(known ? e.pattern : e.unknownHost).test(path)) continue;
    // The models list of Anthropic is Anthropic's; elsewhere the wire follows the path.
    const wire = e.api === 'models' && vendor === 'anthropic' ? 'anthropic' : e.wire;
    const provider = vendor ?? `${wire}-compatible:${preset ?? url.host.toLowerCase()}`;
    return { provider, api: e.api, wire };
  }
  return undefined;
}
