/**
 * Outcomes of proxied exchanges, group-committed: completions that arrive in the same turn of the
 * event loop share one transaction (as the write-ahead inserts do in logs.ts), so under load the
 * proxy's second write costs a fraction of a commit instead of a commit each.
 *
 * A record that a proof batch has already claimed is never rewritten: its receipt commits to
 * the payload hash it was claimed with. That can only happen to a record that another instance
 * judged orphaned and marked interrupted while this one was cut off from the database (see
 * instances.ts); the late outcome is then refused and `complete` resolves false.
 */
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { ProofDatabase } from './proofs.js';
import type { LogCompletion } from './logs.js';
import { GroupCommitQueue } from './group-commit.js';
import type { SqliteHotWrites } from './hot-writes.js';

/** Batched writer of {@link LogCompletion}s. */
export class ProxyOutcomeRepository {
  readonly #queue: GroupCommitQueue<{ id: string; c: LogCompletion }, boolean>;

  constructor(
    private readonly db: Kysely<Database>,
    hot?: SqliteHotWrites,
  ) {
    this.#queue = new GroupCommitQueue<{ id: string; c: LogCompletion }, boolean>(async (batch) => {
      if (hot) {
        return hot.completeLogs(
          batch.map(({ id, c }) => ({
            id,
            status: c.status,
            payload: c.payload,
            payload_hash: c.payloadHash,
            completed_at: c.completedAt,
          })),
        );
      }
      const db = this.db as unknown as Kysely<ProofDatabase>;
      return db.transaction().execute(async (tx) => {
        const written: boolean[] = [];
        for (const { id, c } of batch) {
          const r = await tx
            .updateTable('logs')
            .set({ status: c.status, payload: c.payload, payload_hash: c.payloadHash, completed_at: c.completedAt, instance_id: null })
            .where('id', '=', id)
            .where('proof_batch_id', 'is', null)
            .executeTakeFirst();
          written.push(Number(r.numUpdatedRows) > 0);
        }
        return written;
      });
    });
  }

  /**
   * Writes the outcome of one exchange; resolves once its batch has committed, with false when
   * the record was already sealed into a proof batch and so was left as it was.
   */
  complete(id: string, c: LogCompletion): Promise<boolean> {
    return this.#queue.submit({ id, c });
  }

  /** Waits for every queued outcome. */
  drain(): Promise<void> {
    return this.#queue.drain();
  }
}
