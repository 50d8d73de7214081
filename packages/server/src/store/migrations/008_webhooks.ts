/**
 * Outbound webhooks (issue 12, "Metrics and alerts"; DESIGN §4 "Webhooks"):
 *
 * - `webhooks`: a project's endpoints. `secret` is the `whsec_…` text, kept in the clear
 *   because every delivery is signed with it (SECURITY.md says what that means).
 * - `webhook_deliveries`: one message to one endpoint. `body` is the exact JSON text that is
 *   signed and sent on every attempt, so a retry or a redelivery carries the same bytes and
 *   the same `webhook-id`. A delivery is claimed by moving `next_attempt_at` past the attempt
 *   (a lease): with PostgreSQL the claim takes the rows `FOR UPDATE SKIP LOCKED`, so with many
 *   instances each delivery attempt runs on exactly one, and one that dies mid-attempt leaves
 *   it to be retried once the lease ends.
 * - `webhook_attempts`: the delivery log, one row per attempt (time, status code or error).
 */
import { type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** `webhooks` */
export interface WebhooksTable {
  id: string;
  project_id: string;
  url: string;
  /** JSON array of event types, `["*"]` for every type. */
  events: string;
  secret: string;
  created_at: number;
}

/** `webhook_deliveries` */
export interface WebhookDeliveriesTable {
  /** `msg_…`: the `webhook-id` header, the same on every attempt. */
  id: string;
  webhook_id: string;
  project_id: string;
  event_id: string;
  event_type: string;
  body: string;
  /** `pending` → `delivered`, or `failed` once retrying has given up. */
  state: string;
  /** Attempts since the schedule started (drives the backoff; a redelivery starts a new schedule). */
  retry_count: number;
  /** Start of the current retry schedule, epoch ms (retries stop a day after it). */
  schedule_start: number;
  /** Epoch ms before which no instance tries (a due time, or the lease of a claimed attempt). */
  next_attempt_at: number;
  last_attempt_at: number | null;
  /** HTTP status of the last answer, null when none came (timeout, refused connection). */
  last_status: number | null;
  last_error: string | null;
  delivered_at: number | null;
  created_at: number;
}

/** `webhook_attempts` */
export interface WebhookAttemptsTable {
  id: string;
  delivery_id: string;
  webhook_id: string;
  project_id: string;
  attempted_at: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

declare module '../schema.js' {
  interface Database {
    webhooks: WebhooksTable;
    webhook_deliveries: WebhookDeliveriesTable;
    webhook_attempts: WebhookAttemptsTable;
  }
}

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await db.schema
    .createTable('webhooks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhooks_project').on('webhooks').column('project_id').execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('retry_count', 'integer', (c) => c.notNull())
    .addColumn('schedule_start', 'bigint', (c) => c.notNull())
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('last_attempt_at', 'bigint')
    .addColumn('last_status', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('delivered_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  // The dispatcher's work queue: due pending deliveries, oldest first.
  await db.schema.createIndex('webhook_deliveries_due').on('webhook_deliveries').columns(['state', 'next_attempt_at']).execute();
  // A webhook's delivery log, newest first; and the retention purge by project and age.
  await db.schema.createIndex('webhook_deliveries_webhook').on('webhook_deliveries').columns(['webhook_id', 'created_at']).execute();
  await db.schema.createIndex('webhook_deliveries_project').on('webhook_deliveries').columns(['project_id', 'created_at']).execute();

  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('attempted_at', 'bigint', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('error', 'text')
    .addColumn('duration_ms', 'real', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_attempts_delivery').on('webhook_attempts').columns(['delivery_id', 'attempted_at']).execute();
}
