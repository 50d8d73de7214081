/**
 * The PostgreSQL backend of the log writer (log-writer.ts): one dedicated connection, one
 * statement per batch, so a whole batch is one round trip and one commit:
 *
 *   with ins as (insert into logs … values (…), (…) on conflict (project_id, id) do nothing returning …),
 *        upd as (update logs set … from (values (…), (…)) v where logs.seq = v.seq … returning …)
 *   select … from ins union all select … from upd
 *
 * A small batch (up to four inserts and four outcomes, the usual one at moderate rates) takes a
 * scalar parameter per value (one named statement per shape); a larger one takes one array per
 * column through `unnest`, so that its text does not change with its size (see statementFor).
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
import { executeNamed, type TextRow } from './pg-batch-query.js';
import { leavesPgConnectionUsable } from './availability.js';
import { monotonicMs } from '../monotonic-clock.js';

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

const SET = OUTCOME_TYPES.map(([c]) => `${c} = v.${c}`).join(', ');
const GUARD = "logs.source = 'proxy' and logs.proof_batch_id is null";
/** An outcome row's columns: the row's seq, then what it sets. */
const OUTCOME_ROW_TYPES: Array<[string, string]> = [['seq', 'int8'], ...OUTCOME_TYPES];

/** Inserts the rows `source` yields (`select * from unnest(…)` or `values (…), …`). */
const insertFrom = (source: string) =>
  `insert into logs (${names(INSERT_TYPES)}) ${source} on conflict (project_id, id) do nothing returning seq, project_id, id`;
/** Writes the outcomes `source` yields on the rows their seqs name. */
const updateFrom = (source: string) =>
  `update logs set ${SET}, instance_id = null from ${source} as v(seq, ${names(OUTCOME_TYPES)}) where logs.seq = v.seq and ${GUARD} returning logs.seq as k`;

/** One statement for a batch's inserts and outcomes; every row it returns is (w: 0 insert or 1 outcome, k: seq, project_id, id). */
function combined(ins: string | undefined, upd: string | undefined): string {
  const ctes = [...(ins ? [`ins as (${ins})`] : []), ...(upd ? [`upd as (${upd})`] : [])];
  const selects = [
    ...(ins ? ['select 0 as w, seq as k, project_id, id from ins'] : []),
    ...(upd ? ['select 1 as w, k, null as project_id, null as id from upd'] : []),
  ];
  return `with ${ctes.join(', ')} ${selects.join(' union all ')}`;
}

/** Most inserts, and most outcomes, a batch may have to be written with scalar parameters. */
const SMALL = 4;

/** A named statement, and whether it takes one scalar per value (else one array per column). */
interface WriterStatement {
  name: string;
  text: string;
  scalar: boolean;
}

const statements = new Map<string, WriterStatement>();

/**
 * The named statement (prepared once per connection) for a batch of `nIns` inserts and `nOut`
 * outcomes by seq, not both 0. Up to {@link SMALL} of each, one scalar parameter per value
 * (`VALUES` lists, a statement per shape, 24 at most): the usual batch at moderate rates is one
 * or two of each, and array parameters cost PostgreSQL a parse of each array literal (`array_in`
 * was 8.5 % of its CPU at 1,000 req/s) and the client an escape of each element. Larger batches
 * travel as one array per column through `unnest` (three statements), so their text never
 * changes with their size.
 */
function statementFor(nIns: number, nOut: number): WriterStatement {
  const scalar = nIns <= SMALL && nOut <= SMALL;
  const key = scalar ? `small_${nIns}_${nOut}` : `arrays_${nIns > 0 ? 1 : 0}_${nOut > 0 ? 1 : 0}`;
  let statement = statements.get(key);
  if (!statement) {
    let p = 1;
    const tuple = (types: Array<[string, string]>) => '(' + types.map(([, t]) => `$${p++}::${t}`).join(', ') + ')';
    const tuples = (n: number, types: Array<[string, string]>) => Array.from({ length: n }, () => tuple(types)).join(', ');
    const arrays = (types: Array<[string, string]>) => `unnest(${types.map(([, t]) => `$${p++}::${t}[]`).join(', ')})`;
    const ins =
      nIns === 0 ? undefined : insertFrom(scalar ? `values ${tuples(nIns, INSERT_TYPES)}` : `select * from ${arrays(INSERT_TYPES)}`);
    const upd = nOut === 0 ? undefined : updateFrom(scalar ? `(values ${tuples(nOut, OUTCOME_ROW_TYPES)})` : arrays(OUTCOME_ROW_TYPES));
    statement = { name: `cs_w_${key}`, text: combined(ins, upd), scalar };
    statements.set(key, statement);
  }
  return statement;
}

