/**
 * PostgreSQL: the `payload` column of `logs` is stored without compression (`STORAGE EXTERNAL`:
 * out of line when large, never compressed). A payload is an envelope of AES-GCM ciphertext in
 * base64, which does not compress; PostgreSQL still tried (`pglz_compress` was ~4 % of the
 * writer backend's CPU at 1,000 proxied calls/s: docs/performance-log.md) before storing it as it
 * was. Applies to rows written from now on; nothing is rewritten. SQLite does not compress and
 * is left as it is.
 */
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`alter table logs alter column payload set storage external`.execute(db);
}
