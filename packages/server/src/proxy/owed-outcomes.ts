/**
 * Outcomes of proxied exchanges whose commit failed (the store was unavailable when the exchange
 * ended). The caller already has its answer; the record is still `pending`, and since this
 * instance is alive no sweep will touch it. So the sealed outcome is kept here and written again
 * until the store takes it: the record ends up with the real outcome, not `interrupted`.
 *
 * Bounded by the bytes of the sealed payloads held (a capture can be 2 MB): past the bound an
 * outcome is dropped with an error in the log, and its record becomes `interrupted` once this
 * instance is gone, as before.
 */
import type { LogCompletion, RowRef } from '../store/index.js';

/** The writer this needs (the store's group-committed outcome writer). */
export interface OutcomeWriter {
  complete(ref: RowRef, c: LogCompletion): Promise<boolean>;
}

/** What one retry pass did. */
export interface RetryResult {
  /** Outcomes now stored. */
  written: number;
  /** Outcomes the store refused because a proof batch had already sealed the record. */
  refused: number;
  /** Outcomes still owed (the store failed again). */
  left: number;
}

/** Default bound on the sealed bytes held. */
export const OWED_OUTCOME_BYTES = 64 * 1024 * 1024;

/** Outcomes waiting for the store, oldest first. */
export class OwedOutcomes {
  /** By log id (unique among this instance's calls: ids carry 89 random bits). */
  readonly #owed = new Map<string, { ref: RowRef; c: LogCompletion }>();
  #bytes = 0;

  constructor(
    private readonly writer: OutcomeWriter,
    private readonly maxBytes = OWED_OUTCOME_BYTES,
  ) {}

  /** Outcomes held. */
  get size(): number {
    return this.#owed.size;
  }

  /** Keeps an outcome to write later; false when the bound is reached (the outcome is not kept). */
  add(ref: RowRef, c: LogCompletion): boolean {
    const size = c.payload.length;
    if (this.#bytes + size > this.maxBytes) return false;
    this.#owed.set(ref.id, { ref, c });
    this.#bytes += size;
    return true;
  }

  /** Writes the owed outcomes in order; stops at the first failure (the store is still down). */
  async retry(): Promise<RetryResult> {
    const result: RetryResult = { written: 0, refused: 0, left: 0 };
    for (const [id, { ref, c }] of this.#owed) {
      let stored: boolean;
      try {
        stored = await this.writer.complete(ref, c);
      } catch {
        break;
      }
      this.#owed.delete(id);
      this.#bytes -= c.payload.length;
      if (stored) result.written++;
      else result.refused++;
    }
    result.left = this.#owed.size;
    return result;
  }
}
