/**
 * `GET /metrics` (Prometheus text format) and the request metrics of every route.
 *
 * Who may scrape (DESIGN §4 "Metrics"):
 * - `COUNTERSIGN_METRICS_TOKEN` unset: clients on a loopback address only; any other client gets
 *   403 `metrics_forbidden` (saying which setting opens it). Chosen over 404 so an operator who
 *   points Prometheus at a remote instance learns why at once; the path itself is no secret.
 * - token set: every client must send `Authorization: Bearer <token>`, loopback included, so an
 *   instance behind a load balancer on the same host (whose requests all come from loopback)
 *   is closed by setting the token. Missing → 401 `missing_api_key`, wrong → 401 `invalid_api_key`.
 * The client address is the socket's (Fastify's `trustProxy` is off): X-Forwarded-For opens nothing.
 *
 * Request metrics are recorded in an `onResponse` hook with the route pattern from the route
 * config (never the raw URL, so ids in paths cannot explode the series) and a cached status text.
 * Gauges that count rows are refreshed from this app's store at most every
 * {@link GAUGE_CACHE_MS} on a scrape, never on a request.
 */
import { timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';
import { errorResponses } from '../management/schemas.js';
import { readStoreGauges } from '../store/gauges.js';
import { enableDefaultMetrics, metrics, registry, statusLabel } from './registry.js';

/** How long the row counts of one scrape are reused. */
export const GAUGE_CACHE_MS = 5_000;

/** True for 127.0.0.0/8, ::1 and their IPv4-mapped forms. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  if (net.isIPv4(a)) return a.startsWith('127.');
  return a === '::1';
}

function tokenMatches(sent: string, expected: string): boolean {
  const a = Buffer.from(sent);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Throws the refusal for a scrape that may not read the metrics. */
function checkScraper(request: FastifyRequest, token: string | undefined): void {
  if (token === undefined) {
    if (isLoopback(request.socket.remoteAddress)) return;
    throw new ApiError(
      'metrics_forbidden',
      'metrics are open to loopback clients only; set COUNTERSIGN_METRICS_TOKEN and scrape with that bearer token',
    );
  }
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(request.headers.authorization ?? '');
  if (!m) throw new ApiError('missing_api_key', 'send Authorization: Bearer <COUNTERSIGN_METRICS_TOKEN>');
  if (!tokenMatches(m[1]!, token)) throw new ApiError('invalid_api_key', 'wrong metrics token');
}

async function metricsPlugin(app: FastifyInstance): Promise<void> {
  const { ctx } = app;
  enableDefaultMetrics();

  // Callback style, not async: it runs for every request, and an async hook costs a promise each.
  // The request count is the duration histogram's own count (registry.ts).
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.httpDuration.labels(request.method, route, statusLabel(reply.statusCode)).observe(reply.elapsedTime / 1000);
    done();
  });

  let refreshedAt = -Infinity;
  let refreshing: Promise<void> | undefined;
  const refreshGauges = async (): Promise<void> => {
    const now = ctx.now();
    // Process-local values cost nothing: always current.
    metrics.owedOutcomes.set(app.hasDecorator('proxy') ? app.proxy.owed.size : 0);
    if (now - refreshedAt < GAUGE_CACHE_MS) return;
    refreshing ??= (async () => {
      try {
        const g = await readStoreGauges(ctx.store.db, ctx.store.dialect);
        metrics.pendingRecords.set(g.pendingRecords);
        metrics.proofBatchesUnsealed.set(g.unsealedBatches);
        metrics.proofLag.set(g.oldestUnsealedWindowEnd === null ? 0 : Math.max(0, (now - g.oldestUnsealedWindowEnd) / 1000));
        metrics.webhookBacklog.set(g.webhookBacklog);
        refreshedAt = now;
      } catch (err) {
        // A store outage must not take the metrics down with it; the gauges keep their last values.
        ctx.log.warn({ err }, 'metrics: could not count pending records and unsealed batches');
      } finally {
        refreshing = undefined;
      }
    })();
    await refreshing;
  };

  app.get(
    '/metrics',
    {
      schema: {
        tags: ['management'],
        summary: 'Prometheus metrics (text format 0.0.4)',
        description:
          'Open to loopback clients when COUNTERSIGN_METRICS_TOKEN is unset (others get 403 metrics_forbidden); ' +
          'with the token set, every client must send it as a bearer token. See docs/operations.md "Metrics".',
        security: [],
        produces: ['text/plain'],
        response: {
          200: { type: 'string', description: 'Prometheus text exposition format' },
          ...errorResponses(401, 403),
        },
      },
    },
    async (request, reply) => {
      checkScraper(request, ctx.config.metricsToken);
      await refreshGauges();
      const text = await registry.metrics();
      return reply.header('content-type', registry.contentType).header('cache-control', 'no-store').send(text);
    },
  );
}

export default fp(metricsPlugin, { name: 'countersign-metrics' });
