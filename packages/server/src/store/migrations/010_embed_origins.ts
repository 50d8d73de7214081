/**
 * Per-project embedding origins (issue 11, "Embeddable viewer"; DESIGN §4 "Embedding"):
 * `projects.embed_origins`, a JSON array of origins allowed to frame `/embed` and to call the
 * API with the project's embed tokens (CORS); null = none.
 */
import type { Kysely } from 'kysely';
import type { Dialect } from '../open.js';

declare module '../schema.js' {
  interface ProjectsTable {
    /** JSON array of allowed embedding origins (migration 010); null = none. */
    embed_origins?: string | null;
  }
}

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await db.schema.alterTable('projects').addColumn('embed_origins', 'text').execute();
}
