/**
 * RFC 9162 (Certificate Transparency 2.0) Merkle trees: hashing, tree building, audit paths,
 * consistency proofs and their verification.
 *
 * Verification follows transparency-dev/merkle `proof.VerifyInclusion` / `VerifyConsistency`
 * exactly (the public test vectors are theirs): the proof length must be exactly what the
 * algorithm consumes, the leaf hash must be 32 bytes, and equal-size consistency succeeds iff
 * the proof is empty and the roots are byte-equal. Nothing here throws for bad proof input;
 * the `check*` functions return a reason, the `verify*` functions a boolean.
 *
 * @packageDocumentation
 */
import { bytesEqual, fromHex, toHex } from '../encoding.js';
import { CoreError } from '../errors.js';
import { sha256 } from '../hash.js';

/** Size in bytes of every node hash (SHA-256). */
export const MERKLE_HASH_SIZE = 32;

/** Root of the empty tree: SHA-256 of the empty string. */
export const EMPTY_TREE_ROOT: Uint8Array = sha256(new Uint8Array(0));

/** RFC 9162 leaf hash: SHA-256(0x00 ‖ data). */
export function hashLeaf(data: Uint8Array): Uint8Array {
  const buf = new Uint8Array(data.length + 1);
  buf.set(data, 1);
  return sha256(buf);
}

// One reusable buffer for the common case of two 32-byte children: tree building hashes
// ~n interior nodes, and allocating a fresh 65-byte array for each is the dominant cost.
const NODE_BUF = new Uint8Array(1 + 2 * MERKLE_HASH_SIZE);
NODE_BUF[0] = 1;

/** RFC 9162 interior node hash: SHA-256(0x01 ‖ left ‖ right). */
export function hashChildren(left: Uint8Array, right: Uint8Array): Uint8Array {
  if (left.length === MERKLE_HASH_SIZE && right.length === MERKLE_HASH_SIZE) {
    NODE_BUF.set(left, 1);
    NODE_BUF.set(right, 1 + MERKLE_HASH_SIZE);
    return sha256(NODE_BUF);
  }
  // Verification may be fed odd-sized "hashes" (the vectors do this on purpose).
  const buf = new Uint8Array(1 + left.length + right.length);
  buf[0] = 1;
  buf.set(left, 1);
  buf.set(right, 1 + left.length);
  return sha256(buf);
}

/**
 * The Countersign receipt leaf: the leaf data is the 32 raw bytes of `payloadHash`, so the
 * leaf hash is SHA-256(0x00 ‖ payloadHash bytes).
 * @throws CoreError `invalid_merkle_input` when `payloadHashHex` is not 64 hex digits.
 */
export function receiptLeafHash(payloadHashHex: string): Uint8Array {
  if (typeof payloadHashHex !== 'string' || !/^[0-9a-fA-F]{64}$/.test(payloadHashHex)) {
    throw new CoreError('invalid_merkle_input', 'payloadHash must be 64 hex digits');
  }
  return hashLeaf(fromHex(payloadHashHex));
}

/** A built tree: every level is kept, so any audit path is a lookup, not a recomputation. */
export interface MerkleTree {
  /** Number of leaves. */
  readonly size: number;
  /** Root hash (the empty-tree root when `size` is 0). */
  readonly root: Uint8Array;
  /** Root hash as lower-case hex. */
  readonly rootHex: string;
  /** RFC 9162 audit path (bottom-up siblings) of leaf `index`. @throws CoreError `invalid_merkle_input` */
  path(index: number): Uint8Array[];
  /** {@link MerkleTree.path} as lower-case hex strings (the receipt's `merklePathJson`). */
  pathHex(index: number): string[];
  /** Hash of the complete subtree covering leaves [start, end) of this tree (RFC 9162 MTH). */
  subtreeHash(start: number, end: number): Uint8Array;
}

