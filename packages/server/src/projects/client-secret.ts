/**
 * `POST /v1/projects/{projectId}/client-secret/rotate` (master key; DESIGN §4 "Project settings
 * and secrets"): replaces the secret that signs a project's embed tokens, which is also how a
 * leaked secret is revoked. The new secret is in this answer and nowhere else. Tokens signed
 * with the old secret stop at once, or at the end of `graceSeconds` so browsers holding a token
 * are not cut off while the app servers switch to the new secret.
 */
import type { FastifyInstance } from 'fastify';
import { requireMaster } from '../auth/guards.js';
import { ApiError } from '../errors.js';
import { errorResponses, projectIdParam } from '../management/schemas.js';
import { newClientSecret } from './issue.js';

/** The longest client secret grace period: 30 days, as for a key rotation. */
export const MAX_CLIENT_SECRET_GRACE_SECONDS = 30 * 24 * 3600;

/** Adds the client secret rotation route to the projects plugin (which takes JSON only). */
export function registerClientSecretRoutes(app: FastifyInstance): void {
  const { store, now } = app.ctx;
  app.post<{ Params: { projectId: string }; Body: { graceSeconds?: number } | undefined | null }>(
    '/v1/projects/:projectId/client-secret/rotate',
    {
      onRequest: async (request) => {
        await requireMaster(request);
      },
      schema: {
        tags: ['projects'],
        summary: "Replace a project's client secret (embed tokens); the old one stops at once or after graceSeconds (master key)",
        description:
          'The new secret is shown once, in this answer. Embed tokens signed with the old secret are refused from the next ' +
          'request on, on every instance, or after graceSeconds (default 0, at most 30 days), so servers still signing ' +
          'with the old secret can switch over. Only one previous secret is kept: rotating again ends an earlier grace period at once.',
        params: { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] },
        body: {
          type: ['object', 'null'],
          additionalProperties: false,
          properties: {
            graceSeconds: {
              type: 'integer',
              minimum: 0,
              maximum: MAX_CLIENT_SECRET_GRACE_SECONDS,
              description: 'Seconds tokens signed with the old secret keep working',
            },
          },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              projectId: { type: 'string' },
              clientSecret: { type: 'string', description: 'The new client secret: shown once, store it now' },
              oldSecretRevokedAt: {
                type: 'string',
                description: 'When the old secret stops verifying tokens (now, or the end of the grace)',
              },
            },
          },
          ...errorResponses(400, 401, 403, 404, 413, 415),
        },
      },
    },
    async (request) => {
      const { projectId } = request.params;
      const at = now();
      const grace = request.body?.graceSeconds ?? 0;
      const clientSecret = newClientSecret();
      if (!(await store.projects.rotateClientSecret(projectId, clientSecret, grace > 0 ? at + grace * 1000 : null)))
        throw new ApiError('not_found', `no project ${projectId}`);
      const revokeAt = at + grace * 1000;
      request.log.info({ projectId, revokeAt }, 'client secret rotated');
      return { success: true, projectId, clientSecret, oldSecretRevokedAt: new Date(revokeAt).toISOString() };
    },
  );
}
