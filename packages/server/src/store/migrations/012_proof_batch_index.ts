/**
 * The logs of a proof batch, found by batch (docs/proofs.md, "How a batch is built"): a batch is
 * now claimed and stored in short steps, and a batch left mid-way by a crash is continued from
 * its claimed logs, `WHERE proof_batch_id = ?`. Partial (claimed logs only), so the hot path's
 * inserts, whose `proof_batch_id` is always null, never touch it; a log gains its entry when a
 * batch claims it. Building it reads the table once, at the upgrade.
 */
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await sql`create index logs_proof_batch on logs (proof_batch_id) where proof_batch_id is not null`.execute(db);
}
