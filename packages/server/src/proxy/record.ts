/**
 * The audit record of a proxied call (`POST /v1/proxy` and forward mode alike). The decrypted
 * payload (JCS, with a random `nonce`) holds the request half from the write-ahead record on,
 * and the response half, timings and outcome once the exchange ends:
 *
 * ```
 * { nonce, source: "proxy", via: "proxy" | "forward", outcome,
 *   request:  { method, target, headers (secrets redacted),
 *               bytes, sha256, truncated, body | bodyText | bodyBase64 },
 *   response: { status, headers (secrets redacted), bytes, sha256, truncated, body | bodyText | bodyBase64 | events },
 *   timings:  { firstByteMs, firstChunkMs, totalMs }, llm?, agentRationale?, error? }
 * ```
 * `request.sha256` is the SHA-256 of the exact bytes sent upstream; `body` appears only when
 * those bytes are JSON that canonical JSON keeps exactly (else `bodyText`, or `bodyBase64` for
 * bytes that are not UTF-8). In forward mode the write-ahead record has no body yet (it has not
 * arrived); the final record has it. Only the envelope and its hash reach the store.
 */
import { canonicalize, sealBytesToText, utf8Transient, type EnvelopeKey } from '@countersign/core';
import type { NewLog } from '../store/index.js';
import type { CapturedBody } from './capture.js';
import { firstValue, redactHeaders } from './headers.js';
import type { ExchangeOutcome, ExchangeResult } from './upstream.js';
import type { LlmSummary } from './llm/index.js';
import { offload, OFFLOAD_FROM_BYTES } from '../offload/pool.js';

/** Request metadata as recorded; the body members are those of {@link CapturedBody}. */
export interface RecordedRequest extends Partial<CapturedBody> {
  method: string;
  target: string;
  headers: Record<string, string | string[]>;
}

/** The decrypted proxy payload. */
export interface ProxyPayload {
  nonce: string;
  source: 'proxy';
  /** Which door the call came through: `POST /v1/proxy` or `/v1/forward/…`. */
  via: 'proxy' | 'forward';
  outcome: ExchangeOutcome | 'pending';
  request: RecordedRequest;
  response?: { status: number; headers: Record<string, string | string[]> } & CapturedBody;
  timings?: { firstByteMs?: number; firstChunkMs?: number; totalMs: number };
  /** What a recognised LLM API call was (proxy/llm): provider, model, usage, finish reason. */
  llm?: LlmSummary;
  /** The `X-Agent-Rationale` header as the client sent it (already an envelope of the client's). */
  agentRationale?: string;
  error?: string;
}

/** The indexed fields of a proxy record (what is not encrypted). */
export interface ProxyRecordFields {
  id: string;
  projectId: string;
  keyId: string;
  receivedAt: number;
  actor: string;
  action: string;
  traceId: string | null;
  actorType: string;
  credentialHandoverDetected: boolean;
  requestProof: boolean;
  /** The entry's span (DESIGN §4): its own id, its parent's, and when the call arrived. */
  spanId: string;
  parentSpanId: string | null;
  startedAt: number;
}

/** A sealed payload, ready for the store. */
export interface SealedPayload {
  /** The envelope JSON text. */
  envelope: string;
  /** Hex SHA-256 of the payload's JCS bytes (core's `payloadHashHex`, computed on the same bytes). */
  payloadHash: string;
}

/**
 * The RFC 8785 text of a proxy payload, with the request half's text given ready-made. A call
 * seals two records (the write-ahead one and the final one) that share the request half, which
 * can be a long prompt: it is canonicalized once per call, not once per record. The top level
 * is composed exactly as JCS orders it (keys sorted by code unit, undefined members dropped);
 * a test holds the result equal to `canonicalize(payload)`.
 */
export function canonicalProxyPayload(payload: ProxyPayload, requestJcs: string): string {
  const fields = payload as unknown as Record<string, unknown>;
  let out = '{';
  for (const key of Object.keys(fields).sort()) {
    const value = fields[key];
    if (value === undefined) continue;
    if (out.length > 1) out += ',';
    out += JSON.stringify(key) + ':' + (key === 'request' ? requestJcs : canonicalize(value));
  }
  return out + '}';
}

/** How many body bytes a record carries (request and captured response), to pick where it is sealed. */
function bodyWeight(payload: ProxyPayload): number {
  return (payload.request.bytes ?? 0) + (payload.response?.bytes ?? 0);
}

/**
 * The request half's canonical text to reuse across a call's records, or `undefined` for a
 * large request: its records are sealed in the offload pool, which canonicalizes there,
 * off the event loop, rather than here.
 */
