/**
 * Reads with a project's `live` key (DESIGN "Paths"): the log listing with filters and cursor
 * pagination, one log, and a trace in order. Ingest keys get 403; another project's key gets
 * 403 `project_forbidden`; an embed token reads only inside its scope.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { MAX_ID_LENGTH, type LogListFilter } from '@countersign/core';
import { requireProjectRead } from '../auth/guards.js';
import { assertEmbedScope } from '../auth/embed-token.js';
import type { EmbedPrincipal, KeyPrincipal } from '../auth/principal.js';
import { ApiError } from '../errors.js';
import { errorResponses, logIdSchema, projectIdParam } from '../management/schemas.js';
import type { LogRow } from '../store/index.js';
import { decodeCursor, encodeCursor, logAnswerStream, logEntrySchema, toLogEntry } from './entry.js';
import { FILTER_PROPERTIES, filterOf } from './filters.js';
import { registerLogExport } from './export.js';
import { registerLogStream } from './stream.js';

// Labels (traceId, actor, action) as filters and path segments: the one limit of core's
// MAX_ID_LENGTH, so every label accepted on ingest can be read back (issue 8).
const text256 = { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH } as const;
const projectParams = { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] } as const;

/** Query of the log listing (the wire shape is core's). */
type ListQuery = LogListFilter;

/** Query of a trace read. */
interface TraceQuery {
  limit?: number;
  cursor?: string;
  include?: 'payload';
}

/** Entries of a trace page: by default, and at most. */
const DEFAULT_TRACE_PAGE = 1000;
const MAX_TRACE_PAGE = 10_000;

/** `include=payload`: list and trace pages carry envelopes only when asked (DESIGN §4 "Reading"). */
const includeParam = {
  type: 'string',
  enum: ['payload'],
  description:
    'payload: entries carry their envelopes; the page then also ends once its payloads reach the payload budget (COUNTERSIGN_LIST_PAYLOAD_BUDGET, 8 MiB; at least one entry), and nextCursor continues it',
} as const;

/** The page answer's cursor. */
const nextCursorSchema = { type: ['string', 'null'], description: 'Cursor of the next page; null on the last page' } as const;

/** Checks read access in the request's first hook, before any parsing. */
export async function readGuard(request: FastifyRequest): Promise<void> {
  const { projectId } = request.params as { projectId?: string };
  const principal = await requireProjectRead(request, projectId ?? '');
  // Embed tokens read only the log, trace and proof routes (not events or streams).
  assertEmbedScope(principal, { route: request.routeOptions.url });
}

/** The embed token's scope as forced filters (a live key has none). */
export function scopeOf(request: FastifyRequest): { traceId?: string; actor?: string } {
  const p = request.principal as KeyPrincipal | EmbedPrincipal;
  return p.kind === 'embed' ? p.scope : {};
}

/** True when `row` lies inside the request's scope. */
export function inScope(request: FastifyRequest, row: Pick<LogRow, 'traceId' | 'actor'>): boolean {
  const s = scopeOf(request);
  return (s.traceId === undefined || s.traceId === row.traceId) && (s.actor === undefined || s.actor === row.actor);
}

/** Logs plugin. */
export default async function logsPlugin(app: FastifyInstance): Promise<void> {
  const { store, config } = app.ctx;
  registerLogExport(app);
  registerLogStream(app);

  app.get<{ Params: { projectId: string }; Querystring: ListQuery }>(
    '/v1/projects/:projectId/logs',
    {
      onRequest: readGuard,
      schema: {
        tags: ['logs'],
        summary: "List a project's logs, newest first (live key)",
        description:
          'Entries carry no payload unless include=payload; with it, a page ends early once its payloads reach the payload budget and nextCursor continues it. Read one whole entry with GET …/logs/{logId}.',
        params: projectParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            ...FILTER_PROPERTIES,
            limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 },
            cursor: { type: 'string', maxLength: 64, description: 'nextCursor of the previous page' },
            include: includeParam,
          },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              logs: { type: 'array', items: logEntrySchema },
              nextCursor: nextCursorSchema,
            },
          },
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const filter = filterOf(request, q);
      if (filter === null) return { success: true, logs: [], nextCursor: null };
      const page = await store.logs.page(request.params.projectId, filter, {
        order: 'newest',
        limit: q.limit ?? 50,
        cursorSeq: decodeCursor(q.cursor),
        payloadBudget: q.include === 'payload' ? config.listPayloadBudget : undefined,
      });
      return { success: true, logs: page.rows.map(toLogEntry), nextCursor: page.nextSeq === null ? null : encodeCursor(page.nextSeq) };
    },
  );

  app.get<{ Params: { projectId: string; logId: string } }>(
    '/v1/projects/:projectId/logs/:logId',
    {
      onRequest: readGuard,
      schema: {
        tags: ['logs'],
        summary: 'One log entry, whole, with its payload (live key)',
        params: { type: 'object', properties: { projectId: projectIdParam, logId: logIdSchema }, required: ['projectId', 'logId'] },
        response: {
          200: { type: 'object', properties: { success: { type: 'boolean' }, log: logEntrySchema } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request, reply) => {
      const row = await store.logs.get(request.params.projectId, request.params.logId);
      if (!row || !inScope(request, row)) throw new ApiError('not_found', `no log ${request.params.logId} in this project`);
      // Streamed around the stored envelope text: a 10 MB entry is not parsed and serialized again.
      return reply.type('application/json; charset=utf-8').send(logAnswerStream(row));
    },
  );

  app.get<{ Params: { projectId: string; traceId: string }; Querystring: TraceQuery }>(
    '/v1/projects/:projectId/traces/:traceId',
    {
      onRequest: readGuard,
      schema: {
        tags: ['logs'],
        summary: 'The entries of a trace (same X-Service-Run-ID / traceId), oldest first, in pages (live key)',
        description:
          'The same rule as the log list: no payloads unless include=payload, and then a page ends early once its payloads reach the payload budget; follow nextCursor for the rest of the trace.',
        params: { type: 'object', properties: { projectId: projectIdParam, traceId: text256 }, required: ['projectId', 'traceId'] },
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            limit: { type: 'integer', minimum: 1, maximum: MAX_TRACE_PAGE, default: DEFAULT_TRACE_PAGE },
            cursor: { type: 'string', maxLength: 64, description: 'nextCursor of the previous page' },
            include: includeParam,
          },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              traceId: { type: 'string' },
              logs: { type: 'array', items: logEntrySchema },
              nextCursor: nextCursorSchema,
            },
          },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const { projectId, traceId } = request.params;
      const q = request.query;
      const scope = scopeOf(request);
      const cursorSeq = decodeCursor(q.cursor);
      // An embed token's scope narrows the trace; another trace is not there for it.
      const page =
        scope.traceId !== undefined && scope.traceId !== traceId
          ? { rows: [], nextSeq: null }
          : await store.logs.page(projectId, scope.actor === undefined ? { traceId } : { traceId, actor: scope.actor }, {
              order: 'oldest',
              limit: q.limit ?? DEFAULT_TRACE_PAGE,
              cursorSeq,
              payloadBudget: q.include === 'payload' ? config.listPayloadBudget : undefined,
            });
      if (page.rows.length === 0 && cursorSeq === undefined) throw new ApiError('not_found', `no trace ${traceId} in this project`);
      return {
        success: true,
        traceId,
        logs: page.rows.map(toLogEntry),
        nextCursor: page.nextSeq === null ? null : encodeCursor(page.nextSeq),
      };
    },
  );
}
