/**
 * Project events: a human-class key used with agent context is recorded as a
 * `security.policy_violation` with reason `credential_handover` (spec 6); the retention purge
 * records `retention.purged`. Every event is stored first (so a dashboard that connects later
 * still sees it), together with one webhook delivery per subscribed webhook (same
 * transaction), then pushed to the project's live subscribers on every instance and the
 * webhook dispatchers are woken.
 */
import { randomId, type CredentialClass, type SecurityEvent } from '@countersign/core';
import type { AppContext } from '../app-context.js';
import type { EventRow } from '../store/index.js';
import type { PublishedEvent } from './hub.js';

/** Every event type a project can have (webhooks subscribe to these, or `*`). */
export const EVENT_TYPES = ['security.policy_violation', 'retention.purged'] as const;

/** One event type. */
export type EventType = (typeof EVENT_TYPES)[number];

/** A retention purge, as delivered (stream, list, webhooks). */
export interface RetentionPurgedEvent {
  id: string;
  projectId: string;
  type: 'retention.purged';
  reason: 'retention';
  logId: null;
  createdAt: string;
  /** The project's retention when it ran. */
  retentionDays: number;
  /** Rows deleted, per kind. */
  deleted: { logs: number; receipts: number; events: number; deliveries: number };
  /** Earliest and latest receivedAt of the deleted logs (null when none). */
  from: string | null;
  to: string | null;
}

/** Bounds that keep an event (and its NOTIFY payload, < 8000 bytes) small. */
const MAX_HEADERS = 32;
const MAX_HEADER_NAME = 128;
const MAX_ACTOR = 512;

/** What the ingest paths know when they detect a handover. */
export interface HandoverFacts {
  projectId: string;
  logId: string;
  actor: string;
  credentialClass: CredentialClass;
  /** Names (never values) of the agent context headers. */
  agentHeaders: string[];
}

/** Maps a stored event row to the wire shape (plus `seq`). */
export function toSecurityEvent(row: EventRow): PublishedEvent {
  if (row.type === 'retention.purged') {
    const b = row.body as Partial<RetentionPurgedEvent>;
    return {
      id: row.id,
      seq: row.seq,
      projectId: row.projectId,
      type: 'retention.purged',
      reason: 'retention',
      logId: null,
      createdAt: new Date(row.createdAt).toISOString(),
      retentionDays: typeof b.retentionDays === 'number' ? b.retentionDays : 0,
      deleted: { logs: 0, receipts: 0, events: 0, deliveries: 0, ...b.deleted },
      from: typeof b.from === 'string' ? b.from : null,
      to: typeof b.to === 'string' ? b.to : null,
    } satisfies RetentionPurgedEvent & { seq: number };
  }
  const body = row.body as { actor?: unknown; credentialClass?: unknown; agentHeaders?: unknown };
  return {
    id: row.id,
    seq: row.seq,
    projectId: row.projectId,
    type: 'security.policy_violation',
    reason: 'credential_handover',
    logId: row.logId,
    createdAt: new Date(row.createdAt).toISOString(),
    actor: typeof body.actor === 'string' ? body.actor : '',
    credentialClass: (typeof body.credentialClass === 'string' ? body.credentialClass : 'human') as CredentialClass,
    agentHeaders: Array.isArray(body.agentHeaders) ? body.agentHeaders.filter((h): h is string => typeof h === 'string') : [],
  } satisfies SecurityEvent & { seq: number };
}

/**
 * The body of a webhook delivery of an event (DESIGN §4 "Webhooks"): the event's type, its time,
 * and the event as the stream and the list show it.
 */
export function webhookBody(event: PublishedEvent): string {
  return JSON.stringify({ type: event.type, timestamp: event.createdAt, data: event });
}

/**
 * Stores an event with its webhook deliveries, publishes it to every instance's subscribers of
 * the project, and wakes the webhook dispatchers. Publishing and waking are best effort: the
 * stored event is seen on the next list or reconnect, and stored deliveries on the next poll.
 */
export async function recordEvent(ctx: AppContext, row: Omit<EventRow, 'seq'>): Promise<PublishedEvent> {
  const { seq, deliveries } = await ctx.store.webhooks.recordEvent(
    row,
    (seq) => webhookBody(toSecurityEvent({ ...row, seq })),
    () => 'msg_' + randomId(24),
    ctx.now(),
  );
  const event = toSecurityEvent({ ...row, seq });
  try {
    await ctx.events.publish(event);
  } catch (err) {
    ctx.log.warn({ err, eventId: row.id }, 'could not publish an event to live subscribers');
  }
  if (deliveries > 0) {
    try {
      await ctx.store.notifier.notify('countersign_webhooks', row.projectId);
    } catch (err) {
      ctx.log.warn({ err, eventId: row.id }, 'could not wake the webhook dispatchers; the next poll delivers');
    }
  }
  return event;
}

/**
 * Stores a credential handover event and publishes it to every instance's subscribers of the
 * project. Call after the log entry it names is stored.
 */
export async function recordHandoverEvent(ctx: AppContext, e: HandoverFacts): Promise<void> {
  const agentHeaders = e.agentHeaders.slice(0, MAX_HEADERS).map((h) => h.slice(0, MAX_HEADER_NAME));
  await recordEvent(ctx, {
    id: 'evt_' + randomId(20),
    projectId: e.projectId,
    type: 'security.policy_violation',
    reason: 'credential_handover',
    logId: e.logId,
    createdAt: ctx.now(),
    body: { actor: e.actor.slice(0, MAX_ACTOR), credentialClass: e.credentialClass, agentHeaders },
  });
}
