/**
 * Audit log entries. Inserts go through the log writer (log-writer.ts: group commit off the
 * event loop, with the store deadline); reads use the main connection. An entry's `id` is unique within its
 * project (migration 005), which is what makes a client's retry idempotent without telling one
 * project which ids another has used.
 */
import { sql, type Kysely, type SelectQueryBuilder } from 'kysely';
import type { Database, LogsTable } from './schema.js';
import type { LogWriter } from './log-writer.js';
import type { InstanceLiveness } from './instances.js';
import { readPendingIndex } from './pending-index.js';

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
  /** The entry's W3C span id and its parent's (16 lowercase hex digits; migration 011). */
  spanId?: string | null;
  parentSpanId?: string | null;
  /** Start and end, epoch ms (a proxied call's end comes with its outcome). */
  startedAt?: number | null;
  endedAt?: number | null;
}

/** A stored log entry. */
export interface LogRow extends NewLog {
  seq: number;
  completedAt: number | null;
  /** Plain timing of a proxied exchange (null until its outcome, and for `/v1/log` entries). */
  upstreamStatus: number | null;
  firstByteMs: number | null;
  durationMs: number | null;
}

/** The final state of a proxied exchange, written when it ends. */
export interface LogCompletion {
  status: 'complete' | 'failed' | 'interrupted';
  payload: string;
  payloadHash: string | null;
  completedAt: number;
  /** Plain timing of the exchange (migration 007): upstream status, ms to its first byte, ms in all. */
  upstreamStatus?: number | null;
  firstByteMs?: number | null;
  durationMs?: number | null;
  /** When the exchange ended, epoch ms (migration 011). */
  endedAt?: number | null;
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
  /** Case-insensitive prefix of the actor / action / trace id. */
  actorPrefix?: string | undefined;
  actionPrefix?: string | undefined;
  traceIdPrefix?: string | undefined;
  /** Case-insensitive substring of the actor / action. */
  actorContains?: string | undefined;
  actionContains?: string | undefined;
  /** Any of these statuses / sources. */
  status?: string[] | undefined;
  source?: string[] | undefined;
  /** Plain metadata members that must all equal these texts (`true`, `5`, `eu` …). */
  meta?: Array<[key: string, value: string]> | undefined;
  /** Only entries after this sequence number (the live stream's position). */
  afterSeq?: number | undefined;
  /** Only entries up to this sequence number, inclusive (the live stream's read bound). */
  upToSeq?: number | undefined;
  /** Only entries with one of these sequence numbers (the live stream's late entries). */
  seqs?: number[] | undefined;
}

/** The owners of pending records (the orphan sweep's first read; see pending-index.ts). */
export function pendingOwners(db: Kysely<Database>) {
  return db.selectFrom('logs').select('instance_id').distinct().where('status', '=', 'pending');
}

