/**
 * Webhooks, their deliveries and the delivery log (migration 008). An event and the deliveries
 * it owes are written in one transaction, so an alert is never stored without its deliveries.
 * Claiming due deliveries is one UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) on
 * PostgreSQL, so concurrent instances never take the same row; on SQLite one process writes.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Database } from './schema.js';
import type { Dialect } from './open.js';
import { EventRepository, type EventRow } from './events.js';
import type { WebhookAttemptsTable, WebhookDeliveriesTable, WebhooksTable } from './migrations/008_webhooks.js';

/** A webhook as stored. */
export interface WebhookRow {
  id: string;
  projectId: string;
  url: string;
  /** Event types, or `["*"]` for all. */
  events: string[];
  secret: string;
  createdAt: number;
}

/** A delivery as stored. */
export interface DeliveryRow {
  id: string;
  webhookId: string;
  projectId: string;
  eventId: string;
  eventType: string;
  body: string;
  state: 'pending' | 'delivered' | 'failed';
  retryCount: number;
  scheduleStart: number;
  nextAttemptAt: number;
  lastAttemptAt: number | null;
  lastStatus: number | null;
  lastError: string | null;
  deliveredAt: number | null;
  createdAt: number;
}

/** One attempt of the delivery log. */
export interface AttemptRow {
  id: string;
  deliveryId: string;
  attemptedAt: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** What one attempt ended with, as the dispatcher reports it. */
export interface AttemptResult {
  attemptId: string;
  attemptedAt: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  /** `delivered`, or `pending` with the next due time, or `failed` (retrying gave up). */
  next: { state: 'delivered' } | { state: 'pending'; at: number } | { state: 'failed' };
}

/** Data access for webhooks. */
export class WebhookRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
  ) {}

  /** Adds a webhook. */
  async create(w: WebhookRow): Promise<void> {
    await this.db
      .insertInto('webhooks')
      .values({
        id: w.id,
        project_id: w.projectId,
        url: w.url,
        events: JSON.stringify(w.events),
        secret: w.secret,
        created_at: w.createdAt,
      })
      .execute();
  }

  /** A project's webhooks, oldest first. */
  async list(projectId: string): Promise<WebhookRow[]> {
    const rows = await this.db
      .selectFrom('webhooks')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(fromWebhook);
  }

  /** One webhook of a project. */
  async get(projectId: string, id: string): Promise<WebhookRow | undefined> {
    const r = await this.db.selectFrom('webhooks').selectAll().where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
    return r && fromWebhook(r);
  }

  /** Removes a webhook with its deliveries and their log; false when there was none. */
  async remove(projectId: string, id: string): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const r = await tx.deleteFrom('webhooks').where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
      if (Number(r.numDeletedRows) === 0) return false;
      await tx.deleteFrom('webhook_attempts').where('webhook_id', '=', id).execute();
      await tx.deleteFrom('webhook_deliveries').where('webhook_id', '=', id).execute();
      return true;
    });
  }

  /**
   * Stores an event and, in the same transaction, one delivery per webhook of its project that
   * takes its type. `bodyOf(seq)` makes the delivery body once the event's sequence is known.
   * @returns the event's sequence and how many deliveries were queued.
   */
  async recordEvent(
    e: Omit<EventRow, 'seq'>,
    bodyOf: (seq: number) => string,
    newDeliveryId: () => string,
    now: number,
  ): Promise<{ seq: number; deliveries: number }> {
    return this.db.transaction().execute(async (tx) => {
      const seq = await new EventRepository(tx).insert(e);
      const hooks = (await tx.selectFrom('webhooks').select(['id', 'events']).where('project_id', '=', e.projectId).execute()).filter((h) =>
        takes(JSON.parse(h.events) as string[], e.type),
      );
      if (hooks.length === 0) return { seq, deliveries: 0 };
      const body = bodyOf(seq);
      await tx
        .insertInto('webhook_deliveries')
        .values(
          hooks.map((h) => ({
            id: newDeliveryId(),
            webhook_id: h.id,
            project_id: e.projectId,
            event_id: e.id,
            event_type: e.type,
            body,
            state: 'pending',
            retry_count: 0,
            schedule_start: now,
            next_attempt_at: now,
            last_attempt_at: null,
            last_status: null,
            last_error: null,
            delivered_at: null,
            created_at: now,
          })),
        )
        .execute();
      return { seq, deliveries: hooks.length };
    });
  }

  /**
   * Claims up to `limit` due deliveries for one attempt each: their due time moves to
   * `leaseUntil`, so no other instance takes them meanwhile (and one that dies mid-attempt
   * leaves them to be retried when the lease ends). Returns them with their webhook.
   */
  async claimDue(now: number, leaseUntil: number, limit: number): Promise<Array<{ delivery: DeliveryRow; webhook: WebhookRow }>> {
    // An idle queue costs one index read: no write statement (and, on SQLite, no write lock
    // taken away from ingest) unless something is due.
    const any = await this.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('state', '=', 'pending')
      .where('next_attempt_at', '<=', now)
      .limit(1)
      .executeTakeFirst();
    if (!any) return [];
    const due = this.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('state', '=', 'pending')
      .where('next_attempt_at', '<=', now)
      .orderBy('next_attempt_at')
      .limit(limit);
    const claimed = await this.db
      .updateTable('webhook_deliveries')
      .set({ next_attempt_at: leaseUntil })
      .where('id', 'in', this.dialect === 'postgres' ? due.forUpdate().skipLocked() : due)
      .where('state', '=', 'pending')
      .where('next_attempt_at', '<=', now)
      .returningAll()
      .execute();
    if (claimed.length === 0) return [];
    const hooks = await this.db
      .selectFrom('webhooks')
      .selectAll()
      .where('id', 'in', [...new Set(claimed.map((d) => d.webhook_id))])
      .execute();
    const byId = new Map(hooks.map((h) => [h.id, fromWebhook(h)]));
    const out: Array<{ delivery: DeliveryRow; webhook: WebhookRow }> = [];
    for (const d of claimed) {
      const webhook = byId.get(d.webhook_id);
      if (webhook) out.push({ delivery: fromDelivery(d), webhook });
    }
    return out;
  }

  /** Logs an attempt and moves its delivery to the state it led to, in one transaction. */
  async recordAttempt(d: DeliveryRow, r: AttemptResult): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      await tx
        .insertInto('webhook_attempts')
        .values({
          id: r.attemptId,
          delivery_id: d.id,
          webhook_id: d.webhookId,
          project_id: d.projectId,
          attempted_at: r.attemptedAt,
          status_code: r.statusCode,
          error: r.error,
          duration_ms: r.durationMs,
        })
        .execute();
      await tx
        .updateTable('webhook_deliveries')
        .set({
          state: r.next.state,
          retry_count: d.retryCount + 1,
          next_attempt_at: r.next.state === 'pending' ? r.next.at : r.attemptedAt,
          last_attempt_at: r.attemptedAt,
          last_status: r.statusCode,
          last_error: r.error,
          delivered_at: r.next.state === 'delivered' ? r.attemptedAt : null,
        })
        .where('id', '=', d.id)
        // A redelivery requested during this attempt started a new schedule: leave it be.
        .where('schedule_start', '=', d.scheduleStart)
        .execute();
    });
  }

  /** Due time of the next pending delivery, or undefined. */
  async nextDueAt(): Promise<number | undefined> {
    const r = await this.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.min('next_attempt_at').as('at'))
      .where('state', '=', 'pending')
      .executeTakeFirst();
    return r?.at === null || r?.at === undefined ? undefined : Number(r.at);
  }

  /** A webhook's deliveries, newest first, with their attempts (newest first). */
  async deliveries(webhookId: string, limit: number): Promise<Array<DeliveryRow & { attempts: AttemptRow[] }>> {
    const rows = (
      await this.db
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('webhook_id', '=', webhookId)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limit)
        .execute()
    ).map(fromDelivery);
    if (rows.length === 0) return [];
    const attempts = await this.db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where(
        'delivery_id',
        'in',
        rows.map((r) => r.id),
      )
      .orderBy('attempted_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    const byDelivery = new Map<string, AttemptRow[]>();
    for (const a of attempts) {
      let list = byDelivery.get(a.delivery_id);
      if (!list) byDelivery.set(a.delivery_id, (list = []));
      list.push(fromAttempt(a));
    }
    return rows.map((r) => ({ ...r, attempts: byDelivery.get(r.id) ?? [] }));
  }

  /** One delivery of a webhook. */
  async delivery(webhookId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
    const r = await this.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('webhook_id', '=', webhookId)
      .where('id', '=', deliveryId)
      .executeTakeFirst();
    return r && fromDelivery(r);
  }

  /** Starts a new retry schedule for a delivery (any state): due now, same id and body. */
  async redeliver(webhookId: string, deliveryId: string, now: number): Promise<DeliveryRow | undefined> {
    await this.db
      .updateTable('webhook_deliveries')
      .set({ state: 'pending', retry_count: 0, schedule_start: now, next_attempt_at: now, delivered_at: null })
      .where('webhook_id', '=', webhookId)
      .where('id', '=', deliveryId)
      .execute();
    return this.delivery(webhookId, deliveryId);
  }
}

