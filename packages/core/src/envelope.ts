/**
 * The zero-knowledge envelope: AES-256-GCM through WebCrypto, so the same code seals in the
 * proxy, the client library and opens in the browser.
 *
 * Format (DESIGN "Envelope"): `{"v":1,"alg":"A256GCM","kid","iv","ct","tag"}` with base64url
 * fields; the AAD is the UTF-8 log id, so an envelope cannot be moved to another log id.
 * The 256-bit key is SHA-256 of the UTF-8 key string (envelope-keys.ts).
 */
import { canonicalize } from './canonical.js';
import { CoreError } from './errors.js';
import { concatBytes, fromBase64, fromUtf8, toBase64Url, toHex, utf8, utf8Transient } from './encoding.js';
import { randomBytes } from './random.js';
import { nodeCrypto } from './native.js';
import { sha256Hex } from './hash.js';
import { parsePayloadJson } from './payload.js';
import { rawKeyOf, type EnvelopeKey } from './envelope-keys.js';

/** The stored form of an encrypted payload. */
export interface Envelope {
  v: 1;
  alg: 'A256GCM';
  /** Keyring id, or `sha256:` + 16 hex digits of SHA-256 of the derived key. */
  kid: string;
  /** 12-byte IV, base64url. */
  iv: string;
  /** Ciphertext without the tag, base64url. */
  ct: string;
  /** 16-byte GCM tag, base64url. */
  tag: string;
}

// A WebCrypto call is a round trip through a worker thread; for the small payloads of the hot
// path Node's synchronous cipher (native.ts) is several times cheaper. Same algorithm, same bytes.
/** Larger payloads go to WebCrypto, off the event loop. */
const SYNC_LIMIT_BYTES = 256 * 1024;

/**
 * Envelopes made by this module, whose `iv`, `ct` and `tag` are base64url by construction:
 * {@link envelopeText} writes those without reading them again.
 */
const madeHere = new WeakSet<Envelope>();

/** An envelope's encrypted parts, before encoding. */
interface SealedParts {
  iv: Uint8Array;
  ct: Uint8Array;
  tag: Uint8Array;
}

/** The synchronous encryption (Node's cipher), or `undefined` where only WebCrypto can do it. */
function encryptNow(plaintext: Uint8Array, key: EnvelopeKey, logId: string): SealedParts | undefined {
  const raw = rawKeyOf(key);
  if (!nodeCrypto || !raw || plaintext.length > SYNC_LIMIT_BYTES) return undefined;
  const iv = randomBytes(12);
  const cipher = nodeCrypto.createCipheriv('aes-256-gcm', raw, iv, { authTagLength: 16 });
  cipher.setAAD(utf8Transient(logId)); // a log id is no secret
  const body = cipher.update(plaintext);
  const rest = cipher.final(); // empty for GCM (a stream mode): then no copy of the ciphertext
  return { iv, ct: rest.length === 0 ? body : concatBytes(body, rest), tag: cipher.getAuthTag() };
}

/**
 * A native implementation of the synchronous seal and hash, which a runtime may install (the
 * server installs its addon, packages/server/native): the same AES-256-GCM under the same key,
 * AAD and a fresh 12-byte IV, and SHA-256 of the same plaintext, so the records it makes are the
 * ones this module makes with Node's cipher (a server test holds them equal). For the small
 * records of the proxy's hot path Node's cipher costs mostly its set-up per record; an
 * accelerator keeps one keyed context per derived key instead.
 */
export interface SealAccelerator {
  /** A keyed context for one derived key's raw bytes; kept beside that key, never shared. */
  context(rawKey: Uint8Array): unknown;
  /**
   * Seals `plaintext` under `context` with `aad` (as UTF-8): `[iv, ct, tag]` base64url without
   * padding and the hex SHA-256 of `plaintext`, or `undefined` for an input it does not take.
   */
  seal(context: unknown, aad: string, plaintext: Uint8Array): [string, string, string, string] | undefined;
}

