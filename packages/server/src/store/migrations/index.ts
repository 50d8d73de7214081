/**
 * The ordered list of migrations, applied at start by {@link migrateToLatest}. Each capability
 * that needs tables adds one file here; a migration is never edited after it has shipped.
 */
import type { Kysely } from 'kysely';
import type { Dialect } from '../open.js';
import * as m001 from './001_foundation.js';
import * as m002 from './002_ledger.js';
import * as m003 from './003_proofs.js';
import * as m004 from './004_instances.js';

/** One migration: a name (sort order) and its `up`. */
export interface Migration {
  name: string;
  up: (db: Kysely<unknown>, dialect: Dialect) => Promise<void>;
}

/** All migrations, oldest first. */
export const MIGRATIONS: Migration[] = [
  { name: '001_foundation', up: m001.up },
  { name: '002_ledger', up: m002.up },
  { name: '003_proofs', up: m003.up },
  { name: '004_instances', up: m004.up },
];
