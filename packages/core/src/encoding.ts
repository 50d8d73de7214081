/**
 * Byte encodings shared by every part of Countersign. Pure functions over `Uint8Array`, so the
 * same code runs in Node.js and in the browser (no `Buffer`).
 *
 * @packageDocumentation
 */
import { CoreError } from './errors.js';

/** Each ASCII code's hex digit value, -1 for anything else. */
const HEX_VALUE = new Int8Array(128).fill(-1);
for (let d = 0; d < 16; d++) {
  HEX_VALUE['0123456789abcdef'.charCodeAt(d)] = d;
  HEX_VALUE['0123456789ABCDEF'.charCodeAt(d)] = d;
}
const notHex = (): CoreError => new CoreError('invalid_encoding', 'expected an even-length hex string');

/** Each byte value's two lower-case hex digits. */
const HEX_PAIR: readonly string[] = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

/** Lower-case hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  // A table of the 256 digit pairs: the proxy hexes several short values per call (ids, nonces,
  // the key cache's lookup hash), and a number-to-string and a pad per byte were 4× the time and
  // most of the garbage (850 → 217 ns for 32 bytes).
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += HEX_PAIR[bytes[i]!]!;
  return out;
}

/**
 * Bytes of a hex string (either case).
 * @throws CoreError `invalid_encoding` when the text is not an even-length hex string.
 */
export function fromHex(hex: string): Uint8Array {
  if (typeof hex !== 'string' || hex.length % 2 !== 0) throw notHex();
  // A table lookup per digit (not slice + parseInt per byte: 2.5 µs for 32 bytes, the cost of
  // a proof batch's leaf hashes); an invalid digit looks up -1.
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0, j = 0; i < out.length; i++, j += 2) {
    const hi = HEX_VALUE[hex.charCodeAt(j)] ?? -1;
    const lo = HEX_VALUE[hex.charCodeAt(j + 1)] ?? -1;
    if (hi < 0 || lo < 0) throw notHex();
    out[i] = (hi << 4) | lo;
  }
  return out;
}

const B64_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_LOOKUP = new Int16Array(128).fill(-1);
for (let i = 0; i < B64_ALPHABET.length; i++) B64_LOOKUP[B64_ALPHABET.charCodeAt(i)] = i;
B64_LOOKUP['-'.charCodeAt(0)] = 62;
B64_LOOKUP['_'.charCodeAt(0)] = 63;

/**
 * Node's Buffer when the runtime has one: found by feature detection, never imported, so core
 * stays browser-safe while Node encodes natively (about 100x faster on a 2 MB capture).
 */
interface NodeBufferLike {
  from(data: ArrayBufferLike, byteOffset: number, length: number): { toString(encoding: string): string };
  from(text: string, encoding: 'utf8'): Uint8Array;
}
const NativeBuffer = (globalThis as { Buffer?: NodeBufferLike }).Buffer;

/** Standard base64 (with `=` padding) of `bytes`. */
export function toBase64(bytes: Uint8Array): string {
  if (NativeBuffer) return NativeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  return base64Portable(bytes);
}

/** The portable (browser) base64 encoder; exported for tests that hold it equal to Node's. */
export function base64Portable(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += B64_ALPHABET[n >> 18]! + B64_ALPHABET[(n >> 12) & 63]! + B64_ALPHABET[(n >> 6) & 63]! + B64_ALPHABET[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += B64_ALPHABET[n >> 18]! + B64_ALPHABET[(n >> 12) & 63]! + '==';
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += B64_ALPHABET[n >> 18]! + B64_ALPHABET[(n >> 12) & 63]! + B64_ALPHABET[(n >> 6) & 63]! + '=';
  }
  return out;
}

/** Base64url without padding (RFC 4648 §5), as used by the envelope. */
export function toBase64Url(bytes: Uint8Array): string {
  if (NativeBuffer) return NativeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
  return base64Portable(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * Bytes of base64 or base64url text; padding is optional. Whitespace is not accepted.
 * @throws CoreError `invalid_encoding` on any character outside both alphabets or a bad length.
 */
export function fromBase64(text: string): Uint8Array {
  if (typeof text !== 'string') throw new CoreError('invalid_encoding', 'expected base64 text');
  const body = text.replace(/=+$/, '');
  if (body.length % 4 === 1) throw new CoreError('invalid_encoding', 'base64 text has an impossible length');
  const out = new Uint8Array(Math.floor((body.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    const v = c < 128 ? B64_LOOKUP[c]! : -1;
    if (v < 0) throw new CoreError('invalid_encoding', 'base64 text has a character outside the alphabet');
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  return out;
}

/** Alias of {@link fromBase64}: base64url input is accepted by the same decoder. */
export const fromBase64Url = fromBase64;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** UTF-8 bytes of a string. */
export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** Node pools Buffers under 4 KB (half its 8-KB pool); a longer text gets its own block there too. */
const POOLED_UTF8_MAX_UNITS = 4096;

/**
 * UTF-8 bytes of a string for immediate use (encrypting, hashing), the same bytes as
 * {@link utf8}. On Node a short text is encoded into a slice of Buffer's shared pool instead of
 * a memory block of its own: `TextEncoder` gives every result its own block, and the young
 * generation's collector frees each one in its pause (at 1,000 proxied calls a second, freeing
 * such blocks was ~60 % of each scavenge; docs/performance-log.md). The result shares memory with
 * other short-lived buffers: never keep it, and never pass a secret (SECURITY.md: key strings
 * stay out of shared memory).
 */
export function utf8Transient(text: string): Uint8Array {
  if (!NativeBuffer || text.length > POOLED_UTF8_MAX_UNITS) return encoder.encode(text);
  const b = NativeBuffer.from(text, 'utf8');
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

/**
 * String of UTF-8 bytes.
 * @throws CoreError `invalid_encoding` when the bytes are not valid UTF-8.
 */
export function fromUtf8(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new CoreError('invalid_encoding', 'bytes are not valid UTF-8');
  }
}

/** Constant-time equality of two byte arrays (length leaks, contents do not). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** Concatenation of byte arrays. */
export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
