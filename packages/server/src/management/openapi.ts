/**
 * The OpenAPI document, generated from the route schemas: `/openapi.json` and a docs page at
 * `/docs`. Registered before the routes so it sees them all.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';

async function openapiPlugin(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Countersign API',
        version: '1.0.0',
        description: 'Certifying proxy and audit log. Errors are {success:false,error:{code,message,requestId}}; see docs/errors.md.',
      },
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'key_human_|key_agent_|key_service_|key_live_|key_master_ keys, or an embed token',
          },
        },
      },
      security: [{ bearer: [] }],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}

export default fp(openapiPlugin, { name: 'openapi' });
