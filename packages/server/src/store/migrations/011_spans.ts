/**
 * Spans in the clear (issue 11, "Spans end to end"; DESIGN §4 "Reading": entries carry
 * `spanId`, `parentSpanId` (W3C ids, plain), `startedAt`, `endedAt` when known). The Story
 * Visualizer links entries by them and draws durations without any decryption key.
 * `started_at` / `ended_at` are epoch milliseconds; a proxied call's `ended_at` is written with
 * its outcome.
 */
import type { Kysely } from 'kysely';
import type { Dialect } from '../open.js';

declare module '../schema.js' {
  interface LogsTable {
    /** The entry's own W3C span id, 16 lowercase hex digits (migration 011). */
    span_id?: string | null;
    /** Its parent's span id (migration 011). */
    parent_span_id?: string | null;
    /** Start and end, epoch ms (migration 011). */
    started_at?: number | null;
    ended_at?: number | null;
  }
}

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const int8 = dialect === 'postgres' ? 'bigint' : 'integer';
  await db.schema.alterTable('logs').addColumn('span_id', 'text').execute();
  await db.schema.alterTable('logs').addColumn('parent_span_id', 'text').execute();
  await db.schema.alterTable('logs').addColumn('started_at', int8).execute();
  await db.schema.alterTable('logs').addColumn('ended_at', int8).execute();
}
