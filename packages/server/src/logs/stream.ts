/**
 * `GET /v1/projects/{projectId}/logs/stream` (DESIGN §4 "Reading"): new entries as Server-Sent
 * Events, with the list's filters. Each event: `id: <seq>`, `event: log`, `data: <entry JSON
 * without payload>`; `Last-Event-ID` resumes after that entry, without it the stream starts at
 * the newest entry. The server tails the store by sequence number (every
 * {@link TAIL_EVERY_MS}), so every instance on one PostgreSQL sees every instance's entries and
 * a reconnect loses nothing: the stream opens with an id-only frame (`id: <seq>`, no data) naming
 * where it starts, so even a client that saw no entry before it dropped resumes from there. A
 * proxied call appears when its write-ahead record is committed (status `pending`); its outcome
 * is read with `GET …/logs/{logId}`. HEAD answers the headers.
 */
import type { FastifyInstance } from 'fastify';
import type { LogListFilter } from '@countersign/core';
import { errorResponses, projectIdParam } from '../management/schemas.js';
import { toLogEntry } from './entry.js';
import { FILTER_PROPERTIES, filterOf } from './filters.js';
import { readGuard } from './plugin.js';

/** How often the stream reads the store for new entries, ms. */
export const TAIL_EVERY_MS = 500;
/** Heartbeat comment interval, ms (proxies close silent connections). */
const HEARTBEAT_MS = 15_000;
/** Entries sent per read. */
const TAIL_PAGE = 200;

/** Registers the live stream route (inside the logs plugin). */
export function registerLogStream(app: FastifyInstance): void {
  const { store } = app.ctx;
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of [...open]) end();
  });
  app.get<{ Params: { projectId: string }; Querystring: LogListFilter }>(
    '/v1/projects/:projectId/logs/stream',
    {
      onRequest: readGuard,
      schema: {
        tags: ['logs'],
        summary: 'New log entries as Server-Sent Events, with the list filters',
        description:
          'text/event-stream. It opens with an id-only frame (`id: <seq>`, no data) naming where it starts. Each event: `id: <seq>`, `event: log`, `data: <entry JSON, no payload>`. Last-Event-ID resumes after that entry; without it the stream starts after the newest entry. A `: heartbeat` comment every 15 s. HEAD answers the headers and ends.',
        params: { type: 'object', properties: { projectId: projectIdParam }, required: ['projectId'] },
        querystring: { type: 'object', additionalProperties: false, properties: FILTER_PROPERTIES },
        response: errorResponses(400, 401, 403),
      },
    },
    async (request, reply) => {
      const { projectId } = request.params;
      const filter = filterOf(request, request.query);
      const headers = {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        'x-accel-buffering': 'no',
      };
      if (request.method === 'HEAD') return reply.code(200).headers(headers).send();
      const last = request.headers['last-event-id'];
      let after = typeof last === 'string' && /^\d{1,15}$/.test(last) ? Number(last) : undefined;
      if (after === undefined) {
        const newest = await store.logs.page(projectId, {}, { order: 'newest', limit: 1 });
        after = newest.rows[0]?.seq ?? 0;
      }

      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, { ...headers, connection: 'keep-alive' });
      // The starting point as an id-only frame (no data, so nothing is dispatched): a client that
      // reconnects before any entry came resumes from here, losing nothing written meanwhile.
      res.write(`: connected\nid: ${after}\n\n`);
      let ended = false;
      let reading = false;
      const tail = async () => {
        if (ended || reading || filter === null) return;
        reading = true;
        try {
          for (;;) {
            const page = await store.logs.page(projectId, { ...filter, afterSeq: after }, { order: 'oldest', limit: TAIL_PAGE });
            for (const row of page.rows) {
              if (ended) return;
              res.write(`id: ${row.seq}\nevent: log\ndata: ${JSON.stringify(toLogEntry(row))}\n\n`);
              after = row.seq;
            }
            if (page.rows.length < TAIL_PAGE) break;
          }
        } catch (err) {
          request.log.warn({ err }, 'log stream read failed; retrying');
        } finally {
          reading = false;
        }
      };
      const timer = setInterval(() => void tail(), TAIL_EVERY_MS);
      const heartbeat = setInterval(() => ended || res.write(': heartbeat\n\n'), HEARTBEAT_MS);
      heartbeat.unref();
      const end = () => {
        if (ended) return;
        ended = true;
        clearInterval(timer);
        clearInterval(heartbeat);
        open.delete(end);
        res.end();
      };
      open.add(end);
      res.on('close', end);
      res.on('error', end);
      void tail();
    },
  );
}
