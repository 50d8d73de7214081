/**
 * JSON-schema pieces shared by route schemas, so the OpenAPI document names things the same
 * way everywhere. Plain objects (no builder), as Fastify and @fastify/swagger take them.
 */
import type { FastifyInstance } from 'fastify';
import { LOG_ID_PATTERN } from '@countersign/core';

/** The error body of every failure (DESIGN "Errors"). */
export const errorBody = {
  type: 'object',
  description: 'Every error: a catalogue code (docs/errors.md), a message for people, and the request id for the server log.',
  properties: {
    success: { type: 'boolean', const: false },
    error: {
      type: 'object',
      properties: { code: { type: 'string' }, message: { type: 'string' }, requestId: { type: 'string' } },
      required: ['code', 'message', 'requestId'],
    },
  },
  required: ['success', 'error'],
} as const;

/** Error responses keyed by status, for a route's `response` schema. */
export function errorResponses(...statuses: number[]): Record<number, typeof errorBody> {
  return Object.fromEntries(statuses.map((s) => [s, errorBody]));
}

/** A project id in a path. */
export const projectIdParam = {
  type: 'string',
  pattern: '^prj_live_[0-9A-Za-z]{1,64}$',
  description: 'Project id, prj_live_<id>',
} as const;

/** A key id in a path. */
export const keyIdParam = { type: 'string', pattern: '^kid_[0-9A-Za-z]{1,64}$', description: 'Key id, kid_<id>' } as const;

/** Log ids: server-made `log_<24 base62>` or a client's own id (16-512 safe characters, MAX_ID_LENGTH). */
export { LOG_ID_PATTERN };

/** A log id in a path or body. */
export const logIdSchema = {
  type: 'string',
  pattern: LOG_ID_PATTERN,
  description: '16-512 characters of A-Z a-z 0-9 _ . : - starting with a letter or digit (a UUID fits)',
} as const;

/** Credential classes a project key may have. */
export const projectKeyClass = {
  type: 'string',
  enum: ['human', 'agent', 'service', 'live'],
  description: 'human|agent|service keys ingest and stamp actorType; live keys read',
} as const;

/**
 * Makes a plugin's routes take JSON only: Fastify also parses text/plain by default, which
 * would turn a wrong Content-Type into a confusing schema error instead of 415.
 */
export function acceptJsonOnly(app: FastifyInstance): void {
  if (app.hasContentTypeParser('text/plain')) app.removeContentTypeParser('text/plain');
}
