/**
 * Opening payloads in the browser with the customer's key strings, through core's one envelope
 * implementation. The key strings live only in this object (memory): never in storage, never in
 * a request.
 */
// Core's own envelope and error modules, by path rather than through core's index: the index
// also brings the verifier (pkijs), which the page then loads only with verify.ts, when a proof
// is first checked. The same source files, so core's code is still the only copy.
import { openPayload, type Envelope } from '../../core/src/envelope.js';
import { EnvelopeKeyring, deriveEnvelopeKey } from '../../core/src/envelope-keys.js';
import { isCoreError } from '../../core/src/errors.js';

/** The outcome of opening one payload. */
export type OpenResult =
  { state: 'open'; payload: Record<string, unknown> } | { state: 'no_key' } | { state: 'failed'; code: string; message: string };

/** Splits the key field into key strings: one per line; blank lines ignored. */
export function parseKeyStrings(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((k) => k.trim())
    .filter((k) => k.length > 0);
}

/**
 * Opens envelopes with a set of key strings. An envelope sealed with a bare key string (the
 * proxy, or a client without a keyring) names the key by fingerprint, which the keyring finds.
 * A client keyring names it by its own id (`k1`, …), which the browser cannot map to a string,
 * so each key is then tried: the id only labels the key, it does not change it, and AES-GCM's
 * tag tells a wrong key apart.
 */
export class PayloadOpener {
  readonly #keys: string[];
  readonly #ring: EnvelopeKeyring | undefined;
  readonly #cache = new Map<string, Promise<OpenResult>>();

  /** @param keyStrings the customer's key strings (any number; kept in memory only). */
  constructor(keyStrings: string[]) {
    this.#keys = [...new Set(keyStrings)];
    const named = Object.fromEntries(this.#keys.map((k, i) => [`key${i + 1}`, k]));
    this.#ring = this.#keys.length > 0 ? new EnvelopeKeyring(named, 'key1') : undefined;
  }

  /** How many keys this opener holds. */
  get size(): number {
    return this.#keys.length;
  }

  /**
   * Opens the payload of log `logId` (results cached per log unless `cache` is false, as for an
   * export, which reads each entry once). Never throws.
   */
  open(logId: string, envelope: Envelope, cache = true): Promise<OpenResult> {
    if (!cache) return this.#cache.get(logId) ?? this.#open(logId, envelope);
    let hit = this.#cache.get(logId);
    if (!hit) {
      hit = this.#open(logId, envelope);
      this.#cache.set(logId, hit);
    }
    return hit;
  }

  async #open(logId: string, envelope: Envelope): Promise<OpenResult> {
    if (!this.#ring) return { state: 'no_key' };
    let last: unknown;
    try {
      return { state: 'open', payload: await openPayload(envelope, await this.#ring.keyFor(envelope), logId) };
    } catch (err) {
      last = err;
      if (isCoreError(err) && (err.code === 'invalid_envelope' || err.code === 'invalid_encoding')) return failure(err);
    }
    for (const secret of this.#keys) {
      try {
        return { state: 'open', payload: await openPayload(envelope, await deriveEnvelopeKey(secret, envelope.kid), logId) };
      } catch (err) {
        last = err;
      }
    }
    return failure(last);
  }
}

function failure(err: unknown): OpenResult {
  if (isCoreError(err) && err.code !== 'unknown_key_id' && err.code !== 'decryption_failed') {
    return { state: 'failed', code: err.code, message: err.message };
  }
  return {
    state: 'failed',
    code: 'decryption_failed',
    message: 'none of the given keys opens this payload: it was sealed with another key, or the data was altered',
  };
}
