/**
 * Envelope keys: the 256-bit key derived from a key string (SHA-256 of its UTF-8 bytes), the
 * short-lived cache of derived keys, the fingerprint key id, and the keyring that holds named
 * keys. The envelope itself (sealing, opening, its text) is envelope.ts.
 */
import { CoreError } from './errors.js';
import { toHex } from './encoding.js';
import { randomBytes } from './random.js';
import { sha256, sha256Hex } from './hash.js';
import type { Envelope } from './envelope.js';

/** A derived envelope key: the raw bytes never leave core, only the CryptoKey. */
export interface EnvelopeKey {
  /** The key id written into envelopes made with this key. */
  kid: string;
  /** WebCrypto AES-GCM key. */
  cryptoKey: CryptoKey;
}

/** Raw key bytes, kept beside each derived key for Node's synchronous cipher and never exported from core. */
const rawKeys = new WeakMap<EnvelopeKey, Uint8Array>();

/** The raw bytes of a key derived here, for envelope.ts's synchronous cipher (core-internal: not in index.ts). */
export function rawKeyOf(key: EnvelopeKey): Uint8Array | undefined {
  return rawKeys.get(key);
}

/**
 * Derived keys, cached because the proxy derives the same caller key on every request (a
 * WebCrypto import is a round trip through the thread pool). What is held, and for how long
 * (SECURITY.md, "Customer encryption keys"):
 * - never the key string: an entry is found by SHA-256 of the key string after a random
 *   per-process salt, a one-way value that is no use outside this process;
 * - the derived key (the CryptoKey, and its raw bytes for the synchronous path) for at most
 *   {@link ENVELOPE_KEY_CACHE_MS} after it was derived, whether used meanwhile or not; a timer
 *   drops expired entries even when no request comes;
 * - at most 256 entries (the oldest goes first).
 */
export const ENVELOPE_KEY_CACHE_MS = 60_000;
const MAX_CACHED_KEYS = 256;
const keyCache = new Map<string, { key: Promise<EnvelopeKey>; expiresAt: number }>();
/**
 * Salt of the cache's lookup hashes (one SHA-256 per lookup: a hit costs about 2 µs), as hex:
 * the lookup hashes the text salt + key string, which Node encodes natively (sha256Hex), so the
 * key string's bytes get no memory block of their own.
 */
const cacheSalt = toHex(randomBytes(32));
let cacheTtlMs = ENVELOPE_KEY_CACHE_MS;
let sweepTimer: ReturnType<typeof setTimeout> | undefined;

const monotonicNow = (): number => globalThis.performance.now();

/** Drops expired entries: the map is in derivation order and every entry lives as long, so the expired ones lead. */
function sweepKeyCache(now: number): void {
  for (const [fingerprint, entry] of keyCache) {
    if (entry.expiresAt > now) break;
    keyCache.delete(fingerprint);
  }
}

/** Arms one timer for the oldest entry's expiry, so an idle process forgets keys too. */
function armSweep(): void {
  if (sweepTimer !== undefined || keyCache.size === 0) return;
  const oldest = keyCache.values().next().value!;
  sweepTimer = setTimeout(
    () => {
      sweepTimer = undefined;
      sweepKeyCache(monotonicNow());
      armSweep();
    },
    Math.max(0, oldest.expiresAt - monotonicNow()) + 1,
  );
  // Node: the timer must not keep a process alive.
  (sweepTimer as { unref?: () => void }).unref?.();
}

/**
 * Sets the derived-key cache lifetime in ms (0 = no cache: every call derives afresh) and drops
 * what the new lifetime no longer allows. For embedding programs and tests; the default is
 * {@link ENVELOPE_KEY_CACHE_MS}.
 */
export function setEnvelopeKeyCacheTtl(ms: number): void {
  if (!Number.isFinite(ms) || ms < 0) throw new CoreError('invalid_key', 'the key cache lifetime must be a number of ms >= 0');
  cacheTtlMs = ms;
  const now = monotonicNow();
  for (const entry of keyCache.values()) entry.expiresAt = Math.min(entry.expiresAt, now + ms);
  sweepKeyCache(now);
  if (sweepTimer !== undefined) clearTimeout(sweepTimer);
  sweepTimer = undefined;
  armSweep();
}

