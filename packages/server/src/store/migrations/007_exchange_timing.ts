/**
 * Timing of proxied exchanges in the clear (issue "Drop-in gateway"): the upstream's status,
 * the time to its first byte and the whole duration are not secret, and a timeline (dashboard,
 * export, alerting) needs them without a decryption key. Written with the outcome; null for
 * `/v1/log` entries and for exchanges that never reached an upstream answer.
 */
import type { Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await db.schema.alterTable('logs').addColumn('upstream_status', 'integer').execute();
  // Milliseconds with microsecond precision: a real on PostgreSQL, REAL on SQLite.
  await db.schema.alterTable('logs').addColumn('first_byte_ms', 'real').execute();
  await db.schema.alterTable('logs').addColumn('duration_ms', 'real').execute();
}
