/**
 * Tells a store outage apart from a bug. A dropped or refused database connection, a database
 * shutting down, or SQLite's disk and lock errors mean "the store cannot take this now": the
 * caller gets 503 `log_store_unavailable` and may retry, never a 500.
 */

/**
 * PostgreSQL SQLSTATE classes and codes that mean the server or connection is unavailable, or
 * that a statement hit the store deadline: 55P03 `lock_not_available` (lock_timeout: a table
 * locked by another session) and 57014 `query_canceled` (statement_timeout of the writer).
 */
const PG_UNAVAILABLE = [/^08/, /^57P0[1-4]$/, /^53[0-3]/, /^58/, /^55P03$/, /^57014$/];
/** Of those, the ones after which the connection they came on is gone: connection exceptions, the server ending the session. */
const PG_CONNECTION_ENDED = PG_UNAVAILABLE.slice(0, 2);
/** Node socket errors a database driver passes through. */
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ECONNABORTED']);
/** Our own: a hot-path write past the store deadline (log-writer.ts). */
const STORE_CODES = new Set(['STORE_TIMEOUT']);
/** SQLite result codes of an unavailable or unwritable database file. */
const SQLITE_UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|READONLY|PROTOCOL|NOTADB|CORRUPT)/;
/** Messages of pg and pg-pool for connections lost or refused without a code. */
const PG_MESSAGES =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Cannot use a pool after calling end|is not currently accepting connections|the database system is (starting up|shutting down|in recovery mode)/i;

/** True when `error` (or its cause) says the database is unavailable rather than the query wrong. */
export function isStoreUnavailable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (NET_CODES.has(code) || STORE_CODES.has(code) || SQLITE_UNAVAILABLE.test(code)) return true;
      if (/^[0-9A-Z]{5}$/.test(code) && PG_UNAVAILABLE.some((re) => re.test(code))) return true;
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && PG_MESSAGES.test(message)) return true;
  }
  return false;
}

/**
 * True when a statement's error leaves its PostgreSQL connection usable for the next statement:
 * a SQLSTATE of the statement's own (it rolled back), not one that ended the connection. An
 * error without a SQLSTATE is the client's own report of a lost connection.
 */
export function leavesPgConnectionUsable(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !PG_CONNECTION_ENDED.some((re) => re.test(code));
}
