/**
 * The embedded transparency ledger: append-only entries in the store, an RFC 9162 tree over
 * their leaf hashes, signed entry timestamps (SET) and signed checkpoints, all in Rekor v1's
 * formats (core's checkpoint helpers define the signed bytes once for writer and verifier).
 *
 * Every instance keeps the leaf hashes in memory and catches up from the store before it
 * answers, so several instances sharing one PostgreSQL database serve the same tree.
 */
import {
  buildMerkleTree,
  consistencyProof,
  formatCheckpoint,
  formatCheckpointBody,
  fromHex,
  hashLeaf,
  ledgerSetPayload,
  toBase64,
  toHex,
  utf8,
  type MerkleTree,
} from '@countersign/core';
import type { AppContext } from '../app-context.js';
import { DuplicateLedgerEntryError, type LedgerEntryRow } from '../store/index.js';
import { bodyBytes, hashedRekordBody, type HashedRekord, type LogEntryJson } from './entries.js';
import { checkpointName, checkpointOrigin, loadLedgerIdentity, type LedgerIdentity } from './identity.js';

/** The signed tree head. */
export interface TreeHead {
  treeSize: number;
  /** Root hash, hex. */
  rootHash: string;
  /** Signed-note checkpoint for (treeSize, rootHash). */
  checkpoint: string;
}

/** Thrown by {@link EmbeddedLedger.append} for a body already in the log. */
export { DuplicateLedgerEntryError };

const instances = new WeakMap<AppContext, Promise<EmbeddedLedger>>();

/** The embedded ledger of `ctx`'s app (one per app, its identity made on first use). */
export function getEmbeddedLedger(ctx: AppContext): Promise<EmbeddedLedger> {
  let p = instances.get(ctx);
  if (!p) {
    p = loadLedgerIdentity(ctx).then((identity) => new EmbeddedLedger(ctx, identity));
    // A failed start (store down) must not be cached forever.
    p.catch(() => instances.delete(ctx));
    instances.set(ctx, p);
  }
  return p;
}

const PAGE = 10_000;

