/**
 * The live log stream's watch for late entries (store/seq-gaps.ts says why entries can commit out
 * of `seq` order on a PostgreSQL fleet). Holds the numbers that were missing when the stream's
 * position passed them, each until the store deadline (plus a margin) has gone by since it was
 * seen missing: no writer's statement outlives that deadline (PostgreSQL's `statement_timeout`
 * on every writer connection), so a number still missing then never comes.
 *
 * The position a client resumes from (`Last-Event-ID`) is kept below every number still watched
 * ({@link LateEntryWatch.resumeFrom}), so a client that reconnects before a late entry arrives
 * gets it after the reconnect too (with the entries above that position again; readers dedupe by
 * entry id, as the dashboard does).
 */

/** Most numbers one stream watches; past this the oldest are dropped (and their entries may be missed by this stream). */
export const MAX_WATCHED = 10_000;

/** Numbers missing behind a stream's position, each with the time after which it is given up. */
export class LateEntryWatch {
  /** Missing number → when to give it up (monotonic-clock.ts ms: a wall-clock step must not end a watch early). Insertion order is ascending time. */
  readonly #watched = new Map<number, number>();

  /** @param holdMs how long a missing number is watched: the store deadline plus a margin. */
  constructor(readonly holdMs: number) {}

  /** Numbers being watched. */
  get size(): number {
    return this.#watched.size;
  }

  /** Starts watching `seqs`, seen missing at `now`. */
  watch(seqs: number[], now: number): void {
    for (const seq of seqs) {
      if (this.#watched.has(seq)) continue;
      if (this.#watched.size >= MAX_WATCHED) this.#watched.delete(this.#watched.keys().next().value as number);
      this.#watched.set(seq, now + this.holdMs);
    }
  }

  /** The numbers still watched at `now` (those past their time are given up first). */
  open(now: number): number[] {
    for (const [seq, until] of this.#watched) if (until <= now) this.#watched.delete(seq);
    return [...this.#watched.keys()];
  }

  /** Stops watching `seqs` (their rows arrived). */
  arrived(seqs: number[]): void {
    for (const seq of seqs) this.#watched.delete(seq);
  }

  /** Where a client may resume without missing a watched entry: below all of them, else `position`. */
  resumeFrom(position: number): number {
    let low = position;
    for (const seq of this.#watched.keys()) if (seq - 1 < low) low = seq - 1;
    return low;
  }
}
