/**
 * The span of a proxied call's entry, from the caller's headers (DESIGN §4: `spanId`,
 * `parentSpanId`, W3C ids in the clear). The parent comes from an explicit
 * `X-Service-Parent-Span-ID`, else from the parent-id of the caller's `traceparent`; a
 * malformed `traceparent` is ignored, as the W3C spec asks of a receiver, while a malformed span
 * id the caller set on purpose is a 400. Span ids and `traceparent` parsing are core's.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { HEADERS, isSpanId, newSpanId, parseTraceparent, type Traceparent } from '@countersign/core';
import { ApiError } from '../errors.js';

/**
 * A checked span id, or a 400 `invalid_request` naming `field`.
 * @throws ApiError `invalid_request`.
 */
function spanIdOf(value: string, field: string): string {
  if (!isSpanId(value)) throw new ApiError('invalid_request', `${field} must be a W3C span id: 16 lowercase hex digits, not all zero`);
  return value;
}

/** A single header value (a repeated header counts as absent). */
function one(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return typeof v === 'string' ? v.trim() : undefined;
}

/** The span of a proxied call's entry: its own id (chosen by the caller or new), its parent, and the caller's trace context. */
export interface CallSpan {
  spanId: string;
  parentSpanId: string | undefined;
  /** The caller's valid `traceparent`, if any. */
  traceparent: Traceparent | undefined;
}

/**
 * The span of a proxied call from its headers: `X-Service-Span-ID` (else a new id),
 * `X-Service-Parent-Span-ID` (else the `traceparent` parent-id).
 * @throws ApiError `invalid_request` for a malformed `X-Service-*` span header.
 */
export function callSpanOf(headers: IncomingHttpHeaders): CallSpan {
  const own = one(headers, HEADERS.spanId);
  const parent = one(headers, HEADERS.parentSpanId);
  const traceparent = parseTraceparent(headers.traceparent);
  return {
    spanId: own === undefined ? newSpanId() : spanIdOf(own, 'X-Service-Span-ID'),
    parentSpanId: parent !== undefined ? spanIdOf(parent, 'X-Service-Parent-Span-ID') : traceparent?.parentId,
    traceparent,
  };
}

/**
 * The `traceparent` to send upstream: the caller's trace id and flags with the call's own span
 * as parent-id, so the upstream's spans nest under this entry; undefined when the caller sent
 * none (nothing is added to a request that had no trace context).
 */
export function upstreamTraceparent(span: CallSpan): string | undefined {
  return span.traceparent ? `00-${span.traceparent.traceId}-${span.spanId}-${span.traceparent.flags}` : undefined;
}
