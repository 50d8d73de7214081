/**
 * The PostgreSQL backend of the log writer (log-writer.ts): one dedicated connection, one
 * statement per batch. Inserts and outcomes travel as one array per column through `unnest`, so
 * the statement text never changes (prepared once per connection, no per-batch parse or plan)
 * and a whole batch is one round trip and one commit:
 *
 *   with ins as (insert into logs … select * from unnest($1…$17) on conflict (project_id, id) do nothing returning …),
 *        upd as (update logs set … from unnest($18…$25) v where logs.seq = v.seq … returning …)
 *   select … from ins union all select … from upd
 *
 * A small batch (up to four inserts and four outcomes, the usual one at moderate rates) is the
 * same statement with a scalar parameter per value instead (`VALUES` lists; one named statement
 * per shape), which spares PostgreSQL the parse of array literals.
 *
 * Outcomes name the row by `seq`, which the insert of its pending record returned (RowRef in
 * log-writer.ts); one whose caller has no seq (rare: an owed outcome) names it by project and id,
 * through the unique index. The connection runs with `statement_timeout`
 * and `lock_timeout` at the store deadline, so a statement stuck behind a lock is cancelled and
 * rolled back rather than committing after its callers were told 503, and with sequential
 * scans off (see the constructor).
 */
import pg from 'pg';
import type { NewLog } from './logs.js';
import { EXPIRED, type WriteBackend, type WriteBatch, type WriteResult } from './log-writer.js';
import { INSERT_COLUMNS, OUTCOME_COLUMNS, pushInsert, pushOutcomeValues } from './write-rows.js';

/** PostgreSQL type of each column the hot path writes (the order is write-rows.ts's, shared with the SQLite writer). */
const PG_TYPES: Record<(typeof INSERT_COLUMNS)[number] | (typeof OUTCOME_COLUMNS)[number], string> = {
  id: 'text',
  project_id: 'text',
  key_id: 'text',
  received_at: 'int8',
  occurred_at: 'text',
  actor: 'text',
  action: 'text',
  trace_id: 'text',
  actor_type: 'text',
  credential_handover_detected: 'int4',
  source: 'text',
  status: 'text',
  request_proof: 'int4',
  payload_hash: 'text',
  payload: 'text',
  metadata: 'text',
  instance_id: 'text',
  span_id: 'text',
  parent_span_id: 'text',
  started_at: 'int8',
  ended_at: 'int8',
  completed_at: 'int8',
  upstream_status: 'int4',
  first_byte_ms: 'float8',
  duration_ms: 'float8',
};
const INSERT_TYPES: Array<[column: string, type: string]> = INSERT_COLUMNS.map((c) => [c, PG_TYPES[c]]);
const OUTCOME_TYPES: Array<[column: string, type: string]> = OUTCOME_COLUMNS.map((c) => [c, PG_TYPES[c]]);

const unnest = (types: Array<[string, string]>, from: number) => types.map(([, t], i) => `$${from + i}::${t}[]`).join(', ');
const names = (types: Array<[string, string]>) => types.map(([c]) => c).join(', ');

const INSERT = `insert into logs (${names(INSERT_TYPES)}) select * from unnest(${unnest(INSERT_TYPES, 1)}) on conflict (project_id, id) do nothing returning seq, project_id, id`;
const SET = OUTCOME_TYPES.map(([c]) => `${c} = v.${c}`).join(', ');
const GUARD = "logs.source = 'proxy' and logs.proof_batch_id is null";
const updateBySeq = (from: number) =>
  `update logs set ${SET}, instance_id = null from unnest(${unnest([['seq', 'int8'], ...OUTCOME_TYPES], from)}) as v(seq, ${names(OUTCOME_TYPES)}) where logs.seq = v.seq and ${GUARD} returning logs.seq as k`;
const UPDATE_BY_KEY = `update logs set ${SET}, instance_id = null from unnest(${unnest(
  [['project_id', 'text'], ['id', 'text'], ...OUTCOME_TYPES],
  1,
)}) as v(project_id, id, ${names(OUTCOME_TYPES)}) where logs.project_id = v.project_id and logs.id = v.id and ${GUARD} returning logs.project_id, logs.id`;

/** Most inserts, and most outcomes, a batch may have to be written with scalar parameters. */
const SMALL = 4;

const smallStatements = new Map<string, { name: string; text: string }>();

/**
 * The statement for a small batch (`nIns` inserts, `nOut` outcomes by seq, each at most
 * {@link SMALL}) with one scalar parameter per value: the common batch at moderate rates is one
 * or two of each, and array parameters cost PostgreSQL a parse of each array literal (`array_in`
 * was 8.5 % of its CPU at 1,000 req/s) and the client an escape of each element. The rows come
 * back as those of `cs_w_both`. One named statement per shape (at most 24), made once.
 */
