/**
 * Span ids of entries (DESIGN §4: `spanId`, `parentSpanId`, W3C ids in the clear). W3C Trace
 * Context: a span id is 16 lowercase hex digits, not all zero; `traceparent` is
 * `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`. An entry's parent comes from an
 * explicit `X-Service-Parent-Span-ID` (or the body's `parentSpanId` on `/v1/log`), else from
 * the parent-id of the caller's `traceparent`; a malformed `traceparent` is ignored, as the
 * W3C spec asks of a receiver, while a malformed span id the caller set on purpose is a 400.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { HEADERS } from '@countersign/core';
import { ApiError } from '../errors.js';

const SPAN_RE = /^[0-9a-f]{16}$/;
const TRACEPARENT_RE = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** True for a W3C span id: 16 lowercase hex digits, not all zero. */
export function isSpanId(value: unknown): value is string {
  return typeof value === 'string' && SPAN_RE.test(value) && value !== '0000000000000000';
}

/**
 * A checked span id, or a 400 `invalid_request` naming `field`.
 * @throws ApiError `invalid_request`.
 */
export function spanIdOf(value: unknown, field: string): string {
  if (!isSpanId(value)) throw new ApiError('invalid_request', `${field} must be a W3C span id: 16 lowercase hex digits, not all zero`);
  return value;
}

/** A new random span id. */
export function newSpanId(): string {
  for (;;) {
    const id = randomBytes(8).toString('hex');
    if (id !== '0000000000000000') return id;
  }
}

/** The parts of a valid `traceparent` header, or undefined (absent, repeated or malformed). */
export function parseTraceparent(value: string | string[] | undefined): { traceId: string; parentId: string; flags: string } | undefined {
  if (typeof value !== 'string') return undefined;
  const m = TRACEPARENT_RE.exec(value.trim());
  if (!m || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined)) return undefined;
  if (/^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  return { traceId: m[2]!, parentId: m[3]!, flags: m[4]! };
}

/** A single header value (a repeated header counts as absent). */
function one(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return typeof v === 'string' ? v.trim() : undefined;
}

/** The span of a proxied call's entry: its own id (chosen by the caller or new) and its parent. */
export interface CallSpan {
  spanId: string;
  parentSpanId: string | undefined;
}

/**
 * The span of a proxied call from its headers: `X-Service-Span-ID` (else a new id),
 * `X-Service-Parent-Span-ID` (else the `traceparent` parent-id).
 * @throws ApiError `invalid_request` for a malformed `X-Service-*` span header.
 */
export function callSpanOf(headers: IncomingHttpHeaders): CallSpan {
  const own = one(headers, HEADERS.spanId);
  const parent = one(headers, HEADERS.parentSpanId);
  return {
    spanId: own === undefined ? newSpanId() : spanIdOf(own, 'X-Service-Span-ID'),
    parentSpanId: parent !== undefined ? spanIdOf(parent, 'X-Service-Parent-Span-ID') : parseTraceparent(headers.traceparent)?.parentId,
  };
}

/**
 * The `traceparent` to send upstream: the caller's trace id and flags with the call's own span
 * as parent-id, so the upstream's spans nest under this entry; undefined when the caller sent
 * none (nothing is added to a request that had no trace context).
 */
export function upstreamTraceparent(headers: IncomingHttpHeaders, spanId: string): string | undefined {
  const tp = parseTraceparent(headers.traceparent);
  return tp ? `00-${tp.traceId}-${spanId}-${tp.flags}` : undefined;
}