function assertLeafHashes(leafHashes: readonly Uint8Array[]): void {
  if (!Array.isArray(leafHashes)) throw new CoreError('invalid_merkle_input', 'leafHashes must be an array');
  for (const h of leafHashes) {
    if (!(h instanceof Uint8Array) || h.length !== MERKLE_HASH_SIZE) {
      throw new CoreError('invalid_merkle_input', 'every leaf hash must be 32 bytes');
    }
  }
}

function largestPowerOfTwoBelow(n: number): number {
  // Largest power of two strictly less than n (n >= 2); the RFC 9162 split point.
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * Builds the RFC 9162 tree over `leafHashes` (already leaf-hashed, 32 bytes each).
 *
 * Levels are built bottom-up, pairing neighbours and carrying an unpaired last node up
 * unchanged; that is the same tree as RFC 9162's "split at the largest power of two" recursion.
 * @throws CoreError `invalid_merkle_input` when a leaf hash is not 32 bytes.
 */
export function buildMerkleTree(leafHashes: readonly Uint8Array[]): MerkleTree {
  assertLeafHashes(leafHashes);
  const levels: Uint8Array[][] = [leafHashes.slice()];
  for (let cur = levels[0]!; cur.length > 1;) {
    const next: Uint8Array[] = new Array<Uint8Array>(Math.ceil(cur.length / 2));
    for (let i = 0; i + 1 < cur.length; i += 2) next[i >> 1] = hashChildren(cur[i]!, cur[i + 1]!);
    if (cur.length % 2 === 1) next[next.length - 1] = cur[cur.length - 1]!;
    levels.push(next);
    cur = next;
  }
  const size = leafHashes.length;
  const root = size === 0 ? EMPTY_TREE_ROOT : levels[levels.length - 1]![0]!;

  const path = (index: number): Uint8Array[] => {
    if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
      throw new CoreError('invalid_merkle_input', `leaf index ${index} is outside a tree of size ${size}`);
    }
    const out: Uint8Array[] = [];
    let i = index;
    for (let l = 0; l < levels.length - 1; l++) {
      const level = levels[l]!;
      const sibling = i ^ 1;
      // No sibling means this node is carried up unchanged: nothing to add at this level.
      if (sibling < level.length) out.push(level[sibling]!);
      i >>= 1;
    }
    return out;
  };

  const subtreeHash = (start: number, end: number): Uint8Array => {
    if (!(Number.isSafeInteger(start) && Number.isSafeInteger(end) && 0 <= start && start <= end && end <= size)) {
      throw new CoreError('invalid_merkle_input', `range [${start}, ${end}) is outside a tree of size ${size}`);
    }
    const n = end - start;
    if (n === 0) return EMPTY_TREE_ROOT;
    // An aligned power-of-two range is a stored node; anything else splits per RFC 9162.
    if ((n & (n - 1)) === 0 && start % n === 0) return levels[Math.log2(n)]![start / n]!;
    const k = largestPowerOfTwoBelow(n);
    return hashChildren(subtreeHash(start, start + k), subtreeHash(start + k, end));
  };

  return {
    size,
    root,
    rootHex: toHex(root),
    path,
    pathHex: (index) => path(index).map(toHex),
    subtreeHash,
  };
}

/** RFC 9162 root of `leafHashes`. @throws CoreError `invalid_merkle_input` */
export function merkleRoot(leafHashes: readonly Uint8Array[]): Uint8Array {
  return buildMerkleTree(leafHashes).root;
}

/** RFC 9162 audit path of leaf `index`. Build a tree once with {@link buildMerkleTree} for many paths. */
export function auditPath(leafHashes: readonly Uint8Array[], index: number): Uint8Array[] {
  return buildMerkleTree(leafHashes).path(index);
}

/**
 * RFC 9162 §2.1.4.1 consistency proof between the trees of the first `size1` and `size2`
 * leaves of `leafHashes` (0 < size1 <= size2 <= leafHashes.length; equal sizes give []).
 * @throws CoreError `invalid_merkle_input` on sizes outside that range.
 */
