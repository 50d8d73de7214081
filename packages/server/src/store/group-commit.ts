/**
 * Group commit: writes that arrive in the same turn of the event loop share one transaction.
 * Under load this turns N commits (N fsyncs on SQLite, N round trips on PostgreSQL) into one,
 * which is what lets the proxy write ahead on every call without adding much latency.
 */

/** Runs a batch of items in one go; must resolve with one result per item, in order. */
export type BatchRunner<T, R> = (items: T[]) => Promise<R[]>;

/** Coalesces concurrent `submit` calls into batches of at most `maxBatch` items. */
export class GroupCommitQueue<T, R> {
  #pending: Array<{ item: T; resolve: (r: R) => void; reject: (e: unknown) => void }> = [];
  #scheduled = false;
  #running = 0;
  #idle: Array<() => void> = [];

  constructor(
    private readonly run: BatchRunner<T, R>,
    private readonly maxBatch = 500,
  ) {}

  /** Queues one item; resolves when its batch has committed. */
  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  /** Resolves once every submitted item has been written (or failed). */
  drain(): Promise<void> {
    if (this.#pending.length === 0 && this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #flush(): void {
    this.#scheduled = false;
    while (this.#pending.length > 0) {
      const batch = this.#pending.splice(0, this.maxBatch);
      this.#running++;
      this.run(batch.map((b) => b.item))
        .then(
          (results) => batch.forEach((b, i) => b.resolve(results[i]!)),
          (error: unknown) => batch.forEach((b) => b.reject(error)),
        )
        .finally(() => {
          this.#running--;
          if (this.#running === 0 && this.#pending.length === 0) this.#idle.splice(0).forEach((f) => f());
        });
    }
  }
}
