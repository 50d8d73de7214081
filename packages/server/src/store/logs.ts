/**
 * Audit log entries. Inserts go through group commit; an entry's `id` is unique across the
 * store, which is what makes a client's retry idempotent.
 */
import type { Kysely } from 'kysely';
import type { Database, LogsTable } from './schema.js';
import { GroupCommitQueue } from './group-commit.js';
import type { LogInsertRow, SqliteHotWrites } from './hot-writes.js';
import type { InstanceLiveness } from './instances.js';

/** A log entry to insert. `payload` is the envelope JSON text. */
export interface NewLog {
  id: string;
  projectId: string;
  keyId: string;
  receivedAt: number;
  occurredAt: string | null;
  actor: string;
  action: string;
  traceId: string | null;
  actorType: string;
  credentialHandoverDetected: boolean;
  source: 'proxy' | 'log';
  status: 'pending' | 'complete' | 'failed' | 'interrupted';
  requestProof: boolean;
  payloadHash: string | null;
  payload: string;
  metadata: string | null;
  /** The instance that owes the outcome of a `pending` proxy record (store/instances.ts). */
  instanceId?: string | null;
}

/** A stored log entry. */
export interface LogRow extends NewLog {
  seq: number;
  completedAt: number | null;
}

/** The final state of a proxied exchange, written when it ends. */
export interface LogCompletion {
  status: 'complete' | 'failed' | 'interrupted';
  payload: string;
  payloadHash: string | null;
  completedAt: number;
}

/** Filters of the log listing (DESIGN "Paths"). */
export interface LogFilter {
  traceId?: string | undefined;
  actor?: string | undefined;
  actorType?: string | undefined;
  action?: string | undefined;
  /** Inclusive lower bound on receivedAt, epoch ms. */
  from?: number | undefined;
  /** Exclusive upper bound on receivedAt, epoch ms. */
  to?: number | undefined;
  handover?: boolean | undefined;
}

