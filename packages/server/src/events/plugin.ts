/**
 * Security events with a project's `live` key: `GET /v1/projects/{projectId}/events` (stored,
 * newest first, cursor pagination) and `GET …/events/stream` (Server-Sent Events: stored events
 * after `Last-Event-ID` are replayed, with those just below it that may have committed after it,
 * then live ones arrive as they happen, with heartbeats).
 * A stream ends when its key is revoked or rotated, and when the server shuts down. `HEAD` on
 * the stream (Fastify answers HEAD for every GET route) gets the stream's headers and ends: it
 * used to open a stream that never ended.
 */
import type { FastifyInstance } from 'fastify';
import { hashApiKey } from '@countersign/core';
import { errorResponses, projectIdParam } from '../management/schemas.js';
import { decodeCursor, encodeCursor } from '../logs/entry.js';
import { readGuard } from '../logs/plugin.js';
import type { PublishedEvent } from './hub.js';
import { toSecurityEvent } from './security.js';

/** How often an idle stream sends a comment line, so proxies and clients see it is alive. */
export const SSE_HEARTBEAT_MS = 15_000;
const REPLAY_MAX = 1000;
/**
 * How far before the resume point's event a replay looks for events below its `seq` committed
 * later (store/events.ts, `listLateBefore`), beyond twice the store deadline: an event's insert
 * waits at most the deadline for a connection and at most the deadline for a lock.
 */
const LATE_MARGIN_MS = 5_000;

const projectParams = { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] } as const;

const eventSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    seq: { type: 'integer' },
    projectId: { type: 'string' },
    type: { type: 'string', enum: ['security.policy_violation', 'retention.purged'] },
    reason: { type: 'string', enum: ['credential_handover', 'retention'] },
    logId: { type: ['string', 'null'], description: 'the log of a policy violation; null for retention.purged' },
    createdAt: { type: 'string', format: 'date-time' },
    actor: { type: 'string', description: 'security.policy_violation' },
    credentialClass: { type: 'string', description: 'security.policy_violation' },
    agentHeaders: {
      type: 'array',
      items: { type: 'string' },
      description: 'security.policy_violation: names of the agent context headers, never values',
    },
    retentionDays: { type: 'integer', description: 'retention.purged: the retention that was applied' },
    deleted: {
      type: 'object',
      description: 'retention.purged: rows deleted',
      properties: {
        logs: { type: 'integer' },
        receipts: { type: 'integer' },
        events: { type: 'integer' },
        deliveries: { type: 'integer' },
      },
    },
    from: { type: ['string', 'null'], description: 'retention.purged: earliest receivedAt of the deleted logs' },
    to: { type: ['string', 'null'], description: 'retention.purged: latest receivedAt of the deleted logs' },
  },
} as const;

/** One SSE frame. */
function frame(e: PublishedEvent): string {
  return `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
}

/** Events plugin. */
export default async function eventsPlugin(app: FastifyInstance): Promise<void> {
  const { store, events, config } = app.ctx;
  const lateWindowMs = 2 * config.storeTimeoutMs + LATE_MARGIN_MS;

  app.get<{ Params: { projectId: string }; Querystring: { limit?: number; cursor?: string } }>(
    '/v1/projects/:projectId/events',
    {
      onRequest: readGuard,
      schema: {
        tags: ['events'],
        summary: "A project's security events, newest first (live key)",
        params: projectParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 }, cursor: { type: 'string', maxLength: 64 } },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              events: { type: 'array', items: eventSchema },
              nextCursor: { type: ['string', 'null'] },
            },
          },
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request) => {
      const limit = request.query.limit ?? 50;
      const rows = await store.events.list(request.params.projectId, limit + 1, decodeCursor(request.query.cursor));
      const page = rows.slice(0, limit);
      return {
        success: true,
        events: page.map(toSecurityEvent),
        nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1]!.seq) : null,
      };
    },
  );

  app.get<{ Params: { projectId: string } }>(
    '/v1/projects/:projectId/events/stream',
    {
      onRequest: readGuard,
      schema: {
        tags: ['events'],
        summary: 'Live security events as Server-Sent Events (live key)',
        description:
          'text/event-stream. Each event: `id: <seq>`, `event: <type>` (security.policy_violation, retention.purged), `data: <event JSON>`. Send Last-Event-ID to replay stored events after it, and those below it created within twice the store deadline plus 5 s before it (an event can commit after one with a higher seq; dedupe by id). A `: heartbeat` comment comes every 15 s. HEAD answers the headers (after the same checks) and ends.',
        params: projectParams,
        headers: { type: 'object', properties: { 'last-event-id': { type: 'string', pattern: '^\\d{1,15}$' } } },
        response: errorResponses(400, 401, 403),
      },
    },
    async (request, reply) => {
      const projectId = request.params.projectId;
      const lastHeader = request.headers['last-event-id'];
      const lastSeq = typeof lastHeader === 'string' ? Number(lastHeader) : undefined;
      const auth = /^Bearer[ \t]+(\S+)/i.exec(request.headers.authorization ?? '')?.[1];
      const keyHash = auth?.startsWith('key_') ? hashApiKey(auth) : undefined;

      const headers = {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        'x-accel-buffering': 'no',
      };
      // HEAD: the same checks and headers as GET, no body and no subscription.
      if (request.method === 'HEAD') return reply.code(200).headers(headers).send();

      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, { ...headers, connection: 'keep-alive' });
      res.write(': connected\n\n');

      let ended = false;
      // Live events that arrive during the replay wait for it, so that the replay comes first.
      let buffered: PublishedEvent[] | undefined = lastSeq !== undefined ? [] : undefined;
      // What the replay sent (at most REPLAY_MAX seqs), kept for the stream's life: a live
      // notification of a replayed event can arrive during the replay or after it. Live events are
      // not filtered by order: seqs are taken before commit, and two instances' (or two concurrent
      // calls') notifications can arrive in either order, so a lower seq after a higher one is an
      // event not sent yet, which the old `seq <= last sent` test dropped.
      const replayed = new Set<number>();
      const send = (e: PublishedEvent) => {
        if (ended || replayed.has(e.seq)) return;
        res.write(frame(e));
      };
      const end = () => {
        if (ended) return;
        ended = true;
        clearInterval(heartbeat);
        unsubscribe();
        stopKeyWatch();
        res.end();
      };
      const unsubscribe = events.subscribe(projectId, (e) => (buffered ? buffered.push(e) : send(e)), end);
      const stopKeyWatch = keyHash ? store.notifier.on('countersign_keys', (h) => h === keyHash && end()) : () => undefined;
      const heartbeat = setInterval(() => ended || res.write(': heartbeat\n\n'), SSE_HEARTBEAT_MS);
      heartbeat.unref();
      res.on('close', end);
      res.on('error', end);

      if (lastSeq !== undefined) {
        try {
          // First the project's events below the resume point that may have committed after it
          // (the client may have some of them: it dedupes by id), then those after it.
          const late = await store.events.listLateBefore(projectId, lastSeq, lateWindowMs, REPLAY_MAX);
          for (const row of [...late, ...(await store.events.listAfter(projectId, lastSeq, REPLAY_MAX))]) {
            send(toSecurityEvent(row));
            replayed.add(row.seq);
          }
        } catch (err) {
          request.log.warn({ err }, 'event replay failed');
        }
        const waiting = buffered ?? [];
        buffered = undefined;
        for (const e of waiting) send(e);
      }
    },
  );
}