/** The other statements: outcomes named by project and id (owed ones), and compensations. */
const STATEMENTS = {
  updateByKey: {
    name: 'cs_w_update_by_key',
    text: `update logs set ${SET}, instance_id = null from unnest(${unnest(
      [['project_id', 'text'], ['id', 'text'], ...OUTCOME_TYPES],
      1,
    )}) as v(project_id, id, ${names(OUTCOME_TYPES)}) where logs.project_id = v.project_id and logs.id = v.id and ${GUARD} returning logs.project_id, logs.id`,
  },
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
   * Connections kept between batches instead of going back to the pool: taking one from pg-pool
   * and giving it back arms and clears a timer, queues a tick and emits two events per batch (two
   * batches per call). A held connection that breaks while idle (the server restarts, kills it)
   * leaves this list at once, so the next batch opens a new one instead of failing on it.
   */
  readonly #held: pg.PoolClient[] = [];

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
      // What pg_stat_activity shows for it (a connection string's own application_name wins).
      application_name: 'countersign-writer',
      max: connections,
      connectionTimeoutMillis: timeoutMs,
      // Never closed for being idle: the connection is dedicated, and pg-pool arms a 10-s timer
      // on every release (once per batch) to close idle ones otherwise.
      idleTimeoutMillis: 0,
      // No sequential scans: every statement here touches a handful of rows through an index
      // (`seq`, or the unique (project_id, id)). Left to its statistics, the planner joined the
      // outcomes to `logs` by scanning it (a plan made while the table was small, kept by the
      // cache of these named statements), so each batch cost O(table): 40 ms a batch and 200
      // calls/s at saturation after a few thousand rows (test/store-pg-writer-plan.test.ts).
      options: `-c statement_timeout=${timeoutMs} -c lock_timeout=${timeoutMs} -c enable_seqscan=off`,
    });
    this.#pool.on('error', () => undefined);
    this.#pool.on('connect', (client) =>
      client.on('error', (err) => {
        const i = this.#held.indexOf(client);
        if (i < 0) return;
        this.#held.splice(i, 1);
        client.release(err);
      }),
    );
  }

  async write(batch: WriteBatch, deadline: number): Promise<WriteResult> {
    // Plain arrays: a typed array brings a memory block of its own that the young generation's
    // collector must free in its pause (three per batch, two batches per proxied call).
    const inserted = new Array<number>(batch.inserts.length).fill(0);
    const seqs = new Array<number>(batch.inserts.length).fill(0);
    const completed = new Array<number>(batch.outcomes.length).fill(0);
    if (monotonicMs() >= deadline) return { inserted: inserted.fill(EXPIRED), seqs, completed: completed.fill(EXPIRED) };
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

    const client = this.#held.pop() ?? (await this.#pool.connect());
    let broken: Error | undefined;
    try {
      // Each row: w ('0' insert, '1' outcome), k (seq), project_id, id (combined's columns).
      let rows: TextRow[] = [];
      if (unique.length + seqOutcomes.length > 0) {
        const statement = statementFor(unique.length, seqOutcomes.length);
        let values: unknown[];
        if (statement.scalar) {
          values = [];
          for (const l of unique) pushInsert(values, l);
          for (const o of seqOutcomes) {
            values.push(o.ref.seq);
            pushOutcomeValues(values, o.c);
          }
        } else {
          values = [
            ...(unique.length > 0 ? insertColumns(unique) : []),
            ...(seqOutcomes.length > 0 ? outcomeColumns(seqOutcomes, [outcomeSeqs]) : []),
          ];
        }
        rows = await executeNamed(client, statement.name, statement.text, values);
      }
      const doneSeqs = new Set<number>();
      for (const [w, k, projectId, id] of rows) {
        if (w === '0') {
          const i = firstOf.get(projectId + '\u0000' + id)!;
          inserted[i] = 1;
          seqs[i] = Number(k);
        } else doneSeqs.add(Number(k));
      }
      bySeq.forEach((i, j) => (completed[i] = doneSeqs.has(outcomeSeqs[j]!) ? 1 : 0));
      // Rare: outcomes whose caller has no seq (owed ones), and compensations.
      if (byKey.length > 0) {
        const keyRows = byKey.map((i) => batch.outcomes[i]!);
        const { name, text } = STATEMENTS.updateByKey;
        const values = outcomeColumns(keyRows, [keyRows.map((o) => o.ref.projectId), keyRows.map((o) => o.ref.id)]);
        const done = new Set((await executeNamed(client, name, text, values)).map(([projectId, id]) => projectId + '\u0000' + id));
        byKey.forEach((i) => {
          const ref = batch.outcomes[i]!.ref;
          completed[i] = done.has(ref.projectId + '\u0000' + ref.id) ? 1 : 0;
        });
      }
      if (batch.refusals.length > 0) {
        const rf = batch.refusals;
        const { name, text } = STATEMENTS.refuse;
        await executeNamed(client, name, text, [rf.map((r) => r.projectId), rf.map((r) => r.id), rf.map((r) => r.at)]);
      }
      return { inserted, seqs, completed };
    } catch (e) {
      // A failed statement rolled back; a lost connection is replaced by the pool.
      broken = e as Error;
      throw e;
    } finally {
      if (broken && !leavesPgConnectionUsable(broken)) client.release(broken);
      else this.#held.push(client);
    }
  }

  async close(): Promise<void> {
    for (const client of this.#held.splice(0)) client.release();
    await this.#pool.end();
  }
}