/** Data access for log entries. */
export class LogRepository {
  readonly #inserts: GroupCommitQueue<NewLog, boolean>;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly hot?: SqliteHotWrites,
  ) {
    this.#inserts = new GroupCommitQueue((batch) => this.#insertBatch(batch));
  }

  /**
   * Inserts one entry, sharing a transaction with concurrent inserts.
   * @returns true when inserted, false when an entry with this id already existed.
   */
  insert(log: NewLog): Promise<boolean> {
    return this.#inserts.submit(log);
  }

  /** Inserts many entries (each idempotent on id); returns, per entry, whether it was new. */
  insertMany(logs: NewLog[]): Promise<boolean[]> {
    return Promise.all(logs.map((l) => this.#inserts.submit(l)));
  }

  /** Waits for every queued insert. */
  drain(): Promise<void> {
    return this.#inserts.drain();
  }

  async #insertBatch(batch: NewLog[]): Promise<boolean[]> {
    // Duplicate ids inside one batch: the first wins, the rest report "existed".
    const firstIndex = new Map<string, number>();
    batch.forEach((l, i) => firstIndex.has(l.id) || firstIndex.set(l.id, i));
    const unique = [...firstIndex.values()].map((i) => batch[i]!);
    if (this.hot) {
      const inserted = await this.hot.insertLogs(unique.map(toInsertRow));
      return batch.map((l, i) => firstIndex.get(l.id) === i && inserted.has(l.id));
    }
    const inserted = new Set<string>();
    await this.db.transaction().execute(async (tx) => {
      for (let i = 0; i < unique.length; i += 200) {
        const rows = await tx
          .insertInto('logs')
          .values(unique.slice(i, i + 200).map(toRow))
          .onConflict((oc) => oc.column('id').doNothing())
          .returning('id')
          .execute();
        for (const r of rows) inserted.add(r.id);
      }
    });
    return batch.map((l, i) => firstIndex.get(l.id) === i && inserted.has(l.id));
  }

  /**
   * Marks interrupted the pending proxy records whose instance is gone (killed or crashed
   * mid-exchange, or from before records carried an owner); a live instance's records are left
   * to it. Run at start and periodically. Returns how many records were marked.
   */
  async markOrphansInterrupted(at: number, liveness: InstanceLiveness): Promise<number> {
    const owners = await this.db.selectFrom('logs').select('instance_id').distinct().where('status', '=', 'pending').execute();
    let marked = 0;
    for (const { instance_id: owner } of owners) {
      const mark = async () => {
        const r = await this.db
          .updateTable('logs')
          .set({ status: 'interrupted', completed_at: at, instance_id: null })
          .where('status', '=', 'pending')
          .where('instance_id', owner === null ? 'is' : '=', owner)
          .executeTakeFirst();
        return Number(r.numUpdatedRows);
      };
      marked += (owner === null ? await mark() : await liveness.whileGone(owner, mark)) ?? 0;
    }
    return marked;
  }

  /** One entry of a project. */
  async get(projectId: string, id: string): Promise<LogRow | undefined> {
    const r = await this.db.selectFrom('logs').selectAll().where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
    return r && fromRow(r);
  }

  /** Entries by id, any project (for idempotency checks). */
  async getMany(ids: string[]): Promise<LogRow[]> {
    if (ids.length === 0) return [];
    const rows = await this.db.selectFrom('logs').selectAll().where('id', 'in', ids).execute();
    return rows.map(fromRow);
  }

  /** A page of a project's entries, newest first, after cursor `beforeSeq`. */
  async list(projectId: string, filter: LogFilter, limit: number, beforeSeq?: number): Promise<LogRow[]> {
    let q = this.db.selectFrom('logs').selectAll().where('project_id', '=', projectId);
    if (filter.traceId !== undefined) q = q.where('trace_id', '=', filter.traceId);
    if (filter.actor !== undefined) q = q.where('actor', '=', filter.actor);
    if (filter.actorType !== undefined) q = q.where('actor_type', '=', filter.actorType);
    if (filter.action !== undefined) q = q.where('action', '=', filter.action);
    if (filter.from !== undefined) q = q.where('received_at', '>=', filter.from);
    if (filter.to !== undefined) q = q.where('received_at', '<', filter.to);
    if (filter.handover !== undefined) q = q.where('credential_handover_detected', '=', filter.handover ? 1 : 0);
    if (beforeSeq !== undefined) q = q.where('seq', '<', beforeSeq);
    const rows = await q.orderBy('seq', 'desc').limit(limit).execute();
    return rows.map(fromRow);
  }

  /** Every entry of a trace, in the order received. */
  async trace(projectId: string, traceId: string, limit = 10000): Promise<LogRow[]> {
    const rows = await this.db
      .selectFrom('logs')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('trace_id', '=', traceId)
      .orderBy('seq', 'asc')
      .limit(limit)
      .execute();
    return rows.map(fromRow);
  }
}

function toRow(l: NewLog): Omit<LogsTable, 'seq'> {
  return { ...toInsertRow(l), completed_at: null };
}

function toInsertRow(l: NewLog): LogInsertRow {
  return {
    id: l.id,
    project_id: l.projectId,
    key_id: l.keyId,
    received_at: l.receivedAt,
    occurred_at: l.occurredAt,
    actor: l.actor,
    action: l.action,
    trace_id: l.traceId,
    actor_type: l.actorType,
    credential_handover_detected: l.credentialHandoverDetected ? 1 : 0,
    source: l.source,
    status: l.status,
    request_proof: l.requestProof ? 1 : 0,
    payload_hash: l.payloadHash,
    payload: l.payload,
    metadata: l.metadata,
    instance_id: l.instanceId ?? null,
  };
}

function fromRow(r: Omit<LogsTable, 'seq'> & { seq: number }): LogRow {
  return {
    seq: r.seq,
    id: r.id,
    projectId: r.project_id,
    keyId: r.key_id,
    receivedAt: r.received_at,
    occurredAt: r.occurred_at,
    actor: r.actor,
    action: r.action,
    traceId: r.trace_id,
    actorType: r.actor_type,
    credentialHandoverDetected: r.credential_handover_detected === 1,
    source: r.source as LogRow['source'],
    status: r.status as LogRow['status'],
    requestProof: r.request_proof === 1,
    payloadHash: r.payload_hash,
    payload: r.payload,
    metadata: r.metadata,
    completedAt: r.completed_at,
  };
}
