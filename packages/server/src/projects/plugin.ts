/**
 * Projects and keys (spec 4.3 / 2.4, DESIGN "Paths"), all with the master key:
 * `POST /v1/projects`, `POST|GET /v1/projects/{projectId}/keys`,
 * `POST /v1/projects/{projectId}/keys/{keyId}/rotate`, `DELETE /v1/projects/{projectId}/keys/{keyId}`,
 * `POST /v1/projects/{projectId}/client-secret/rotate` (client-secret.ts).
 * Key text and the client secret appear only in the answer of the call that made them.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireMaster } from '../auth/guards.js';
import { ApiError } from '../errors.js';
import { acceptJsonOnly, errorResponses, keyIdParam, projectIdParam, projectKeyClass } from '../management/schemas.js';
import { issueKey, newProject, toKeyView, type ProjectKeyClass } from './issue.js';
import { registerClientSecretRoutes } from './client-secret.js';

const label = { type: 'string', maxLength: 200, description: 'Free-text label for the key' } as const;
/** A rotation grace period: the old key keeps working this long (30 days at most). */
const GRACE_SECONDS = { type: 'integer', minimum: 0, maximum: 30 * 24 * 3600, description: 'Seconds the old key keeps working' } as const;

const keyView = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    projectId: { type: 'string' },
    credentialClass: { type: 'string' },
    apiKeyPrefix: { type: 'string' },
    label: { type: ['string', 'null'] },
    status: {
      type: 'string',
      enum: ['active', 'expiring', 'revoked'],
      description: 'expiring: rotated with a grace period, still accepted until revokedAt',
    },
    createdAt: { type: 'string' },
    revokedAt: { type: ['string', 'null'], description: 'When the key stops (or stopped) working' },
    rotatedFrom: { type: ['string', 'null'] },
  },
} as const;

const issuedKey = {
  type: 'object',
  properties: { ...keyView.properties, apiKey: { type: 'string', description: 'The key text: shown once, store it now' } },
} as const;

const masterOnly = async (request: FastifyRequest) => {
  await requireMaster(request);
};