let accelerator: SealAccelerator | undefined;
/** Each derived key's accelerator context: dropped with the key (envelope-keys.ts caches keys for a while). */
let acceleratorContexts = new WeakMap<EnvelopeKey, unknown>();

/**
 * Installs (or, with `undefined`, removes) the native seal used by {@link sealBytesToText} and
 * {@link sealBytesWithHash} for inputs below 64 KiB. Without one, Node's cipher (or WebCrypto)
 * seals; the bytes are the same.
 */
export function installSealAccelerator(impl: SealAccelerator | undefined): void {
  accelerator = impl;
  acceleratorContexts = new WeakMap();
}

/** The accelerated seal and hash (`[iv, ct, tag, sha256]`), or `undefined` where it does not apply. */
function acceleratedSeal(bytes: Uint8Array, key: EnvelopeKey, logId: string): [string, string, string, string] | undefined {
  const raw = accelerator && bytes.length < ASYNC_HASH_FROM ? rawKeyOf(key) : undefined;
  if (!raw) return undefined;
  let context = acceleratorContexts.get(key);
  if (context === undefined) acceleratorContexts.set(key, (context = accelerator!.context(raw)));
  return accelerator!.seal(context, logId, bytes);
}

/** The synchronous seal, or `undefined` where only WebCrypto can do it. */
function sealNow(plaintext: Uint8Array, key: EnvelopeKey, logId: string): Envelope | undefined {
  const parts = encryptNow(plaintext, key, logId);
  return parts && madeEnvelope(key.kid, parts.iv, parts.ct, parts.tag);
}

/** An envelope of this module's making (its fields base64url-encoded here; see {@link envelopeText}). */
function madeEnvelope(kid: string, iv: Uint8Array, ct: Uint8Array, tag: Uint8Array): Envelope {
  return madeEncodedEnvelope(kid, toBase64Url(iv), toBase64Url(ct), toBase64Url(tag));
}

/** {@link madeEnvelope} from fields already base64url (the seal accelerator's). */
function madeEncodedEnvelope(kid: string, iv: string, ct: string, tag: string): Envelope {
  const e: Envelope = { v: 1, alg: 'A256GCM', kid, iv, ct, tag };
  madeHere.add(e);
  return e;
}

/**
 * `JSON.stringify` of an envelope whose `iv`, `ct` and `tag` are base64url (no escaping needed),
 * written by concatenation, members in the envelope's own order.
 */
function textOf(kid: string, iv: string, ct: string, tag: string): string {
  return '{"v":1,"alg":"A256GCM","kid":' + JSON.stringify(kid) + ',"iv":"' + iv + '","ct":"' + ct + '","tag":"' + tag + '"}';
}

/**
 * Encrypts bytes into an envelope bound to `logId`.
 */
export async function sealBytes(plaintext: Uint8Array, key: EnvelopeKey, logId: string): Promise<Envelope> {
  const now = sealNow(plaintext, key, logId);
  if (now) return now;
  const iv = randomBytes(12);
  const sealed = new Uint8Array(
    await globalThis.crypto.subtle.encrypt(
      { name: 'AES-GCM', iv: iv as BufferSource, additionalData: utf8(logId) as BufferSource, tagLength: 128 },
      key.cryptoKey,
      plaintext as BufferSource,
    ),
  );
  return madeEnvelope(key.kid, iv, sealed.subarray(0, sealed.length - 16), sealed.subarray(sealed.length - 16));
}

/**
 * The envelope's JSON text: exactly `JSON.stringify(envelope)`. For an envelope this module made
 * it is written by concatenation, because its `iv`, `ct` and `tag` are base64url, which never
 * needs escaping, while `JSON.stringify` reads the ciphertext again character by character
 * (about 3 ns a character here: 8 µs for a 2 KB record, warm). Any other envelope (one a client
 * sent, say) goes through `JSON.stringify`.
 */
