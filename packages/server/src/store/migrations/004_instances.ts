/**
 * `logs.instance_id`: which server instance wrote a proxy record ahead and still owes its
 * outcome. Set on `pending` rows only. With several instances on one PostgreSQL database, a
 * starting instance used to mark EVERY pending row interrupted, including exchanges another live
 * instance was still streaming; now only rows of instances that are gone are marked (see
 * store/instances.ts). Rows from before this migration have no owner and count as orphaned.
 */
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await db.schema.alterTable('logs').addColumn('instance_id', 'text').execute();
  // The sweep's only question is "which instances own pending rows". A partial index answers it
  // and, unlike the full index on status it replaces, costs nothing for the rows that are final
  // from the start (every /v1/log entry) and one entry for the lifetime of a proxy call.
  await db.schema.dropIndex('logs_status').execute();
  await sql`create index logs_pending_owner on logs (instance_id) where status = 'pending'`.execute(db);
}
