/**
 * Our request headers (`X-Service-*`, and `X-Agent-Rationale`), read the same way on every path.
 *
 * - Sent once: Node joins repeats of a header it does not know into one string, "first, second",
 *   so two `X-Service-Encryption-Key` headers used to seal a record that opens with neither. A
 *   global onRequest hook refuses any repeated header of ours with 400 `invalid_request`,
 *   before authentication or any record.
 * - Read as UTF-8: Node hands header values over as latin1 (one character per byte), which
 *   garbled "agent-é中" into "agent-Ã©ä¸­". {@link serviceHeaderText} gives back the text the
 *   bytes spell in UTF-8 and refuses bytes that are not UTF-8. A percent-encoded value is NOT
 *   decoded: "agent-%C3%A9" is stored as those 12 characters (docs/proxy.md, "Header values").
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';

/** Lower-case prefix of the service's own request headers. */
const SERVICE_PREFIX = 'x-service-';
/** The one `X-Agent-*` header the service stores (sealed): a joined pair would never open. */
const RATIONALE = 'x-agent-rationale';

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** True when `name` starts with the lower-case ASCII `prefix`, ignoring ASCII case. Allocation-free. */
function startsWithFolded(name: string, prefix: string): boolean {
  if (name.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) {
    const c = name.charCodeAt(i);
    if ((c >= 0x41 && c <= 0x5a ? c + 0x20 : c) !== prefix.charCodeAt(i)) return false;
  }
  return true;
}

/** True when the raw header name (any case) is one of ours. Allocation-free. */
function isOurs(name: string): boolean {
  // 'x' / 'X' first, so the usual headers (host, content-type, authorization…) cost one compare.
  const c = name.charCodeAt(0);
  if (c !== 0x78 && c !== 0x58) return false;
  if (name.length > SERVICE_PREFIX.length && startsWithFolded(name, SERVICE_PREFIX)) return true;
  return name.length === RATIONALE.length && startsWithFolded(name, RATIONALE);
}

/**
 * The name of the first header of ours that appears more than once in `rawHeaders` (Node's
 * flat `[name, value, name, value, …]` list, names as sent), lower-case; undefined when none.
 * Allocates only when a request carries two or more of our headers.
 */
export function repeatedServiceHeader(rawHeaders: readonly string[]): string | undefined {
  let first: string | undefined;
  let seen: string[] | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const raw = rawHeaders[i]!;
    if (!isOurs(raw)) continue;
    const name = raw.toLowerCase();
    if (first === undefined) {
      first = name;
      continue;
    }
    if (name === first) return name;
    if (seen === undefined) seen = [first];
    else if (seen.includes(name)) return name;
    seen.push(name);
  }
  return undefined;
}

/** `x-service-agent-id` → `X-Service-Agent-ID`, for messages. */
export function displayHeaderName(name: string): string {
  return name
    .split('-')
    .map((part) => (part === 'id' ? 'ID' : part.charAt(0).toUpperCase() + part.slice(1)))
    .join('-');
}

/**
 * Refuses, on every route, a request that repeats one of our headers: 400 `invalid_request`
 * naming the header (never its values). Registered once on the root instance by app.ts.
 */
export function installServiceHeaderChecks(app: FastifyInstance): void {
  // A callback hook, not an async one: every request passes here, and this spares it a promise.
  app.addHook('onRequest', (request: FastifyRequest, _reply, done) => {
    const repeated = repeatedServiceHeader(request.raw.rawHeaders);
    if (repeated === undefined) done();
    else done(new ApiError('invalid_request', `${displayHeaderName(repeated)} is sent more than once; send it once`));
  });
}

/** True when a latin1 string from Node holds a byte ≥ 0x80 (only then is there anything to decode). */
function hasHighByte(value: string): boolean {
  for (let i = 0; i < value.length; i++) if (value.charCodeAt(i) > 0x7f) return true;
  return false;
}

/**
 * The text of one of our request headers: its bytes read as UTF-8 (Node gives them as latin1,
 * one character per byte), not trimmed beyond what HTTP already strips around a value, and
 * never percent-decoded. Undefined when the header is absent. A repeated header never gets
 * here (the onRequest check refuses it); should one, its first value is taken.
 * @param name the lower-case header name (`HEADERS.*` in core).
 * @throws ApiError `invalid_request` when the bytes are not valid UTF-8.
 */
export function serviceHeaderText(headers: IncomingHttpHeaders, name: string): string | undefined {
  const raw = headers[name];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined || !hasHighByte(value)) return value;
  try {
    return strictUtf8.decode(Buffer.from(value, 'latin1'));
  } catch {
    throw new ApiError(
      'invalid_request',
      `${displayHeaderName(name)} is not valid UTF-8; send the value as UTF-8 bytes (a percent-encoded value is stored as sent)`,
    );
  }
}
