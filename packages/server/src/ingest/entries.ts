/**
 * Direct ingestion, entry by entry: turning a validated `POST /v1/log` entry into the row that
 * is stored (sealing a plain payload with the caller's key, then forgetting the key), and the
 * idempotency rule for a retried id. The route only orchestrates these.
 */
import {
  HEADERS,
  MAX_METADATA_BYTES,
  assertEnvelope,
  canonicalize,
  deriveEnvelopeKey,
  isCoreError,
  openPayload,
  payloadHashHex,
  randomId,
  randomNonce,
  sealPayload,
  type Envelope,
} from '@countersign/core';
import type { IncomingHttpHeaders } from 'node:http';
import type { LogIngestEntry } from '@countersign/core';
import { ApiError } from '../errors.js';
import type { IngestPrincipal } from '../auth/principal.js';
import type { LogRow, NewLog } from '../store/index.js';
import type { IngestStamp } from './stamp.js';

/** One entry of a `POST /v1/log` body, after schema validation (the wire shape is core's). */
export type LogInput = LogIngestEntry & { payload: Record<string, unknown> };

/** Request-wide facts every entry of one call shares. */
export interface IngestRequest {
  principal: IngestPrincipal;
  stamp: IngestStamp;
  headers: IncomingHttpHeaders;
  /** The caller's `X-Service-Encryption-Key`, when sent (plain payloads). */
  encryptionKey: string | undefined;
  receivedAt: number;
}

/** An entry ready to store, with what the idempotency check needs. */
export interface PreparedLog {
  log: NewLog;
  /** True when the caller sent its own id (only then can a retry be a duplicate). */
  clientId: boolean;
  /** The plain payload as sent (plain path only), to compare a retry without storing it. */
  plainPayload: Record<string, unknown> | undefined;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function bounded(name: string, value: string | undefined, max: number): string | undefined {
  if (value === undefined) return undefined;
  if (value.length === 0 || value.length > max) throw new ApiError('invalid_request', `${name} must be 1-${max} characters`);
  return value;
}

/** True when a payload is meant as an envelope (so a malformed one is named as such). */
function looksLikeEnvelope(payload: Record<string, unknown>): boolean {
  return 'ct' in payload && 'alg' in payload;
}

/** A new server-made log id. */
export function newLogId(): string {
  return 'log_' + randomId(24);
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

  let payload: Envelope;
  let payloadHash: string | null;
  let plainPayload: Record<string, unknown> | undefined;
  if (req.encryptionKey !== undefined) {
    // Plain path: the server seals with the caller's key and keeps neither key nor plaintext.
    if (input.payloadHash !== undefined) fail('invalid_request', 'payloadHash is computed by the server for plain payloads; leave it out');
    plainPayload = input.payload;
    const sealed = 'nonce' in input.payload ? input.payload : { ...input.payload, nonce: randomNonce() };
    payloadHash = payloadHashHex(sealed);
    payload = await sealPayload(sealed, await deriveEnvelopeKey(req.encryptionKey), id);
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
      actor: input.actor ?? bounded('X-Service-Agent-ID', header(defaults, HEADERS.agentId), 256) ?? 'unknown',
      action: input.action ?? bounded('X-Service-Action', header(defaults, HEADERS.action), 256) ?? 'log.entry',
      traceId: input.traceId ?? bounded('X-Service-Run-ID', header(defaults, HEADERS.runId), 256) ?? null,
      actorType: req.stamp.actorType,
      credentialHandoverDetected: req.stamp.credentialHandoverDetected,
      source: 'log',
      status: 'complete',
      requestProof: input.requestProof ?? false,
      payloadHash,
      payload: canonicalize(payload),
      metadata,
    },
  };
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
  const sent = 'nonce' in candidate.plainPayload ? candidate.plainPayload : { ...candidate.plainPayload, nonce: stored.nonce };
  return canonicalize(sent) === canonicalize(stored);
}
