/**
 * The read-back shape of a log entry (DESIGN "Paths") and the opaque cursors of listings.
 * Shared by the log, trace, proxy and proof paths, so an entry looks the same wherever it is read.
 */
import { Readable } from 'node:stream';
import { fromBase64, toBase64Url, utf8, fromUtf8, type Envelope, type LogListEntry } from '@countersign/core';
import { ApiError } from '../errors.js';
import type { LogRow } from '../store/index.js';

/** A stored row, with or without its payload (list and trace pages read it only when asked). */
export type ReadableRow = Omit<LogRow, 'payload'> & { payload?: string | undefined };

/**
 * Maps a stored row to the entry as read back: `id, projectId, receivedAt (ISO), actor, action,
 * traceId, actorType, credentialHandoverDetected, source, status, requestProof, payloadHash`,
 * `payload` (the envelope object) when the row was read with it, plus `metadata`,
 * `occurredAt`, the proxy timings and the span fields (`spanId`, `parentSpanId`, `startedAt`,
 * `endedAt`) when present.
 */
export function toLogEntry(row: ReadableRow): LogListEntry {
  const entry: LogListEntry = {
    id: row.id,
    projectId: row.projectId,
    receivedAt: new Date(row.receivedAt).toISOString(),
    actor: row.actor,
    action: row.action,
    traceId: row.traceId,
    actorType: row.actorType as LogListEntry['actorType'],
    credentialHandoverDetected: row.credentialHandoverDetected,
    source: row.source,
    status: row.status,
    requestProof: row.requestProof,
    payloadHash: row.payloadHash,
  };
  if (row.payload !== undefined) entry.payload = JSON.parse(row.payload) as Envelope;
  if (row.metadata !== null) entry.metadata = JSON.parse(row.metadata) as Record<string, unknown>;
  if (row.occurredAt !== null) entry.occurredAt = row.occurredAt;
  // Plain timing of a proxied exchange, not secret (DESIGN §4): for timelines without a key.
  if (row.upstreamStatus !== null) entry.upstreamStatus = row.upstreamStatus;
  if (row.firstByteMs !== null) entry.firstByteMs = row.firstByteMs;
  if (row.durationMs !== null) entry.durationMs = row.durationMs;
  // Spans in the clear (DESIGN §4): the trace graph links entries without a key.
  if (row.spanId != null) entry.spanId = row.spanId;
  if (row.parentSpanId != null) entry.parentSpanId = row.parentSpanId;
  if (row.startedAt != null) entry.startedAt = new Date(row.startedAt).toISOString();
  if (row.endedAt != null) entry.endedAt = new Date(row.endedAt).toISOString();
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
      description:
        'The envelope {v,alg,kid,iv,ct,tag}; open it with your key and the log id as AAD. Always in GET …/logs/{logId}; in list and trace pages only with include=payload',
      additionalProperties: true,
    },
    metadata: { type: 'object', additionalProperties: true },
    occurredAt: { type: 'string' },
    upstreamStatus: { type: 'integer', description: 'Proxied calls: the upstream HTTP status (in the clear)' },
    firstByteMs: { type: 'number', description: 'Proxied calls: ms from sending upstream to its response headers' },
    durationMs: { type: 'number', description: 'Proxied calls: ms from receiving the call to its end' },
    spanId: { type: 'string', description: "The entry's W3C span id (16 hex digits), in the clear" },
    parentSpanId: { type: 'string', description: "Its parent's span id (the enclosing run or the caller's span)" },
    startedAt: { type: 'string', format: 'date-time', description: 'When the recorded work started' },
    endedAt: { type: 'string', format: 'date-time', description: 'When it ended (a proxied call: when its outcome was committed)' },
  },
} as const;

/** Pieces of the stored envelope text written at a time by {@link logAnswerStream}. */
const PIECE_CHARS = 64 * 1024;

/**
 * The answer of `GET …/logs/{logId}`, `{"success":true,"log":{…,"payload":<envelope>}}`, as a
 * stream: the stored envelope text (already JSON, and as large as the body limit allows) is
 * written in pieces between the JSON of the other fields, never parsed and serialized again
 * into one more string of its size.
 */
export function logAnswerStream(row: LogRow): Readable {
  const fields = JSON.stringify(toLogEntry({ ...row, payload: undefined }));
  const head = `{"success":true,"log":${fields.slice(0, -1)},"payload":`;
  const envelope = row.payload;
  return Readable.from(
    (function* () {
      yield head;
      for (let at = 0; at < envelope.length;) {
        let end = Math.min(envelope.length, at + PIECE_CHARS);
        // Never split a surrogate pair (envelopes are ASCII; this keeps any text whole).
        if (end < envelope.length && /[\ud800-\udbff]/.test(envelope[end - 1]!)) end--;
        yield envelope.slice(at, end);
        at = end;
      }
      yield '}}';
    })(),
    { objectMode: false },
  );
}

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
