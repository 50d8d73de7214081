/**
 * Cross-instance notifications. With PostgreSQL every instance holds one dedicated connection
 * that LISTENs, and `notify` goes through `pg_notify`, so every instance (the sender included)
 * hears every message. With SQLite there is one process, so `notify` calls the handlers
 * directly. Used for dashboard events and for key revocation reaching every key cache.
 */
import type pg from 'pg';
import { DedicatedConnection } from './dedicated-connection.js';

/** Receives the text payload of a notification on one channel. */
export type NotifyHandler = (payload: string) => void;

/** Channels are fixed names (they are SQL identifiers); payloads are under 8000 bytes. */
export type NotifyChannel = 'countersign_events' | 'countersign_keys' | 'countersign_webhooks';

const CHANNELS: readonly NotifyChannel[] = ['countersign_events', 'countersign_keys', 'countersign_webhooks'];

/** Publish/subscribe over LISTEN/NOTIFY, or in process. */
export class Notifier {
  readonly #handlers = new Map<NotifyChannel, Set<NotifyHandler>>();
  /** The LISTENing connection (PostgreSQL); while it is being replaced, other instances' messages are missed. */
  readonly #listener: DedicatedConnection | undefined;

  /** @param pool the PostgreSQL pool, or undefined for in-process delivery. */
  constructor(private readonly pool: pg.Pool | undefined) {
    this.#listener =
      pool &&
      new DedicatedConnection(pool, async (client) => {
        client.on('notification', (m) => this.#dispatch(m.channel as NotifyChannel, m.payload ?? ''));
        for (const ch of CHANNELS) await client.query(`LISTEN ${ch}`);
      });
  }

  /** Starts listening (PostgreSQL); a no-op in process. */
  async start(): Promise<void> {
    await this.#listener?.open();
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
    this.#handlers.clear();
    await this.#listener?.close(async (client) => {
      await client.query('UNLISTEN *');
    });
  }
}