export function consistencyProof(leafHashes: readonly Uint8Array[], size1: number, size2: number): Uint8Array[] {
  const tree = buildMerkleTree(leafHashes);
  if (!(Number.isSafeInteger(size1) && Number.isSafeInteger(size2) && 0 < size1 && size1 <= size2 && size2 <= tree.size)) {
    throw new CoreError('invalid_merkle_input', `need 0 < size1 <= size2 <= ${tree.size}`);
  }
  const out: Uint8Array[] = [];
  // SUBPROOF(m, D[start:end], b) from RFC 9162, with subtree hashes read from the built levels.
  const subproof = (m: number, start: number, end: number, complete: boolean): void => {
    const n = end - start;
    if (m === n) {
      if (!complete) out.push(tree.subtreeHash(start, end));
      return;
    }
    const k = largestPowerOfTwoBelow(n);
    if (m <= k) {
      subproof(m, start, start + k, complete);
      out.push(tree.subtreeHash(start + k, end));
    } else {
      subproof(m - k, start + k, end, false);
      out.push(tree.subtreeHash(start, start + k));
    }
  };
  if (size1 < size2) subproof(size1, 0, size2, true);
  return out;
}

/** Outcome of a proof check: `ok`, or the reason it failed. */
export type MerkleCheck = { ok: true } | { ok: false; reason: string };

function bitLength(x: bigint): number {
  return x === 0n ? 0 : x.toString(2).length;
}

function popCount(x: bigint): number {
  let n = 0;
  for (const c of x.toString(2)) if (c === '1') n++;
  return n;
}

function trailingZeros(x: bigint): number {
  let n = 0;
  while (x > 0n && (x & 1n) === 0n) {
    x >>= 1n;
    n++;
  }
  return n;
}

