/**
 * Pure pieces of proof batching: which window is closed, the deterministic order of a batch's
 * leaves, and the batch tree built with core's RFC 9162 code (never re-implemented here).
 */
import { buildMerkleTree, receiptLeafHash } from '@countersign/core';
import type { ClaimedLeaf, PlacedLeaf } from '../store/index.js';

/** A batching window: [start, end) in epoch ms. */
export interface ProofWindow {
  start: number;
  end: number;
}

/**
 * The most recent window that is closed at `now`: its end is at least `graceMs` in the past,
 * which gives writes stamped just before the boundary time to commit before it is claimed.
 */
export function lastClosedWindow(now: number, windowMs: number, graceMs: number): ProofWindow {
  const end = Math.floor((now - graceMs) / windowMs) * windowMs;
  return { start: end - windowMs, end };
}

/** The window an instant falls in. */
export function windowOf(at: number, windowMs: number): ProofWindow {
  const start = Math.floor(at / windowMs) * windowMs;
  return { start, end: start + windowMs };
}

/** When the batcher should next look: just after the next window closes (plus grace). */
export function nextCloseAt(now: number, windowMs: number, graceMs: number): number {
  return lastClosedWindow(now, windowMs, graceMs).end + windowMs + graceMs;
}

/** Exponential backoff of a failing batch: base · 2^attempts, capped. `attempts` counts earlier failures. */
export function backoffDelay(attempts: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(attempts, 30));
}

/**
 * Leaf order of a batch: by the time the log became final, then by log id, then by project id
 * (log ids are unique per project only, migration 005). Any instance that claims the same set
 * builds the same tree, and a receipt's leafIndex is reproducible from the logs alone.
 */
export function orderLeaves(leaves: readonly ClaimedLeaf[]): ClaimedLeaf[] {
  const cmp = (x: string, y: string): number => (x < y ? -1 : x > y ? 1 : 0);
  return [...leaves].sort((a, b) => a.eligibleAt - b.eligibleAt || cmp(a.logId, b.logId) || cmp(a.projectId, b.projectId));
}

/** A built batch tree whose leaves are materialised on demand (a 100,000-leaf batch never holds every path at once). */
export interface BatchTree {
  /** Lower-case hex root. */
  merkleRoot: string;
  /** Number of leaves. */
  size: number;
  /** Leaf `index` with its audit path. */
  leaf(index: number): PlacedLeaf;
}

/**
 * Builds a batch's RFC 9162 tree with core's code: leaf data = the 32 payloadHash bytes, so each
 * leaf hash is SHA-256(0x00 ‖ payloadHash). Leaves are in {@link orderLeaves} order.
 */
export function buildBatchTree(leaves: readonly ClaimedLeaf[]): BatchTree {
  const ordered = orderLeaves(leaves);
  const tree = buildMerkleTree(ordered.map((l) => receiptLeafHash(l.payloadHash)));
  // Audit paths share nodes: hex-encode each node once (the tree hands out the same node objects).
  const hexOf = new WeakMap<Uint8Array, string>();
  const hex = (node: Uint8Array): string => {
    let h = hexOf.get(node);
    if (h === undefined) {
      h = Buffer.from(node.buffer, node.byteOffset, node.byteLength).toString('hex');
      hexOf.set(node, h);
    }
    return h;
  };
  return {
    merkleRoot: tree.rootHex,
    size: tree.size,
    leaf(index) {
      const l = ordered[index]!;
      return {
        logId: l.logId,
        projectId: l.projectId,
        payloadHash: l.payloadHash.toLowerCase(),
        leafIndex: index,
        merklePath: tree.path(index).map(hex),
      };
    },
  };
}
