/**
 * `GET /healthz`: 200 once the server is ready and its store answers, 503 otherwise, so a
 * load balancer stops sending traffic to an instance whose database is gone.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';

/** Health endpoint plugin. */
export default async function healthPlugin(app: FastifyInstance): Promise<void> {
  app.get('/healthz', { schema: { hide: true } }, async () => {
    if (!(await app.ctx.store.ping())) throw new ApiError('log_store_unavailable', 'the store does not answer');
    return { success: true, status: 'ok', dialect: app.ctx.store.dialect, roles: [...app.ctx.config.roles] };
  });
}
