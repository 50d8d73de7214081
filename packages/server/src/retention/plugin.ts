/**
 * Retention and deletion (role `management`): the periodic purge of expired entries
 * (`COUNTERSIGN_RETENTION_SWEEP_MS`, default 10 min; one instance at a time) and
 * `DELETE /v1/projects/{projectId}` (master key). Retention itself is set with
 * `PATCH /v1/projects/{projectId}` `{"retentionDays": N | null}` (projects/settings.ts).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireMaster } from '../auth/guards.js';
import { ApiError } from '../errors.js';
import { errorResponses, projectIdParam } from '../management/schemas.js';
import { deleteProject, purgeExpired } from './purge.js';

const masterOnly = async (request: FastifyRequest) => {
  await requireMaster(request);
};

const count = { type: 'integer' } as const;

/** Retention plugin. */
export default async function retentionPlugin(app: FastifyInstance): Promise<void> {
  const { ctx } = app;

  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  const sweep = () => {
    running = purgeExpired(ctx)
      .catch((err: unknown) => ctx.log.warn({ err }, 'retention purge failed; retrying at the next sweep'))
      .finally(() => (running = undefined));
  };
  app.addHook('onReady', async () => {
    timer = setInterval(() => running ?? sweep(), ctx.config.retentionSweepMs);
    timer.unref();
  });
  ctx.onClose.push(async () => {
    clearInterval(timer);
    await running;
  });

  app.delete<{ Params: { projectId: string } }>(
    '/v1/projects/:projectId',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['projects'],
        summary:
          'Delete a project and all its data: keys (they stop working at once, on every instance), logs, receipts, events, webhooks (master key)',
        description:
          'Proof batches and ledger entries stay (they hold only Merkle roots), so receipts of other projects in the same batches still verify. ' +
          'Deletion runs in bounded batches; a project with millions of logs takes a while to answer.',
        params: { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] },
        response: {
          200: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              deleted: {
                type: 'object',
                properties: { logs: count, receipts: count, events: count, keys: count, webhooks: count, deliveries: count },
              },
            },
          },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const { projectId } = request.params;
      if (!(await ctx.store.projects.get(projectId))) throw new ApiError('not_found', `no project ${projectId}`);
      const deleted = await deleteProject(ctx, projectId);
      request.log.warn({ projectId, deleted }, 'project deleted');
      return { success: true, deleted };
    },
  );
}
