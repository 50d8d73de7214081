/**
 * Reads with a project's `live` key (DESIGN "Paths"): the log listing with filters and cursor
 * pagination, one log, and a trace in order. Ingest keys get 403; another project's key gets
 * 403 `project_forbidden`; an embed token reads only inside its scope.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { LogListFilter } from '@countersign/core';
import { requireProjectRead } from '../auth/guards.js';
import { assertEmbedScope } from '../auth/embed-token.js';
import type { EmbedPrincipal, KeyPrincipal } from '../auth/principal.js';
import { ApiError } from '../errors.js';
import { errorResponses, logIdSchema, projectIdParam } from '../management/schemas.js';
import type { LogFilter, LogRow } from '../store/index.js';
import { decodeCursor, encodeCursor, logEntrySchema, toLogEntry } from './entry.js';

const text256 = { type: 'string', minLength: 1, maxLength: 256 } as const;
const projectParams = { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] } as const;

/** Query of the log listing (the wire shape is core's). */
type ListQuery = LogListFilter;

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

function epochMs(name: string, iso: string | undefined): number | undefined {
  if (iso === undefined) return undefined;
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new ApiError('invalid_request', `${name} must be an ISO 8601 date-time`);
  return ms;
}

/** Logs plugin. */
export default async function logsPlugin(app: FastifyInstance): Promise<void> {
  const { store } = app.ctx;

  app.get<{ Params: { projectId: string }; Querystring: ListQuery }>(
    '/v1/projects/:projectId/logs',
    {
      onRequest: readGuard,
      schema: {
        tags: ['logs'],
        summary: "List a project's logs, newest first (live key)",
        params: projectParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            traceId: text256,
            actor: text256,
            actorType: { type: 'string', enum: ['human', 'agent', 'service'] },
            action: text256,
            from: { type: 'string', format: 'date-time', description: 'receivedAt >= from' },
            to: { type: 'string', format: 'date-time', description: 'receivedAt < to' },
            handover: { type: 'boolean', description: 'only entries with (true) or without (false) credential handover' },
            limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 },
            cursor: { type: 'string', maxLength: 64, description: 'nextCursor of the previous page' },
          },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              logs: { type: 'array', items: logEntrySchema },
              nextCursor: { type: ['string', 'null'], description: 'null on the last page' },
            },
          },
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const scope = scopeOf(request);
      const filter: LogFilter = {
        traceId: q.traceId,
        actor: q.actor,
        actorType: q.actorType,
        action: q.action,
        from: epochMs('from', q.from),
        to: epochMs('to', q.to),
        handover: q.handover,
      };
      // An embed token's scope narrows the filter; asking outside it finds nothing.
      for (const k of ['traceId', 'actor'] as const) {
        const forced = scope[k];
        if (forced === undefined) continue;
        if (filter[k] !== undefined && filter[k] !== forced) return { success: true, logs: [], nextCursor: null };
        filter[k] = forced;
      }
      const limit = q.limit ?? 50;
      const rows = await store.logs.list(request.params.projectId, filter, limit + 1, decodeCursor(q.cursor));
      const page = rows.slice(0, limit);
      const nextCursor = rows.length > limit ? encodeCursor(page[page.length - 1]!.seq) : null;
      return { success: true, logs: page.map(toLogEntry), nextCursor };
    },
  );

  app.get<{ Params: { projectId: string; logId: string } }>(
    '/v1/projects/:projectId/logs/:logId',
    {
      onRequest: readGuard,
      schema: {
        tags: ['logs'],
        summary: 'One log entry (live key)',
        params: { type: 'object', properties: { projectId: projectIdParam, logId: logIdSchema }, required: ['projectId', 'logId'] },
        response: {
          200: { type: 'object', properties: { success: { type: 'boolean' }, log: logEntrySchema } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const row = await store.logs.get(request.params.projectId, request.params.logId);
      if (!row || !inScope(request, row)) throw new ApiError('not_found', `no log ${request.params.logId} in this project`);
      return { success: true, log: toLogEntry(row) };
    },
  );

  app.get<{ Params: { projectId: string; traceId: string } }>(
    '/v1/projects/:projectId/traces/:traceId',
    {
      onRequest: readGuard,
      schema: {
        tags: ['logs'],
        summary: 'Every entry of a trace (same X-Service-Run-ID / traceId), oldest first (live key)',
        params: { type: 'object', properties: { projectId: projectIdParam, traceId: text256 }, required: ['projectId', 'traceId'] },
        response: {
          200: {
            type: 'object',
            properties: { success: { type: 'boolean' }, traceId: { type: 'string' }, logs: { type: 'array', items: logEntrySchema } },
          },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const { projectId, traceId } = request.params;
      const rows = (await store.logs.trace(projectId, traceId)).filter((r) => inScope(request, r));
      if (rows.length === 0) throw new ApiError('not_found', `no trace ${traceId} in this project`);
      return { success: true, traceId, logs: rows.map(toLogEntry) };
    },
  );
}
