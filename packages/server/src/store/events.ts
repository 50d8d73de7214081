/**
 * Security events (spec 6), stored so that a dashboard that connects later still sees them.
 */
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, EventsTable } from './schema.js';

/** A stored event; `body` holds the fields beyond the indexed ones. */
export interface EventRow {
  seq: number;
  id: string;
  projectId: string;
  type: string;
  reason: string;
  logId: string;
  createdAt: number;
  body: Record<string, unknown>;
}

/** Data access for events. */
export class EventRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Stores an event and returns its sequence number. */
  async insert(e: Omit<EventRow, 'seq'>): Promise<number> {
    const r = await this.db
      .insertInto('events')
      .values({
        id: e.id,
        project_id: e.projectId,
        type: e.type,
        reason: e.reason,
        log_id: e.logId,
        created_at: e.createdAt,
        body: JSON.stringify(e.body),
      })
      .returning('seq')
      .executeTakeFirstOrThrow();
    return Number(r.seq);
  }

  /** A project's events, newest first, before cursor `beforeSeq`. */
  async list(projectId: string, limit: number, beforeSeq?: number): Promise<EventRow[]> {
    let q = this.db.selectFrom('events').selectAll().where('project_id', '=', projectId);
    if (beforeSeq !== undefined) q = q.where('seq', '<', beforeSeq);
    const rows = await q.orderBy('seq', 'desc').limit(limit).execute();
    return rows.map(fromRow);
  }

  /**
   * The events a client resuming after `resumeSeq` may not have been sent: those of the project
   * below it created at most `windowMs` before the event at `resumeSeq` (none when that event is
   * not the project's), oldest first, among the `scan` newest below it. A `seq` is taken before
   * its insert commits, so an event can become visible (and be notified) after one with a higher
   * `seq`; the replay after `resumeSeq` alone would never send it (events/plugin.ts).
   */
  async listLateBefore(projectId: string, resumeSeq: number, windowMs: number, scan: number): Promise<EventRow[]> {
    // One statement: the resume point's time, and the `scan` newest numbers below it through the
    // (project_id, seq) index, so that the time filter never reads the project's whole history.
    const anchor = this.db.selectFrom('events').select('created_at').where('project_id', '=', projectId).where('seq', '=', resumeSeq);
    const newest = this.db
      .selectFrom('events')
      .select('seq')
      .where('project_id', '=', projectId)
      .where('seq', '<', resumeSeq)
      .orderBy('seq', 'desc')
      .limit(scan);
    const rows = await this.db
      .selectFrom('events')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('seq', 'in', newest)
      .where(sql<boolean>`created_at >= (${anchor}) - ${windowMs}`)
      .orderBy('seq', 'asc')
      .execute();
    return rows.map(fromRow);
  }

  /** A project's events after sequence `afterSeq`, oldest first (SSE replay on reconnect). */
  async listAfter(projectId: string, afterSeq: number, limit: number): Promise<EventRow[]> {
    const rows = await this.db
      .selectFrom('events')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('seq', '>', afterSeq)
      .orderBy('seq', 'asc')
      .limit(limit)
      .execute();
    return rows.map(fromRow);
  }
}

function fromRow(r: Selectable<EventsTable>): EventRow {
  return {
    seq: Number(r.seq),
    id: r.id,
    projectId: r.project_id,
    type: r.type,
    reason: r.reason,
    logId: r.log_id,
    createdAt: r.created_at,
    body: JSON.parse(r.body) as Record<string, unknown>,
  };
}