function smallStatement(nIns: number, nOut: number): { name: string; text: string } {
  const key = `${nIns}_${nOut}`;
  let statement = smallStatements.get(key);
  if (!statement) {
    let p = 1;
    const tuple = (types: Array<[string, string]>) => '(' + types.map(([, t]) => `$${p++}::${t}`).join(', ') + ')';
    const tuples = (n: number, types: Array<[string, string]>) => Array.from({ length: n }, () => tuple(types)).join(', ');
    const ins = `insert into logs (${names(INSERT_TYPES)}) values ${tuples(nIns, INSERT_TYPES)} on conflict (project_id, id) do nothing returning seq, project_id, id`;
    const upd = `update logs set ${SET}, instance_id = null from (values ${tuples(nOut, [['seq', 'int8'], ...OUTCOME_TYPES])}) as v(seq, ${names(OUTCOME_TYPES)}) where logs.seq = v.seq and ${GUARD} returning logs.seq as k`;
    const text =
      nIns > 0 && nOut > 0
        ? `with ins as (${ins}), upd as (${upd}) select 0 as w, seq as k, project_id, id from ins union all select 1, k, null, null from upd`
        : nIns > 0
          ? `with ins as (${ins}) select 0 as w, seq as k, project_id, id from ins`
          : `with upd as (${upd}) select 1 as w, k, null as project_id, null as id from upd`;
    statement = { name: `cs_w_small_${key}`, text };
    smallStatements.set(key, statement);
  }
  return statement;
}

/** The named statements (prepared once per connection). */
const STATEMENTS = {
  insert: { name: 'cs_w_insert', text: INSERT },
  update: { name: 'cs_w_update', text: updateBySeq(1) },
  both: {
    name: 'cs_w_both',
    text: `with ins as (${INSERT}), upd as (${updateBySeq(INSERT_TYPES.length + 1)}) select 0 as w, seq as k, project_id, id from ins union all select 1, k, null, null from upd`,
  },
  updateByKey: { name: 'cs_w_update_by_key', text: UPDATE_BY_KEY },
  refuse: {
    name: 'cs_w_refuse',
    text: "update logs set status = 'failed', completed_at = v.at, instance_id = null from unnest($1::text[], $2::text[], $3::int8[]) as v(project_id, id, at) where logs.project_id = v.project_id and logs.id = v.id and logs.status = 'pending'",
  },
};

/** Flat rows of `width` values (write-rows.ts order) as one array per column, for `unnest`. */
function columnsOf(flat: unknown[], width: number): unknown[][] {
  const rows = flat.length / width;
  const cols: unknown[][] = Array.from({ length: width }, () => new Array<unknown>(rows));
  for (let r = 0; r < rows; r++) for (let c = 0; c < width; c++) cols[c]![r] = flat[r * width + c];
  return cols;
}

function insertColumns(logs: NewLog[]): unknown[][] {
  const flat: unknown[] = [];
  for (const l of logs) pushInsert(flat, l);
  return columnsOf(flat, INSERT_COLUMNS.length);
}

/** The outcome columns of `rows`, after the key columns `keys` (seq; or project id and id). */
function outcomeColumns(rows: WriteBatch['outcomes'], keys: unknown[][]): unknown[][] {
  const flat: unknown[] = [];
  for (const o of rows) pushOutcomeValues(flat, o.c);
  return [...keys, ...columnsOf(flat, OUTCOME_COLUMNS.length)];
}

/** Dedicated-connection backend for PostgreSQL. */
export class PgWriter implements WriteBackend {
  readonly maxInflight: number;
  readonly #pool: pg.Pool;

