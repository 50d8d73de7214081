/**
 * Direct ingestion, entry by entry: turning a validated `POST /v1/log` entry into the row that
 * is stored (sealing a plain payload with the caller's key, then forgetting the key), and the
 * idempotency rule for a retried id. The route only orchestrates these.
 */
import {
  HEADERS,
  MAX_ID_LENGTH,
  MAX_METADATA_BYTES,
  assertEnvelope,
  canonicalEnvelopeText,
  canonicalize,
  deriveEnvelopeKey,
  isCoreError,
  openPayload,
  timeOrderedId,
  randomNonce,
  isSpanId,
  newSpanId,
  sealPayloadWithHash,
  type Envelope,
} from '@countersign/core';
import type { IncomingHttpHeaders } from 'node:http';
import type { LogIngestEntry } from '@countersign/core';
import { ApiError } from '../errors.js';
import type { IngestPrincipal } from '../auth/principal.js';
import type { LogRow, NewLog } from '../store/index.js';
import type { IngestStamp } from './stamp.js';
import { displayHeaderName, serviceHeaderText } from '../http/service-headers.js';
import { offload, OFFLOAD_FROM_BYTES } from '../offload/pool.js';

/** One entry of a `POST /v1/log` body, after schema validation (the wire shape is core's). */
export type LogInput = LogIngestEntry & { payload: Record<string, unknown> };

/** Request-wide facts every entry of one call shares. */
export interface IngestRequest {
  principal: IngestPrincipal;
  stamp: IngestStamp;
  headers: IncomingHttpHeaders;
  /** The caller's `X-Service-Encryption-Key`, when sent (plain payloads). */
  encryptionKey: string | undefined;
  /**
   * The `X-Agent-Rationale` value as sent (the client's own sealed rationale), when sent: kept
   * inside a plain payload the server seals (member `agentRationale`), never in the clear.
   */
  agentRationale: string | undefined;
  receivedAt: number;
  /** Bytes of the request body: from `OFFLOAD_FROM_BYTES` up, plain payloads seal in the offload pool. */
  bodyBytes: number;
  /** The parent-id of a valid `traceparent` header: the default parent of entries that name their span. */
  traceparentParent?: string | undefined;
}

/** An entry ready to store, with what the idempotency check needs. */
export interface PreparedLog {
  log: NewLog;
  /** True when the caller sent its own id (only then can a retry be a duplicate). */
  clientId: boolean;
  /** The plain payload as sent (plain path only), to compare a retry without storing it. */
  plainPayload: Record<string, unknown> | undefined;
}

/** A label header (`X-Service-Agent-ID`, `-Action`, `-Run-ID`) read as UTF-8 and bounded like the body's fields. */
function labelHeader(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = serviceHeaderText(headers, name);
  if (value === undefined) return undefined;
  if (value.length === 0 || value.length > MAX_ID_LENGTH)
    throw new ApiError('invalid_request', `${displayHeaderName(name)} must be 1-${MAX_ID_LENGTH} characters`);
  return value;
}

/** The name of the payload member that holds `X-Agent-Rationale` in a plain payload the server seals. */
export const AGENT_RATIONALE_MEMBER = 'agentRationale';

/** True when a payload is meant as an envelope (so a malformed one is named as such). */
function looksLikeEnvelope(payload: Record<string, unknown>): boolean {
  return 'ct' in payload && 'alg' in payload;
}

/** A new server-made log id. */
export function newLogId(): string {
  return 'log_' + timeOrderedId(24);
}

/**
 * Builds the stored row for one entry.
 * @throws ApiError `invalid_request`, `invalid_envelope`, `missing_encryption_key`.
 */
export async function prepareLog(input: LogInput, req: IngestRequest, index: number | undefined): Promise<PreparedLog> {
  const where = index === undefined ? '' : `logs[${index}]: `;
  const fail = (code: 'invalid_request' | 'invalid_envelope' | 'missing_encryption_key', msg: string): never => {
    throw new ApiError(code, where + msg);
  };
  const id = input.id ?? newLogId();
  let metadata: string | null = null;
  if (input.metadata !== undefined) {
    metadata = canonicalize(input.metadata);
    if (new TextEncoder().encode(metadata).length > MAX_METADATA_BYTES)
      fail('invalid_request', `metadata is larger than ${MAX_METADATA_BYTES} bytes; put large data in the encrypted payload`);
  }
  if (input.occurredAt !== undefined && Number.isNaN(Date.parse(input.occurredAt)))
    fail('invalid_request', 'occurredAt must be an ISO 8601 date-time');
  const span = entrySpan(input, req, fail);

  let payload: Envelope;
  let payloadHash: string | null;
  let plainPayload: Record<string, unknown> | undefined;
  if (req.encryptionKey !== undefined) {
    // Plain path: the server seals with the caller's key and keeps neither key nor plaintext.
    if (input.payloadHash !== undefined) fail('invalid_request', 'payloadHash is computed by the server for plain payloads; leave it out');
    plainPayload = withRationale(input.payload, req.agentRationale, fail);
    // The added member first: a literal that spreads and then adds a member is cloned on V8's
    // slow path (~0.5 µs, docs/performance-log.md); the record is canonical JSON, so order is not kept.
    const sealed = 'nonce' in plainPayload ? plainPayload : { nonce: randomNonce(), ...plainPayload };
    const key = await deriveEnvelopeKey(req.encryptionKey);
    const done =
      req.bodyBytes < OFFLOAD_FROM_BYTES
        ? await sealPayloadWithHash(sealed, key, id)
        : await offload({ kind: 'sealLog', payload: sealed, key, logId: id });
    payloadHash = done.payloadHash;
    payload = done.envelope;
  } else {
    if (!looksLikeEnvelope(input.payload))
      fail(
        'missing_encryption_key',
        'payload is not an envelope: send X-Service-Encryption-Key to have a plain payload encrypted, or encrypt it yourself',
      );
    try {
      assertEnvelope(input.payload);
    } catch (e) {
      if (isCoreError(e)) fail('invalid_envelope', e.message);
      throw e;
    }
    if (input.id === undefined)
      fail('invalid_request', 'a client-encrypted payload is bound to its log id (the AAD): send the id you sealed it with');
    payload = input.payload as unknown as Envelope;
    payloadHash = input.payloadHash ?? null;
  }

  const defaults = req.headers;
  return {
    clientId: input.id !== undefined,
    plainPayload,
    log: {
      id,
      projectId: req.principal.projectId,
      keyId: req.principal.keyId,
      receivedAt: req.receivedAt,
      occurredAt: input.occurredAt ?? null,
      actor: input.actor ?? labelHeader(defaults, HEADERS.agentId) ?? 'unknown',
      action: input.action ?? labelHeader(defaults, HEADERS.action) ?? 'log.entry',
      traceId: input.traceId ?? labelHeader(defaults, HEADERS.runId) ?? null,
      actorType: req.stamp.actorType,
      credentialHandoverDetected: req.stamp.credentialHandoverDetected,
      source: 'log',
      status: 'complete',
      requestProof: input.requestProof ?? false,
      payloadHash,
      payload: canonicalEnvelopeText(payload),
      metadata,
      spanId: span.spanId,
      parentSpanId: span.parentSpanId,
      startedAt: span.startedAt,
      endedAt: span.endedAt,
    },
  };
}

