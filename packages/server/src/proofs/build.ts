/**
 * Builds a proof batch in short steps (store/proof-claims.ts), yielding to the event loop
 * between them, so that neither the loop nor, on SQLite, the write lock is held for longer than
 * one chunk: claim the window's leaves a chunk at a time, freeze the set with its root, store the
 * receipts a chunk at a time, then hand the batch to the timestamp step. Also continues a batch
 * that a crash (or a failed pass) left `claiming` or `building`.
 */
import type { ProofBatchRow, Store } from '../store/index.js';
import { buildBatchTree } from './batch.js';

/** How a batch is built. */
export interface BuildOptions {
  /** Leaves claimed, and receipts stored, per transaction. */
  chunk: number;
  /** Clock, epoch ms. */
  now: () => number;
}

/** Leaves per step by default: a step of 100 stays within a few milliseconds on either store, even on a busy core. */
export const DEFAULT_BUILD_CHUNK = 100;

/** Lets the event loop (and, on SQLite, the writer thread's commits) run between two steps. */
const breathe = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Claims the window's leaves into a new batch `batchId` and builds it.
 * @returns the batch, now `timestamping`, or undefined when the window had nothing to claim
 *   (or already has a batch).
 */
export async function claimAndBuild(
  store: Store,
  req: { batchId: string; windowStart: number; windowEnd: number },
  o: BuildOptions,
): Promise<ProofBatchRow | undefined> {
  const claimed = await claimAll(store, { ...req, now: o.now() }, o.chunk);
  if (claimed === 0) return undefined;
  return build(store, req.batchId, o);
}

/** Finishes a batch left `claiming` or `building`; returns it, now `timestamping`. */
export async function continueBatch(store: Store, batch: ProofBatchRow, o: BuildOptions): Promise<ProofBatchRow | undefined> {
  if (batch.state === 'claiming') {
    await claimAll(store, { batchId: batch.id, windowStart: batch.windowStart, windowEnd: batch.windowEnd, now: o.now() }, o.chunk);
  }
  return build(store, batch.id, o);
}

async function claimAll(
  store: Store,
  req: { batchId: string; windowStart: number; windowEnd: number; now: number },
  chunk: number,
): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await store.proofs.build.claimChunk(req, chunk);
    total += n;
    if (n < chunk) return total;
    await breathe();
  }
}

/** From `claiming` (freezes it) or `building` (checks the claimed set is the frozen one) to `timestamping`. */
async function build(store: Store, batchId: string, o: BuildOptions): Promise<ProofBatchRow | undefined> {
  const steps = store.proofs.build;
  const before = await store.proofs.getBatch(batchId);
  if (!before || (before.state !== 'claiming' && before.state !== 'building')) return before;
  const leaves = await steps.claimedLeaves(batchId);
  await breathe();
  const tree = buildBatchTree(leaves);
  if (before.state === 'claiming') await steps.freeze(batchId, tree.size, tree.merkleRoot);
  else if (before.merkleRoot !== tree.merkleRoot || before.treeSize !== tree.size)
    // Its claimed logs changed since it froze (a project deleted, a purge): nothing outside has
    // seen this root, so the batch is stored again from what is claimed now.
    await steps.restartBuild(batchId, tree.size, tree.merkleRoot);
  for (let i = 0; i < tree.size; i += o.chunk) {
    await breathe();
    const placed = Array.from({ length: Math.min(o.chunk, tree.size - i) }, (_, k) => tree.leaf(i + k));
    await steps.storeReceipts(batchId, placed);
  }
  await steps.finish(batchId, o.now());
  return store.proofs.getBatch(batchId);
}