function isIndex(value: unknown): value is number {
  // Indices beyond 2^53 cannot be represented exactly in JSON-parsed numbers; treat as invalid.
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isHashList(value: unknown): value is Uint8Array[] {
  return Array.isArray(value) && value.every((h) => h instanceof Uint8Array);
}

// Split of an inclusion proof for `index` in a tree of `size` leaves into the part below the
// point where the paths to index and to size-1 diverge ("inner") and the part above ("border").
function decompose(index: bigint, size: bigint): { inner: number; border: number } {
  const inner = bitLength(index ^ (size - 1n));
  return { inner, border: popCount(index >> BigInt(inner)) };
}

function chainInner(seed: Uint8Array, proof: Uint8Array[], index: bigint): Uint8Array {
  proof.forEach((h, i) => {
    seed = ((index >> BigInt(i)) & 1n) === 0n ? hashChildren(seed, h) : hashChildren(h, seed);
  });
  return seed;
}

function chainInnerRight(seed: Uint8Array, proof: Uint8Array[], index: bigint): Uint8Array {
  proof.forEach((h, i) => {
    if (((index >> BigInt(i)) & 1n) === 1n) seed = hashChildren(h, seed);
  });
  return seed;
}

function chainBorderRight(seed: Uint8Array, proof: Uint8Array[]): Uint8Array {
  for (const h of proof) seed = hashChildren(h, seed);
  return seed;
}

/**
 * Root implied by an inclusion proof (RFC 9162 §2.1.3.2), or the reason it cannot be computed.
 * `proof` is the bottom-up sibling list; its length must be exactly what the algorithm consumes.
 */
export function rootFromInclusionProof(
  leafHash: Uint8Array,
  index: number,
  treeSize: number,
  proof: readonly Uint8Array[],
): { ok: true; root: Uint8Array } | { ok: false; reason: string } {
  if (!isIndex(index) || !isIndex(treeSize)) return { ok: false, reason: 'index and tree size must be non-negative safe integers' };
  if (index >= treeSize) return { ok: false, reason: `index ${index} is beyond a tree of size ${treeSize}` };
  if (!(leafHash instanceof Uint8Array) || leafHash.length !== MERKLE_HASH_SIZE) {
    return { ok: false, reason: 'leaf hash must be 32 bytes' };
  }
  if (!isHashList(proof)) return { ok: false, reason: 'proof must be a list of byte strings' };
  const { inner, border } = decompose(BigInt(index), BigInt(treeSize));
  if (proof.length !== inner + border) {
    return { ok: false, reason: `proof has ${proof.length} hashes, expected ${inner + border}` };
  }
  const res = chainInner(leafHash, proof.slice(0, inner), BigInt(index));
  return { ok: true, root: chainBorderRight(res, proof.slice(inner)) };
}

/** Checks an RFC 9162 inclusion proof of `leafHash` at `index` in a tree of `treeSize` with `root`. */
export function checkInclusion(
  leafHash: Uint8Array,
  index: number,
  treeSize: number,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): MerkleCheck {
  const computed = rootFromInclusionProof(leafHash, index, treeSize, proof);
  if (!computed.ok) return computed;
  if (!(root instanceof Uint8Array) || !bytesEqual(computed.root, root)) {
    return { ok: false, reason: `computed root ${toHex(computed.root)} does not match the expected root` };
  }
  return { ok: true };
}

/** Boolean form of {@link checkInclusion}. */
export function verifyInclusion(
  leafHash: Uint8Array,
  index: number,
  treeSize: number,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  return checkInclusion(leafHash, index, treeSize, proof, root).ok;
}

/**
 * Checks an RFC 9162 consistency proof that the tree of `size1` leaves with `root1` is a prefix
 * of the tree of `size2` leaves with `root2`, with transparency-dev semantics (see file header).
 */
export function checkConsistency(
  size1: number,
  size2: number,
  proof: readonly Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): MerkleCheck {
  if (!isIndex(size1) || !isIndex(size2)) return { ok: false, reason: 'sizes must be non-negative safe integers' };
  if (!isHashList(proof) || !(root1 instanceof Uint8Array) || !(root2 instanceof Uint8Array)) {
    return { ok: false, reason: 'roots and proof must be byte strings' };
  }
  if (size2 < size1) return { ok: false, reason: `size2 (${size2}) < size1 (${size1})` };
  if (size1 === 0) return { ok: false, reason: 'consistency proof from an empty tree is meaningless' };
  if (size1 === size2) {
    if (proof.length > 0) return { ok: false, reason: 'sizes are equal but the proof is not empty' };
    return bytesEqual(root1, root2) ? { ok: true } : { ok: false, reason: 'sizes are equal but the roots differ' };
  }
  if (proof.length === 0) return { ok: false, reason: 'empty proof' };

  const s1 = BigInt(size1);
  const decomposed = decompose(s1 - 1n, BigInt(size2));
  const shift = trailingZeros(s1);
  const inner = decomposed.inner - shift;
  // When size1 is a power of two its root is the first node of the path and is not sent.
  const seedIsRoot1 = s1 === 1n << BigInt(shift);
  const seed = seedIsRoot1 ? root1 : proof[0]!;
  const start = seedIsRoot1 ? 0 : 1;
  if (proof.length !== start + inner + decomposed.border) {
    return { ok: false, reason: `proof has ${proof.length} hashes, expected ${start + inner + decomposed.border}` };
  }
  const rest = proof.slice(start);
  const mask = (s1 - 1n) >> BigInt(shift);
  const hash1 = chainBorderRight(chainInnerRight(seed, rest.slice(0, inner), mask), rest.slice(inner));
  if (!bytesEqual(hash1, root1)) return { ok: false, reason: 'computed first root does not match root1' };
  const hash2 = chainBorderRight(chainInner(seed, rest.slice(0, inner), mask), rest.slice(inner));
  if (!bytesEqual(hash2, root2)) return { ok: false, reason: 'computed second root does not match root2' };
  return { ok: true };
}

/** Boolean form of {@link checkConsistency}. */
export function verifyConsistency(
  size1: number,
  size2: number,
  proof: readonly Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): boolean {
  return checkConsistency(size1, size2, proof, root1, root2).ok;
}
