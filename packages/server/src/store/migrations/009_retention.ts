/**
 * Per-project retention (issue 12, "Retention and deletion"; DESIGN §4 "Project settings"):
 * `projects.retention_days`, null = keep forever. The purge (retention/purge.ts) walks a
 * project's logs and events in `seq` order through the existing (project_id, seq) indexes, so
 * no new index costs the insert path anything.
 */
import type { Kysely } from 'kysely';
import type { Dialect } from '../open.js';

declare module '../schema.js' {
  interface ProjectsTable {
    /** Days a project's logs and events are kept (migration 009); null = forever. */
    retention_days?: number | null;
  }
}

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await db.schema.alterTable('projects').addColumn('retention_days', 'integer').execute();
}
