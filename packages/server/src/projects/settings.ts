/**
 * `PATCH /v1/projects/{projectId}` (master key; DESIGN §4 "Project settings"): each body field
 * is one setting, applied independently of the others. A setting is one entry of
 * {@link PROJECT_SETTINGS} (its schema, how it is stored, how it is read back), so adding one
 * (e.g. `embedOrigins`) is adding an entry: the route, its schema and its answer follow.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireMaster } from '../auth/guards.js';
import { ApiError } from '../errors.js';
import { acceptJsonOnly, errorResponses, projectIdParam } from '../management/schemas.js';
import type { AppContext } from '../app-context.js';

/** One setting of a project. */
export interface ProjectSetting {
  /** JSON schema of the field's value (also its OpenAPI description). */
  schema: Record<string, unknown>;
  /** Stores a new value (already validated by the schema). */
  apply(ctx: AppContext, projectId: string, value: unknown): Promise<void>;
  /** The stored value, as the answer shows it. */
  read(ctx: AppContext, projectId: string): Promise<unknown>;
}

/** Longest retention accepted: 100 years. */
const MAX_RETENTION_DAYS = 36_500;

/** Every settable field, by its body name. */
export const PROJECT_SETTINGS: Record<string, ProjectSetting> = {
  retentionDays: {
    schema: {
      type: ['integer', 'null'],
      minimum: 1,
      maximum: MAX_RETENTION_DAYS,
      description:
        'Days logs and events are kept; older ones are purged in bounded batches (docs/operations.md "Retention and deletion"). null = forever.',
    },
    apply: async (ctx, projectId, value) => {
      await ctx.store.retention.setRetentionDays(projectId, value as number | null);
    },
    read: async (ctx, projectId) => (await ctx.store.retention.retentionDays(projectId)) ?? null,
  },
  embedOrigins: {
    schema: {
      type: ['array', 'null'],
      maxItems: 32,
      uniqueItems: true,
      items: { type: 'string', maxLength: 256, pattern: '^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$' },
      description:
        "Origins (scheme://host[:port]) allowed to frame /embed and to call the API with this project's embed tokens (CORS); null or [] = none.",
    },
    apply: async (ctx, projectId, value) => {
      await ctx.store.projects.setEmbedOrigins(projectId, (value as string[] | null)?.map((o) => o.toLowerCase()) ?? null);
    },
    read: async (ctx, projectId) => ctx.store.projects.embedOrigins(projectId),
  },
};

const masterOnly = async (request: FastifyRequest) => {
  await requireMaster(request);
};

/** Project settings plugin. */
export default async function projectSettingsPlugin(app: FastifyInstance): Promise<void> {
  const { ctx } = app;
  acceptJsonOnly(app);
  const names = Object.keys(PROJECT_SETTINGS);
  const fields = Object.fromEntries(names.map((n) => [n, PROJECT_SETTINGS[n]!.schema]));

  app.patch<{ Params: { projectId: string }; Body: Record<string, unknown> }>(
    '/v1/projects/:projectId',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['projects'],
        summary: "Change a project's settings; fields left out keep their value (master key)",
        params: { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] },
        body: { type: 'object', additionalProperties: false, minProperties: 1, properties: fields },
        response: {
          200: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              project: {
                type: 'object',
                properties: { id: { type: 'string' }, name: { type: 'string' }, createdAt: { type: 'string' }, ...fields },
              },
            },
          },
          ...errorResponses(400, 401, 403, 404, 413, 415),
        },
      },
    },
    async (request) => {
      const { projectId } = request.params;
      const project = await ctx.store.projects.get(projectId);
      if (!project) throw new ApiError('not_found', `no project ${projectId}`);
      for (const name of names) {
        if (Object.hasOwn(request.body, name)) await PROJECT_SETTINGS[name]!.apply(ctx, projectId, request.body[name]);
      }
      const settings = Object.fromEntries(await Promise.all(names.map(async (n) => [n, await PROJECT_SETTINGS[n]!.read(ctx, projectId)])));
      request.log.info({ projectId, changed: Object.keys(request.body) }, 'project settings changed');
      return {
        success: true,
        project: { id: project.id, name: project.name, createdAt: new Date(project.createdAt).toISOString(), ...settings },
      };
    },
  );
}
