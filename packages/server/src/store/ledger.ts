/**
 * Storage of the embedded transparency ledger: an append-only table of entries. There is no
 * update or delete method (and triggers refuse both); appends are serialized so that log
 * indices are dense and each is taken once, across every instance sharing the database.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { Dialect } from './open.js';

/** One stored ledger entry. */
export interface LedgerEntryRow {
  logIndex: number;
  /** Lower-case hex leaf hash. */
  leafHash: string;
  /** Base64 of the body bytes. */
  body: string;
  /** Seconds since the epoch. */
  integratedTime: number;
  /** Base64 DER signed entry timestamp. */
  signedEntryTimestamp: string;
}

/** Thrown by {@link LedgerRepository.append} when the same body is already in the log. */
export class DuplicateLedgerEntryError extends Error {
  constructor(readonly existing: LedgerEntryRow) {
    super(`the entry is already in the ledger at index ${existing.logIndex}`);
    this.name = 'DuplicateLedgerEntryError';
  }
}

// Key of the PostgreSQL advisory lock that serializes appends (any fixed 64-bit number works;
// this is "ledger" in ASCII, so it does not collide with other advisory locks of the service).
const APPEND_LOCK_KEY = 0x6c6564676572;

type Row = Database['ledger_entries'];

function fromRow(r: Row): LedgerEntryRow {
  return {
    logIndex: Number(r.log_index),
    leafHash: r.leaf_hash,
    body: r.body,
    integratedTime: Number(r.integrated_time),
    signedEntryTimestamp: r.signed_entry_timestamp,
  };
}

/** Data access for the ledger. */
export class LedgerRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
  ) {}

  /**
   * Appends one entry at the next index. `complete` receives that index and returns the rest
   * of the row (the signed entry timestamp covers the index, so it is made inside the lock).
   * @throws DuplicateLedgerEntryError when an entry with the same leaf hash exists.
   */
  async append(
    leafHash: string,
    complete: (logIndex: number) => Promise<Omit<LedgerEntryRow, 'logIndex' | 'leafHash'>>,
  ): Promise<LedgerEntryRow> {
    return this.db.transaction().execute(async (trx) => {
      // PostgreSQL: the transaction-scoped advisory lock makes concurrent appends from every
      // instance wait in line. SQLite: Kysely runs a transaction on its single connection
      // exclusively, and the primary key refuses a second writer process taking the same index.
      if (this.dialect === 'postgres') await sql`select pg_advisory_xact_lock(${APPEND_LOCK_KEY})`.execute(trx);
      const existing = await trx.selectFrom('ledger_entries').selectAll().where('leaf_hash', '=', leafHash).executeTakeFirst();
      if (existing) throw new DuplicateLedgerEntryError(fromRow(existing));
      const last = await trx
        .selectFrom('ledger_entries')
        .select((eb) => eb.fn.max('log_index').as('m'))
        .executeTakeFirst();
      const logIndex = last?.m === null || last?.m === undefined ? 0 : Number(last.m) + 1;
      const rest = await complete(logIndex);
      const row: LedgerEntryRow = { logIndex, leafHash, ...rest };
      await trx
        .insertInto('ledger_entries')
        .values({
          log_index: row.logIndex,
          leaf_hash: row.leafHash,
          body: row.body,
          integrated_time: row.integratedTime,
          signed_entry_timestamp: row.signedEntryTimestamp,
        })
        .execute();
      return row;
    });
  }

  /** Number of entries (= the current tree size). */
  async size(): Promise<number> {
    const r = await this.db
      .selectFrom('ledger_entries')
      .select((eb) => eb.fn.max('log_index').as('m'))
      .executeTakeFirst();
    return r?.m === null || r?.m === undefined ? 0 : Number(r.m) + 1;
  }

  /** Leaf hashes (hex) of entries `from` (inclusive) onwards, in index order, at most `limit`. */
  async leafHashes(from: number, limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom('ledger_entries')
      .select('leaf_hash')
      .where('log_index', '>=', from)
      .orderBy('log_index', 'asc')
      .limit(limit)
      .execute();
    return rows.map((r) => r.leaf_hash);
  }

  /** The entry at `logIndex`, or undefined. */
  async byIndex(logIndex: number): Promise<LedgerEntryRow | undefined> {
    const r = await this.db.selectFrom('ledger_entries').selectAll().where('log_index', '=', logIndex).executeTakeFirst();
    return r ? fromRow(r) : undefined;
  }

  /** The entry with leaf hash `leafHash` (lower-case hex), or undefined. */
  async byLeafHash(leafHash: string): Promise<LedgerEntryRow | undefined> {
    const r = await this.db.selectFrom('ledger_entries').selectAll().where('leaf_hash', '=', leafHash).executeTakeFirst();
    return r ? fromRow(r) : undefined;
  }
}
