/**
 * The hot write path on SQLite: log inserts and proxy outcomes as cached prepared statements,
 * run synchronously by better-sqlite3 inside one transaction per group-commit batch.
 *
 * Why: through Kysely every statement is compiled and prepared anew, which cost more than the
 * write itself (profiled at roughly half of the proxy's CPU per call). Why it is safe: the
 * statements run while holding Kysely's own connection mutex (`db.connection()`), so they never
 * interleave with a Kysely transaction that is open on the same connection.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { Database, LogsTable } from './schema.js';

/** A log row as the insert statement binds it (Kysely's row shape, without `seq`). */
export type LogInsertRow = Omit<LogsTable, 'seq' | 'completed_at'>;

/** An outcome as the update statement binds it. */
export interface OutcomeRow {
  id: string;
  status: string;
  payload: string;
  payload_hash: string | null;
  completed_at: number;
}

const INSERT_COLUMNS = [
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
  'payload',
  'metadata',
  'instance_id',
] as const satisfies readonly (keyof LogInsertRow)[];

/** Prepared-statement writer for SQLite. */
export class SqliteHotWrites {
  readonly #insert: BetterSqlite3.Statement;
  readonly #complete: BetterSqlite3.Statement;
  readonly #insertAll: (rows: LogInsertRow[]) => Set<string>;
  readonly #completeAll: (rows: OutcomeRow[]) => boolean[];

  constructor(
    private readonly db: Kysely<Database>,
    raw: BetterSqlite3.Database,
  ) {
    this.#insert = raw.prepare(
      `insert into logs (${INSERT_COLUMNS.join(', ')}) values (${INSERT_COLUMNS.map((c) => '@' + c).join(', ')}) on conflict (id) do nothing`,
    );
    this.#complete = raw.prepare(
      // A record already sealed into a proof batch never changes (see proxy-outcomes.ts).
      'update logs set status = @status, payload = @payload, payload_hash = @payload_hash, completed_at = @completed_at, instance_id = null where id = @id and proof_batch_id is null',
    );
    this.#insertAll = raw.transaction((rows: LogInsertRow[]) => {
      const inserted = new Set<string>();
      for (const row of rows) if (this.#insert.run(row).changes > 0) inserted.add(row.id);
      return inserted;
    });
    this.#completeAll = raw.transaction((rows: OutcomeRow[]) => rows.map((row) => this.#complete.run(row).changes > 0));
  }

  /** Inserts rows (idempotent on id) in one transaction; resolves with the ids that were new. */
  insertLogs(rows: LogInsertRow[]): Promise<Set<string>> {
    return this.db.connection().execute(async () => this.#insertAll(rows));
  }

  /** Writes outcomes in one transaction; per row, whether it was written. */
  completeLogs(rows: OutcomeRow[]): Promise<boolean[]> {
    return this.db.connection().execute(async () => this.#completeAll(rows));
  }
}
