/**
 * JSON number tokens for `inspectJson` (json-text.ts), internal to core: the RFC 8259 §6 grammar
 * read from bytes, and whether canonical JSON, which writes `String(Number(token))`, says the
 * same decimal as the token.
 */
import { MINUS, NINE, ScanError, ZERO } from './json-lexical.js';

/** {@link NumberScan.verdict}: the token is exact by arithmetic alone. */
export const NUMBER_EXACT = 0;
/** {@link NumberScan.verdict}: the token is `-0` (or `-0.0`, …), which canonical JSON writes `0`. */
export const NUMBER_NEGATIVE_ZERO = 1;
/** {@link NumberScan.verdict}: only {@link numberIsExact} on the token's text can tell. */
export const NUMBER_NEEDS_CHECK = 2;

/** What {@link scanNumber} found; one instance is reused from token to token (no allocation per number). */
export class NumberScan {
  /** The offset after the token. */
  end = 0;
  /** {@link NUMBER_EXACT}, {@link NUMBER_NEGATIVE_ZERO} or {@link NUMBER_NEEDS_CHECK}. */
  verdict = NUMBER_EXACT;
}

/**
 * Reads the number token at `start` (RFC 8259 §6) into `out`, or throws a {@link ScanError}.
 * Counts its significant digits on the way: at most 15 of them in the normal range always
 * survive the double and come back as its shortest form (DBL_DIG = 15), so such a token needs no
 * conversion to be known exact.
 */
export function scanNumber(b: Uint8Array, start: number, out: NumberScan): void {
  let i = start;
  const negative = b[i] === MINUS;
  if (negative) i++;
  let sig = 0; // digits from the first nonzero one, trailing zeros excluded
  let zerosRun = 0; // zeros since the last nonzero digit
  let magnitude = 0; // exponent of the first significant digit, before the e part
  let c = b[i];
  if (c === ZERO) {
    i++;
    c = b[i];
    if (c !== undefined && c >= ZERO && c <= NINE) throw new ScanError('syntax', i, 'leading zero in a number');
  } else if (c !== undefined && c >= 0x31 && c <= NINE) {
    for (; c !== undefined && c >= ZERO && c <= NINE; c = b[++i]) {
      if (c === ZERO) {
        zerosRun++;
      } else {
        sig += zerosRun + 1;
        zerosRun = 0;
      }
      magnitude++;
    }
    magnitude--;
  } else {
    throw new ScanError('syntax', i, 'invalid number');
  }
  if (c === 0x2e) {
    c = b[++i];
    if (c === undefined || c < ZERO || c > NINE) throw new ScanError('syntax', i, 'digit expected after the decimal point');
    let leading = sig === 0 && zerosRun === 0;
    for (; c !== undefined && c >= ZERO && c <= NINE; c = b[++i]) {
      if (leading) {
        magnitude--;
        if (c !== ZERO) {
          leading = false;
          sig = 1;
        }
      } else if (c === ZERO) {
        zerosRun++;
      } else {
        sig += zerosRun + 1;
        zerosRun = 0;
      }
    }
  }
  let exponent = 0;
  if (c === 0x65 || c === 0x45) {
    c = b[++i];
    const negativeExponent = c === MINUS;
    if (c === MINUS || c === 0x2b) c = b[++i];
    if (c === undefined || c < ZERO || c > NINE) throw new ScanError('syntax', i, 'digit expected in the exponent');
    for (; c !== undefined && c >= ZERO && c <= NINE; c = b[++i]) if (exponent < 1e6) exponent = exponent * 10 + (c - ZERO);
    if (negativeExponent) exponent = -exponent;
  }
  out.end = i;
  if (sig === 0) {
    out.verdict = negative ? NUMBER_NEGATIVE_ZERO : NUMBER_EXACT;
    return;
  }
  const e10 = magnitude + exponent;
  out.verdict = sig <= 15 && e10 > -300 && e10 < 300 ? NUMBER_EXACT : NUMBER_NEEDS_CHECK;
}

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
