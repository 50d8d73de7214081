/**
 * `GET /v1/projects/{projectId}/logs/stream` (DESIGN §4 "Reading"): new entries as Server-Sent
 * Events, with the list's filters. Each event: `id: <seq>`, `event: log`, `data: <entry JSON
 * without payload>`; `Last-Event-ID` resumes after that entry, without it the stream starts at
 * the newest entry. The server tails the store by sequence number (every
 * {@link TAIL_EVERY_MS}), so every instance on one PostgreSQL sees every instance's entries and
 * a reconnect loses nothing: the stream opens with an id-only frame (`id: <seq>`, no data) naming
 * where it starts, so even a client that saw no entry before it dropped resumes from there. On
 * PostgreSQL an entry can commit after one with a higher `seq` (another instance's writer): the
 * stream watches the numbers missing behind its position until they arrive or the store deadline
 * gives them up (late-entries.ts, store/seq-gaps.ts), sends a late entry when it arrives, and
 * keeps the resume position below the numbers it still watches with an id-only frame. A
 * proxied call appears when its write-ahead record is committed (status `pending`); its outcome
 * is read with `GET …/logs/{logId}`. HEAD answers the headers.
 */
import type { FastifyInstance } from 'fastify';
import type { LogListFilter } from '@countersign/core';
import { errorResponses, projectIdParam } from '../management/schemas.js';
import { toLogEntry } from './entry.js';
import { FILTER_PROPERTIES, filterOf } from './filters.js';
import { readGuard } from './plugin.js';
import { LateEntryWatch } from './late-entries.js';
import { monotonicMs } from '../monotonic-clock.js';

/** How often the stream reads the store for new entries, ms. */
export const TAIL_EVERY_MS = 500;
/** Heartbeat comment interval, ms (proxies close silent connections). */
const HEARTBEAT_MS = 15_000;
/** Entries sent per read. */
const TAIL_PAGE = 200;
/** How far below its starting point a stream looks for entries still to commit (PostgreSQL). */
const START_LOOKBACK = 1_000;
/** Added to the store deadline for how long a missing number is watched, ms. */
const LATE_MARGIN_MS = 5_000;

/** Registers the live stream route (inside the logs plugin). */
export function registerLogStream(app: FastifyInstance): void {
  const { store, config } = app.ctx;
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
      const resumed = typeof last === 'string' && /^\d{1,15}$/.test(last) ? Number(last) : undefined;
      let after = resumed ?? (await store.logs.page(projectId, {}, { order: 'newest', limit: 1 })).rows[0]?.seq ?? 0;

      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, { ...headers, connection: 'keep-alive' });
      // The starting point as an id-only frame (no data, so nothing is dispatched): a client that
      // reconnects before any entry came resumes from here, losing nothing written meanwhile.
      res.write(`: connected\nid: ${after}\n\n`);
      let ended = false;
      let reading = false;
      const send = (row: { seq: number } & Parameters<typeof toLogEntry>[0]) =>
        res.write(`id: ${row.seq}\nevent: log\ndata: ${JSON.stringify(toLogEntry(row))}\n\n`);
      // PostgreSQL: entries may commit out of seq order (store/seq-gaps.ts).
      const late = store.seqGaps.outOfOrder ? new LateEntryWatch(config.storeTimeoutMs + LATE_MARGIN_MS) : undefined;
      let primed = false;
      /** The resume position the client holds (its Last-Event-ID). */
      let told = after;
      /**
       * Sends the entries after `from` (up to `upTo`), page by page; returns the last one's seq
       * (`from` when none). Each one sent is no longer watched: it may have been seen missing by
       * the bound's snapshot and committed before the page's.
       */
      const sendRange = async (from: number, upTo?: number): Promise<number> => {
        for (;;) {
          const page = await store.logs.page(
            projectId,
            { ...filter, afterSeq: from, upToSeq: upTo },
            { order: 'oldest', limit: TAIL_PAGE },
          );
          for (const row of page.rows) {
            if (ended) return from;
            send(row);
            from = told = row.seq;
            late?.arrived([row.seq]);
          }
          if (page.rows.length < TAIL_PAGE) return from;
        }
      };
      const readWatchingGaps = async (watch: LateEntryWatch) => {
        // The bound first, then the rows up to it: every number of the range is read or watched.
        // The first read also looks below the starting point, for entries still committing elsewhere.
        const { upTo, missing } = await store.seqGaps.missing(primed ? after : Math.max(0, after - START_LOOKBACK));
        primed = true;
        watch.watch(missing, monotonicMs());
        await sendRange(after, upTo);
        if (ended) return;
        after = upTo;
        const open = watch.open(monotonicMs());
        let sentLate = false;
        if (open.length > 0) {
          const arrived = await store.seqGaps.present(open);
          watch.arrived(arrived.map((a) => a.seq));
          const mine = arrived.filter((a) => a.projectId === projectId).map((a) => a.seq);
          if (mine.length > 0) {
            const page = await store.logs.page(projectId, { ...filter, seqs: mine }, { order: 'oldest', limit: mine.length });
            for (const row of page.rows) {
              if (ended) return;
              send(row);
              told = row.seq;
              sentLate = true;
            }
          }
        }
        // Below every number still watched, so that a reconnect cannot step past its entry; after
        // a late entry, back up to that point (a reconnect need not read again what came since).
        const resume = watch.resumeFrom(after);
        if (resume < told || (sentLate && resume > told)) {
          res.write(`id: ${resume}\n\n`);
          told = resume;
        }
      };
      const tail = async () => {
        if (ended || reading || filter === null) return;
        reading = true;
        try {
          if (late) await readWatchingGaps(late);
          else after = await sendRange(after);
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
