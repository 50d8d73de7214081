/**
 * Random bytes for IVs, nonces and ids, from the platform CSPRNG (`crypto.getRandomValues`)
 * through a small pool: the proxy needs several short random values per call, and one call into
 * WebCrypto per value cost more than the values themselves. Bytes are handed out once each and
 * the pool is overwritten as it is used.
 */

const POOL_SIZE = 4096;
const pool = new Uint8Array(POOL_SIZE);
let offset = POOL_SIZE;

/** `n` fresh random bytes (a new array the caller owns). */
export function randomBytes(n: number): Uint8Array {
  if (n > POOL_SIZE / 4) {
    const out = new Uint8Array(n);
    // getRandomValues fills at most 65,536 bytes per call.
    for (let i = 0; i < n; i += 65536) globalThis.crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65536)));
    return out;
  }
  if (offset + n > POOL_SIZE) {
    globalThis.crypto.getRandomValues(pool);
    offset = 0;
  }
  const out = pool.slice(offset, offset + n);
  pool.fill(0, offset, offset + n);
  offset += n;
  return out;
}
