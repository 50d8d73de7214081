/**
 * The decrypted log payload and its hash. `payloadHash` = hex SHA-256 of the RFC 8785 bytes, so
 * a parsed object and its text hash the same, whoever canonicalizes them.
 */
import { canonicalize } from './canonical.js';
import { toHex } from './encoding.js';
import { sha256Hex } from './hash.js';
import { CoreError } from './errors.js';
import { randomBytes } from './random.js';

/** Hex SHA-256 of the canonical (RFC 8785) form of `payload`. */
export function payloadHashHex(payload: unknown): string {
  // The canonical text hashed as UTF-8 by the native digest (no copy of it as bytes first).
  return sha256Hex(canonicalize(payload));
}

/**
 * A 128-bit random nonce as 32 hex digits. Every payload carries one so that its hash,
 * which is public in receipts and the ledger, reveals nothing about a guessable payload.
 */
export function randomNonce(): string {
  return toHex(randomBytes(16));
}

/**
 * Parses JSON text that must hold an object (the payload form).
 * @throws CoreError `invalid_json` when it is not JSON or not an object.
 */
export function parsePayloadJson(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CoreError('invalid_json', 'payload is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new CoreError('invalid_json', 'payload must be a JSON object');
  }
  return value as Record<string, unknown>;
}