export function envelopeText(envelope: Envelope): string {
  if (!madeHere.has(envelope)) return JSON.stringify(envelope);
  return textOf(envelope.kid, envelope.iv, envelope.ct, envelope.tag);
}

/**
 * The envelope's RFC 8785 text: exactly `canonicalize(envelope)` (members sorted: alg, ct, iv,
 * kid, tag, v), written by concatenation for an envelope this module made, for the reason given
 * at {@link envelopeText}.
 */
export function canonicalEnvelopeText(envelope: Envelope): string {
  if (!madeHere.has(envelope)) return canonicalize(envelope);
  return (
    '{"alg":"A256GCM","ct":"' +
    envelope.ct +
    '","iv":"' +
    envelope.iv +
    '","kid":' +
    JSON.stringify(envelope.kid) +
    ',"tag":"' +
    envelope.tag +
    '","v":1}'
  );
}

/** Encrypts a JSON payload (its RFC 8785 bytes) into an envelope bound to `logId`. */
export function sealPayload(payload: unknown, key: EnvelopeKey, logId: string): Promise<Envelope> {
  return sealBytes(transientCanonicalBytes(payload), key, logId);
}

/**
 * The payload's RFC 8785 bytes for sealing only: Node's Buffer pool holds a short text (see
 * `utf8Transient`), read before the seal's first await (the cipher and the digest run
 * synchronously; WebCrypto copies its input when called), never kept.
 */
function transientCanonicalBytes(payload: unknown): Uint8Array {
  return utf8Transient(canonicalize(payload));
}

// Above this size the hash runs in WebCrypto (asynchronous, beside the encryption) instead of the
// synchronous digest; both are SHA-256 of the same bytes.
const ASYNC_HASH_FROM = 64 * 1024;

/**
 * {@link sealBytes} and the hex SHA-256 of the same bytes: what a stored record needs (its
 * envelope and its `payloadHash`) from one serialization. Large inputs are hashed in WebCrypto.
 */
export async function sealBytesWithHash(
  bytes: Uint8Array,
  key: EnvelopeKey,
  logId: string,
): Promise<{ envelope: Envelope; payloadHash: string }> {
  const fast = acceleratedSeal(bytes, key, logId);
  if (fast) return { envelope: madeEncodedEnvelope(key.kid, fast[0], fast[1], fast[2]), payloadHash: fast[3] };
  // The usual case, all synchronous: no promise per step (the proxy seals two records a call).
  const small = bytes.length < ASYNC_HASH_FROM;
  const now = small ? sealNow(bytes, key, logId) : undefined;
  if (now) return { envelope: now, payloadHash: sha256Hex(bytes) };
  const hash = small
    ? Promise.resolve(sha256Hex(bytes))
    : globalThis.crypto.subtle.digest('SHA-256', bytes as BufferSource).then((d) => toHex(new Uint8Array(d)));
  const [envelope, payloadHash] = await Promise.all([sealBytes(bytes, key, logId), hash]);
  return { envelope, payloadHash };
}

/**
 * {@link sealBytesWithHash}, answered as the envelope's JSON text (exactly
 * `envelopeText(envelope)`) beside the hash: what a stored record keeps. On the usual synchronous
 * path no envelope object is built, so none is registered as this module's making either (that
 * registration is a weak collection's insert, which costs V8 a slow write barrier per record).
 */
export async function sealBytesToText(bytes: Uint8Array, key: EnvelopeKey, logId: string): Promise<{ text: string; payloadHash: string }> {
  const fast = acceleratedSeal(bytes, key, logId);
  if (fast) return { text: textOf(key.kid, fast[0], fast[1], fast[2]), payloadHash: fast[3] };
  const parts = bytes.length < ASYNC_HASH_FROM ? encryptNow(bytes, key, logId) : undefined;
  if (parts) {
    const text = textOf(key.kid, toBase64Url(parts.iv), toBase64Url(parts.ct), toBase64Url(parts.tag));
    return { text, payloadHash: sha256Hex(bytes) };
  }
  const { envelope, payloadHash } = await sealBytesWithHash(bytes, key, logId);
  return { text: envelopeText(envelope), payloadHash };
}