/** The embedded ledger of one app. */
export class EmbeddedLedger {
  private leaves: Uint8Array[] = [];
  private tree: MerkleTree | undefined;
  /** Signed checkpoints by tree size, with the name they were signed under. */
  private checkpoints = new Map<number, { name: string; text: string }>();
  private syncQueue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly ctx: AppContext,
    readonly identity: LedgerIdentity,
  ) {}

  /** The Rekor UUID of a leaf: 16-hex tree ID + 64-hex leaf hash. */
  uuidOf(leafHashHex: string): string {
    return this.identity.treeIdHex + leafHashHex;
  }

  /** Appends `body` and returns the stored row. @throws DuplicateLedgerEntryError */
  async append(body: HashedRekord): Promise<LedgerEntryRow> {
    const bytes = bodyBytes(body);
    const leafHash = toHex(hashLeaf(bytes));
    const bodyB64 = toBase64(bytes);
    const row = await this.ctx.store.ledger.append(leafHash, async (logIndex) => {
      const integratedTime = Math.floor(this.ctx.now() / 1000);
      const setPayload = ledgerSetPayload({ body: bodyB64, integratedTime, logID: this.identity.logId, logIndex });
      return { body: bodyB64, integratedTime, signedEntryTimestamp: toBase64(this.identity.signMessage(utf8(setPayload))) };
    });
    return row;
  }

  /** Enters a Merkle root: a hashedrekord whose data hash is the root, signed by the ledger key over it. */
  async appendRoot(rootHex: string): Promise<LedgerEntryRow> {
    if (!/^[0-9a-fA-F]{64}$/.test(rootHex)) throw new TypeError('merkle root must be 64 hex digits');
    const signature = this.identity.signDigest(fromHex(rootHex));
    return this.append(hashedRekordBody(rootHex, signature, this.identity.publicKeyPem));
  }

  /** Brings the in-memory leaves up to the store's current size; returns that size. */
  sync(): Promise<number> {
    // Catch-ups run one after another: two running at once would both append the same page.
    const run = this.syncQueue.then(() => this.catchUp());
    this.syncQueue = run.catch(() => undefined);
    return run;
  }

  private async catchUp(): Promise<number> {
    const size = await this.ctx.store.ledger.size();
    while (this.leaves.length < size) {
      const page = await this.ctx.store.ledger.leafHashes(this.leaves.length, Math.min(PAGE, size - this.leaves.length));
      if (page.length === 0) break;
      for (const h of page) this.leaves.push(fromHex(h));
    }
    return Math.min(size, this.leaves.length);
  }

  /** The tree of the first `size` leaves (cached for the latest size). */
  private treeOf(size: number): MerkleTree {
    if (this.tree?.size === size) return this.tree;
    const t = buildMerkleTree(this.leaves.slice(0, size));
    if (size === this.leaves.length) this.tree = t;
    return t;
  }

  /** The name checkpoints are signed under now (see {@link checkpointName}). */
  checkpointName(): string {
    return checkpointName(this.ctx);
  }

  private checkpointFor(size: number, root: Uint8Array): string {
    // The name follows the base URL, which changes once an ephemeral port is bound.
    const name = this.checkpointName();
    const cached = this.checkpoints.get(size);
    if (cached !== undefined && cached.name === name) return cached.text;
    const body = formatCheckpointBody(checkpointOrigin(name, this.identity.treeId), size, root);
    const signature = this.identity.signMessage(utf8(body));
    const text: string = formatCheckpoint(body, [{ name, keyHint: this.identity.keyHint, signature }]);
    // Checkpoints of the latest sizes are asked for again and again; keep a few.
    if (this.checkpoints.size > 64) this.checkpoints.clear();
    this.checkpoints.set(size, { name, text });
    return text;
  }

  /** The current signed tree head. */
  async treeHead(): Promise<TreeHead> {
    const size = await this.sync();
    const tree = this.treeOf(size);
    return { treeSize: size, rootHash: tree.rootHex, checkpoint: this.checkpointFor(size, tree.root) };
  }

  /** The Rekor LogEntry response for a stored row, with an inclusion proof in the current tree. */
  async entryResponse(row: LedgerEntryRow): Promise<Record<string, LogEntryJson>> {
    const size = Math.max(await this.sync(), row.logIndex + 1);
    if (size > this.leaves.length) throw new Error(`ledger leaf ${row.logIndex} is not loaded`);
    const tree = this.treeOf(size);
    return {
      [this.uuidOf(row.leafHash)]: {
        body: row.body,
        integratedTime: row.integratedTime,
        logID: this.identity.logId,
        logIndex: row.logIndex,
        verification: {
          inclusionProof: {
            logIndex: row.logIndex,
            rootHash: tree.rootHex,
            treeSize: size,
            hashes: tree.pathHex(row.logIndex),
            checkpoint: this.checkpointFor(size, tree.root),
          },
          signedEntryTimestamp: row.signedEntryTimestamp,
        },
      },
    };
  }

  /** The entry at `logIndex`, or undefined. */
  async entryByIndex(logIndex: number): Promise<Record<string, LogEntryJson> | undefined> {
    const row = await this.ctx.store.ledger.byIndex(logIndex);
    return row ? this.entryResponse(row) : undefined;
  }

  /** The entry with Rekor UUID `uuid` (64-hex leaf hash, or 80-hex with this tree's ID), or undefined. */
  async entryByUuid(uuid: string): Promise<Record<string, LogEntryJson> | undefined> {
    const id = uuid.toLowerCase();
    let leaf: string;
    if (/^[0-9a-f]{64}$/.test(id)) leaf = id;
    else if (/^[0-9a-f]{80}$/.test(id) && id.startsWith(this.identity.treeIdHex)) leaf = id.slice(16);
    else return undefined;
    const row = await this.ctx.store.ledger.byLeafHash(leaf);
    return row ? this.entryResponse(row) : undefined;
  }

  /**
   * RFC 9162 consistency proof between the trees of `firstSize` and `lastSize` leaves, with the
   * root of the larger; undefined when `lastSize` is beyond the current tree.
   */
  async consistency(firstSize: number, lastSize: number): Promise<{ rootHash: string; hashes: string[] } | undefined> {
    const size = await this.sync();
    if (lastSize > size) return undefined;
    const tree = this.treeOf(lastSize);
    const hashes = firstSize === 0 ? [] : consistencyProof(this.leaves.slice(0, lastSize), firstSize, lastSize).map(toHex);
    return { rootHash: tree.rootHex, hashes };
  }
}
