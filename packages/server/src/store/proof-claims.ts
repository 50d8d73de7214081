/**
 * The steps that build a proof batch, each one short transaction (docs/proofs.md, "How a batch
 * is built"). A window's batch used to be one transaction: claim every leaf, build the tree,
 * store every receipt. At 1,000 proof requests a second that is 5,000 leaves, and on SQLite the
 * transaction ran on the event loop's connection holding the write lock for 160 ms to 370 ms,
 * so every call stalled behind it (docs/performance.md, "Proofs"). Now:
 *
 *   claimChunk  (tx: ≤ N leaves get the batch's id; the batch row is made by the first)  state `claiming`
 *   freeze      (the claimed set is final; its root and size are stored)                  state `building`
 *   storeReceipts (tx per ≤ N receipts, insert-or-keep)
 *   finish      (every receipt is stored)                                                 state `timestamping`
 *
 * Nothing outside sees a batch before `timestamping`: its root is not timestamped or entered in
 * the ledger, so a batch left mid-way by a crash is continued (more leaves claimed while
 * `claiming`; the tree rebuilt from the claimed logs while `building`), and if its claimed logs
 * changed meanwhile (a project deleted, a retention purge), its root is recomputed and its
 * receipts stored again ({@link BatchBuildSteps.restartBuild}).
 */
import { sql, type Kysely } from 'kysely';
import type { ProofBatchesTable } from './migrations/003_proofs.js';
import type { ClaimedLeaf, PlacedLeaf, ProofDatabase } from './proofs.js';

/** A window to claim leaves for, into the batch `batchId`. */
export interface ClaimChunkRequest {
  batchId: string;
  windowStart: number;
  windowEnd: number;
  now: number;
}

const eligibleAt = sql<number>`coalesce(completed_at, received_at)`;

/** The steps, on the store's database (`store.proofs.build`). */
export class BatchBuildSteps {
  constructor(private readonly db: Kysely<ProofDatabase>) {}

  /**
   * One short transaction: gives up to `limit` unclaimed final logs that asked for a proof and
   * became final before the window's end (earlier stragglers included) the batch's id, making the
   * batch row (state `claiming`) with the first of them.
   * @returns how many logs it claimed; 0 makes no batch row.
   */
  async claimChunk(req: ClaimChunkRequest, limit: number): Promise<number> {
    return this.db.transaction().execute(async (tx) => {
      const existing = await tx
        .selectFrom('proof_batches')
        .select(['id', 'state'])
        .where('window_start', '=', req.windowStart)
        .executeTakeFirst();
      if (existing && (existing.id !== req.batchId || existing.state !== 'claiming')) return 0;
      if (!existing) await tx.insertInto('proof_batches').values(newBatchRow(req)).execute();
      const r = await tx
        .updateTable('logs')
        .set({ proof_batch_id: req.batchId })
        .where('seq', 'in', (eb) =>
          eb
            .selectFrom('logs')
            .select('seq')
            .where('request_proof', '=', 1)
            .where('proof_batch_id', 'is', null)
            .where('payload_hash', 'is not', null)
            .where('status', '!=', 'pending')
            .where(eligibleAt, '<', req.windowEnd)
            .limit(limit),
        )
        .executeTakeFirst();
      const claimed = Number(r.numUpdatedRows);
      // Nothing to claim in a window that had no batch yet: no batch either.
      if (claimed === 0 && !existing) await tx.deleteFrom('proof_batches').where('id', '=', req.batchId).execute();
      return claimed;
    });
  }

  /** The logs a batch has claimed, as tree leaves (a read, through the partial index of migration 012). */
  async claimedLeaves(batchId: string): Promise<ClaimedLeaf[]> {
    const rows = await this.db
      .selectFrom('logs')
      .select(['id', 'project_id', 'payload_hash', eligibleAt.as('eligible_at')])
      .where('proof_batch_id', '=', batchId)
      .execute();
    return rows.map((r) => ({ logId: r.id, projectId: r.project_id, payloadHash: r.payload_hash!, eligibleAt: Number(r.eligible_at) }));
  }

  /** `claiming` → `building`: the claimed set is final; stores the tree's size and root. */
  async freeze(batchId: string, treeSize: number, merkleRoot: string): Promise<void> {
    await this.db
      .updateTable('proof_batches')
      .set({ state: 'building', tree_size: treeSize, merkle_root: merkleRoot })
      .where('id', '=', batchId)
      .where('state', '=', 'claiming')
      .execute();
  }

  /**
   * For a `building` batch whose claimed logs changed since it froze (a project deleted, a purge):
   * drops its receipts and stores the new size and root, in one transaction.
   */
  async restartBuild(batchId: string, treeSize: number, merkleRoot: string): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      await tx.deleteFrom('proof_receipts').where('batch_id', '=', batchId).execute();
      await tx
        .updateTable('proof_batches')
        .set({ tree_size: treeSize, merkle_root: merkleRoot })
        .where('id', '=', batchId)
        .where('state', '=', 'building')
        .execute();
    });
  }

  /** Stores receipts of a `building` batch (one statement; a receipt already stored is kept). */
  async storeReceipts(batchId: string, leaves: PlacedLeaf[]): Promise<void> {
    if (leaves.length === 0) return;
    await this.db
      .insertInto('proof_receipts')
      .values(
        leaves.map((l) => ({
          log_id: l.logId,
          project_id: l.projectId,
          batch_id: batchId,
          leaf_index: l.leafIndex,
          payload_hash: l.payloadHash,
          merkle_path: JSON.stringify(l.merklePath),
        })),
      )
      .onConflict((oc) => oc.columns(['project_id', 'log_id']).doNothing())
      .execute();
  }

  /** `building` → `timestamping`: every receipt is stored; the batch is due for its timestamp now. */
  async finish(batchId: string, now: number): Promise<void> {
    await this.db
      .updateTable('proof_batches')
      .set({ state: 'timestamping', next_attempt_at: now })
      .where('id', '=', batchId)
      .where('state', '=', 'building')
      .execute();
  }
}

function newBatchRow(req: ClaimChunkRequest): ProofBatchesTable {
  return {
    id: req.batchId,
    window_start: req.windowStart,
    window_end: req.windowEnd,
    tree_size: 0,
    merkle_root: '',
    state: 'claiming',
    tsa_response: null,
    rekor_log_index: null,
    ledger_url: null,
    ledger_uuid: null,
    integrated_time: null,
    attempts: 0,
    next_attempt_at: req.now,
    last_error: null,
    created_at: req.now,
    sealed_at: null,
  };
}
