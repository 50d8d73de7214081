/**
 * Security events (spec 6): a human-class key used with agent context is recorded as a
 * `security.policy_violation` with reason `credential_handover`, stored first (so a dashboard
 * that connects later still sees it) and then pushed to the project's live subscribers.
 */
import { randomId, type CredentialClass, type SecurityEvent } from '@countersign/core';
import type { AppContext } from '../app-context.js';
import type { EventRow } from '../store/index.js';
import type { PublishedEvent } from './hub.js';

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
 * Stores a credential handover event and publishes it to every instance's subscribers of the
 * project. Call after the log entry it names is stored.
 */
export async function recordHandoverEvent(ctx: AppContext, e: HandoverFacts): Promise<void> {
  const createdAt = ctx.now();
  const agentHeaders = e.agentHeaders.slice(0, MAX_HEADERS).map((h) => h.slice(0, MAX_HEADER_NAME));
  const row: Omit<EventRow, 'seq'> = {
    id: 'evt_' + randomId(20),
    projectId: e.projectId,
    type: 'security.policy_violation',
    reason: 'credential_handover',
    logId: e.logId,
    createdAt,
    body: { actor: e.actor.slice(0, MAX_ACTOR), credentialClass: e.credentialClass, agentHeaders },
  };
  const seq = await ctx.store.events.insert(row);
  try {
    await ctx.events.publish(toSecurityEvent({ ...row, seq }));
  } catch (err) {
    // Stored is what matters; a missed live push is seen on the next list or reconnect.
    ctx.log.warn({ err, eventId: row.id }, 'could not publish a security event to live subscribers');
  }
}
