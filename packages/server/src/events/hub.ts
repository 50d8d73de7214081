/**
 * The event hub: delivers security events to the live subscribers of a project (the SSE
 * stream, the dashboard). Publishing goes through the store's notifier, so with PostgreSQL
 * every instance's subscribers get every event (LISTEN/NOTIFY), and with SQLite delivery is
 * in process. Events are stored before they are published; the hub is only the live path.
 */
import type { SecurityEvent } from '@countersign/core';
import type { Notifier } from '../store/notify.js';
import type { RetentionPurgedEvent } from './security.js';

/**
 * An event as delivered live: the stored event plus its store sequence (the SSE event id, also
 * used for resuming with Last-Event-ID). A security event, or an operational one such as a
 * retention purge (events/security.ts).
 */
export type PublishedEvent = (SecurityEvent | RetentionPurgedEvent) & { seq: number };

/** Receives one event. */
export type EventListener = (event: PublishedEvent) => void;

const CHANNEL = 'countersign_events';

/** Per-project fan-out of live events. */
export class EventHub {
  readonly #subscribers = new Map<string, Set<EventListener>>();
  readonly #closers = new Set<() => void>();
  readonly #unlisten: () => void;

  constructor(private readonly notifier: Notifier) {
    this.#unlisten = notifier.on(CHANNEL, (payload) => this.#deliver(payload));
  }

  #deliver(payload: string): void {
    let event: PublishedEvent;
    try {
      event = JSON.parse(payload) as PublishedEvent;
    } catch {
      return;
    }
    for (const listener of this.#subscribers.get(event.projectId) ?? []) {
      try {
        listener(event);
      } catch {
        /* one broken subscriber must not starve the others */
      }
    }
  }

  /**
   * Subscribes to a project's live events.
   * @param onClose called if the hub closes (server shutdown) while subscribed.
   * @returns the function that unsubscribes.
   */
  subscribe(projectId: string, listener: EventListener, onClose?: () => void): () => void {
    let set = this.#subscribers.get(projectId);
    if (!set) this.#subscribers.set(projectId, (set = new Set()));
    set.add(listener);
    if (onClose) this.#closers.add(onClose);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#subscribers.get(projectId) === set) this.#subscribers.delete(projectId);
      if (onClose) this.#closers.delete(onClose);
    };
  }

  /** Number of live subscribers of a project (for tests and health). */
  subscriberCount(projectId: string): number {
    return this.#subscribers.get(projectId)?.size ?? 0;
  }

  /** Sends an already stored event to every instance's subscribers of its project. */
  async publish(event: PublishedEvent): Promise<void> {
    await this.notifier.notify(CHANNEL, JSON.stringify(event));
  }

  /** Ends every subscription (their `onClose` runs) and stops listening. */
  close(): void {
    this.#unlisten();
    for (const c of [...this.#closers]) {
      try {
        c();
      } catch {
        /* ignore */
      }
    }
    this.#closers.clear();
    this.#subscribers.clear();
  }
}