/** Data access for log entries. */
export class LogRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly writer: LogWriter,
    private readonly dialect: 'sqlite' | 'postgres' = 'sqlite',
  ) {}

  /**
   * Inserts one entry, sharing a transaction with concurrent inserts.
   * @returns true when inserted, false when an entry with this id already existed in its project.
   * @throws StoreTimeoutError past the store deadline, or the store's error (both: 503).
   */
  async insert(log: NewLog): Promise<boolean> {
    return (await this.writer.insert(log)) > 0;
  }

  /**
   * Inserts one entry like {@link insert}, and tells where it went: its `seq`, which an outcome
   * names to find the row by primary key (proxy-outcomes.ts); 0 when its project had that id.
   */
  insertReturningSeq(log: NewLog): Promise<number> {
    return this.writer.insert(log);
  }

  /** Inserts many entries (each idempotent on project and id); returns, per entry, whether it was new. */
  async insertMany(logs: NewLog[]): Promise<boolean[]> {
    return (await Promise.all(logs.map((l) => this.writer.insert(l)))).map((seq) => seq > 0);
  }

  /** Waits for every queued insert (and outcome: they share the writer). */
  drain(): Promise<void> {
    return this.writer.drain();
  }

  /**
   * Marks interrupted the pending proxy records whose instance is gone (killed or crashed
   * mid-exchange, or from before records carried an owner); a live instance's records are left
   * to it. Run at start and periodically. Returns how many records were marked.
   */
  async markOrphansInterrupted(at: number, liveness: InstanceLiveness): Promise<number> {
    const owners = await readPendingIndex(this.db, this.dialect, (db) => pendingOwners(db).execute());
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

  /** Entries of one project by id (idempotency checks: another project's ids are never seen). */
  async getMany(projectId: string, ids: string[]): Promise<LogRow[]> {
    if (ids.length === 0) return [];
    const rows = await this.db.selectFrom('logs').selectAll().where('project_id', '=', projectId).where('id', 'in', ids).execute();
    return rows.map(fromRow);
  }

  /** A page of a project's entries, newest first, after cursor `beforeSeq`. */
  async list(projectId: string, filter: LogFilter, limit: number, beforeSeq?: number): Promise<LogRow[]> {
    let q = filtered(this.db.selectFrom('logs').selectAll().where('project_id', '=', projectId), filter);
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

  /**
   * One page of the read API (log list, trace), bounded in size (issue 8: 50 entries of 9.5 MB
   * made one listing answer 500 at 2.7 GB). Entries are read without their payload column, with
   * its size. With `payloadBudget`, the page keeps the longest run of entries whose payloads fit
   * in it (always at least one, so an entry larger than the budget is still readable), and only
   * those rows are read again, whole, so that an entry's status, hash and payload agree.
   */
  async page(projectId: string, filter: LogFilter, options: LogPageOptions): Promise<LogPage> {
    const newest = options.order === 'newest';
    let q = filtered(
      this.db
        .selectFrom('logs')
        .select([...SUMMARY_COLUMNS, sql<number | string>`octet_length(payload)`.as('payload_bytes')])
        .where('project_id', '=', projectId),
      filter,
      this.dialect,
    );
    if (options.cursorSeq !== undefined) q = q.where('seq', newest ? '<' : '>', options.cursorSeq);
    const found = await q
      .orderBy('seq', newest ? 'desc' : 'asc')
      .limit(options.limit + 1)
      .execute();
    let rows = found.slice(0, options.limit);
    let more = found.length > options.limit;
    const budget = options.payloadBudget;
    if (budget === undefined) {
      const summaries = rows.map((r) => ({ ...fromRow({ ...r, payload: '' }), payload: undefined, payloadBytes: Number(r.payload_bytes) }));
      return { rows: summaries, nextSeq: more ? rows[rows.length - 1]!.seq : null };
    }
    let spent = 0;
    let n = 0;
    while (n < rows.length && (n === 0 || spent + Number(rows[n]!.payload_bytes) <= budget)) spent += Number(rows[n++]!.payload_bytes);
    if (n < rows.length) more = true;
    rows = rows.slice(0, n);
    if (rows.length === 0) return { rows: [], nextSeq: null };
    const whole = await this.db
      .selectFrom('logs')
      .selectAll()
      .where('project_id', '=', projectId)
      .where(
        'seq',
        'in',
        rows.map((r) => r.seq),
      )
      .execute();
    const bySeq = new Map(whole.map((r) => [r.seq, r]));
    // An entry purged in between (retention) drops out of the page; the cursor still moves past it.
    const full = rows.flatMap((r) => {
      const w = bySeq.get(r.seq);
      return w ? [{ ...fromRow(w), payloadBytes: w.payload.length }] : [];
    });
    return { rows: full, nextSeq: more ? rows[rows.length - 1]!.seq : null };
  }
}

/** Options of {@link LogRepository.page}. */
export interface LogPageOptions {
  /** `newest` first (the log list) or `oldest` first (a trace). */
  order: 'newest' | 'oldest';
  /** Most entries in the page. */
  limit: number;
  /** The cursor: entries before (newest first) or after (oldest first) this sequence number. */
  cursorSeq?: number | undefined;
  /** Read payloads, at most this many bytes of them in the page; undefined = no payloads. */
  payloadBudget?: number | undefined;
}

/** An entry of a page: `payload` only when the page reads payloads; `payloadBytes` always. */
export type LogPageRow = Omit<LogRow, 'payload'> & { payload: string | undefined; payloadBytes: number };

/** A page, and the sequence number to continue after (null on the last page). */
export interface LogPage {
  rows: LogPageRow[];
  nextSeq: number | null;
}

/** Every column but `payload`: what a page reads first (the check below fails when a column is added and not listed). */
const SUMMARY_COLUMNS = [
  'seq',
  'id',
  'project_id',
  'key_id',
  'received_at',
  'occurred_at',
  'actor',
  'action',
  'trace_id',
  'actor_type',
  'credential_handover_detected',
  'source',
  'status',
  'request_proof',
  'payload_hash',
  'metadata',
  'completed_at',
  'instance_id',
  'upstream_status',
  'first_byte_ms',
  'duration_ms',
  'span_id',
  'parent_span_id',
  'started_at',
  'ended_at',
] as const satisfies ReadonlyArray<Exclude<keyof LogsTable, 'payload'>>;
const everyColumnListed: Exclude<Exclude<keyof LogsTable, 'payload'>, (typeof SUMMARY_COLUMNS)[number]> extends never ? true : never = true;
void everyColumnListed;

/** A LIKE pattern matching `text` literally (wildcards escaped with `\`), lower-cased. */
function likePattern(text: string, prefixOnly: boolean): string {
  const literal = text.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c);
  return (prefixOnly ? '' : '%') + literal + '%';
}

