/**
 * The few counts `GET /metrics` reads from the database. Each is an index range (pending
 * records: `logs_pending_owner`, read as pending-index.ts says; unsealed batches:
 * `proof_batches_state`), and the metrics plugin runs them at most once every few seconds,
 * whatever the scrape rate.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { Dialect } from './open.js';
import { readPendingIndex } from './pending-index.js';
import { BUILDING_STATES, SEALING_STATES, type ProofDatabase } from './proofs.js';

/** What the scrape-time gauges show. */
export interface StoreGauges {
  /** Proxy records still `pending` (every instance's). */
  pendingRecords: number;
  /** Proof batches claimed and not yet sealed. */
  unsealedBatches: number;
  /** Window end (epoch ms) of the oldest unsealed batch, or null when every batch is sealed. */
  oldestUnsealedWindowEnd: number | null;
  /** Webhook deliveries still to be tried. */
  webhookBacklog: number;
}

/** How many records are pending (read as pending-index.ts says). */
export function pendingCount(db: Kysely<Database>) {
  return db
    .selectFrom('logs')
    .select(sql<number>`count(*)`.as('n'))
    .where('status', '=', 'pending');
}

/** Reads {@link StoreGauges}. */
export async function readStoreGauges(db: Kysely<Database>, dialect: Dialect): Promise<StoreGauges> {
  const pdb = db as unknown as Kysely<ProofDatabase>;
  const [pending, unsealed, backlog] = await Promise.all([
    readPendingIndex(db, dialect, (db) => pendingCount(db).executeTakeFirstOrThrow()),
    pdb
      .selectFrom('proof_batches')
      .select([sql<number>`count(*)`.as('n'), sql<number | null>`min(window_end)`.as('oldest')])
      .where('state', 'in', [...BUILDING_STATES, ...SEALING_STATES])
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('webhook_deliveries')
      .select(sql<number>`count(*)`.as('n'))
      .where('state', '=', 'pending')
      .executeTakeFirstOrThrow(),
  ]);
  return {
    pendingRecords: Number(pending.n),
    unsealedBatches: Number(unsealed.n),
    oldestUnsealedWindowEnd: unsealed.oldest === null ? null : Number(unsealed.oldest),
    webhookBacklog: Number(backlog.n),
  };
}