/** True when a webhook subscribed to `types` takes an event of `type`. */
export function takes(types: readonly string[], type: string): boolean {
  return types.includes('*') || types.includes(type);
}

function fromWebhook(r: Selectable<WebhooksTable>): WebhookRow {
  return {
    id: r.id,
    projectId: r.project_id,
    url: r.url,
    events: JSON.parse(r.events) as string[],
    secret: r.secret,
    createdAt: Number(r.created_at),
  };
}

function fromDelivery(r: Selectable<WebhookDeliveriesTable>): DeliveryRow {
  return {
    id: r.id,
    webhookId: r.webhook_id,
    projectId: r.project_id,
    eventId: r.event_id,
    eventType: r.event_type,
    body: r.body,
    state: r.state as DeliveryRow['state'],
    retryCount: Number(r.retry_count),
    scheduleStart: Number(r.schedule_start),
    nextAttemptAt: Number(r.next_attempt_at),
    lastAttemptAt: r.last_attempt_at === null ? null : Number(r.last_attempt_at),
    lastStatus: r.last_status,
    lastError: r.last_error,
    deliveredAt: r.delivered_at === null ? null : Number(r.delivered_at),
    createdAt: Number(r.created_at),
  };
}

function fromAttempt(r: Selectable<WebhookAttemptsTable>): AttemptRow {
  return {
    id: r.id,
    deliveryId: r.delivery_id,
    attemptedAt: Number(r.attempted_at),
    statusCode: r.status_code,
    error: r.error,
    durationMs: Number(r.duration_ms),
  };
}
