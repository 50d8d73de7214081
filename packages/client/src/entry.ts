/**
 * What `log(entry)` takes, how it is checked, and the decrypted payload it becomes.
 *
 * The decrypted log payload (the JSON inside the envelope, whose SHA-256 is `payloadHash`) is:
 * `{ v: 1, kind: "countersign.log", action, actor?, target?, traceId?, metadata?, payload?,
 * occurredAt?, telemetry?, agent?: {runId, agentId, rationale?, traceparent}, nonce }`, with the
 * same redacted / referenced values as the plain fields sent beside it.
 */
import { canonicalize, isSpanId, MAX_METADATA_BYTES, randomNonce } from '@countersign/core';
import { ClientError } from './errors.js';
import { LOG_ID_RE } from './config.js';
import type { RequestContext, TelemetryRecord } from './telemetry.js';

/** The argument of `ServiceClient.log`. */
export interface LogEntryInput {
  /** What was done, e.g. `invoice.approve` (1-256 characters). */
  action: string;
  /** Who acted (1-256 characters). Default inside an agent run: the agent id; otherwise the server writes `unknown`. */
  actor?: string;
  /** What was acted on: a string or a small JSON object. Stored encrypted only. */
  target?: unknown;
  /** Run id that stitches logs into a trace (default inside an agent run: the run id). */
  traceId?: string;
  /** Small plain JSON, stored in the clear for filtering (max 4 KiB, after redaction); also inside the ciphertext. */
  metadata?: Record<string, unknown>;
  /** The details: any JSON. Encrypted on this machine; the server never sees it. */
  payload?: unknown;
  /** Ask for an RFC 3161 proof receipt (5-second batches). */
  requestProof?: boolean;
  /** When it happened (default: now). */
  occurredAt?: Date | string;
  /** The end user's request, for telemetry (IP, user agent, location) per the telemetry settings. */
  request?: RequestContext;
  /** Your own log id (16-128 of A-Z a-z 0-9 _ . : -), to make a re-run of your job idempotent. Default: a new `log_…` id. */
  id?: string;
  /** When the recorded work started and ended (sent in the clear, for timelines). */
  startedAt?: Date | string;
  endedAt?: Date | string;
  /** This entry's W3C span id (16 lowercase hex digits). Default: a new one. */
  spanId?: string;
  /** Its parent span. Default inside an agent run: the run's span. */
  parentSpanId?: string;
}

/** The agent part of a decrypted payload. */
export interface PayloadAgent {
  runId: string;
  agentId: string;
  rationale?: string;
  traceparent: string;
}

/** The decrypted log payload written by the client library. */
export interface ClientLogPayload {
  v: 1;
  kind: 'countersign.log';
  action: string;
  actor?: string;
  target?: unknown;
  traceId?: string;
  metadata?: Record<string, unknown>;
  payload?: unknown;
  occurredAt: string;
  telemetry?: TelemetryRecord;
  agent?: PayloadAgent;
  /** 128 random bits, so the public payload hash reveals nothing. */
  nonce: string;
}

function bad(message: string): never {
  throw new ClientError('invalid_entry', `log(): ${message}`);
}

function text(name: string, v: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0 || v.length > 256) bad(`${name} must be a string of 1-256 characters`);
  return v;
}

/** A JSON-safe deep copy (drops undefined members, applies toJSON), or an invalid_entry error. */
export function toJsonValue(name: string, v: unknown): unknown {
  if (v === undefined) return undefined;
  try {
    return JSON.parse(canonicalize(v)) as unknown;
  } catch (e) {
    return bad(`${name} must be JSON-serializable (${e instanceof Error ? e.message : String(e)})`);
  }
}

/** A checked entry. */
export interface CheckedEntry {
  id: string | undefined;
  action: string;
  actor: string | undefined;
  target: unknown;
  traceId: string | undefined;
  metadata: Record<string, unknown> | undefined;
  payload: unknown;
  requestProof: boolean | undefined;
  occurredAt: string;
  startedAt: string | undefined;
  endedAt: string | undefined;
  spanId: string | undefined;
  parentSpanId: string | undefined;
}

