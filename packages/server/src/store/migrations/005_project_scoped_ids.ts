/**
 * Log ids are unique per project, not across the server (issue 8, "Secrets and strict input").
 * A client-chosen id used to be unique in the whole store, so `POST /v1/log` with an id that
 * another project had used answered 409 where a fresh one answered 201: anyone could learn
 * whether some other tenant used an id. Now the same id in two projects is two logs; a retry
 * inside one project stays idempotent.
 *
 * - `logs`: UNIQUE (id) becomes UNIQUE (project_id, id). PostgreSQL drops and adds the
 *   constraint; SQLite cannot drop a column constraint, so the table is rebuilt with the columns
 *   it has at this point (001, 003, 004), its rows copied with their `seq`, and its indexes made
 *   again.
 * - `proof_receipts`: the primary key (log_id) becomes (project_id, log_id) the same way.
 *
 * Server-made ids (`log_` + 24 random base62 characters, 143 bits) stay unique in practice, and
 * the envelope AAD stays the bare log id.
 */
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** The columns of `logs` when this migration runs, in order. */
const LOG_COLUMNS = [
  'seq',
  'id',
  'project_id',
  'key_id',
  'received_at',
  'occurred_at',
  'actor',
  'action',
  'trace_id',
  'actor_type',
  'credential_handover_detected',
  'source',
  'status',
  'request_proof',
  'payload_hash',
  'payload',
  'metadata',
  'completed_at',
  'proof_batch_id',
  'instance_id',
] as const;

const RECEIPT_COLUMNS = ['log_id', 'project_id', 'batch_id', 'leaf_index', 'payload_hash', 'merkle_path'] as const;

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') {
    // `.unique()` on a column is PostgreSQL's `<table>_<column>_key`; a primary key is `<table>_pkey`.
    await sql`alter table logs drop constraint logs_id_key`.execute(db);
    await sql`alter table logs add constraint logs_project_id_id_key unique (project_id, id)`.execute(db);
    await sql`alter table proof_receipts drop constraint proof_receipts_pkey`.execute(db);
    await sql`alter table proof_receipts add constraint proof_receipts_pkey primary key (project_id, log_id)`.execute(db);
    return;
  }

  // SQLite runs migrations outside a transaction: the rebuild is one, so a crash leaves the old
  // tables or the new ones, never half of each.
  await db.transaction().execute(async (tx) => {
    const logCols = sql.raw(LOG_COLUMNS.join(', '));
    await tx.schema
      .createTable('logs_005')
      .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('id', 'text', (c) => c.notNull())
      .addColumn('project_id', 'text', (c) => c.notNull())
      .addColumn('key_id', 'text', (c) => c.notNull())
      .addColumn('received_at', 'bigint', (c) => c.notNull())
      .addColumn('occurred_at', 'text')
      .addColumn('actor', 'text', (c) => c.notNull())
      .addColumn('action', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text')
      .addColumn('actor_type', 'text', (c) => c.notNull())
      .addColumn('credential_handover_detected', 'integer', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('request_proof', 'integer', (c) => c.notNull())
      .addColumn('payload_hash', 'text')
      .addColumn('payload', 'text', (c) => c.notNull())
      .addColumn('metadata', 'text')
      .addColumn('completed_at', 'bigint')
      .addColumn('proof_batch_id', 'text')
      .addColumn('instance_id', 'text')
      .addUniqueConstraint('logs_project_id_id_key', ['project_id', 'id'])
      .execute();
    await sql`insert into logs_005 (${logCols}) select ${logCols} from logs`.execute(tx);
    await tx.schema.dropTable('logs').execute();
    await tx.schema.alterTable('logs_005').renameTo('logs').execute();
    // The indexes of 001, 003 and 004, as they were (they went with the old table).
    await tx.schema.createIndex('logs_project_seq').on('logs').columns(['project_id', 'seq']).execute();
    await tx.schema.createIndex('logs_project_trace').on('logs').columns(['project_id', 'trace_id', 'seq']).execute();
    await sql`create index logs_proof_unclaimed on logs (received_at) where request_proof = 1 and proof_batch_id is null`.execute(tx);
    await sql`create index logs_pending_owner on logs (instance_id) where status = 'pending'`.execute(tx);

    const receiptCols = sql.raw(RECEIPT_COLUMNS.join(', '));
    await tx.schema
      .createTable('proof_receipts_005')
      .addColumn('log_id', 'text', (c) => c.notNull())
      .addColumn('project_id', 'text', (c) => c.notNull())
      .addColumn('batch_id', 'text', (c) => c.notNull().references('proof_batches.id'))
      .addColumn('leaf_index', 'integer', (c) => c.notNull())
      .addColumn('payload_hash', 'text', (c) => c.notNull())
      .addColumn('merkle_path', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('proof_receipts_pkey', ['project_id', 'log_id'])
      .execute();
    await sql`insert into proof_receipts_005 (${receiptCols}) select ${receiptCols} from proof_receipts`.execute(tx);
    await tx.schema.dropTable('proof_receipts').execute();
    await tx.schema.alterTable('proof_receipts_005').renameTo('proof_receipts').execute();
    await tx.schema.createIndex('proof_receipts_batch_leaf').on('proof_receipts').columns(['batch_id', 'leaf_index']).unique().execute();
  });
}
