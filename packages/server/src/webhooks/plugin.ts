/**
 * Per-project webhooks (DESIGN §4 "Webhooks"), all with the master key:
 * `POST|GET /v1/projects/{projectId}/webhooks`, `DELETE …/webhooks/{webhookId}`,
 * `GET …/webhooks/{webhookId}/deliveries`, `POST …/deliveries/{deliveryId}/redeliver`.
 * The secret appears only in the answer of the call that made it. The dispatcher (delivery
 * loop) runs on every instance with the `management` or `ingest` role; each attempt runs on
 * exactly one of them (dispatcher.ts).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { randomId } from '@countersign/core';
import { requireMaster } from '../auth/guards.js';
import { ApiError } from '../errors.js';
import { acceptJsonOnly, errorResponses, projectIdParam } from '../management/schemas.js';
import { parseTarget, TargetBlockedError, TargetInvalidError, TargetUnresolvableError } from '../proxy/ssrf.js';
import type { AttemptRow, DeliveryRow, WebhookRow } from '../store/index.js';
import { EVENT_TYPES } from '../events/security.js';
import { WebhookDispatcher } from './dispatcher.js';
import { newWebhookSecret } from './signing.js';

/** Most webhooks one project may have. */
export const MAX_WEBHOOKS = 20;

const webhookIdParam = { type: 'string', pattern: '^whk_[0-9A-Za-z]{1,64}$', description: 'Webhook id, whk_<id>' } as const;
const deliveryIdParam = {
  type: 'string',
  pattern: '^msg_[0-9A-Za-z]{1,64}$',
  description: 'Delivery id (the webhook-id header), msg_<id>',
} as const;

const webhookView = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    projectId: { type: 'string' },
    url: { type: 'string' },
    events: { type: 'array', items: { type: 'string' }, description: 'Event types delivered; "*" = all' },
    createdAt: { type: 'string', format: 'date-time' },
  },
} as const;

const deliveryView = {
  type: 'object',
  properties: {
    id: { type: 'string', description: 'The webhook-id header of every attempt' },
    webhookId: { type: 'string' },
    eventId: { type: 'string' },
    eventType: { type: 'string' },
    state: { type: 'string', enum: ['pending', 'delivered', 'failed'], description: 'failed: retrying gave up after a day' },
    attemptCount: { type: 'integer', description: 'Attempts in the current schedule (a redelivery starts a new one)' },
    nextAttemptAt: { type: ['string', 'null'], format: 'date-time' },
    lastStatus: { type: ['integer', 'null'], description: 'HTTP status of the last answer; null when none came' },
    lastError: { type: ['string', 'null'] },
    deliveredAt: { type: ['string', 'null'], format: 'date-time' },
    createdAt: { type: 'string', format: 'date-time' },
    attempts: {
      type: 'array',
      description: 'The delivery log, newest first',
      items: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          attemptedAt: { type: 'string', format: 'date-time' },
          statusCode: { type: ['integer', 'null'] },
          error: { type: ['string', 'null'] },
          durationMs: { type: 'number' },
        },
      },
    },
  },
} as const;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function toWebhookView(w: WebhookRow) {
  return { id: w.id, projectId: w.projectId, url: w.url, events: w.events, createdAt: new Date(w.createdAt).toISOString() };
}

function toDeliveryView(d: DeliveryRow, attempts: AttemptRow[] = []) {
  return {
    id: d.id,
    webhookId: d.webhookId,
    eventId: d.eventId,
    eventType: d.eventType,
    state: d.state,
    attemptCount: d.retryCount,
    nextAttemptAt: d.state === 'pending' ? iso(d.nextAttemptAt) : null,
    lastStatus: d.lastStatus,
    lastError: d.lastError,
    deliveredAt: iso(d.deliveredAt),
    createdAt: new Date(d.createdAt).toISOString(),
    attempts: attempts.map((a) => ({
      id: a.id,
      attemptedAt: new Date(a.attemptedAt).toISOString(),
      statusCode: a.statusCode,
      error: a.error,
      durationMs: a.durationMs,
    })),
  };
}

