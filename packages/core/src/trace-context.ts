/**
 * W3C Trace Context, the part every package needs: span ids (16 lowercase hex digits, not all
 * zero) and the `traceparent` header (`<version>-<32 hex trace id>-<16 hex parent id>-<2 hex
 * flags>`). Entries carry their spans in the clear (DESIGN §4); the server reads callers'
 * headers with these, the client makes its runs' spans with them.
 */
import { toHex } from './encoding.js';
import { randomBytes } from './random.js';

const SPAN_RE = /^[0-9a-f]{16}$/;
const TRACEPARENT_RE = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_SPAN = '0000000000000000';

/** True for a W3C span id: 16 lowercase hex digits, not all zero. */
export function isSpanId(value: unknown): value is string {
  return typeof value === 'string' && SPAN_RE.test(value) && value !== ZERO_SPAN;
}

/** A new random span id. */
export function newSpanId(): string {
  for (;;) {
    const id = toHex(randomBytes(8));
    if (id !== ZERO_SPAN) return id;
  }
}

/** The parts of a `traceparent` value. */
export interface Traceparent {
  traceId: string;
  parentId: string;
  flags: string;
}

/**
 * The parts of a valid `traceparent` value, or undefined (absent, repeated, malformed, version
 * `ff`, all-zero ids, or version 00 with extra fields): a receiver ignores an invalid one.
 */
export function parseTraceparent(value: string | string[] | undefined): Traceparent | undefined {
  if (typeof value !== 'string') return undefined;
  const m = TRACEPARENT_RE.exec(value.trim());
  if (!m || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined)) return undefined;
  if (/^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  return { traceId: m[2]!, parentId: m[3]!, flags: m[4]! };
}
