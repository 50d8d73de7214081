/**
 * Proof batches and receipts (migration 003). The batcher (proofs/batcher.ts, proofs/build.ts)
 * drives these steps; every one is a single statement or short transaction, so a crash between
 * two of them leaves a state the next attempt continues from:
 *
 *   build.claimChunk … freeze … storeReceipts … finish (proof-claims.ts) → states `claiming`, `building`, `timestamping`
 *   saveTimestamp (only while none is stored)                        → state `ledger`
 *   saveLedgerEntry (only while none is stored)                      → state `sealed`
 */
import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { Database, LogsTable } from './schema.js';
import type { LogsProofColumns, ProofBatchesTable } from './migrations/003_proofs.js';
import { withTryAdvisoryLock, type AdvisoryKey } from './advisory-lock.js';
import { BatchBuildSteps } from './proof-claims.js';

/** The schema with `logs.proof_batch_id` (migration 003): for the proofs and the completion guard. */
export type ProofDatabase = Omit<Database, 'logs'> & { logs: LogsTable & LogsProofColumns };

/** Where a batch is in its sealing. */
export type ProofBatchState = 'claiming' | 'building' | 'timestamping' | 'ledger' | 'sealed';

/** States of a batch still being built (proof-claims.ts): its root is not out yet. */
export const BUILDING_STATES: ProofBatchState[] = ['claiming', 'building'];
/** States of a built batch waiting for its timestamp or its ledger entry. */
export const SEALING_STATES: ProofBatchState[] = ['timestamping', 'ledger'];

/** A leaf as claimed from the logs: what the tree is built from. */
export interface ClaimedLeaf {
  logId: string;
  projectId: string;
  payloadHash: string;
  /** When the log became final (completion time of a proxied exchange, else receipt time), epoch ms. */
  eligibleAt: number;
}

/** A leaf with its place in the tree, as stored. */
export interface PlacedLeaf {
  logId: string;
  projectId: string;
  payloadHash: string;
  leafIndex: number;
  /** Hex siblings, bottom-up. */
  merklePath: string[];
}

/** A proof batch row. */
export interface ProofBatchRow {
  id: string;
  windowStart: number;
  windowEnd: number;
  treeSize: number;
  merkleRoot: string;
  state: ProofBatchState;
  tsaResponse: string | null;
  rekorLogIndex: number | null;
  ledgerUrl: string | null;
  ledgerUuid: string | null;
  integratedTime: number | null;
  attempts: number;
  nextAttemptAt: number;
  lastError: string | null;
  createdAt: number;
  sealedAt: number | null;
}

/** A stored receipt row joined with its batch. */
export interface StoredReceipt {
  logId: string;
  projectId: string;
  payloadHash: string;
  leafIndex: number;
  merklePath: string[];
  batch: ProofBatchRow;
}

/** Advisory lock key of the proof sealer ('CSPR', 1): one sealer at a time across instances. */
const SEAL_LOCK: AdvisoryKey = [0x43535052, 1];

/** Data access for proof batches and receipts. */
export class ProofRepository {
  readonly #db: Kysely<ProofDatabase>;
  readonly #pgPool: pg.Pool | undefined;
  /** In-process mutex for SQLite (one process per database file). */
  #localHeld = false;

  /** The steps that build a batch (proof-claims.ts). */
  readonly build: BatchBuildSteps;

