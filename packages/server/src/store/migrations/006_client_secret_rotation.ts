/**
 * Client secret rotation (issue 8, "Secrets and strict input"; DESIGN §4 "Project settings and
 * secrets"): `POST /v1/projects/{projectId}/client-secret/rotate` replaces a project's embed-token
 * secret. During an optional grace period the replaced secret still verifies tokens, so browsers
 * holding a token signed with it are not cut off mid-session; these two columns hold it and the
 * moment it stops (both null when there is no grace period running). Only one previous secret is
 * kept: rotating again ends the earlier grace period at once.
 */
import type { Kysely } from 'kysely';
import type { Dialect } from '../open.js';

declare module '../schema.js' {
  interface ProjectsTable {
    /** The client secret replaced by the last rotation, while its grace period runs (migration 006). */
    client_secret_previous?: string | null;
    /** When `client_secret_previous` stops verifying embed tokens, epoch ms (migration 006). */
    client_secret_previous_until?: number | null;
  }
}

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  void dialect;
  await db.schema.alterTable('projects').addColumn('client_secret_previous', 'text').execute();
  await db.schema.alterTable('projects').addColumn('client_secret_previous_until', 'bigint').execute();
}