/** How many derived keys the cache holds now (operations and tests). */
export function envelopeKeyCacheSize(): number {
  sweepKeyCache(monotonicNow());
  return keyCache.size;
}

/**
 * Derives the envelope key from a key string (SHA-256 of its UTF-8 bytes). Derived keys are
 * cached for a short time, never the key string (see {@link ENVELOPE_KEY_CACHE_MS}).
 * @param keyString the secret as the caller gave it (non-empty).
 * @param kid optional keyring id; otherwise the fingerprint id.
 * @throws CoreError `invalid_key` on an empty key string.
 */
export function deriveEnvelopeKey(keyString: string, kid?: string): Promise<EnvelopeKey> {
  if (typeof keyString !== 'string' || keyString.length === 0) {
    return Promise.reject(new CoreError('invalid_key', 'encryption key must be a non-empty string'));
  }
  const lookup = sha256Hex(cacheSalt + keyString);
  const cacheKey = kid === undefined ? lookup : lookup + '\u0000' + kid;
  const now = monotonicNow();
  sweepKeyCache(now);
  const hit = keyCache.get(cacheKey);
  if (hit) return hit.key;
  const raw = sha256(keyString);
  const id = kid ?? kidOfRawKey(raw);
  const made = globalThis.crypto.subtle
    .importKey('raw', raw as BufferSource, { name: 'AES-GCM' }, false, ['encrypt', 'decrypt'])
    .then((cryptoKey) => {
      const key: EnvelopeKey = { kid: id, cryptoKey };
      rawKeys.set(key, raw);
      return key;
    });
  if (cacheTtlMs > 0) {
    if (keyCache.size >= MAX_CACHED_KEYS) keyCache.delete(keyCache.keys().next().value as string);
    keyCache.set(cacheKey, { key: made, expiresAt: now + cacheTtlMs });
    armSweep();
  }
  return made;
}

/** The fingerprint key id of a key string, as used when there is no keyring. */
export function fingerprintKid(keyString: string): string {
  return kidOfRawKey(sha256(keyString));
}

/** The fingerprint id of a derived key's raw bytes (the key string's SHA-256): a hash of them, never the bytes. */
function kidOfRawKey(raw: Uint8Array): string {
  return 'sha256:' + toHex(sha256(raw)).slice(0, 16);
}

/**
 * A set of named keys, as in the client's keyring: one active key seals, every key opens.
 */
export class EnvelopeKeyring {
  readonly #keys = new Map<string, string>();
  readonly #active: string;

  /**
   * @param keys key id → key string (old keys stay for reading old logs).
   * @param activeKid the id that seals new envelopes.
   * @throws CoreError `unknown_key_id` when `activeKid` is not in `keys`.
   */
  constructor(keys: Record<string, string>, activeKid: string) {
    for (const [kid, secret] of Object.entries(keys)) this.#keys.set(kid, secret);
    if (!this.#keys.has(activeKid)) throw new CoreError('unknown_key_id', `active key id "${activeKid}" is not in the keyring`);
    this.#active = activeKid;
  }

  /** The id of the sealing key. */
  get activeKid(): string {
    return this.#active;
  }

  /** The sealing key. */
  activeKey(): Promise<EnvelopeKey> {
    return deriveEnvelopeKey(this.#keys.get(this.#active)!, this.#active);
  }

  /**
   * The key that opens `envelope`: by keyring id, or by fingerprint id for envelopes that
   * were sealed with a bare key string (e.g. through the proxy).
   * @throws CoreError `unknown_key_id` when no key of the ring matches.
   */
  async keyFor(envelope: Pick<Envelope, 'kid'>): Promise<EnvelopeKey> {
    const byId = this.#keys.get(envelope.kid);
    if (byId !== undefined) return deriveEnvelopeKey(byId, envelope.kid);
    for (const secret of this.#keys.values()) {
      if (fingerprintKid(secret) === envelope.kid) return deriveEnvelopeKey(secret);
    }
    throw new CoreError('unknown_key_id', `no key in the keyring has id "${envelope.kid}"`);
  }
}
