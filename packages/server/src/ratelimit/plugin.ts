/**
 * Per-key rate limiting (`COUNTERSIGN_RATE_LIMIT` requests per second per key, bursts of twice
 * that; 0 turns it off, the default). It runs after the route's guard has said who is calling,
 * so the budget belongs to the key (or the embed token's project), never to an IP. A refused
 * request gets 429 `rate_limited` with `Retry-After`, before anything is written or forwarded:
 * explicit backpressure that the client library honours, not a dropped record.
 * The buckets live in each process: with several instances, each enforces its own share.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import { TokenBuckets } from './token-bucket.js';
import { metrics } from '../metrics/registry.js';

async function rateLimitPlugin(app: FastifyInstance): Promise<void> {
  const rate = app.ctx.config.rateLimit;
  if (rate <= 0) return;
  const buckets = new TokenBuckets(rate, rate * 2);
  app.addHook('preHandler', async (request) => {
    const p = request.principal;
    if (!p || p.kind === 'master') return;
    const id = p.kind === 'key' ? p.keyId : `embed:${p.projectId}`;
    const verdict = buckets.take(id, app.ctx.now());
    if (!verdict.allowed) {
      metrics.rateLimited.inc({ route: request.routeOptions.url ?? 'unmatched' });
      throw new ApiError('rate_limited', `this key is over ${rate} requests per second; retry after ${verdict.retryAfterSeconds} s`, {
        headers: { 'retry-after': String(verdict.retryAfterSeconds) },
      });
    }
  });
}

export default fp(rateLimitPlugin, { name: 'rate-limit' });
