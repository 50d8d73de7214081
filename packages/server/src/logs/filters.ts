/**
 * The filters of the log reads (DESIGN §4 "Reading"): one querystring schema and one reading of
 * it for the list (`GET …/logs`), the export (`…/logs/export`) and the live stream
 * (`…/logs/stream`), so the three always select the same entries. An embed token's scope
 * narrows the filter; asking outside it selects nothing.
 */
import type { FastifyRequest } from 'fastify';
import { MAX_ID_LENGTH, type LogListFilter } from '@countersign/core';
import { ApiError } from '../errors.js';
import type { LogFilter } from '../store/index.js';
import { scopeOf } from './plugin.js';

const label = { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH } as const;
const part = { type: 'string', minLength: 1, maxLength: 256 } as const;
const list = { type: 'string', pattern: '^[a-z_]+(,[a-z_]+)*$', maxLength: 256 } as const;

/** Querystring properties of every log read that filters. */
export const FILTER_PROPERTIES = {
  traceId: label,
  actor: label,
  actorType: { type: 'string', enum: ['human', 'agent', 'service'] },
  action: label,
  from: { type: 'string', format: 'date-time', description: 'receivedAt >= from' },
  to: { type: 'string', format: 'date-time', description: 'receivedAt < to' },
  handover: { type: 'boolean', description: 'only entries with (true) or without (false) credential handover' },
  actorPrefix: { ...part, description: 'case-insensitive prefix of the actor' },
  actionPrefix: { ...part, description: 'case-insensitive prefix of the action' },
  traceIdPrefix: { ...part, description: 'case-insensitive prefix of the trace id' },
  actorContains: { ...part, description: 'case-insensitive substring of the actor' },
  actionContains: { ...part, description: 'case-insensitive substring of the action' },
  status: { ...list, description: 'one status or a comma-separated list (pending, complete, failed, interrupted …)' },
  source: { ...list, description: 'one source or a comma-separated list (log, proxy)' },
  meta: {
    anyOf: [
      { type: 'string', maxLength: 1024 },
      { type: 'array', items: { type: 'string', maxLength: 1024 }, maxItems: 16 },
    ],
    description: 'plain metadata key=value, repeatable; all must match (values compare as text: true, 5, eu)',
  },
} as const;

/** The store filter of a read, or `null` when the request's scope excludes everything it asks for. */
export function filterOf(request: FastifyRequest, q: LogListFilter): LogFilter | null {
  const filter: LogFilter = {
    traceId: q.traceId,
    actor: q.actor,
    actorType: q.actorType,
    action: q.action,
    from: epochMs('from', q.from),
    to: epochMs('to', q.to),
    handover: q.handover,
    actorPrefix: q.actorPrefix,
    actionPrefix: q.actionPrefix,
    traceIdPrefix: q.traceIdPrefix,
    actorContains: q.actorContains,
    actionContains: q.actionContains,
    status: q.status?.split(','),
    source: q.source?.split(','),
    meta: metaPairs(q.meta),
  };
  const scope = scopeOf(request);
  for (const k of ['traceId', 'actor'] as const) {
    const forced = scope[k];
    if (forced === undefined) continue;
    if (filter[k] !== undefined && filter[k] !== forced) return null;
    filter[k] = forced;
  }
  return filter;
}

function metaPairs(meta: string | string[] | undefined): Array<[string, string]> | undefined {
  if (meta === undefined) return undefined;
  return (Array.isArray(meta) ? meta : [meta]).map((m) => {
    const eq = m.indexOf('=');
    if (eq <= 0) throw new ApiError('invalid_request', `meta must be key=value, got "${m.slice(0, 64)}"`);
    return [m.slice(0, eq), m.slice(eq + 1)];
  });
}

function epochMs(name: string, iso: string | undefined): number | undefined {
  if (iso === undefined) return undefined;
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new ApiError('invalid_request', `${name} must be an ISO 8601 date-time`);
  return ms;
}