const masterOnly = async (request: FastifyRequest) => {
  await requireMaster(request);
};

/** Webhooks plugin: routes with the `management` role, the dispatcher with `management` or `ingest`. */
export default async function webhooksPlugin(app: FastifyInstance): Promise<void> {
  const { ctx } = app;
  const { store, now } = ctx;
  const dispatcher = new WebhookDispatcher({
    store,
    allowTargets: ctx.config.allowTargets,
    timeoutMs: ctx.config.webhooks.timeoutMs,
    retryBaseMs: ctx.config.webhooks.retryBaseMs,
    now,
    log: ctx.log,
  });
  if (ctx.config.roles.has('management') || ctx.config.roles.has('ingest')) {
    app.addHook('onReady', async () => dispatcher.start());
    ctx.onClose.push(() => dispatcher.stop());
  }
  if (!ctx.config.roles.has('management')) return;
  acceptJsonOnly(app);

  const projectOr404 = async (projectId: string) => {
    if (!(await store.projects.get(projectId))) throw new ApiError('not_found', `no project ${projectId}`);
  };
  const webhookOr404 = async (projectId: string, webhookId: string) => {
    const w = await store.webhooks.get(projectId, webhookId);
    if (!w) throw new ApiError('not_found', `no webhook ${webhookId} in project ${projectId}`);
    return w;
  };
  const projectParams = { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] } as const;
  const webhookParams = {
    type: 'object',
    properties: { projectId: projectIdParam, webhookId: webhookIdParam },
    required: ['projectId', 'webhookId'],
  } as const;

  app.post<{ Params: { projectId: string }; Body: { url: string; events?: string[] } }>(
    '/v1/projects/:projectId/webhooks',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['webhooks'],
        summary: 'Add a webhook: events are POSTed to the URL, signed per Standard Webhooks (master key)',
        description:
          'events: the types to deliver (security.policy_violation, retention.purged) or "*" (the default) for all. ' +
          'The URL passes the same SSRF guard as proxied calls (COUNTERSIGN_ALLOW_TARGETS admits private hosts). ' +
          'The secret (whsec_…) is shown once: verify each delivery with it (webhook-signature).',
        params: projectParams,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['url'],
          properties: {
            url: { type: 'string', minLength: 1, maxLength: 2048, description: 'http(s) URL that receives the POSTs' },
            events: {
              type: 'array',
              minItems: 1,
              maxItems: EVENT_TYPES.length + 1,
              uniqueItems: true,
              items: { type: 'string', enum: ['*', ...EVENT_TYPES] },
            },
          },
        },
        response: {
          201: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              webhook: {
                type: 'object',
                properties: { ...webhookView.properties, secret: { type: 'string', description: 'whsec_… signing secret: shown once' } },
              },
            },
          },
          ...errorResponses(400, 401, 403, 404, 409, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { projectId } = request.params;
      await projectOr404(projectId);
      const url = await checkUrl(dispatcher, request.body.url);
      if ((await store.webhooks.list(projectId)).length >= MAX_WEBHOOKS)
        throw new ApiError('too_many_webhooks', `project ${projectId} already has ${MAX_WEBHOOKS} webhooks; delete one first`);
      const events = request.body.events?.includes('*') || !request.body.events ? ['*'] : request.body.events;
      const webhook: WebhookRow = { id: 'whk_' + randomId(20), projectId, url, events, secret: newWebhookSecret(), createdAt: now() };
      await store.webhooks.create(webhook);
      request.log.info({ projectId, webhookId: webhook.id }, 'webhook created');
      return reply.code(201).send({ success: true, webhook: { ...toWebhookView(webhook), secret: webhook.secret } });
    },
  );

  app.get<{ Params: { projectId: string } }>(
    '/v1/projects/:projectId/webhooks',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['webhooks'],
        summary: "A project's webhooks, without secrets (master key)",
        params: projectParams,
        response: {
          200: { type: 'object', properties: { success: { type: 'boolean' }, webhooks: { type: 'array', items: webhookView } } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      await projectOr404(request.params.projectId);
      return { success: true, webhooks: (await store.webhooks.list(request.params.projectId)).map(toWebhookView) };
    },
  );

  app.delete<{ Params: { projectId: string; webhookId: string } }>(
    '/v1/projects/:projectId/webhooks/:webhookId',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['webhooks'],
        summary: 'Remove a webhook with its deliveries and delivery log; nothing more is sent to it (master key)',
        params: webhookParams,
        response: {
          200: { type: 'object', properties: { success: { type: 'boolean' }, webhook: webhookView } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const { projectId, webhookId } = request.params;
      const w = await webhookOr404(projectId, webhookId);
      if (!(await store.webhooks.remove(projectId, webhookId)))
        throw new ApiError('not_found', `no webhook ${webhookId} in project ${projectId}`);
      request.log.info({ projectId, webhookId }, 'webhook removed');
      return { success: true, webhook: toWebhookView(w) };
    },
  );

  app.get<{ Params: { projectId: string; webhookId: string }; Querystring: { limit?: number } }>(
    '/v1/projects/:projectId/webhooks/:webhookId/deliveries',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['webhooks'],
        summary: "A webhook's deliveries, newest first, each with its attempts (master key)",
        params: webhookParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
        },
        response: {
          200: { type: 'object', properties: { success: { type: 'boolean' }, deliveries: { type: 'array', items: deliveryView } } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const { projectId, webhookId } = request.params;
      await webhookOr404(projectId, webhookId);
      const rows = await store.webhooks.deliveries(webhookId, request.query.limit ?? 50);
      return { success: true, deliveries: rows.map((d) => toDeliveryView(d, d.attempts)) };
    },
  );

  app.post<{ Params: { projectId: string; webhookId: string; deliveryId: string } }>(
    '/v1/projects/:projectId/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
    {
      onRequest: masterOnly,
      schema: {
        tags: ['webhooks'],
        summary: 'Send a delivery again now, with the same webhook-id and body, and a new day of retries (master key)',
        params: {
          type: 'object',
          properties: { projectId: projectIdParam, webhookId: webhookIdParam, deliveryId: deliveryIdParam },
          required: ['projectId', 'webhookId', 'deliveryId'],
        },
        response: {
          202: { type: 'object', properties: { success: { type: 'boolean' }, delivery: deliveryView } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request, reply) => {
      const { projectId, webhookId, deliveryId } = request.params;
      await webhookOr404(projectId, webhookId);
      const d = await store.webhooks.redeliver(webhookId, deliveryId, now());
      if (!d) throw new ApiError('not_found', `no delivery ${deliveryId} of webhook ${webhookId}`);
      await store.notifier.notify('countersign_webhooks', projectId).catch(() => dispatcher.wake());
      request.log.info({ projectId, webhookId, deliveryId }, 'webhook redelivery requested');
      return reply.code(202).send({ success: true, delivery: toDeliveryView(d) });
    },
  );
}

/**
 * Checks a webhook URL as the proxy checks a target: http(s), no credentials, and a host whose
 * every address passes the SSRF policy (or is on the allow list). A name that does not resolve
 * yet is accepted: every attempt is checked again when it connects.
 */
async function checkUrl(dispatcher: WebhookDispatcher, url: string): Promise<string> {
  let scheme: string;
  try {
    scheme = new URL(url).protocol;
  } catch {
    throw new ApiError('invalid_request', 'body/url must be an absolute http:// or https:// URL');
  }
  if (scheme !== 'http:' && scheme !== 'https:') throw new ApiError('invalid_request', 'body/url must use http or https');
  try {
    parseTarget(url);
    await dispatcher.guard.check(url);
  } catch (e) {
    if (e instanceof TargetInvalidError) throw new ApiError('invalid_request', `body/url: ${e.message}`);
    if (e instanceof TargetBlockedError) throw new ApiError('target_blocked', `webhook URL refused: ${e.message}`);
    if (!(e instanceof TargetUnresolvableError)) throw e;
  }
  return url;
}
