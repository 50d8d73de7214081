/**
 * Lexical helpers of `inspectJson` (json-text.ts), internal to core: the scan's error, the bytes
 * its grammar names, UTF-8 sequence lengths, hex escapes, ASCII slices and member names.
 */

/** Thrown inside the scan (json-text.ts, json-number.ts) and turned into the error answer by `inspectJson`. */
export class ScanError {
  constructor(
    readonly error: 'syntax' | 'too_deep' | 'invalid_utf8',
    readonly offset: number,
    readonly message: string,
  ) {}
}

/** `"` as a UTF-8 byte. */
export const QUOTE = 0x22;
/** The backslash as a UTF-8 byte. */
export const BACKSLASH = 0x5c;
/** `-` as a UTF-8 byte. */
export const MINUS = 0x2d;
/** `0` as a UTF-8 byte. */
export const ZERO = 0x30;
/** `9` as a UTF-8 byte. */
export const NINE = 0x39;

/** Hex digit values, -1 for anything else. */
const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX[0x30 + i] = i;
for (let i = 0; i < 6; i++) HEX[0x41 + i] = HEX[0x61 + i] = 10 + i;

/** ASCII bytes [start, end) as a string (in chunks: `apply` has an argument limit). */
export function ascii(b: Uint8Array, start: number, end: number): string {
  const CHUNK = 8192;
  if (end - start <= CHUNK) return String.fromCharCode.apply(null, b.subarray(start, end) as unknown as number[]);
  const parts: string[] = [];
  for (let i = start; i < end; i += CHUNK) {
    parts.push(String.fromCharCode.apply(null, b.subarray(i, Math.min(end, i + CHUNK)) as unknown as number[]));
  }
  return parts.join('');
}

/** The value of four hex digits at `i`, or -1. */
export function hex4(b: Uint8Array, i: number): number {
  if (i + 4 > b.length) return -1;
  const h0 = HEX[b[i]!]!;
  const h1 = HEX[b[i + 1]!]!;
  const h2 = HEX[b[i + 2]!]!;
  const h3 = HEX[b[i + 3]!]!;
  return h0 < 0 || h1 < 0 || h2 < 0 || h3 < 0 ? -1 : (h0 << 12) | (h1 << 8) | (h2 << 4) | h3;
}

/** Length of the well-formed UTF-8 sequence at `i` (Unicode Table 3-7), or 0 when it is not one. */
export function utf8Length(b: Uint8Array, i: number): number {
  const c = b[i]!;
  const c1 = b[i + 1] ?? 0;
  if (c >= 0xc2 && c <= 0xdf) return (c1 & 0xc0) === 0x80 ? 2 : 0;
  const c2 = b[i + 2] ?? 0;
  if (c >= 0xe0 && c <= 0xef) {
    const lo = c === 0xe0 ? 0xa0 : 0x80;
    const hi = c === 0xed ? 0x9f : 0xbf;
    return c1 >= lo && c1 <= hi && (c2 & 0xc0) === 0x80 ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const lo = c === 0xf0 ? 0x90 : 0x80;
    const hi = c === 0xf4 ? 0x8f : 0xbf;
    return c1 >= lo && c1 <= hi && (c2 & 0xc0) === 0x80 && ((b[i + 3] ?? 0) & 0xc0) === 0x80 ? 4 : 0;
  }
  return 0;
}

const utf8Lenient = new TextDecoder('utf-8', { ignoreBOM: true });

/**
 * The text of a UTF-8 buffer; bytes that are not UTF-8 become U+FFFD (as `TextDecoder` and Node's
 * `Buffer#toString` do).
 */
export function decodeLenient(b: Uint8Array): string {
  return utf8Lenient.decode(b);
}

/**
 * The member name whose string contents are bytes [start, end) (between its quotes); `general`
 * when it may hold escapes or non-ASCII.
 */
export function decodeName(b: Uint8Array, start: number, end: number, general: boolean): string {
  if (!general) return ascii(b, start, end);
  return JSON.parse(utf8Lenient.decode(b.subarray(start - 1, end + 1))) as string;
}