/** The listing filters on a query of `logs`. */
function filtered<O>(
  query: SelectQueryBuilder<Database, 'logs', O>,
  filter: LogFilter,
  dialect: 'sqlite' | 'postgres' = 'sqlite',
): SelectQueryBuilder<Database, 'logs', O> {
  let q = query;
  const like = (column: 'actor' | 'action' | 'trace_id', text: string | undefined, prefixOnly: boolean) => {
    if (text !== undefined) q = q.where(sql<boolean>`lower(${sql.ref(column)}) like ${likePattern(text, prefixOnly)} escape '\\'`);
  };
  like('actor', filter.actorPrefix, true);
  like('action', filter.actionPrefix, true);
  like('trace_id', filter.traceIdPrefix, true);
  like('actor', filter.actorContains, false);
  like('action', filter.actionContains, false);
  if (filter.status !== undefined && filter.status.length > 0) q = q.where('status', 'in', filter.status);
  if (filter.source !== undefined && filter.source.length > 0) q = q.where('source', 'in', filter.source);
  if (filter.afterSeq !== undefined) q = q.where('seq', '>', filter.afterSeq);
  if (filter.upToSeq !== undefined) q = q.where('seq', '<=', filter.upToSeq);
  if (filter.seqs !== undefined) q = q.where('seq', 'in', filter.seqs.length > 0 ? filter.seqs : [-1]);
  for (const [key, value] of filter.meta ?? []) {
    // Metadata is JSON text; a member compares as text (true, 5, "eu" → eu) on both stores.
    q =
      dialect === 'postgres'
        ? q.where(sql<boolean>`(metadata::jsonb ->> ${key}) = ${value}`)
        : q.where(
            sql<boolean>`exists (select 1 from json_each(logs.metadata) m where m.key = ${key} and (case m.type when 'true' then 'true' when 'false' then 'false' else cast(m.value as text) end) = ${value})`,
          );
  }
  if (filter.traceId !== undefined) q = q.where('trace_id', '=', filter.traceId);
  if (filter.actor !== undefined) q = q.where('actor', '=', filter.actor);
  if (filter.actorType !== undefined) q = q.where('actor_type', '=', filter.actorType);
  if (filter.action !== undefined) q = q.where('action', '=', filter.action);
  if (filter.from !== undefined) q = q.where('received_at', '>=', filter.from);
  if (filter.to !== undefined) q = q.where('received_at', '<', filter.to);
  if (filter.handover !== undefined) q = q.where('credential_handover_detected', '=', filter.handover ? 1 : 0);
  return q;
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
    upstreamStatus: r.upstream_status ?? null,
    firstByteMs: r.first_byte_ms ?? null,
    durationMs: r.duration_ms ?? null,
    spanId: r.span_id ?? null,
    parentSpanId: r.parent_span_id ?? null,
    startedAt: r.started_at == null ? null : Number(r.started_at),
    endedAt: r.ended_at == null ? null : Number(r.ended_at),
  };
}
