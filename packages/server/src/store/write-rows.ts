/**
 * The hot write path's rows as flat lists of column values, in one order for both backends:
 * the SQLite writer thread's messages (sqlite-writer.ts) and the PostgreSQL writer's scalar
 * parameters for small batches (pg-writer.ts).
 */
import type { LogCompletion, NewLog } from './logs.js';

/** Columns of an insert, in the order of its flat row. */
export const INSERT_COLUMNS = [
  'id',
  'project_id',
  'key_id',
  'received_at',
  'occurred_at',
  'actor',
  'action',
  'trace_id',
  'actor_type',
  'credential_handover_detected',
  'source',
  'status',
  'request_proof',
  'payload_hash',
  'payload',
  'metadata',
  'instance_id',
  'span_id',
  'parent_span_id',
  'started_at',
  'ended_at',
] as const;

/** Columns an outcome sets, in the order of its flat row. */
export const OUTCOME_COLUMNS = [
  'status',
  'payload',
  'payload_hash',
  'completed_at',
  'upstream_status',
  'first_byte_ms',
  'duration_ms',
  'ended_at',
] as const;

/** Appends one insert row to a flat array, in {@link INSERT_COLUMNS} order (booleans as 1/0). */
export function pushInsert(out: unknown[], l: NewLog): void {
  out.push(
    l.id,
    l.projectId,
    l.keyId,
    l.receivedAt,
    l.occurredAt,
    l.actor,
    l.action,
    l.traceId,
    l.actorType,
    l.credentialHandoverDetected ? 1 : 0,
    l.source,
    l.status,
    l.requestProof ? 1 : 0,
    l.payloadHash,
    l.payload,
    l.metadata,
    l.instanceId ?? null,
    l.spanId ?? null,
    l.parentSpanId ?? null,
    l.startedAt ?? null,
    l.endedAt ?? null,
  );
}

/** Appends the values an outcome sets to a flat array, in {@link OUTCOME_COLUMNS} order. */
export function pushOutcomeValues(out: unknown[], c: LogCompletion): void {
  out.push(
    c.status,
    c.payload,
    c.payloadHash,
    c.completedAt,
    c.upstreamStatus ?? null,
    c.firstByteMs ?? null,
    c.durationMs ?? null,
    c.endedAt ?? null,
  );
}