/**
 * {@link sealPayload} and the payload's hash from the same canonical bytes (serialized once):
 * `payloadHash` equals `payloadHashHex(payload)`.
 */
export function sealPayloadWithHash(
  payload: unknown,
  key: EnvelopeKey,
  logId: string,
): Promise<{ envelope: Envelope; payloadHash: string }> {
  return sealBytesWithHash(transientCanonicalBytes(payload), key, logId);
}

/**
 * Checks the shape of an untrusted envelope.
 * @throws CoreError `invalid_envelope` naming the first thing that is wrong.
 */
export function assertEnvelope(value: unknown): asserts value is Envelope {
  const bad = (why: string): never => {
    throw new CoreError('invalid_envelope', `envelope ${why}`);
  };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) bad('must be a JSON object');
  const e = value as Record<string, unknown>;
  const allowed = new Set(['v', 'alg', 'kid', 'iv', 'ct', 'tag']);
  for (const k of Object.keys(e)) if (!allowed.has(k)) bad(`has an unknown field "${k}"`);
  if (e.v !== 1) bad('field "v" must be 1');
  if (e.alg !== 'A256GCM') bad('field "alg" must be "A256GCM"');
  if (typeof e.kid !== 'string' || e.kid.length === 0 || e.kid.length > 128) bad('field "kid" must be a string of 1-128 characters');
  for (const f of ['iv', 'ct', 'tag'] as const) {
    if (typeof e[f] !== 'string' || !/^[A-Za-z0-9_-]*$/.test(e[f] as string)) bad(`field "${f}" must be base64url without padding`);
  }
  if (fromBase64(e.iv as string).length !== 12) bad('field "iv" must be 12 bytes');
  if (fromBase64(e.tag as string).length !== 16) bad('field "tag" must be 16 bytes');
}

/**
 * Decrypts an envelope bound to `logId`.
 * @throws CoreError `invalid_envelope` on a malformed envelope, `decryption_failed` when the key,
 * the log id or any byte is wrong.
 */
export async function openBytes(envelope: Envelope, key: EnvelopeKey, logId: string): Promise<Uint8Array> {
  assertEnvelope(envelope);
  const iv = fromBase64(envelope.iv);
  const ct = fromBase64(envelope.ct);
  const tag = fromBase64(envelope.tag);
  const raw = rawKeyOf(key);
  if (nodeCrypto && raw && ct.length <= SYNC_LIMIT_BYTES) {
    try {
      const decipher = nodeCrypto.createDecipheriv('aes-256-gcm', raw, iv, { authTagLength: 16 });
      decipher.setAAD(utf8(logId));
      decipher.setAuthTag(tag);
      return concatBytes(decipher.update(ct), decipher.final());
    } catch (cause) {
      throw new CoreError('decryption_failed', 'envelope did not open: wrong key, wrong log id, or altered data', { cause });
    }
  }
  const joined = new Uint8Array(ct.length + tag.length);
  joined.set(ct);
  joined.set(tag, ct.length);
  try {
    return new Uint8Array(
      await globalThis.crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: iv as BufferSource, additionalData: utf8(logId) as BufferSource, tagLength: 128 },
        key.cryptoKey,
        joined,
      ),
    );
  } catch (cause) {
    throw new CoreError('decryption_failed', 'envelope did not open: wrong key, wrong log id, or altered data', { cause });
  }
}

/** Decrypts an envelope and parses its JSON payload. */
export async function openPayload(envelope: Envelope, key: EnvelopeKey, logId: string): Promise<Record<string, unknown>> {
  return parsePayloadJson(fromUtf8(await openBytes(envelope, key, logId)));
}
