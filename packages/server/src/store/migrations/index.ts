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
import * as m005 from './005_project_scoped_ids.js';
import * as m006 from './006_client_secret_rotation.js';
import * as m007 from './007_exchange_timing.js';
import * as m008 from './008_webhooks.js';
import * as m009 from './009_retention.js';
import * as m010 from './010_embed_origins.js';
import * as m011 from './011_spans.js';
import * as m012 from './012_proof_batch_index.js';
import * as m013 from './013_payload_storage.js';
import * as m014 from './014_partial_trace_index.js';

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
  { name: '005_project_scoped_ids', up: m005.up },
  { name: '006_client_secret_rotation', up: m006.up },
  { name: '007_exchange_timing', up: m007.up },
  { name: '008_webhooks', up: m008.up },
  { name: '009_retention', up: m009.up },
  { name: '010_embed_origins', up: m010.up },
  { name: '011_spans', up: m011.up },
  { name: '012_proof_batch_index', up: m012.up },
  { name: '013_payload_storage', up: m013.up },
  { name: '014_partial_trace_index', up: m014.up },
];