  /**
   * @param connectionString the store's database.
   * @param timeoutMs the store deadline: statement and lock timeout of the connection, and the longest wait for it.
   * @param connections batches in flight at once, each on its own connection (PostgreSQL merges
   *   the WAL flushes of concurrent commits); the statements of one batch stay on one.
   */
  constructor(connectionString: string, timeoutMs: number, connections = 1) {
    this.maxInflight = connections;
    // One connection (by default), replaced by the pool when it breaks (outage, restart).
    this.#pool = new pg.Pool({
      connectionString,
      max: connections,
      connectionTimeoutMillis: timeoutMs,
      // No sequential scans: every statement here touches a handful of rows through an index
      // (`seq`, or the unique (project_id, id)). Left to its statistics, the planner joined the
      // outcomes to `logs` by scanning it (a plan made while the table was small, kept by the
      // cache of these named statements), so each batch cost O(table): 40 ms a batch and 200
      // calls/s at saturation after a few thousand rows (test/store-pg-writer-plan.test.ts).
      options: `-c statement_timeout=${timeoutMs} -c lock_timeout=${timeoutMs} -c enable_seqscan=off`,
    });
    this.#pool.on('error', () => undefined);
    this.#pool.on('connect', (client) => client.on('error', () => undefined));
  }

  async write(batch: WriteBatch, deadline: number): Promise<WriteResult> {
    const inserted = new Uint8Array(batch.inserts.length);
    const seqs = new Float64Array(batch.inserts.length);
    const completed = new Uint8Array(batch.outcomes.length);
    if (Date.now() >= deadline) return { inserted: inserted.fill(EXPIRED), seqs, completed: completed.fill(EXPIRED) };
    // Within one batch the first of a (project, id) pair wins; the others report "existed".
    const firstOf = new Map<string, number>();
    const unique: NewLog[] = [];
    batch.inserts.forEach((l, i) => {
      const key = l.projectId + '\u0000' + l.id;
      if (firstOf.has(key)) return;
      firstOf.set(key, i);
      unique.push(l);
    });
    const bySeq: number[] = [];
    const byKey: number[] = [];
    batch.outcomes.forEach((o, i) => (o.ref.seq ? bySeq : byKey).push(i));
    const seqOutcomes = bySeq.map((i) => batch.outcomes[i]!);
    const outcomeSeqs = seqOutcomes.map((o) => o.ref.seq!);

    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      let rows: Array<{ w?: number; k: number | string; project_id: string | null; id: string | null }> = [];
      const small = unique.length <= SMALL && seqOutcomes.length <= SMALL;
      const ins = !small && unique.length > 0 ? insertColumns(unique) : undefined;
      const upd = !small && seqOutcomes.length > 0 ? outcomeColumns(seqOutcomes, [outcomeSeqs]) : undefined;
      if (small) {
        if (unique.length + seqOutcomes.length > 0) {
          const values: unknown[] = [];
          for (const l of unique) pushInsert(values, l);
          for (const o of seqOutcomes) {
            values.push(o.ref.seq);
            pushOutcomeValues(values, o.c);
          }
          rows = (await client.query({ ...smallStatement(unique.length, seqOutcomes.length), values })).rows;
        }
      } else if (ins && upd) rows = (await client.query({ ...STATEMENTS.both, values: [...ins, ...upd] })).rows;
      else if (ins)
        rows = (await client.query({ ...STATEMENTS.insert, values: ins })).rows.map((r) => ({
          w: 0,
          k: r.seq,
          project_id: r.project_id,
          id: r.id,
        }));
      else if (upd)
        rows = (await client.query({ ...STATEMENTS.update, values: upd })).rows.map((r) => ({ w: 1, k: r.k, project_id: null, id: null }));
      for (const r of rows) {
        if (r.w === 0) {
          const i = firstOf.get(r.project_id + '\u0000' + r.id)!;
          inserted[i] = 1;
          seqs[i] = Number(r.k);
        }
      }
      const doneSeqs = new Set(rows.filter((r) => r.w === 1).map((r) => Number(r.k)));
      bySeq.forEach((i, j) => (completed[i] = doneSeqs.has(outcomeSeqs[j]!) ? 1 : 0));
      // Rare: outcomes whose caller has no seq (owed ones), and compensations.
      if (byKey.length > 0) {
        const keyRows = byKey.map((i) => batch.outcomes[i]!);
        const r = await client.query<{ project_id: string; id: string }>({
          ...STATEMENTS.updateByKey,
          values: outcomeColumns(keyRows, [keyRows.map((o) => o.ref.projectId), keyRows.map((o) => o.ref.id)]),
        });
        const done = new Set(r.rows.map((x) => x.project_id + '\u0000' + x.id));
        byKey.forEach((i) => {
          const ref = batch.outcomes[i]!.ref;
          completed[i] = done.has(ref.projectId + '\u0000' + ref.id) ? 1 : 0;
        });
      }
      if (batch.refusals.length > 0) {
        const rf = batch.refusals;
        await client.query({ ...STATEMENTS.refuse, values: [rf.map((r) => r.projectId), rf.map((r) => r.id), rf.map((r) => r.at)] });
      }
      return { inserted, seqs, completed };
    } catch (e) {
      // A failed statement rolled back; a lost connection is replaced by the pool.
      broken = e as Error;
      throw e;
    } finally {
      client.release(
        broken && !('code' in broken && typeof broken.code === 'string' && /^[0-9A-Z]{5}$/.test(broken.code)) ? broken : undefined,
      );
    }
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}
