/**
 * The proof batcher: turns every log that asked for a proof into a leaf of one RFC 9162 batch
 * per window (spec 8: 5 s) across all projects, then timestamps the root (RFC 3161) and enters
 * it in the ledger. Receipts are readable once the batch is sealed.
 *
 * Guarantees, and what gives them:
 * - A leaf is in exactly one batch: a claim is an UPDATE … WHERE proof_batch_id IS NULL, and
 *   `proof_receipts` (project_id, log_id) is a primary key.
 * - No step stalls the proxy: a batch is claimed and stored in short steps (build.ts), each one
 *   chunk of leaves, with the event loop free between them.
 * - One batch per window: `proof_batches.window_start` is unique, and on PostgreSQL every pass
 *   runs under a session advisory lock, so with several instances one seals and the others wait
 *   (their logs are in the same table, so they are claimed by whichever instance leads).
 * - Nothing is lost: a log that commits after its window was claimed (clock skew, a slow write)
 *   is claimed by the next batch; a failed TSA or ledger call leaves the batch where it is, to be
 *   retried with exponential backoff by any instance, including after a restart.
 * - No step is redone differently: a batch left mid-build is continued from its claimed logs
 *   before anything is timestamped (build.ts), and the TSA token and ledger entry are stored as
 *   each arrives, so a retry continues with the same root.
 */
import { fromHex, randomId, toBase64 } from '@countersign/core';
import type { Logger } from 'pino';
import type { Store } from '../store/index.js';
import type { ProofBatchRow } from '../store/index.js';
import type { TimestampWitness } from '../tsa/witness.js';
import type { LedgerWitness } from '../ledger/witness.js';
import { backoffDelay, lastClosedWindow, nextCloseAt } from './batch.js';
import { claimAndBuild, continueBatch, DEFAULT_BUILD_CHUNK } from './build.js';
import { metrics } from '../metrics/registry.js';

/** Settings of a {@link ProofBatcher}. */
export interface ProofBatcherOptions {
  store: Store;
  /** The TSA (resolved lazily, so a slow first-start CA does not hold up the app). */
  timestampWitness: () => Promise<TimestampWitness>;
  /** The ledger (resolved lazily). */
  ledgerWitness: () => Promise<LedgerWitness>;
  /** Window length, ms. */
  windowMs: number;
  /** How long after a window ends before it is claimed, ms (default min(500, windowMs / 5)). */
  graceMs?: number;
  /** Backoff of a failing batch: first delay and cap, ms (default min(1000, windowMs) and 5 min). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Leaves claimed, and receipts stored, per transaction (default {@link DEFAULT_BUILD_CHUNK}). */
  buildChunk?: number;
  /** Clock, epoch ms. */
  now: () => number;
  log: Logger;
}

/** What one pass did. */
export interface BatcherPass {
  /** False when another instance held the lock (nothing was done here). */
  led: boolean;
  /** The batch made in this pass, if any. */
  claimed?: ProofBatchRow;
  /** Batches sealed in this pass. */
  sealed: string[];
  /** Batches whose step failed in this pass (they stay pending). */
  failed: string[];
}

