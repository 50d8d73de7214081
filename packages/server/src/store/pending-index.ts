/**
 * Reads of the pending records' partial index (`logs_pending_owner`, migration 004) on
 * PostgreSQL, by a plain index scan: the orphan sweep (logs.ts) and the pending gauge
 * (gauges.ts), which run every 30 s and on every scrape.
 *
 * Why this needs saying: every proxied call leaves a dead entry in that index. Its write-ahead
 * record enters it as `pending`; its outcome writes a new row version that is not pending, and
 * the old version's entry stays until VACUUM removes it. A bitmap scan, which the planner picks
 * when its statistics are stale (autovacuum off, or not yet run since the table grew), visits
 * the heap for every one of those entries at every read: in a 15-minute run at 1,000 req/s the
 * sweep took 1.0-1.9 s and read ~950 MB each time (docs/performance-log.md, fifteenth
 * session). A plain index scan visits each dead entry once and marks it dead in the index
 * (`kill_prior_tuple`), so the next read skips it: each read costs the calls completed since the
 * last one (and a walk over the index's pages), not a heap visit for every call since the last
 * VACUUM. (An entry can be marked only once no transaction that began before its outcome still
 * runs; docs/operations.md, "Vacuum".)
 * SQLite removes an entry when its row leaves the index, so there the reads run as they are.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { Dialect } from './open.js';

/**
 * Runs `read` on PostgreSQL in a transaction that turns bitmap and sequential scans off (so the
 * planner uses the partial index by a plain or index-only scan, whatever its statistics say);
 * on SQLite runs it on `db` as it is.
 */
export async function readPendingIndex<T>(db: Kysely<Database>, dialect: Dialect, read: (db: Kysely<Database>) => Promise<T>): Promise<T> {
  if (dialect !== 'postgres') return read(db);
  return db.transaction().execute(async (tx) => {
    // One round trip for both settings (`set local` takes one at a time).
    await sql`select set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`.execute(tx);
    return read(tx);
  });
}
