/**
 * `@countersign/core`: the runtime-agnostic heart of Countersign. Everything two parts must
 * agree on lives here once: encodings, canonical JSON, the envelope, key classes, payload
 * hashes, Merkle trees and proof verification. No I/O, almost no dependencies.
 *
 * @packageDocumentation
 */
export * from './errors.js';
export * from './encoding.js';
export * from './hash.js';
export * from './canonical.js';
export * from './json-text.js';
export * from './payload.js';
export * from './envelope.js';
// Not rawKeyOf: a derived key's raw bytes stay inside core.
export {
  deriveEnvelopeKey,
  envelopeKeyCacheSize,
  EnvelopeKeyring,
  ENVELOPE_KEY_CACHE_MS,
  fingerprintKid,
  setEnvelopeKeyCacheTtl,
  type EnvelopeKey,
} from './envelope-keys.js';
export * from './keys.js';
export * from './types.js';
export * from './handover.js';
export * from './trace-context.js';
export * from './proofs/index.js';
