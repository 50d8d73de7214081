/**
 * One execution of a named statement of the PostgreSQL writer (pg-writer.ts), handed to node-pg
 * as a custom query (its `Submittable` protocol, as pg-cursor and pg-query-stream use) so that a
 * batch costs the driver only what the writer needs of it:
 *
 * - no Describe: node-pg's own `Query` describes the portal at every execution of a named
 *   statement, so every batch's answer carried its column list again and the client built its
 *   row parsers anew from it (2.6 % of the event loop on PostgreSQL at 1,000 req/s, the
 *   forty-first session's profile). The writer knows its statements' columns; a `DataRow`
 *   arrives the same without it, as text.
 * - no row objects: each row is the array of its fields' texts (or null), read by position.
 * - values mapped once, by node-pg's own `prepareValue` (numbers, strings, null, and the arrays
 *   of the `unnest` statements), straight into the Bind message.
 *
 * Errors are node-pg's: a statement's failure is the `DatabaseError` its parser built (with the
 * SQLSTATE `code` that pg-writer.ts and availability.ts read), a lost connection the client's own
 * error, so the writer's outage handling is unchanged.
 */
import type pg from 'pg';
import pgUtils from 'pg/lib/utils.js';

/** The part of node-pg's `Connection` a custom query drives (pg/lib/connection.js). */
interface PgConnection {
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
  stream: { cork?: () => void; uncork?: () => void };
  parse(config: { text: string; name: string; types: unknown[] }): void;
  bind(config: { portal: string; statement: string; values: unknown[]; valueMapper: (v: unknown) => unknown }): void;
  execute(config: { portal: string; rows: number }): void;
  sync(): void;
  sendCopyFail(message: string): void;
}

/** A row of a statement's answer: each column's text, or null, in the statement's order. */
export type TextRow = Array<string | null>;

const prepareValue = pgUtils.prepareValue;

/**
 * Executes the named statement `name` (parsed on the connection the first time) with `values`,
 * and resolves with its rows as text. The promise settles once, when the server is ready for
 * the next query, or on the statement's or the connection's error.
 */
export function executeNamed(client: pg.PoolClient, name: string, text: string, values: unknown[]): Promise<TextRow[]> {
  return new Promise<TextRow[]>((resolve, reject) => {
    client.query(new NamedExecution(name, text, values, resolve, reject) as unknown as pg.QueryConfig);
  });
}

/** node-pg calls these methods of the active query as the server's messages arrive (pg/lib/client.js). */
class NamedExecution {
  readonly rows: TextRow[] = [];
  #failure: Error | undefined;
  #settled = false;

  constructor(
    /** Read by node-pg: it records the statement as parsed on ParseComplete, and forgets it on an error. */
    readonly name: string,
    readonly text: string,
    readonly values: unknown[],
    readonly resolve: (rows: TextRow[]) => void,
    readonly reject: (err: Error) => void,
  ) {}

  submit(connection: PgConnection): void {
    connection.stream.cork?.();
    try {
      if (connection.parsedStatements[this.name] === undefined && connection.submittedNamedStatements[this.name] === undefined) {
        connection.parse({ text: this.text, name: this.name, types: [] });
        connection.submittedNamedStatements[this.name] = this.text;
      }
      try {
        connection.bind({ portal: '', statement: this.name, values: this.values, valueMapper: prepareValue });
      } catch (err) {
        // A value node-pg cannot map (none of the writer's are): nothing of the Bind was sent;
        // Sync brings the server's ReadyForQuery, which settles this execution with the error.
        this.#failure = err as Error;
        connection.sync();
        return;
      }
      connection.execute({ portal: '', rows: 0 });
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
  }

  handleRowDescription(): void {}

  handleDataRow(msg: { fields: TextRow }): void {
    this.rows.push(msg.fields);
  }

  handleCommandComplete(): void {}

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: PgConnection): void {
    connection.sendCopyFail('No source stream defined');
  }

  handleCopyData(): void {}

  handleError(err: Error): void {
    // node-pg reports a statement's error, then (unless the connection is gone) ReadyForQuery
    // with no active query; the error settles the execution.
    this.#failure = err;
    this.#settle();
  }

  handleReadyForQuery(): void {
    this.#settle();
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    if (this.#failure) this.reject(this.#failure);
    else this.resolve(this.rows);
  }
}
