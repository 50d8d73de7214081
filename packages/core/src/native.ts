/**
 * Node's `crypto` module when the runtime has one, found at run time through
 * `process.getBuiltinModule` (never imported, so core stays browser-safe; `undefined` in a
 * browser). Only the slice core uses is typed. Callers keep a portable path beside every use:
 * same algorithms, same bytes, Node's native speed where it exists.
 */

/** The part of Node's `crypto` that core calls. */
export interface NodeCryptoSlice {
  createHash(alg: 'sha256'): { update(data: Uint8Array): { digest(): Uint8Array; digest(encoding: 'hex'): string } };
  /**
   * One-shot digest (Node 20.12 and later): no Hash object, so no native handle for the
   * scavenger to process and, in hex, no digest buffer either. A string is hashed as its UTF-8
   * bytes, encoded natively (no `TextEncoder` block for the scavenger to free).
   */
  hash?: ((alg: 'sha256', data: Uint8Array | string, encoding: 'hex') => string) &
    ((alg: 'sha256', data: Uint8Array | string, encoding: 'buffer') => Uint8Array);
  createCipheriv(
    alg: 'aes-256-gcm',
    key: Uint8Array,
    iv: Uint8Array,
    options: { authTagLength: number },
  ): { setAAD(aad: Uint8Array): unknown; update(data: Uint8Array): Uint8Array; final(): Uint8Array; getAuthTag(): Uint8Array };
  createDecipheriv(
    alg: 'aes-256-gcm',
    key: Uint8Array,
    iv: Uint8Array,
    options: { authTagLength: number },
  ): { setAAD(aad: Uint8Array): unknown; setAuthTag(tag: Uint8Array): unknown; update(data: Uint8Array): Uint8Array; final(): Uint8Array };
}

/** Node's crypto module, or `undefined` outside Node. */
export const nodeCrypto = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process?.getBuiltinModule?.(
  'node:crypto',
) as NodeCryptoSlice | undefined;