/** Projects and keys plugin. */
export default async function projectsPlugin(app: FastifyInstance): Promise<void> {
  const { store, keys, now } = app.ctx;
  acceptJsonOnly(app);

  registerClientSecretRoutes(app);

  const projectOr404 = async (projectId: string) => {
    const project = await store.projects.get(projectId);
    if (!project) throw new ApiError('not_found', `no project ${projectId}`);
    return project;
  };

  app.post<{ Body: { name: string; credentialClass: ProjectKeyClass; credentialLabel?: string } }>(
    '/v1/projects',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['projects'],
        summary: 'Create a project and its first key (master key)',
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['name', 'credentialClass'],
          properties: { name: { type: 'string', minLength: 1, maxLength: 200 }, credentialClass: projectKeyClass, credentialLabel: label },
        },
        response: {
          201: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              project: {
                type: 'object',
                properties: {
                  id: { type: 'string', description: 'prj_live_<id>' },
                  name: { type: 'string' },
                  apiKey: { type: 'string', description: 'Raw key with the class prefix; shown once' },
                  apiKeyPrefix: { type: 'string' },
                  credentialClass: { type: 'string' },
                  keyId: { type: 'string' },
                  clientSecret: { type: 'string', description: 'Signs HS256 embed tokens; shown once' },
                  createdAt: { type: 'string' },
                },
              },
            },
          },
          ...errorResponses(400, 401, 403, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const at = now();
      const project = newProject(request.body.name, at);
      const key = issueKey(project.id, request.body.credentialClass, request.body.credentialLabel ?? null, at);
      await store.projects.createWithKey(project, key.row);
      request.log.info({ projectId: project.id, keyId: key.row.id }, 'project created');
      return reply.code(201).send({
        success: true,
        project: {
          id: project.id,
          name: project.name,
          apiKey: key.apiKey,
          apiKeyPrefix: key.row.apiKeyPrefix,
          credentialClass: key.row.credentialClass,
          keyId: key.row.id,
          clientSecret: project.clientSecret,
          createdAt: new Date(at).toISOString(),
        },
      });
    },
  );

  app.post<{ Params: { projectId: string }; Body: { credentialClass: ProjectKeyClass; credentialLabel?: string } }>(
    '/v1/projects/:projectId/keys',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['keys'],
        summary: 'Add a key to a project (master key)',
        params: { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] },
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['credentialClass'],
          properties: { credentialClass: projectKeyClass, credentialLabel: label },
        },
        response: {
          201: { type: 'object', properties: { success: { type: 'boolean' }, key: issuedKey } },
          ...errorResponses(400, 401, 403, 404, 413, 415),
        },
      },
    },
    async (request, reply) => {
      await projectOr404(request.params.projectId);
      const key = issueKey(request.params.projectId, request.body.credentialClass, request.body.credentialLabel ?? null, now());
      await store.projects.addKey(key.row);
      return reply.code(201).send({ success: true, key: { ...toKeyView(key.row), apiKey: key.apiKey } });
    },
  );

  app.get<{ Params: { projectId: string } }>(
    '/v1/projects/:projectId/keys',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['keys'],
        summary: "List a project's keys without secrets (master key)",
        params: { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] },
        response: {
          200: { type: 'object', properties: { success: { type: 'boolean' }, keys: { type: 'array', items: keyView } } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      await projectOr404(request.params.projectId);
      const rows = await store.projects.listKeys(request.params.projectId);
      const at = now();
      return { success: true, keys: rows.map((r) => toKeyView(r, at)) };
    },
  );

  app.post<{
    Params: { projectId: string; keyId: string };
    Body: { credentialClass?: ProjectKeyClass; credentialLabel?: string; graceSeconds?: number } | undefined;
  }>(
    '/v1/projects/:projectId/keys/:keyId/rotate',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['keys'],
        summary: 'Replace a key with a new one; the old key stops working at once or after graceSeconds (master key)',
        description:
          'credentialClass defaults to the old key class; it may change (spec 4.3: rotation takes credentialClass). ' +
          'graceSeconds (default 0, at most 30 days) keeps the old key working that long, on every instance, so clients ' +
          'holding it switch over without a 401; DELETE on the old key ends the grace period at once.',
        params: { type: 'object', properties: { projectId: projectIdParam, keyId: keyIdParam }, required: ['projectId', 'keyId'] },
        body: {
          type: ['object', 'null'],
          additionalProperties: false,
          properties: { credentialClass: projectKeyClass, credentialLabel: label, graceSeconds: GRACE_SECONDS },
        },
        response: {
          201: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              key: issuedKey,
              revokedKeyId: { type: 'string' },
              oldKeyRevokedAt: { type: 'string', description: 'When the old key stops working (now, or the end of the grace period)' },
            },
          },
          ...errorResponses(400, 401, 403, 404, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { projectId, keyId } = request.params;
      const old = await store.projects.key(projectId, keyId);
      if (!old) throw new ApiError('not_found', `no key ${keyId} in project ${projectId}`);
      if (old.revokedAt !== null) throw new ApiError('not_found', `key ${keyId} is already revoked; create a new key instead`);
      const at = now();
      const credentialClass = request.body?.credentialClass ?? (old.credentialClass as ProjectKeyClass);
      const label = request.body?.credentialLabel ?? old.label;
      const replacement = issueKey(projectId, credentialClass, label, at, old.id);
      const revokeAt = at + (request.body?.graceSeconds ?? 0) * 1000;
      if (!(await store.projects.rotateKey(projectId, keyId, replacement.row, at, revokeAt)))
        throw new ApiError('not_found', `key ${keyId} was revoked meanwhile; create a new key instead`);
      await keys.invalidateEverywhere(old.keyHash);
      request.log.info({ projectId, keyId, newKeyId: replacement.row.id, revokeAt }, 'key rotated');
      return reply.code(201).send({
        success: true,
        key: { ...toKeyView(replacement.row, at), apiKey: replacement.apiKey },
        revokedKeyId: keyId,
        oldKeyRevokedAt: new Date(revokeAt).toISOString(),
      });
    },
  );

  app.delete<{ Params: { projectId: string; keyId: string } }>(
    '/v1/projects/:projectId/keys/:keyId',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['keys'],
        summary: 'Revoke a key; it stops working at once on every path and instance (master key)',
        description: 'Revoking an already revoked key answers 200 with its state (idempotent).',
        params: { type: 'object', properties: { projectId: projectIdParam, keyId: keyIdParam }, required: ['projectId', 'keyId'] },
        response: {
          200: { type: 'object', properties: { success: { type: 'boolean' }, key: keyView } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const { projectId, keyId } = request.params;
      await store.projects.revokeKey(projectId, keyId, now());
      const row = await store.projects.key(projectId, keyId);
      if (!row) throw new ApiError('not_found', `no key ${keyId} in project ${projectId}`);
      await keys.invalidateEverywhere(row.keyHash);
      request.log.info({ projectId, keyId }, 'key revoked');
      return { success: true, key: toKeyView(row, now()) };
    },
  );
}
