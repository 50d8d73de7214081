/**
 * Lexical helpers of `inspectJson` (json-text.ts), internal to core: number-token exactness (does
 * canonical JSON, which writes `String(Number(token))`, say the same decimal as the token?),
 * UTF-8 sequence lengths, hex escapes and ASCII slices.
 */

/** `-` and `0` as UTF-8 bytes (shared with json-text.ts's scanner). */
export const MINUS = 0x2d;
export const ZERO = 0x30;

/**
 * True when the JSON number `token` denotes exactly the decimal that `String(Number(token))`
 * (the shortest round-trip form, which canonical JSON writes) denotes. A nonzero token read as 0
 * (underflow) or as Infinity (overflow) is not exact; neither is any negative zero.
 */
export function numberIsExact(token: string): boolean {
  const x = Number(token);
  if (!Number.isFinite(x)) return false;
  if (x === 0) return decimalKey(token) === '0';
  const shortest = String(x);
  return shortest === token || decimalKey(shortest) === decimalKey(token);
}

/**
 * A normal form of a decimal number text (a JSON number token or `String(x)`): sign, significant
 * digits without leading or trailing zeros, and the decimal exponent of the first of them ('0'
 * for positive zero, '-0' for negative zero). Slices, so a long token costs no allocation per
 * character.
 */
export function decimalKey(text: string): string {
  const negative = text.charCodeAt(0) === MINUS;
  let mantissaEnd = text.length;
  let point = -1;
  let first = -1;
  let last = -1;
  for (let i = negative ? 1 : 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2e) {
      point = i;
    } else if (c === 0x65 || c === 0x45) {
      mantissaEnd = i;
      break;
    } else if (c !== ZERO) {
      if (first < 0) first = i;
      last = i;
    }
  }
  if (first < 0) return negative ? '-0' : '0';
  if (point < 0) point = mantissaEnd;
  const digits = text.slice(first, last + 1).replace('.', '');
  const magnitude = first < point ? point - first - 1 : point - first;
  const exponent = mantissaEnd < text.length ? Number(text.slice(mantissaEnd + 1)) : 0;
  return `${negative ? '-' : ''}${digits}e${magnitude + exponent}`;
}

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
