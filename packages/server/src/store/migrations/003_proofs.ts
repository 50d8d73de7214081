/**
 * Tables of the proof batcher:
 *
 * - `proof_batches`: one row per sealed (or being-sealed) window. `window_start` is unique, so
 *   two instances can never make two batches of one window; the TSA answer and the ledger
 *   result are written onto the row as each step succeeds, which is what makes every step
 *   idempotent after a crash (the root is fixed when the row is made and is never recomputed).
 * - `proof_receipts`: one row per leaf: the log's position and audit path in its batch. The
 *   fields shared by every leaf of a batch (root, TSA token, ledger index) stay on the batch row
 *   and are joined in when a receipt is read, so a 100,000-leaf batch stores one token, not
 *   100,000 copies. `log_id` is the primary key: a log is a leaf of at most one batch.
 * - `logs.proof_batch_id`: which batch claimed a log. Claiming is one UPDATE … WHERE
 *   proof_batch_id IS NULL inside the batch's transaction, and a partial index over the
 *   unclaimed proof logs keeps that query proportional to the backlog, not to the table.
 */
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** `proof_batches`: a window's Merkle batch and the progress of its sealing. */
export interface ProofBatchesTable {
  id: string;
  /** Epoch ms, inclusive; unique (one batch per window). */
  window_start: number;
  /** Epoch ms, exclusive. */
  window_end: number;
  tree_size: number;
  /** Lower-case hex RFC 9162 root. */
  merkle_root: string;
  /** `timestamping` → `ledger` → `sealed`. */
  state: string;
  /** Base64 DER TimeStampResp over the root, once timestamped. */
  tsa_response: string | null;
  rekor_log_index: number | null;
  ledger_url: string | null;
  ledger_uuid: string | null;
  /** Ledger integration time, epoch seconds. */
  integrated_time: number | null;
  /** Failed sealing attempts so far (drives the backoff). */
  attempts: number;
  /** Epoch ms before which no instance retries this batch. */
  next_attempt_at: number;
  last_error: string | null;
  created_at: number;
  sealed_at: number | null;
}

/** `proof_receipts`: one leaf of a batch. */
export interface ProofReceiptsTable {
  log_id: string;
  project_id: string;
  batch_id: string;
  leaf_index: number;
  payload_hash: string;
  /** JSON array of lower-case hex siblings, bottom-up (RFC 9162 audit path). */
  merkle_path: string;
}

/** The column this migration adds to `logs` (typed where it is used: store/proofs.ts). */
export interface LogsProofColumns {
  proof_batch_id: string | null;
}

declare module '../schema.js' {
  interface Database {
    proof_batches: ProofBatchesTable;
    proof_receipts: ProofReceiptsTable;
  }
}

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await db.schema
    .createTable('proof_batches')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('window_start', 'bigint', (c) => c.notNull().unique())
    .addColumn('window_end', 'bigint', (c) => c.notNull())
    .addColumn('tree_size', 'integer', (c) => c.notNull())
    .addColumn('merkle_root', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('tsa_response', 'text')
    .addColumn('rekor_log_index', 'bigint')
    .addColumn('ledger_url', 'text')
    .addColumn('ledger_uuid', 'text')
    .addColumn('integrated_time', 'bigint')
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('sealed_at', 'bigint')
    .execute();
  await db.schema.createIndex('proof_batches_state').on('proof_batches').columns(['state', 'next_attempt_at']).execute();

  await db.schema
    .createTable('proof_receipts')
    .addColumn('log_id', 'text', (c) => c.primaryKey())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('batch_id', 'text', (c) => c.notNull().references('proof_batches.id'))
    .addColumn('leaf_index', 'integer', (c) => c.notNull())
    .addColumn('payload_hash', 'text', (c) => c.notNull())
    .addColumn('merkle_path', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('proof_receipts_batch_leaf').on('proof_receipts').columns(['batch_id', 'leaf_index']).unique().execute();

  await db.schema.alterTable('logs').addColumn('proof_batch_id', 'text').execute();
  // Only logs that asked for a proof and are not yet in a batch: the batcher's work queue.
  await sql`create index logs_proof_unclaimed on logs (received_at) where request_proof = 1 and proof_batch_id is null`.execute(db);
}
