/**
 * Storage of the embedded timestamp authority: issued-token serials, and the shared key
 * material of the embedded witnesses (TSA and ledger) for PostgreSQL fleets.
 */
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** Key material rows (`witness_keys`): one JSON object of named PEM/text values per witness. */
export class WitnessKeyRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** The material stored under `name`, or undefined. */
  async get(name: string): Promise<Record<string, string> | undefined> {
    const row = await this.db.selectFrom('witness_keys').select('material').where('name', '=', name).executeTakeFirst();
    return row ? (JSON.parse(row.material) as Record<string, string>) : undefined;
  }

  /**
   * Stores `material` under `name` unless a row is already there, and returns whichever is
   * stored afterwards: when two instances start at once, both end up with the first one's.
   */
  async putIfAbsent(name: string, material: Record<string, string>, createdAt: number): Promise<Record<string, string>> {
    await this.db
      .insertInto('witness_keys')
      .values({ name, material: JSON.stringify(material), created_at: createdAt })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    const stored = await this.get(name);
    if (!stored) throw new Error(`witness key material "${name}" vanished after insert`);
    return stored;
  }
}

/** A timestamp about to be issued. */
export interface NewTsaToken {
  genTime: number;
  hashOid: string;
  hashedMessageHex: string;
}

/** Issued timestamps (`tsa_tokens`). */
export class TsaTokenRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Records a timestamp and returns its serial number (unique, increasing across instances). */
  async allocateSerial(token: NewTsaToken): Promise<number> {
    const r = await this.db
      .insertInto('tsa_tokens')
      .values({ gen_time: token.genTime, hash_oid: token.hashOid, hashed_message: token.hashedMessageHex })
      .returning('serial')
      .executeTakeFirstOrThrow();
    return Number(r.serial);
  }
}
