/**
 * Which server instances are alive, so that one instance never declares another's exchanges
 * interrupted while they are still streaming.
 *
 * Every instance draws a random id at start and stamps it on the write-ahead records it still
 * owes an outcome for. On PostgreSQL it also holds, for as long as it runs, a session-level
 * advisory lock named by that id on a dedicated connection. PostgreSQL releases a session's
 * locks when the session ends, so an instance that was killed, crashed or lost its network
 * loses its lock within moments while a live one keeps it: whoever can take the lock knows the
 * owner is gone, and holds the lock while it marks the owner's records. On SQLite one process
 * owns the data directory, so every other id belongs to a process that is gone.
 */
import type pg from 'pg';
import { randomId } from '@countersign/core';
import { DedicatedConnection } from './dedicated-connection.js';
import { tryAdvisoryLock, withTryAdvisoryLock } from './advisory-lock.js';

/** Advisory lock namespace of instance liveness ('CSIN'); the second key is hashtext(id). */
const LOCK_NAMESPACE = 0x4353494e;
/** Redraws of the id when its 32-bit lock name clashes with a live instance's (rare). */
const MAX_DRAWS = 5;

function newInstanceId(): string {
  return 'ins_' + randomId(16);
}

/** This instance's id and its liveness lock; tells whether another instance is gone. */
export class InstanceLiveness {
  #id = newInstanceId();
  #started = false;
  /** The connection whose session holds the lock (PostgreSQL); re-taken after a loss. */
  readonly #holder: DedicatedConnection | undefined;

  /** @param pool the PostgreSQL pool, or undefined on SQLite (one process, no lock needed). */
  constructor(private readonly pool: pg.Pool | undefined) {
    this.#holder = pool && new DedicatedConnection(pool, (client) => this.#takeLock(client));
  }

  /** This instance's id, stamped on the pending records it owns. */
  get id(): string {
    return this.#id;
  }

  /** Takes the liveness lock (PostgreSQL); a no-op on SQLite. */
  async start(): Promise<void> {
    await this.#holder?.open();
    this.#started = true;
  }

  async #takeLock(client: pg.PoolClient): Promise<void> {
    for (let draw = 1; ; draw++) {
      if (await tryAdvisoryLock(client, [LOCK_NAMESPACE, this.#id])) return;
      // Someone holds our lock name. At first start that is a clash with a live instance's
      // hash: draw again. After a reconnect the id is already on our records, so keep it and
      // retry later (another instance is checking on us right now and will let go).
      if (this.#started) throw new Error('the liveness lock is held by another session');
      if (draw >= MAX_DRAWS) throw new Error('could not take an instance liveness lock');
      this.#id = newInstanceId();
    }
  }

  /**
   * Runs `fn` if the instance `otherId` is gone, holding its lock meanwhile so it cannot be
   * judged alive halfway; returns undefined without running `fn` while it is alive.
   */
  async whileGone<T>(otherId: string, fn: () => Promise<T>): Promise<T | undefined> {
    if (otherId === this.#id) return undefined;
    if (!this.pool) return fn();
    return withTryAdvisoryLock(this.pool, [LOCK_NAMESPACE, otherId], fn);
  }

  /** Lets go of the lock (the session ends with the connection). */
  async close(): Promise<void> {
    await this.#holder?.close();
  }
}
