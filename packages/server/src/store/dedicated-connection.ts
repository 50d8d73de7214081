/**
 * One PostgreSQL connection held for the life of the process, for state that lives in a session:
 * the LISTEN of the notifier, the advisory lock of instance liveness. When the connection is
 * lost (database restart, network cut) it is replaced after a pause, and `setUp` runs again on
 * the new one, until it succeeds or the holder closes.
 */
import type pg from 'pg';

const RETRY_MS = 1000;

/** A pooled connection kept checked out and re-established after a loss. */
export class DedicatedConnection {
  #client: pg.PoolClient | undefined;
  #closed = false;
  #retry: NodeJS.Timeout | undefined;

  /**
   * @param pool where the connection comes from.
   * @param setUp prepares a fresh connection (listen, take a lock); a throw gives it back, broken.
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly setUp: (client: pg.PoolClient) => Promise<void>,
  ) {}

  /** Connects and runs `setUp`; rejects (and retries nothing) when either fails. */
  async open(): Promise<void> {
    if (this.#closed) return;
    const client = await this.pool.connect();
    try {
      await this.setUp(client);
    } catch (e) {
      client.release(true);
      throw e;
    }
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    this.#client = client;
  }

  #lost(client: pg.PoolClient): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    try {
      client.release(true);
    } catch {
      /* already gone */
    }
    this.#scheduleRetry();
  }

  #scheduleRetry(): void {
    if (this.#closed || this.#retry) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.open().catch(() => this.#scheduleRetry());
    }, RETRY_MS);
    this.#retry.unref();
  }

  /**
   * Stops retrying and gives the connection back: to the pool after `tearDown` succeeds, or
   * destroyed (ending its session and whatever it held) when there is none or it fails.
   */
  async close(tearDown?: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    if (!client) return;
    if (!tearDown) return void client.release(true);
    try {
      await tearDown(client);
      client.release();
    } catch {
      client.release(true);
    }
  }
}
