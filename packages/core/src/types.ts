/**
 * Wire types that the server, the client, the CLI and the dashboard must agree on.
 */
import type { ActorType, CredentialClass } from './keys.js';
import type { Envelope } from './envelope.js';

/** The JSON body of every error answer. */
export interface ErrorBody {
  success: false;
  error: { code: string; message: string; requestId: string };
}

/** Where a log entry came from. */
export type LogSource = 'proxy' | 'log';

/** Lifecycle of a log record: proxy records are written before forwarding, then completed. */
export type LogStatus = 'pending' | 'complete' | 'failed' | 'interrupted';

/** A log entry as read back (DESIGN "Paths"). `payload` is the envelope; the server never sees plaintext. */
export interface LogEntry {
  id: string;
  projectId: string;
  receivedAt: string;
  actor: string;
  action: string;
  traceId: string | null;
  actorType: ActorType;
  credentialHandoverDetected: boolean;
  source: LogSource;
  status: LogStatus;
  requestProof: boolean;
  payloadHash: string | null;
  payload: Envelope;
  /** Plain metadata that the caller chose to send beside the envelope (already redacted); absent when none. */
  metadata?: Record<string, unknown>;
  /** When the caller says the event happened (client clock); absent when not given. */
  occurredAt?: string;
  /** Proxied calls: the upstream's HTTP status, in the clear; absent when no answer arrived. */
  upstreamStatus?: number;
  /** Proxied calls: ms from sending upstream to the upstream's response headers. */
  firstByteMs?: number;
  /** Proxied calls: ms from receiving the call to its end. */
  durationMs?: number;
  /** The entry's own W3C span id (16 lowercase hex digits), in the clear; absent when unknown. */
  spanId?: string;
  /** The span id of its parent (a run, a caller's span); absent for a root or when unknown. */
  parentSpanId?: string;
  /** When the work it records started and ended (ISO 8601); absent when unknown. */
  startedAt?: string;
  endedAt?: string;
}

/**
 * An entry of a log-list or trace page (`GET …/logs`, `GET …/traces/{traceId}`): `payload` is
 * there only when the page was asked for with `include=payload` (DESIGN §4 "Reading"), and even
 * then a page ends early once its payload budget is spent. `GET …/logs/{logId}` always has it.
 */
export type LogListEntry = Omit<LogEntry, 'payload'> & { payload?: Envelope };

/**
 * One entry of a `POST /v1/log` body. `payload` is either a client-sealed {@link Envelope}
 * (then `id` is required: it is the envelope's AAD) or a plain JSON object that the server seals
 * with `X-Service-Encryption-Key`.
 */
export interface LogIngestEntry {
  id?: string;
  actor?: string;
  action?: string;
  traceId?: string;
  requestProof?: boolean;
  /** ISO 8601. */
  occurredAt?: string;
  /** Plain JSON stored in the clear beside the envelope (at most 4096 bytes). */
  metadata?: Record<string, unknown>;
  payload: Envelope | Record<string, unknown>;
  /** Hex SHA-256 of the canonical plaintext; checked against nothing the server can see, kept for proofs. */
  payloadHash?: string;
  /** This entry's W3C span id (16 lowercase hex digits, not all zero); stored in the clear. */
  spanId?: string;
  /** Its parent's span id; default: the parent-id of the request's `traceparent` header. */
  parentSpanId?: string;
  /** ISO 8601 start and end of the work it records (end not before start). */
  startedAt?: string;
  endedAt?: string;
}

/** Filters of `GET /v1/projects/{projectId}/logs` (as query parameters). */
export interface LogListFilter {
  traceId?: string;
  actor?: string;
  actorType?: ActorType;
  action?: string;
  /** ISO 8601: receivedAt >= from. */
  from?: string;
  /** ISO 8601: receivedAt < to. */
  to?: string;
  /** Only entries with (true) or without (false) credential handover. */
  handover?: boolean;
  /** Case-insensitive prefix of the actor, the action, the trace id. */
  actorPrefix?: string;
  actionPrefix?: string;
  traceIdPrefix?: string;
  /** Case-insensitive substring of the actor, the action. */
  actorContains?: string;
  actionContains?: string;
  /** One status or a comma-separated list (`pending,failed`). */
  status?: string;
  /** One source or a comma-separated list (`log,proxy`). */
  source?: string;
  /** Plain metadata `key=value`, repeatable: every one must match (values compare as text). */
  meta?: string | string[];
  limit?: number;
  cursor?: string;
  /** `payload`: the entries carry their envelopes (a page then ends early at the server's payload budget). */
  include?: 'payload';
}

/** A security event (spec 6). */
export interface SecurityEvent {
  id: string;
  projectId: string;
  type: 'security.policy_violation';
  reason: 'credential_handover';
  logId: string;
  createdAt: string;
  actor: string;
  credentialClass: CredentialClass;
  /** Names (not values) of the agent context headers that triggered it. */
  agentHeaders: string[];
}

/** The headers of the Countersign interface (spec 4.1), lower-case as Node sees them. */
export const HEADERS = {
  encryptionKey: 'x-service-encryption-key',
  agentId: 'x-service-agent-id',
  action: 'x-service-action',
  runId: 'x-service-run-id',
  upstreamAuthorization: 'x-service-upstream-authorization',
  logId: 'x-service-log-id',
  agentRationale: 'x-agent-rationale',
  /** Forward mode: the Countersign key (Authorization belongs to the upstream there). */
  serviceKey: 'x-service-key',
  /** Forward mode: `true` asks for a proof receipt. */
  requestProof: 'x-service-request-proof',
  /** Forward mode: the upstream base URL when no upstream name is used. */
  targetBase: 'x-service-target-base',
  /** Proxy and forward: the span id the caller chooses for the call's entry (16 hex digits). */
  spanId: 'x-service-span-id',
  /** Proxy and forward: the parent span of the call's entry (else the `traceparent` parent-id). */
  parentSpanId: 'x-service-parent-span-id',
} as const;

/** Default `actor` and `action` of proxied calls (spec 2.2). */
export const PROXY_DEFAULTS = { actor: 'proxy', action: 'proxy.request' } as const;

/**
 * The one length limit of ids and labels, in characters: log ids, `actor`, `action`, `traceId`
 * (body fields, `X-Service-*` headers, list filters, path segments, embed-token scopes). One
 * limit everywhere, so whatever is accepted on ingest can be read back on every path.
 */
export const MAX_ID_LENGTH = 512;

/** Client-chosen log ids: 16-512 characters of `A-Z a-z 0-9 _ . : -`, starting with a letter or digit (a UUID fits). */
export const LOG_ID_PATTERN = `^[A-Za-z0-9][A-Za-z0-9_.:-]{15,${MAX_ID_LENGTH - 1}}$`;

/** The largest plain `metadata` object, as UTF-8 JSON bytes (it is stored in the clear). */
export const MAX_METADATA_BYTES = 4096;