/** Runs the batching loop of one app instance. */
export class ProofBatcher {
  readonly #o: Required<Omit<ProofBatcherOptions, 'graceMs' | 'retryBaseMs' | 'retryMaxMs' | 'buildChunk'>> & {
    graceMs: number;
    retryBaseMs: number;
    retryMaxMs: number;
    buildChunk: number;
  };
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;
  #stopped = true;

  constructor(options: ProofBatcherOptions) {
    this.#o = {
      ...options,
      graceMs: options.graceMs ?? Math.min(500, Math.floor(options.windowMs / 5)),
      retryBaseMs: options.retryBaseMs ?? Math.min(1000, options.windowMs),
      retryMaxMs: options.retryMaxMs ?? 5 * 60 * 1000,
      buildChunk: options.buildChunk ?? DEFAULT_BUILD_CHUNK,
    };
  }

  /** Starts the loop: one pass now (resuming anything pending), then one after every window closes. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  /** Stops the loop and waits for a pass in progress to finish. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  /**
   * One pass: under the seal lock, claims the last closed window's leaves into a new batch, then
   * advances every batch whose next attempt is due. Exposed for tests and the benchmark.
   */
  async pass(): Promise<BatcherPass> {
    const { store } = this.#o;
    const result = await store.proofs.withSealLock(async () => {
      const out: BatcherPass = { led: true, sealed: [], failed: [] };
      const build = { chunk: this.#o.buildChunk, now: this.#o.now };
      // First what a crash or a failed pass left half built (their roots are not out yet).
      for (const b of await store.proofs.unfinishedBatches()) await continueBatch(store, b, build);
      const window = lastClosedWindow(this.#o.now(), this.#o.windowMs, this.#o.graceMs);
      const claimed = await claimAndBuild(
        store,
        { batchId: 'bat_' + randomId(20), windowStart: window.start, windowEnd: window.end },
        build,
      );
      if (claimed) {
        out.claimed = claimed;
        metrics.proofBatchLeaves.observe(claimed.treeSize);
        this.#o.log.debug({ batchId: claimed.id, treeSize: claimed.treeSize, windowStart: window.start }, 'proof batch claimed');
      }
      for (const batch of await store.proofs.dueBatches(this.#o.now())) {
        if (await this.#advance(batch)) out.sealed.push(batch.id);
        else out.failed.push(batch.id);
      }
      return out;
    });
    return result ?? { led: false, sealed: [], failed: [] };
  }

  /** Takes a batch through its remaining steps; false (and a scheduled retry) when one fails. */
  async #advance(batch: ProofBatchRow): Promise<boolean> {
    const { store, log } = this.#o;
    try {
      if (batch.tsaResponse === null) {
        const tsa = await this.#o.timestampWitness();
        const token = await tsa.timestamp(fromHex(batch.merkleRoot));
        await store.proofs.saveTimestamp(batch.id, toBase64(token));
      }
      if (batch.rekorLogIndex === null) {
        const ledger = await this.#o.ledgerWitness();
        const entry = await ledger.submit(batch.merkleRoot);
        await store.proofs.saveLedgerEntry(batch.id, entry, this.#o.now());
      }
      log.info({ batchId: batch.id, treeSize: batch.treeSize, merkleRoot: batch.merkleRoot }, 'proof batch sealed');
      metrics.proofSealDelay.observe(Math.max(0, this.#o.now() - batch.windowEnd) / 1000);
      return true;
    } catch (err) {
      const delay = backoffDelay(batch.attempts, this.#o.retryBaseMs, this.#o.retryMaxMs);
      const message = err instanceof Error ? err.message : String(err);
      log.warn({ err, batchId: batch.id, attempts: batch.attempts + 1, retryInMs: delay }, 'proof batch step failed; will retry');
      try {
        await store.proofs.recordFailure(batch.id, message, this.#o.now() + delay);
      } catch (storeErr) {
        log.error({ err: storeErr, batchId: batch.id }, 'could not record a proof batch failure');
      }
      return false;
    }
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        const run = this.#runOnce();
        this.#running = run;
      },
      Math.max(0, delayMs),
    );
    this.#timer.unref();
  }

  async #runOnce(): Promise<void> {
    try {
      await this.pass();
    } catch (err) {
      // The store may be briefly unavailable; the next pass tries again.
      this.#o.log.error({ err }, 'proof batcher pass failed');
    }
    if (this.#stopped) return;
    const now = this.#o.now();
    let at = nextCloseAt(now, this.#o.windowMs, this.#o.graceMs);
    try {
      const due = await this.#o.store.proofs.nextDueAt();
      if (due !== undefined) at = Math.min(at, Math.max(due, now + 100));
    } catch {
      /* store unavailable: look again at the next window */
    }
    this.#schedule(at - now);
  }
}
