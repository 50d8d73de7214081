/**
 * Header rules of the proxy (DESIGN "Proxy", spec 4.1 rule 1). Going upstream, the caller's
 * headers pass except ours (`X-Service-*`), agent context (`X-Agent-*`), our `Authorization`,
 * hop-by-hop headers and those named in `Connection`, `Host`, `Content-Length` and forwarding
 * headers; `X-Service-Upstream-Authorization` becomes the upstream `Authorization`. Coming back,
 * hop-by-hop headers are dropped. For the audit record, secret-bearing values are redacted.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { HEADERS } from '@countersign/core';

/** RFC 9110 §7.6.1 hop-by-hop headers, plus the non-standard ones proxies still see. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/**
 * Caller headers that never go upstream besides hop-by-hop: ours, the body framing we redo, and
 * forwarding headers (they would leak the caller's network or let it spoof one).
 */
const NOT_FORWARDED = new Set([
  'authorization',
  'host',
  'content-length',
  'content-encoding',
  'expect',
  'forwarded',
  'via',
  'x-real-ip',
  'x-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
  'x-cluster-client-ip',
  'x-original-forwarded-for',
]);

/** Names (normalised: lower case, `_` as `-`) whose values never reach a log. */
const SECRET_NAMES = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'api-key',
  'x-auth-token',
  'x-amz-security-token',
  'x-goog-api-key',
]);
const SECRET_PATTERN = /(auth|token|secret|key|cookie|session|password|passwd|credential|signature)/;

/** The value written in a log instead of a secret. */
export const REDACTED = '[REDACTED]';

function normalise(name: string): string {
  return name.toLowerCase().replace(/_/g, '-');
}

/**
 * Per-call work on header names and `Connection` values, remembered: the same few names and
 * values come with every call, and each verdict took case folding, a regular expression and
 * set lookups (or a Set made per call, for `Connection`). Bounded: short keys only, and at most
 * {@link MEMO_ENTRIES} of them, after which a new key is worked out each time as before, so a
 * caller or upstream sending endless new names cannot grow it.
 */
class Memo<V> {
  readonly #entries = new Map<string, V>();
  constructor(private readonly compute: (key: string) => V) {}
  get(key: string): V {
    let v = this.#entries.get(key);
    if (v === undefined) {
      v = this.compute(key);
      if (key.length <= MEMO_KEY_LENGTH && this.#entries.size < MEMO_ENTRIES) this.#entries.set(key, v);
    }
    return v;
  }
}
const MEMO_ENTRIES = 512;
const MEMO_KEY_LENGTH = 64;

const NO_NAMES: ReadonlySet<string> = new Set();

/** Names listed in a `Connection` header (they are hop-by-hop for this message). Shared: read only. */
const connectionValues = new Memo<ReadonlySet<string>>((value) => {
  const out = new Set<string>();
  for (const part of value.split(',')) {
    const n = part.trim().toLowerCase();
    if (n) out.add(n);
  }
  return out.size === 0 ? NO_NAMES : out;
});

function connectionNamed(value: string | string[] | undefined): ReadonlySet<string> {
  if (value === undefined) return NO_NAMES;
  return connectionValues.get(Array.isArray(value) ? value.join(',') : value);
}

const strippedNames = new Memo<boolean>((name) => {
  const lower = name.toLowerCase();
  const n = normalise(name);
  return (
    n.startsWith('x-service-') ||
    n.startsWith('x-agent-') ||
    n.startsWith('x-forwarded-') ||
    HOP_BY_HOP.has(lower) ||
    HOP_BY_HOP.has(n) ||
    NOT_FORWARDED.has(lower) ||
    NOT_FORWARDED.has(n)
  );
});

/** True when a caller header name must not go upstream (apart from the Connection-named ones). */
export function isStrippedRequestHeader(name: string): boolean {
  return strippedNames.get(name);
}

/** How the caller reached the proxy: it decides who owns `Authorization` (see {@link upstreamRequestHeaders}). */
export type ProxyMode = 'proxy' | 'forward';

/**
 * The headers sent upstream for a caller's request.
 *
 * - `proxy` (`POST /v1/proxy`): `Authorization` carries OUR key, so it is dropped and
 *   `X-Service-Upstream-Authorization` becomes the upstream's; the body is the `payload` member,
 *   re-framed by us, so `content-type` defaults to `application/json` and `content-length` is ours.
 * - `forward` (`/v1/forward/…`): our key travels in `X-Service-Key`, so `Authorization` (the SDK's
 *   own provider key) goes upstream untouched, as does the body's framing (`content-length`,
 *   `content-encoding`, `content-type`): the body is streamed byte for byte.
 */
export function upstreamRequestHeaders(
  incoming: IncomingHttpHeaders,
  hasBody: boolean,
  mode: ProxyMode = 'proxy',
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const named = connectionNamed(incoming.connection);
  const forward = mode === 'forward';
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined) continue;
    if (forward && FORWARDED_AS_IS.has(name)) {
      if (!named.has(name)) out[name] = value;
      continue;
    }
    if (isStrippedRequestHeader(name) || named.has(name.toLowerCase())) continue;
    out[name] = value;
  }
  if (forward) {
    if (!hasBody) delete out['content-length'];
    return out;
  }
  const upstreamAuth = incoming[HEADERS.upstreamAuthorization];
  if (typeof upstreamAuth === 'string' && upstreamAuth !== '') out.authorization = upstreamAuth;
  if (hasBody) {
    if (out['content-type'] === undefined) out['content-type'] = 'application/json';
  } else {
    delete out['content-type'];
  }
  return out;
}

/** Headers that forward mode passes upstream although `/v1/proxy` re-makes or owns them. */
const FORWARDED_AS_IS = new Set(['authorization', 'content-length', 'content-encoding']);

/**
 * The upstream's response headers as passed back: hop-by-hop and Connection-named ones removed,
 * and every `X-Service-*` header (ours alone);
 * `content-length` too when no body can follow (the caller's request to us is never HEAD).
 */
export function downstreamResponseHeaders(upstream: IncomingHttpHeaders, opts: { bodyless: boolean }): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const named = connectionNamed(upstream.connection);
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named.has(lower)) continue;
    // Our header namespace is ours: an upstream must not be able to speak in our name
    // (a forged X-Service-Log-ID would point the caller at another record).
    if (normalise(lower).startsWith('x-service-')) continue;
    if (opts.bodyless && lower === 'content-length') continue;
    out[lower] = value;
  }
  return out;
}

/** The first value of a header that may repeat (Node gives some as arrays). */
export function firstValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

const secretNames = new Memo<boolean>((name) => {
  const n = normalise(name);
  return SECRET_NAMES.has(n) || SECRET_PATTERN.test(n);
});

/** True when a header's value may carry a credential (so a log shows only `[REDACTED]`). */
export function isSecretHeader(name: string): boolean {
  return secretNames.get(name);
}

/** A header map for the audit record: names kept, secret values replaced by {@link REDACTED}. */
export function redactHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    out[name.toLowerCase()] = isSecretHeader(name) ? REDACTED : value;
  }
  return out;
}
