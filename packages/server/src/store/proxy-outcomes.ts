/**
 * Outcomes of proxied exchanges, group-committed: completions that arrive in the same turn of the
 * event loop share one transaction (as the write-ahead inserts do in logs.ts), so under load the
 * proxy's second write costs a fraction of a commit instead of a commit each.
 */
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { LogCompletion } from './logs.js';
import { GroupCommitQueue } from './group-commit.js';
import type { SqliteHotWrites } from './hot-writes.js';

/** Batched writer of {@link LogCompletion}s. */
export class ProxyOutcomeRepository {
  readonly #queue: GroupCommitQueue<{ id: string; c: LogCompletion }, void>;

  constructor(
    private readonly db: Kysely<Database>,
    hot?: SqliteHotWrites,
  ) {
    this.#queue = new GroupCommitQueue<{ id: string; c: LogCompletion }, void>(async (batch) => {
      if (hot) {
        await hot.completeLogs(
          batch.map(({ id, c }) => ({
            id,
            status: c.status,
            payload: c.payload,
            payload_hash: c.payloadHash,
            completed_at: c.completedAt,
          })),
        );
        return batch.map(() => undefined);
      }
      await this.db.transaction().execute(async (tx) => {
        for (const { id, c } of batch) {
          await tx
            .updateTable('logs')
            .set({ status: c.status, payload: c.payload, payload_hash: c.payloadHash, completed_at: c.completedAt })
            .where('id', '=', id)
            .execute();
        }
      });
      return batch.map(() => undefined);
    });
  }

  /** Writes the outcome of one exchange; resolves once its batch has committed. */
  complete(id: string, c: LogCompletion): Promise<void> {
    return this.#queue.submit({ id, c });
  }

  /** Waits for every queued outcome. */
  drain(): Promise<void> {
    return this.#queue.drain();
  }
}
