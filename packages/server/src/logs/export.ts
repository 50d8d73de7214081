/**
 * `GET /v1/projects/{projectId}/logs/export?format=csv|jsonl&<filters>` (DESIGN §4 "Reading"):
 * the whole filtered range, oldest first, streamed page by page with backpressure, so memory
 * stays at one page whatever the range. CSV holds the plain fields (no payload); JSONL holds one
 * whole entry per line, envelope included (pages then end at the payload budget, as lists do).
 */
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { LogListFilter } from '@countersign/core';
import { errorResponses, projectIdParam } from '../management/schemas.js';
import type { LogFilter } from '../store/index.js';
import { toLogEntry } from './entry.js';
import { FILTER_PROPERTIES, filterOf } from './filters.js';
import { readGuard } from './plugin.js';

/** Entries read per store page while exporting. */
const EXPORT_PAGE = 500;

/** CSV columns: the plain fields of an entry, in this order. */
const CSV_COLUMNS = [
  'id',
  'receivedAt',
  'occurredAt',
  'actor',
  'actorType',
  'action',
  'traceId',
  'source',
  'status',
  'credentialHandoverDetected',
  'requestProof',
  'payloadHash',
  'upstreamStatus',
  'firstByteMs',
  'durationMs',
  'spanId',
  'parentSpanId',
  'startedAt',
  'endedAt',
  'metadata',
] as const;

/** Registers the export route (inside the logs plugin). */
export function registerLogExport(app: FastifyInstance): void {
  const { store, config } = app.ctx;
  app.get<{ Params: { projectId: string }; Querystring: LogListFilter & { format: 'csv' | 'jsonl' } }>(
    '/v1/projects/:projectId/logs/export',
    {
      onRequest: readGuard,
      schema: {
        tags: ['logs'],
        summary: "Export the filtered range of a project's logs, oldest first, as CSV (plain fields) or JSONL (whole entries)",
        params: { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] },
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { ...FILTER_PROPERTIES, format: { type: 'string', enum: ['csv', 'jsonl'] } },
          required: ['format'],
        },
        response: errorResponses(400, 401, 403),
      },
    },
    async (request, reply) => {
      const { projectId } = request.params;
      const jsonl = request.query.format === 'jsonl';
      const filter = filterOf(request, request.query);
      async function* lines(): AsyncGenerator<string> {
        if (!jsonl) yield CSV_COLUMNS.join(',') + '\r\n';
        if (filter === null) return;
        let cursorSeq: number | undefined;
        for (;;) {
          const page = await store.logs.page(projectId, filter as LogFilter, {
            order: 'oldest',
            limit: EXPORT_PAGE,
            cursorSeq,
            payloadBudget: jsonl ? config.listPayloadBudget : undefined,
          });
          let chunk = '';
          for (const row of page.rows) {
            const entry = toLogEntry(row) as unknown as Record<string, unknown>;
            chunk += jsonl ? JSON.stringify(entry) + '\n' : CSV_COLUMNS.map((c) => csvCell(entry[c])).join(',') + '\r\n';
          }
          if (chunk !== '') yield chunk;
          if (page.nextSeq === null) return;
          cursorSeq = page.nextSeq;
        }
      }
      return reply
        .type(jsonl ? 'application/x-ndjson; charset=utf-8' : 'text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="countersign-${projectId}-logs.${jsonl ? 'jsonl' : 'csv'}"`)
        .header('cache-control', 'no-store')
        .send(Readable.from(lines()));
    },
  );
}

/**
 * One CSV cell (RFC 4180): quoted when it holds a comma, quote or line break. A text starting
 * with `=`, `+`, `-`, `@`, tab or CR gets a leading `'`, so a spreadsheet opening the export
 * never runs an actor name as a formula.
 */
export function csvCell(value: unknown): string {
  if (value === undefined || value === null) return '';
  let text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = "'" + text;
  return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
}