/**
 * Checks an entry and normalizes it to JSON values.
 * @throws ClientError `invalid_entry` naming the field.
 */
export function checkEntry(entry: LogEntryInput, now: number = Date.now()): CheckedEntry {
  if (entry === null || typeof entry !== 'object') bad('pass an entry object with at least an action');
  const action = text('action', entry.action);
  if (action === undefined) bad('action is required (e.g. "invoice.approve")');
  if (entry.id !== undefined && (typeof entry.id !== 'string' || !LOG_ID_RE.test(entry.id)))
    bad('id must be 16-128 characters of A-Z a-z 0-9 _ . : - starting with a letter or digit');
  if (entry.metadata !== undefined && (entry.metadata === null || typeof entry.metadata !== 'object' || Array.isArray(entry.metadata)))
    bad('metadata must be a plain object');
  if (entry.requestProof !== undefined && typeof entry.requestProof !== 'boolean') bad('requestProof must be a boolean');
  let occurredAt: string;
  if (entry.occurredAt === undefined) occurredAt = new Date(now).toISOString();
  else {
    const ms = entry.occurredAt instanceof Date ? entry.occurredAt.getTime() : Date.parse(entry.occurredAt);
    if (Number.isNaN(ms)) bad('occurredAt must be a Date or an ISO 8601 date-time');
    occurredAt = new Date(ms).toISOString();
  }
  const startedAt = instant('startedAt', entry.startedAt);
  const endedAt = instant('endedAt', entry.endedAt);
  if (startedAt !== undefined && endedAt !== undefined && Date.parse(endedAt) < Date.parse(startedAt)) bad('endedAt is before startedAt');
  const spanId = span('spanId', entry.spanId);
  const parentSpanId = span('parentSpanId', entry.parentSpanId);
  if (spanId !== undefined && spanId === parentSpanId) bad('an entry cannot be its own parent span');
  return {
    id: entry.id,
    action,
    actor: text('actor', entry.actor),
    target: toJsonValue('target', entry.target),
    traceId: text('traceId', entry.traceId),
    metadata: toJsonValue('metadata', entry.metadata) as Record<string, unknown> | undefined,
    // Not copied: it is only canonicalized (sealing and hashing), which checks it is JSON.
    payload: entry.payload,
    requestProof: entry.requestProof,
    occurredAt,
    startedAt,
    endedAt,
    spanId,
    parentSpanId,
  };
}

/** An optional instant as ISO 8601, or invalid_entry. */
function instant(name: string, v: Date | string | undefined): string | undefined {
  if (v === undefined) return undefined;
  const ms = v instanceof Date ? v.getTime() : typeof v === 'string' ? Date.parse(v) : NaN;
  if (Number.isNaN(ms)) bad(`${name} must be a Date or an ISO 8601 date-time`);
  return new Date(ms).toISOString();
}

/** An optional W3C span id (16 lowercase hex digits, not all zero), or invalid_entry. */
function span(name: string, v: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (!isSpanId(v)) bad(`${name} must be 16 lowercase hex digits, not all zero`);
  return v;
}

/** Throws when plain metadata is too large for the server. */
export function assertMetadataSize(metadata: Record<string, unknown> | undefined): void {
  if (metadata === undefined) return;
  const size = new TextEncoder().encode(canonicalize(metadata)).length;
  if (size > MAX_METADATA_BYTES)
    bad(`metadata is ${size} bytes; the limit is ${MAX_METADATA_BYTES}: put large data in payload (encrypted)`);
}

/** Builds the payload that is sealed (undefined members left out). */
export function buildPayload(parts: Omit<ClientLogPayload, 'v' | 'kind' | 'nonce'>): ClientLogPayload {
  const out: Record<string, unknown> = { v: 1, kind: 'countersign.log' };
  for (const [k, v] of Object.entries(parts)) if (v !== undefined) out[k] = v;
  out.nonce = randomNonce();
  return out as unknown as ClientLogPayload;
}
