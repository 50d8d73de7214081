/**
 * CORS for embed tokens (DESIGN §4 "Embedding"): a host application whose origin is in a
 * project's `embedOrigins` may call the project's read API from the browser with one of the
 * project's embed tokens. Only embed-token requests get CORS headers (keys never do: a key in a
 * browser of another origin is a leak, not a use case), and only for a listed origin; the
 * preflight of `/v1/projects/{projectId}/…` is answered for a listed origin of that project.
 */
import type { FastifyInstance } from 'fastify';

const ALLOWED_HEADERS = 'authorization, content-type, last-event-id';
const EXPOSED_HEADERS = 'x-service-log-id, content-disposition';

/** Installs the preflight route and the header hook (app.ts, with the management role). */
export function installEmbedCors(app: FastifyInstance): void {
  const projects = app.ctx.store.projects;
  // preHandler runs after the route's guard (the principal is known) and before a stream is
  // hijacked, so headers set on the raw response reach streamed answers too.
  // Callback style, not async: every request passes here and nearly none is an embed token's,
  // so the common case costs no promise.
  app.addHook('preHandler', (request, reply, done) => {
    const origin = request.headers.origin;
    const p = request.principal;
    if (typeof origin !== 'string' || p?.kind !== 'embed') return done();
    projects.embedOrigins(p.projectId).then((origins) => {
      if (origins.includes(origin.toLowerCase())) {
        reply.raw.setHeader('access-control-allow-origin', origin);
        reply.raw.setHeader('access-control-expose-headers', EXPOSED_HEADERS);
        reply.raw.setHeader('vary', 'Origin');
      }
      done();
    }, done);
  });
  app.options<{ Params: { projectId: string } }>('/v1/projects/:projectId/*', { schema: { hide: true } }, async (request, reply) => {
    const origin = request.headers.origin;
    reply.header('vary', 'Origin');
    if (typeof origin === 'string' && (await projects.embedOrigins(request.params.projectId)).includes(origin.toLowerCase())) {
      reply
        .header('access-control-allow-origin', origin)
        .header('access-control-allow-methods', 'GET, HEAD')
        .header('access-control-allow-headers', ALLOWED_HEADERS)
        .header('access-control-max-age', '600');
    }
    return reply.code(204).send();
  });
}