/**
 * The span fields of an entry (DESIGN §4), checked: W3C span ids, ISO 8601 times, end not
 * before start. The parent defaults to the parent-id of the request's `traceparent` (the client
 * library sends its run's span there), but only for an entry that names its own span: a plain
 * log without span facts stays without them.
 */
function entrySpan(
  input: LogInput,
  req: IngestRequest,
  fail: (code: 'invalid_request', msg: string) => never,
): { spanId: string | null; parentSpanId: string | null; startedAt: number | null; endedAt: number | null } {
  const check = (v: string | undefined, field: string) =>
    v === undefined || isSpanId(v)
      ? (v ?? null)
      : fail('invalid_request', `${field} must be a W3C span id: 16 lowercase hex digits, not all zero`);
  const time = (v: string | undefined, field: string) => {
    if (v === undefined) return null;
    const ms = Date.parse(v);
    return Number.isNaN(ms) ? fail('invalid_request', `${field} must be an ISO 8601 date-time`) : ms;
  };
  const parentSpanId = check(input.parentSpanId, 'parentSpanId') ?? req.traceparentParent ?? null;
  // An entry under a known parent is a span of its own even when the caller named none.
  const spanId = check(input.spanId, 'spanId') ?? (parentSpanId !== null ? newSpanId() : null);
  const startedAt = time(input.startedAt, 'startedAt');
  const endedAt = time(input.endedAt, 'endedAt');
  if (startedAt !== null && endedAt !== null && endedAt < startedAt) fail('invalid_request', 'endedAt is before startedAt');
  if (spanId !== null && spanId === parentSpanId) fail('invalid_request', 'an entry cannot be its own parent span');
  return { spanId, parentSpanId, startedAt, endedAt };
}

/**
 * A plain payload with the request's `X-Agent-Rationale` added as {@link AGENT_RATIONALE_MEMBER}
 * (spec 5.4: the rationale is kept, sealed, in the record of its call). A payload that already
 * holds a different value there is refused rather than silently overwritten.
 */
function withRationale(
  payload: Record<string, unknown>,
  rationale: string | undefined,
  fail: (code: 'invalid_request', msg: string) => never,
): Record<string, unknown> {
  if (rationale === undefined) return payload;
  if (AGENT_RATIONALE_MEMBER in payload && payload[AGENT_RATIONALE_MEMBER] !== rationale)
    fail('invalid_request', `payload.${AGENT_RATIONALE_MEMBER} differs from X-Agent-Rationale; the server stores the header there`);
  return { [AGENT_RATIONALE_MEMBER]: rationale, ...payload }; // the same value if the payload has it (checked above)
}

/**
 * The idempotency rule: a retry with an existing id is a duplicate (accepted, nothing written)
 * when it is the same entry: same project, actorType, actor, action, traceId, occurredAt,
 * metadata, requestProof, and the same payload: for a client envelope the identical envelope
 * and payloadHash; for a plain payload, the stored envelope opens with the key sent now and
 * holds the same JSON (the server-added nonce aside). Anything else is a conflict (409).
 */
export async function isSameEntry(existing: LogRow, candidate: PreparedLog, encryptionKey: string | undefined): Promise<boolean> {
  const a = existing;
  const b = candidate.log;
  if (a.source !== 'log' || a.projectId !== b.projectId || a.actorType !== b.actorType) return false;
  if (a.actor !== b.actor || a.action !== b.action || a.traceId !== b.traceId || a.occurredAt !== b.occurredAt) return false;
  if (a.metadata !== b.metadata || a.requestProof !== b.requestProof) return false;
  if (candidate.plainPayload === undefined) return a.payload === b.payload && a.payloadHash === b.payloadHash;
  if (encryptionKey === undefined) return false;
  let stored: Record<string, unknown>;
  try {
    stored = await openPayload(JSON.parse(a.payload) as Envelope, await deriveEnvelopeKey(encryptionKey), a.id);
  } catch {
    return false;
  }
  const sent = 'nonce' in candidate.plainPayload ? candidate.plainPayload : { nonce: stored.nonce, ...candidate.plainPayload };
  return canonicalize(sent) === canonicalize(stored);
}
