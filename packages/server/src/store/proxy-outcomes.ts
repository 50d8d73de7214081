/**
 * Outcomes of proxied exchanges, group-committed through the log writer (log-writer.ts): they
 * share batches, and so commits, with the write-ahead inserts of other calls, off the event loop.
 * The call names its row ({@link RowRef}): by its primary key, which the insert of its pending
 * record returned, else by the unique (project, id) index. Nothing is remembered per call in the
 * writer (a map of pending rows, as before, was churned once per call and lost when the writer
 * thread restarted, leaving a lookup by id alone: a scan of the table).
 *
 * A record that a proof batch has already claimed is never rewritten: its receipt commits to
 * the payload hash it was claimed with. That can only happen to a record that another instance
 * judged orphaned and marked interrupted while this one was cut off from the database (see
 * instances.ts); the late outcome is then refused and `complete` resolves false.
 */
import type { LogCompletion } from './logs.js';
import type { LogWriter, RowRef } from './log-writer.js';

/** Batched writer of {@link LogCompletion}s. */
export class ProxyOutcomeRepository {
  constructor(private readonly writer: LogWriter) {}

  /**
   * Writes the outcome of one exchange; resolves once its batch has committed, with false when
   * the record was already sealed into a proof batch and so was left as it was.
   * @throws StoreTimeoutError past the store deadline, or the store's error.
   */
  complete(ref: RowRef, c: LogCompletion): Promise<boolean> {
    return this.writer.complete(ref, c);
  }

  /** Waits for every queued outcome (and insert: they share the writer). */
  drain(): Promise<void> {
    return this.writer.drain();
  }
}
