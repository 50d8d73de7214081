/**
 * Retention and deletion (migration 009): a project's `retention_days`, the purge of expired
 * entries, and the deletion of a whole project. Every delete here is bounded: one batch of at
 * most `limit` rows per transaction, so a purge of millions of rows never holds the database
 * (or, on SQLite, the one connection ingest also writes through) for longer than one batch.
 *
 * Expired logs are found by walking the project's (project_id, seq) index from its oldest row
 * and stopping at the first one still inside the retention period: `received_at` is stamped by
 * the server and grows with `seq` (up to the clock skew between instances, which only delays a
 * row to the next sweep), so no index on `received_at` is needed and the insert path pays for
 * nothing. A log's receipt row goes with it; the proof batch and its ledger entry stay, so the
 * receipts of the logs that remain still verify.
 */
import { sql, type Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from './schema.js';
import type { ProofDatabase } from './proofs.js';
import { withTryAdvisoryLock, type AdvisoryKey } from './advisory-lock.js';

/** Advisory lock of the purge ('CSRT'): one instance purges at a time. */
const PURGE_LOCK: AdvisoryKey = [0x43535254, 1];

/** What one batch of a purge removed. */
export interface PurgeBatch {
  /** Rows deleted from the table walked (logs or events). */
  deleted: number;
  /** Receipt rows deleted with the logs. */
  receipts: number;
  /** Earliest and latest time (received_at / created_at) among the deleted rows, epoch ms. */
  from: number | null;
  to: number | null;
  /** The last `seq` looked at (the next batch starts after it). */
  lastSeq: number;
  /** True when the walk reached a row inside the retention period, or the end. */
  done: boolean;
}

/** Counts of a project deletion. */
export interface ProjectDeletion {
  logs: number;
  receipts: number;
  events: number;
  keys: number;
  webhooks: number;
  deliveries: number;
}

/** Data access for retention and deletion. */
export class RetentionRepository {
  readonly #db: Kysely<ProofDatabase>;
  #localHeld = false;

  constructor(
    db: Kysely<Database>,
    private readonly pgPool: pg.Pool | undefined,
  ) {
    this.#db = db as unknown as Kysely<ProofDatabase>;
  }

  /** Sets a project's retention (null = forever); false when there is no such project. */
  async setRetentionDays(projectId: string, days: number | null): Promise<boolean> {
    const r = await this.#db.updateTable('projects').set({ retention_days: days }).where('id', '=', projectId).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** A project's retention in days, null for forever, undefined when there is no such project. */
  async retentionDays(projectId: string): Promise<number | null | undefined> {
    const r = await this.#db.selectFrom('projects').select('retention_days').where('id', '=', projectId).executeTakeFirst();
    return r === undefined ? undefined : (r.retention_days ?? null);
  }

  /** Every project with a retention period. */
  async projectsWithRetention(): Promise<Array<{ projectId: string; retentionDays: number }>> {
    const rows = await this.#db.selectFrom('projects').select(['id', 'retention_days']).where('retention_days', 'is not', null).execute();
    return rows.map((r) => ({ projectId: r.id, retentionDays: Number(r.retention_days) }));
  }

  /** Runs `fn` if no other purge runs (PostgreSQL: on any instance); undefined when one does. */
  async withPurgeLock<T>(fn: () => Promise<T>): Promise<T | undefined> {
    if (this.pgPool) return withTryAdvisoryLock(this.pgPool, PURGE_LOCK, fn);
    if (this.#localHeld) return undefined;
    this.#localHeld = true;
    try {
      return await fn();
    } finally {
      this.#localHeld = false;
    }
  }

  /**
   * Deletes, in one transaction, up to `limit` of a project's oldest logs received before
   * `cutoff` (all of them when `cutoff` is Infinity: project deletion), with their receipts.
   * Records still `pending` are skipped by the retention purge (their instance owes an outcome);
   * project deletion takes them too.
   */
  async purgeLogs(projectId: string, cutoff: number, afterSeq: number, limit: number): Promise<PurgeBatch> {
    return this.#db.transaction().execute(async (tx) => {
      const rows = await tx
        .selectFrom('logs')
        .select(['seq', 'id', 'received_at', 'status'])
        .where('project_id', '=', projectId)
        .where('seq', '>', afterSeq)
        .orderBy('seq')
        .limit(limit)
        .execute();
      const all = cutoff === Infinity;
      const expired: typeof rows = [];
      let done = rows.length < limit;
      for (const r of rows) {
        if (!all && Number(r.received_at) >= cutoff) {
          done = true;
          break;
        }
        expired.push(r);
      }
      const doomed = all ? expired : expired.filter((r) => r.status !== 'pending');
      const out: PurgeBatch = { deleted: 0, receipts: 0, lastSeq: afterSeq, done, ...span(doomed.map((r) => r.received_at)) };
      if (expired.length > 0) out.lastSeq = Number(expired[expired.length - 1]!.seq);
      if (doomed.length === 0) return out;
      const ids = doomed.map((r) => r.id);
      const receipts = await tx
        .deleteFrom('proof_receipts')
        .where('project_id', '=', projectId)
        .where('log_id', 'in', ids)
        .executeTakeFirst();
      const logs = await tx
        .deleteFrom('logs')
        .where(
          'seq',
          'in',
          doomed.map((r) => r.seq),
        )
        .executeTakeFirst();
      out.deleted = Number(logs.numDeletedRows);
      out.receipts = Number(receipts.numDeletedRows);
      return out;
    });
  }

  /** Like {@link purgeLogs} for a project's security and retention events (by `created_at`). */
  async purgeEvents(projectId: string, cutoff: number, afterSeq: number, limit: number): Promise<PurgeBatch> {
    return this.#db.transaction().execute(async (tx) => {
      const rows = await tx
        .selectFrom('events')
        .select(['seq', 'created_at'])
        .where('project_id', '=', projectId)
        .where('seq', '>', afterSeq)
        .orderBy('seq')
        .limit(limit)
        .execute();
      let done = rows.length < limit;
      const expired: typeof rows = [];
      for (const r of rows) {
        if (cutoff !== Infinity && Number(r.created_at) >= cutoff) {
          done = true;
          break;
        }
        expired.push(r);
      }
      const out: PurgeBatch = { deleted: 0, receipts: 0, lastSeq: afterSeq, done, ...span(expired.map((r) => r.created_at)) };
      if (expired.length === 0) return out;
      out.lastSeq = Number(expired[expired.length - 1]!.seq);
      const r = await tx
        .deleteFrom('events')
        .where(
          'seq',
          'in',
          expired.map((e) => e.seq),
        )
        .executeTakeFirst();
      out.deleted = Number(r.numDeletedRows);
      return out;
    });
  }

  /**
   * Deletes up to `limit` of a project's webhook deliveries created before `cutoff` that are no
   * longer pending (all of them, with `cutoff` Infinity), with their attempts. Returns how many.
   */
  async purgeDeliveries(projectId: string, cutoff: number, limit: number): Promise<number> {
    return this.#db.transaction().execute(async (tx) => {
      let q = tx.selectFrom('webhook_deliveries').select('id').where('project_id', '=', projectId);
      if (cutoff !== Infinity) q = q.where('created_at', '<', cutoff).where('state', '!=', 'pending');
      const ids = (await q.limit(limit).execute()).map((r) => r.id);
      if (ids.length === 0) return 0;
      await tx.deleteFrom('webhook_attempts').where('delivery_id', 'in', ids).execute();
      const r = await tx.deleteFrom('webhook_deliveries').where('id', 'in', ids).executeTakeFirst();
      return Number(r.numDeletedRows);
    });
  }

  /**
   * First step of deleting a project: removes its keys (so they stop resolving) and returns
   * their hashes, which the caller then invalidates in every instance's key cache.
   */
  async removeKeys(projectId: string): Promise<string[]> {
    return this.#db.transaction().execute(async (tx) => {
      const rows = await tx.selectFrom('api_keys').select('key_hash').where('project_id', '=', projectId).execute();
      await tx.deleteFrom('api_keys').where('project_id', '=', projectId).execute();
      return rows.map((r) => r.key_hash);
    });
  }

  /** Removes a project's webhooks (their deliveries go first, with {@link purgeDeliveries}). */
  async removeWebhooks(projectId: string): Promise<number> {
    const r = await this.#db.deleteFrom('webhooks').where('project_id', '=', projectId).executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Deletes up to `limit` receipt rows of a project left without their log. */
  async purgeReceipts(projectId: string, limit: number): Promise<number> {
    const ids = (
      await this.#db.selectFrom('proof_receipts').select('log_id').where('project_id', '=', projectId).limit(limit).execute()
    ).map((r) => r.log_id);
    if (ids.length === 0) return 0;
    const r = await this.#db.deleteFrom('proof_receipts').where('project_id', '=', projectId).where('log_id', 'in', ids).executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Removes the project row itself (last step of a deletion); false when it was already gone. */
  async removeProject(projectId: string): Promise<boolean> {
    const r = await this.#db.deleteFrom('projects').where('id', '=', projectId).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }

  /** Rows of a project still in the store, per table (tests and the deletion's final check). */
  async remaining(projectId: string): Promise<Record<'logs' | 'events' | 'receipts' | 'keys' | 'webhooks' | 'deliveries', number>> {
    const count = async (table: 'logs' | 'events' | 'proof_receipts' | 'api_keys' | 'webhooks' | 'webhook_deliveries') =>
      Number(
        (
          await this.#db
            .selectFrom(table)
            .select(sql<number>`count(*)`.as('n'))
            .where('project_id', '=', projectId)
            .executeTakeFirstOrThrow()
        ).n,
      );
    return {
      logs: await count('logs'),
      events: await count('events'),
      receipts: await count('proof_receipts'),
      keys: await count('api_keys'),
      webhooks: await count('webhooks'),
      deliveries: await count('webhook_deliveries'),
    };
  }
}

/** Earliest and latest of some epoch-ms times. */
function span(times: Array<number | string>): { from: number | null; to: number | null } {
  if (times.length === 0) return { from: null, to: null };
  let from = Infinity;
  let to = -Infinity;
  for (const t of times) {
    const n = Number(t);
    if (n < from) from = n;
    if (n > to) to = n;
  }
  return { from, to };
}
