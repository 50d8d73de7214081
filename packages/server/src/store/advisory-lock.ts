/**
 * Session advisory locks on PostgreSQL, taken without waiting on a connection of their own:
 * the proof sealer's (one sealer at a time) and the liveness check of another instance's lock
 * (instances.ts). The lock lives and dies with that connection's session.
 */
import type pg from 'pg';

/**
 * A lock name: a namespace and a second key, either a number or a text hashed by PostgreSQL
 * (`hashtext`), both in the two-int4 key space.
 */
export type AdvisoryKey = readonly [namespace: number, key: number | string];

function keySql(key: AdvisoryKey): string {
  return typeof key[1] === 'string' ? '$1, hashtext($2)' : '$1, $2';
}

/** Takes `key` on `client` if it is free; true when taken. */
export async function tryAdvisoryLock(client: pg.PoolClient, key: AdvisoryKey): Promise<boolean> {
  const r = await client.query<{ ok: boolean }>(`select pg_try_advisory_lock(${keySql(key)}) as ok`, [...key]);
  return r.rows[0]?.ok === true;
}

/**
 * Runs `fn` holding `key` on a pooled connection, if the lock is free; returns undefined without
 * running `fn` when another session holds it. A connection that cannot unlock afterwards is
 * destroyed rather than returned to the pool still holding the lock.
 */
export async function withTryAdvisoryLock<T>(pool: pg.Pool, key: AdvisoryKey, fn: () => Promise<T>): Promise<T | undefined> {
  const client = await pool.connect();
  let broken = false;
  try {
    if (!(await tryAdvisoryLock(client, key))) return undefined;
    try {
      return await fn();
    } finally {
      try {
        await client.query(`select pg_advisory_unlock(${keySql(key)})`, [...key]);
      } catch {
        broken = true;
      }
    }
  } finally {
    client.release(broken);
  }
}
