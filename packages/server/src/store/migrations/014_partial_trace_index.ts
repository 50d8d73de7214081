/**
 * `logs_project_trace` (project, trace id, seq) keeps only the entries that have a trace id.
 * Its one reader asks for one trace (`WHERE project_id = ? AND trace_id = ?`, logs.ts `trace`
 * and the `traceId` filter), which both stores know implies `trace_id IS NOT NULL`, so the
 * partial index serves it as the whole one did; the prefix filter compares `lower(trace_id)` and
 * never used the index. A call without a trace id (most SDK calls through forward mode, and
 * `/v1/proxy` calls that name none) no longer writes an index entry nobody reads: one b-tree
 * fewer per insert (on SQLite ~1.4 WAL frames of a call's ~11, docs/performance-log.md), and on
 * PostgreSQL one index insertion fewer for the insert and one for the outcome's new row version.
 * Building it reads the table once, at the upgrade.
 */
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await sql`drop index logs_project_trace`.execute(db);
  await sql`create index logs_project_trace on logs (project_id, trace_id, seq) where trace_id is not null`.execute(db);
}
