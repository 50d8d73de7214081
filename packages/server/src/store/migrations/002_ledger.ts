/**
 * Tables of the embedded timestamp authority and transparency ledger:
 *
 * - `witness_keys`: the TSA's and the ledger's key material (PEM, as JSON) when the store is
 *   PostgreSQL, so that every instance of a fleet signs with ONE identity. With SQLite the
 *   material lives as files in the data dir instead (see tsa/material.ts); the table exists in
 *   both dialects so the schema is one.
 * - `tsa_tokens`: one row per issued timestamp; its auto-increment `serial` is the TSTInfo
 *   serialNumber, which makes serials unique and monotonic across instances.
 * - `ledger_entries`: the append-only transparency log. `log_index` is the primary key (so an
 *   index can never be taken twice), `leaf_hash` is unique (a body is entered once), and
 *   triggers refuse UPDATE and DELETE in both dialects.
 */
import { sql, type Generated, type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** `witness_keys`: key material of the embedded TSA and ledger (PostgreSQL deployments). */
export interface WitnessKeysTable {
  name: string;
  /** JSON object of named PEM/text values. */
  material: string;
  created_at: number;
}

/** `tsa_tokens`: issued timestamps. */
export interface TsaTokensTable {
  serial: Generated<number>;
  gen_time: number;
  /** Hash algorithm OID of the request's message imprint. */
  hash_oid: string;
  /** Hex of the timestamped digest. */
  hashed_message: string;
}

/** `ledger_entries`: the embedded Rekor-compatible ledger. */
export interface LedgerEntriesTable {
  log_index: number;
  /** Lower-case hex RFC 9162 leaf hash of the body (SHA-256(0x00 ‖ body)). */
  leaf_hash: string;
  /** The entry body, base64 of its canonical JSON bytes (as Rekor serves it). */
  body: string;
  /** Seconds since the epoch. */
  integrated_time: number;
  /** Base64 DER ECDSA signature of the ledger key over the SET payload. */
  signed_entry_timestamp: string;
}

declare module '../schema.js' {
  interface Database {
    witness_keys: WitnessKeysTable;
    tsa_tokens: TsaTokensTable;
    ledger_entries: LedgerEntriesTable;
  }
}

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('witness_keys')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('material', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  const tokens =
    dialect === 'postgres'
      ? db.schema.createTable('tsa_tokens').addColumn('serial', 'bigserial', (c) => c.primaryKey())
      : db.schema.createTable('tsa_tokens').addColumn('serial', 'integer', (c) => c.primaryKey().autoIncrement());
  await tokens
    .addColumn('gen_time', 'bigint', (c) => c.notNull())
    .addColumn('hash_oid', 'text', (c) => c.notNull())
    .addColumn('hashed_message', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('ledger_entries')
    .addColumn('log_index', 'bigint', (c) => c.primaryKey())
    .addColumn('leaf_hash', 'text', (c) => c.notNull().unique())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('integrated_time', 'bigint', (c) => c.notNull())
    .addColumn('signed_entry_timestamp', 'text', (c) => c.notNull())
    .execute();

  // Append-only, enforced by the database itself and not only by the absence of a code path.
  if (dialect === 'postgres') {
    await sql`create function ledger_entries_append_only() returns trigger language plpgsql as $$
      begin raise exception 'ledger_entries is append-only'; end $$`.execute(db);
    await sql`create trigger ledger_entries_no_update before update or delete on ledger_entries
      for each row execute function ledger_entries_append_only()`.execute(db);
  } else {
    await sql`create trigger ledger_entries_no_update before update on ledger_entries
      begin select raise(abort, 'ledger_entries is append-only'); end`.execute(db);
    await sql`create trigger ledger_entries_no_delete before delete on ledger_entries
      begin select raise(abort, 'ledger_entries is append-only'); end`.execute(db);
  }
}