export function requestJcsOf(request: RecordedRequest): string | undefined {
  return (request.bytes ?? 0) >= OFFLOAD_FROM_BYTES ? undefined : canonicalize(request);
}

/**
 * Seals a proxy record: on this thread when it is small, in the offload pool when its bodies weigh
 * {@link OFFLOAD_FROM_BYTES} or more. Same bytes either way (see {@link sealHere}).
 */
export async function sealProxyPayload(
  payload: ProxyPayload,
  key: EnvelopeKey,
  logId: string,
  requestJcs?: string,
): Promise<SealedPayload> {
  if (bodyWeight(payload) < OFFLOAD_FROM_BYTES) return sealHere(payload, key, logId, requestJcs);
  const { envelope, payloadHash } = await offload({
    kind: 'seal',
    payload,
    key,
    logId,
    ...(requestJcs === undefined ? {} : { requestJcs }),
  });
  return { envelope, payloadHash };
}

/**
 * Canonicalizes the payload once (reusing `requestJcs`, the request half's canonical text, when
 * given), then seals those bytes and hashes them, so the stored hash is exactly
 * `payloadHashHex(payload)` without serializing twice. Runs on the main thread or in the offload
 * pool's worker.
 */
export async function sealHere(payload: ProxyPayload, key: EnvelopeKey, logId: string, requestJcs?: string): Promise<SealedPayload> {
  // Transient bytes (Node's shared pool for a short text): sealed and hashed here, then dropped.
  const bytes = utf8Transient(requestJcs === undefined ? canonicalize(payload) : canonicalProxyPayload(payload, requestJcs));
  const { text, payloadHash } = await sealBytesToText(bytes, key, logId);
  return { envelope: text, payloadHash };
}

/**
 * The store row for a record (pending write-ahead, or a refusal recorded at once). Written out
 * member by member, not spread: spreading a record this wide and adding members to the copy
 * made V8 build a fresh hidden class per call (~4 KB of old-generation garbage a call, measured
 * with the sampling heap profiler; docs/performance-log.md, "Garbage that outlived its call").
 */
export function newProxyLog(
  fields: ProxyRecordFields,
  sealed: SealedPayload,
  status: NewLog['status'],
  owner: { instanceId?: string | null; endedAt?: number | null } = {},
): NewLog {
  return {
    id: fields.id,
    projectId: fields.projectId,
    keyId: fields.keyId,
    receivedAt: fields.receivedAt,
    occurredAt: null,
    actor: fields.actor,
    action: fields.action,
    traceId: fields.traceId,
    actorType: fields.actorType,
    credentialHandoverDetected: fields.credentialHandoverDetected,
    source: 'proxy',
    status,
    requestProof: fields.requestProof,
    payloadHash: sealed.payloadHash,
    payload: sealed.envelope,
    metadata: null,
    instanceId: owner.instanceId ?? null,
    spanId: fields.spanId,
    parentSpanId: fields.parentSpanId,
    startedAt: fields.startedAt,
    endedAt: owner.endedAt ?? null,
  };
}

/** The status column for an outcome. */
export function statusOf(outcome: ExchangeOutcome): 'complete' | 'failed' | 'interrupted' {
  if (outcome === 'complete') return 'complete';
  if (outcome === 'client_disconnected' || outcome === 'server_shutdown') return 'interrupted';
  return 'failed';
}

/**
 * The full payload of a finished exchange. `request` replaces the pending request half when the
 * body was streamed (forward mode) and is only known now.
 */
export function finalPayload(pending: ProxyPayload, result: ExchangeResult, totalMs: number, request = pending.request): ProxyPayload {
  // Member by member, not spread (see newProxyLog).
  const out: ProxyPayload = {
    nonce: pending.nonce,
    source: pending.source,
    via: pending.via,
    outcome: result.outcome,
    request,
    timings: { totalMs: round(totalMs) },
  };
  if (pending.agentRationale !== undefined) out.agentRationale = pending.agentRationale;
  if (result.firstByteMs !== undefined) out.timings!.firstByteMs = round(result.firstByteMs);
  if (result.firstChunkMs !== undefined) out.timings!.firstChunkMs = round(result.firstChunkMs);
  if (result.status !== undefined && result.upstreamHeaders) {
    const h = result.upstreamHeaders;
    const body = result.capture.finish(firstValue(h['content-type']), firstValue(h['content-encoding']));
    out.response = { status: result.status, headers: redactHeaders(h), ...body };
  }
  if (result.error !== undefined) out.error = result.error;
  return out;
}

/** Milliseconds to the microsecond, as recorded. */
export function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
