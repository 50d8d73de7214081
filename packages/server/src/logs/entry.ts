/**
 * The read-back shape of a log entry (DESIGN "Paths") and the opaque cursors of listings.
 * Shared by the log, trace, proxy and proof paths, so an entry looks the same wherever it is read.
 */
import { fromBase64, toBase64Url, utf8, fromUtf8, type Envelope, type LogEntry } from '@countersign/core';
import { ApiError } from '../errors.js';
import type { LogRow } from '../store/index.js';

/**
 * Maps a stored row to the entry as read back: `id, projectId, receivedAt (ISO), actor, action,
 * traceId, actorType, credentialHandoverDetected, source, status, requestProof, payloadHash,
 * payload` (the envelope object), plus `metadata` and `occurredAt` when present.
 */
export function toLogEntry(row: LogRow): LogEntry {
  const entry: LogEntry = {
    id: row.id,
    projectId: row.projectId,
    receivedAt: new Date(row.receivedAt).toISOString(),
    actor: row.actor,
    action: row.action,
    traceId: row.traceId,
    actorType: row.actorType as LogEntry['actorType'],
    credentialHandoverDetected: row.credentialHandoverDetected,
    source: row.source,
    status: row.status,
    requestProof: row.requestProof,
    payloadHash: row.payloadHash,
    payload: JSON.parse(row.payload) as Envelope,
  };
  if (row.metadata !== null) entry.metadata = JSON.parse(row.metadata) as Record<string, unknown>;
  if (row.occurredAt !== null) entry.occurredAt = row.occurredAt;
  return entry;
}

/** JSON schema of a log entry as read back (for route `response` schemas and OpenAPI). */
export const logEntrySchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    projectId: { type: 'string' },
    receivedAt: { type: 'string', format: 'date-time' },
    actor: { type: 'string' },
    action: { type: 'string' },
    traceId: { type: ['string', 'null'] },
    actorType: { type: 'string', enum: ['human', 'agent', 'service'] },
    credentialHandoverDetected: { type: 'boolean' },
    source: { type: 'string', enum: ['proxy', 'log'] },
    status: { type: 'string', enum: ['pending', 'complete', 'failed', 'interrupted'] },
    requestProof: { type: 'boolean' },
    payloadHash: { type: ['string', 'null'] },
    payload: {
      type: 'object',
      description: 'The envelope {v,alg,kid,iv,ct,tag}; open it with your key and the log id as AAD',
      additionalProperties: true,
    },
    metadata: { type: 'object', additionalProperties: true },
    occurredAt: { type: 'string' },
  },
} as const;

const CURSOR_PREFIX = 'c1.';

/** An opaque cursor for "entries before sequence `seq`". */
export function encodeCursor(seq: number): string {
  return CURSOR_PREFIX + toBase64Url(utf8(String(seq)));
}

/**
 * Reads a cursor made by {@link encodeCursor}.
 * @throws ApiError `invalid_cursor`.
 */
export function decodeCursor(cursor: string | undefined): number | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  let seq = NaN;
  if (cursor.startsWith(CURSOR_PREFIX) && cursor.length < 40) {
    try {
      const text = fromUtf8(fromBase64(cursor.slice(CURSOR_PREFIX.length)));
      if (/^\d{1,15}$/.test(text)) seq = Number(text);
    } catch {
      /* falls through to the error */
    }
  }
  if (!Number.isSafeInteger(seq) || seq < 1)
    throw new ApiError('invalid_cursor', 'the cursor is not one this server issued; start again without it');
  return seq;
}
