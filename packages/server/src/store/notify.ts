/**
 * Cross-instance notifications. With PostgreSQL every instance holds one dedicated connection
 * that LISTENs, and `notify` goes through `pg_notify`, so every instance (the sender included)
 * hears every message. With SQLite there is one process, so `notify` calls the handlers
 * directly. Used for dashboard events and for key revocation reaching every key cache.
 */
import type pg from 'pg';

/** Receives the text payload of a notification on one channel. */
export type NotifyHandler = (payload: string) => void;

/** Channels are fixed names (they are SQL identifiers); payloads are under 8000 bytes. */
export type NotifyChannel = 'countersign_events' | 'countersign_keys';

const CHANNELS: readonly NotifyChannel[] = ['countersign_events', 'countersign_keys'];
const RECONNECT_MS = 1000;

/** Publish/subscribe over LISTEN/NOTIFY, or in process. */
export class Notifier {
  readonly #handlers = new Map<NotifyChannel, Set<NotifyHandler>>();
  #client: pg.PoolClient | undefined;
  #closed = false;
  #reconnect: NodeJS.Timeout | undefined;

  /** @param pool the PostgreSQL pool, or undefined for in-process delivery. */
  constructor(private readonly pool: pg.Pool | undefined) {}

  /** Starts listening (PostgreSQL); a no-op in process. */
  async start(): Promise<void> {
    if (!this.pool || this.#closed) return;
    const client = await this.pool.connect();
    client.on('notification', (m) => this.#dispatch(m.channel as NotifyChannel, m.payload ?? ''));
    // A dropped listening connection is replaced; until then other instances' messages are missed.
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    for (const ch of CHANNELS) await client.query(`LISTEN ${ch}`);
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
    if (this.#closed || this.#reconnect) return;
    this.#reconnect = setTimeout(() => {
      this.#reconnect = undefined;
      this.start().catch(() => this.#scheduleRetry());
    }, RECONNECT_MS);
    this.#reconnect.unref();
  }

  #dispatch(channel: NotifyChannel, payload: string): void {
    for (const h of this.#handlers.get(channel) ?? []) {
      try {
        h(payload);
      } catch {
        /* one bad subscriber must not stop the others */
      }
    }
  }

  /** Adds a handler; returns the function that removes it. */
  on(channel: NotifyChannel, handler: NotifyHandler): () => void {
    let set = this.#handlers.get(channel);
    if (!set) this.#handlers.set(channel, (set = new Set()));
    set.add(handler);
    return () => set.delete(handler);
  }

  /** Sends a message to every instance's handlers (this one's included). */
  async notify(channel: NotifyChannel, payload: string): Promise<void> {
    if (this.pool) {
      await this.pool.query('select pg_notify($1, $2)', [channel, payload]);
      return;
    }
    this.#dispatch(channel, payload);
  }

  /** Stops listening and forgets every handler. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#reconnect) clearTimeout(this.#reconnect);
    const client = this.#client;
    this.#client = undefined;
    this.#handlers.clear();
    if (client) {
      try {
        await client.query(`UNLISTEN *`);
      } catch {
        /* connection already gone */
      }
      client.release();
    }
  }
}