  constructor(db: Kysely<Database>, pgPool?: pg.Pool) {
    this.#db = db as unknown as Kysely<ProofDatabase>;
    this.#pgPool = pgPool;
    this.build = new BatchBuildSteps(this.#db);
  }

  /**
   * Runs `fn` as the one sealer: on PostgreSQL under a session advisory lock held on a dedicated
   * connection (released with the session if this process dies), on SQLite under an in-process
   * flag. Returns undefined without running `fn` when another sealer holds the lock.
   */
  async withSealLock<T>(fn: () => Promise<T>): Promise<T | undefined> {
    if (!this.#pgPool) {
      if (this.#localHeld) return undefined;
      this.#localHeld = true;
      try {
        return await fn();
      } finally {
        this.#localHeld = false;
      }
    }
    return withTryAdvisoryLock(this.#pgPool, SEAL_LOCK, fn);
  }

  /** Batches left `claiming` or `building`, oldest window first. */
  async unfinishedBatches(): Promise<ProofBatchRow[]> {
    const rows = await this.#db
      .selectFrom('proof_batches')
      .selectAll()
      .where('state', 'in', BUILDING_STATES)
      .orderBy('window_start', 'asc')
      .execute();
    return rows.map(fromBatchRow);
  }

  /** Built batches not yet sealed whose next attempt is due at `now`, oldest window first. */
  async dueBatches(now: number, limit = 100): Promise<ProofBatchRow[]> {
    const rows = await this.#db
      .selectFrom('proof_batches')
      .selectAll()
      .where('state', 'in', SEALING_STATES)
      .where('next_attempt_at', '<=', now)
      .orderBy('window_start', 'asc')
      .limit(limit)
      .execute();
    return rows.map(fromBatchRow);
  }

  /** Earliest `next_attempt_at` of the unsealed batches, if any. */
  async nextDueAt(): Promise<number | undefined> {
    const r = await this.#db
      .selectFrom('proof_batches')
      .select((eb) => eb.fn.min('next_attempt_at').as('at'))
      .where('state', 'in', SEALING_STATES)
      .executeTakeFirst();
    return r?.at == null ? undefined : Number(r.at);
  }

  /** Stores the TSA answer, unless one is stored already (then the stored one stays). */
  async saveTimestamp(batchId: string, tsaResponseBase64: string): Promise<void> {
    await this.#db
      .updateTable('proof_batches')
      .set({ tsa_response: tsaResponseBase64, state: 'ledger' })
      .where('id', '=', batchId)
      .where('tsa_response', 'is', null)
      .execute();
  }

  /** Stores the ledger entry and marks the batch sealed, unless an entry is stored already. */
  async saveLedgerEntry(
    batchId: string,
    entry: { logIndex: number; uuid: string; ledgerUrl: string; integratedTime: number },
    sealedAt: number,
  ): Promise<void> {
    await this.#db
      .updateTable('proof_batches')
      .set({
        rekor_log_index: entry.logIndex,
        ledger_uuid: entry.uuid,
        ledger_url: entry.ledgerUrl,
        integrated_time: entry.integratedTime,
        state: 'sealed',
        sealed_at: sealedAt,
        last_error: null,
      })
      .where('id', '=', batchId)
      .where('rekor_log_index', 'is', null)
      .execute();
  }

  /** Records a failed attempt: the batch stays where it is and is retried at `nextAttemptAt`. */
  async recordFailure(batchId: string, error: string, nextAttemptAt: number): Promise<void> {
    await this.#db
      .updateTable('proof_batches')
      .set((eb) => ({ attempts: eb('attempts', '+', 1), next_attempt_at: nextAttemptAt, last_error: error.slice(0, 1000) }))
      .where('id', '=', batchId)
      .execute();
  }

  /** One batch. */
  async getBatch(batchId: string): Promise<ProofBatchRow | undefined> {
    const r = await this.#db.selectFrom('proof_batches').selectAll().where('id', '=', batchId).executeTakeFirst();
    return r && fromBatchRow(r);
  }

  /** Batches, oldest window first (operations and tests). */
  async listBatches(limit = 1000): Promise<ProofBatchRow[]> {
    const rows = await this.#db.selectFrom('proof_batches').selectAll().orderBy('window_start', 'asc').limit(limit).execute();
    return rows.map(fromBatchRow);
  }

  /** The receipt row of a log in `projectId` joined with its batch, if the log is a leaf yet. */
  async receipt(projectId: string, logId: string): Promise<StoredReceipt | undefined> {
    const r = await this.#db
      .selectFrom('proof_receipts as r')
      .innerJoin('proof_batches as b', 'b.id', 'r.batch_id')
      .selectAll('b')
      .select(['r.log_id', 'r.project_id', 'r.payload_hash', 'r.leaf_index', 'r.merkle_path'])
      .where('r.project_id', '=', projectId)
      .where('r.log_id', '=', logId)
      .executeTakeFirst();
    if (!r) return undefined;
    return {
      logId: r.log_id,
      projectId: r.project_id,
      payloadHash: r.payload_hash,
      leafIndex: r.leaf_index,
      merklePath: JSON.parse(r.merkle_path) as string[],
      batch: fromBatchRow(r),
    };
  }

  /** Every leaf of a batch in leaf order (operations and tests). */
  async leaves(batchId: string): Promise<PlacedLeaf[]> {
    const rows = await this.#db
      .selectFrom('proof_receipts')
      .selectAll()
      .where('batch_id', '=', batchId)
      .orderBy('leaf_index', 'asc')
      .execute();
    return rows.map((r) => ({
      logId: r.log_id,
      projectId: r.project_id,
      payloadHash: r.payload_hash,
      leafIndex: r.leaf_index,
      merklePath: JSON.parse(r.merkle_path) as string[],
    }));
  }
}

function fromBatchRow(r: ProofBatchesTable): ProofBatchRow {
  const num = (v: number | null): number | null => (v === null ? null : Number(v));
  return {
    id: r.id,
    windowStart: Number(r.window_start),
    windowEnd: Number(r.window_end),
    treeSize: Number(r.tree_size),
    merkleRoot: r.merkle_root,
    state: r.state as ProofBatchState,
    tsaResponse: r.tsa_response,
    rekorLogIndex: num(r.rekor_log_index),
    ledgerUrl: r.ledger_url,
    ledgerUuid: r.ledger_uuid,
    integratedTime: num(r.integrated_time),
    attempts: Number(r.attempts),
    nextAttemptAt: Number(r.next_attempt_at),
    lastError: r.last_error,
    createdAt: Number(r.created_at),
    sealedAt: num(r.sealed_at),
  };
}
