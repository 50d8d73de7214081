/**
 * Retention and deletion: the purge of a project's expired entries, and the deletion of a
 * whole project. Both delete in bounded batches ({@link PURGE_BATCH} rows per transaction) and
 * yield to the event loop between batches, so ingest keeps its latency while millions of rows
 * go (on SQLite, ingest's writes queue behind one batch at most).
 *
 * What goes and what stays (docs/operations.md "Retention and deletion"):
 * - A log past its project's retention goes with its receipt row. Proof batches and ledger
 *   entries stay: they hold only roots, and the receipts of the logs that remain (and any
 *   receipt a client kept) still verify against them. A deleted log simply has no receipt to
 *   fetch any more.
 * - Events past the retention go too; webhook deliveries past it go once delivered or given up.
 * - Each purge that deleted something is itself recorded as a `retention.purged` event (counts
 *   and the time range of the deleted logs), stored, streamed and delivered to webhooks.
 * - Deleting a project removes its keys first (they stop resolving, and every instance's key
 *   cache is told at once), then its webhooks and deliveries, logs with receipts, events, and
 *   the project row.
 */
import { randomId } from '@countersign/core';
import type { AppContext } from '../app-context.js';
import type { ProjectDeletion, PurgeBatch } from '../store/index.js';
import { metrics } from '../metrics/registry.js';
import { recordEvent } from '../events/security.js';

/** Rows deleted per transaction. */
export const PURGE_BATCH = 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

/** What the purge did to one project. */
export interface ProjectPurge {
  projectId: string;
  retentionDays: number;
  logs: number;
  receipts: number;
  events: number;
  deliveries: number;
  /** Earliest and latest receivedAt of the deleted logs, epoch ms. */
  from: number | null;
  to: number | null;
}

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Runs a batch step until it reports done, yielding between batches; sums what it deleted. */
async function drainBatches(
  step: (afterSeq: number) => Promise<PurgeBatch>,
): Promise<{ deleted: number; receipts: number; from: number | null; to: number | null }> {
  const sum = { deleted: 0, receipts: 0, from: null as number | null, to: null as number | null };
  let afterSeq = 0;
  for (;;) {
    const b = await step(afterSeq);
    sum.deleted += b.deleted;
    sum.receipts += b.receipts;
    if (b.from !== null) sum.from = sum.from === null ? b.from : Math.min(sum.from, b.from);
    if (b.to !== null) sum.to = sum.to === null ? b.to : Math.max(sum.to, b.to);
    if (b.done || b.lastSeq === afterSeq) return sum;
    afterSeq = b.lastSeq;
    await yieldToLoop();
  }
}

async function drainCount(step: () => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await step();
    total += n;
    if (n < PURGE_BATCH) return total;
    await yieldToLoop();
  }
}

/** Deletes one project's expired entries as of `now` and records the purge as an event. */
export async function purgeProject(ctx: AppContext, projectId: string, retentionDays: number, now: number): Promise<ProjectPurge> {
  const { retention } = ctx.store;
  const cutoff = now - retentionDays * DAY_MS;
  const logs = await drainBatches((after) => retention.purgeLogs(projectId, cutoff, after, PURGE_BATCH));
  const events = await drainBatches((after) => retention.purgeEvents(projectId, cutoff, after, PURGE_BATCH));
  const deliveries = await drainCount(() => retention.purgeDeliveries(projectId, cutoff, PURGE_BATCH));
  const out: ProjectPurge = {
    projectId,
    retentionDays,
    logs: logs.deleted,
    receipts: logs.receipts,
    events: events.deleted,
    deliveries,
    from: logs.from,
    to: logs.to,
  };
  countPurged(out);
  if (out.logs + out.events + out.deliveries > 0) {
    await recordEvent(ctx, {
      id: 'evt_' + randomId(20),
      projectId,
      type: 'retention.purged',
      reason: 'retention',
      logId: '',
      createdAt: ctx.now(),
      body: {
        retentionDays,
        deleted: { logs: out.logs, receipts: out.receipts, events: out.events, deliveries: out.deliveries },
        from: out.from === null ? null : new Date(out.from).toISOString(),
        to: out.to === null ? null : new Date(out.to).toISOString(),
      },
    });
    ctx.log.info({ ...out }, 'retention purge deleted expired entries');
  }
  return out;
}

/**
 * One purge of every project that has a retention, under the purge lock (one instance at a
 * time). Returns undefined when another purge holds the lock.
 */
export async function purgeExpired(ctx: AppContext, now = ctx.now()): Promise<ProjectPurge[] | undefined> {
  return ctx.store.retention.withPurgeLock(async () => {
    const done: ProjectPurge[] = [];
    for (const { projectId, retentionDays } of await ctx.store.retention.projectsWithRetention()) {
      done.push(await purgeProject(ctx, projectId, retentionDays, now));
    }
    return done;
  });
}

/**
 * Deletes a project and everything of it. Its keys go first and every instance forgets them at
 * once, so nothing new arrives while the rest is deleted; logs are swept once more at the end
 * for a request that was already past authentication.
 */
export async function deleteProject(ctx: AppContext, projectId: string): Promise<ProjectDeletion> {
  const { retention } = ctx.store;
  const hashes = await retention.removeKeys(projectId);
  for (const h of hashes) await ctx.keys.invalidateEverywhere(h);
  const deliveries = await drainCount(() => retention.purgeDeliveries(projectId, Infinity, PURGE_BATCH));
  const webhooks = await retention.removeWebhooks(projectId);
  const logs = await drainBatches((after) => retention.purgeLogs(projectId, Infinity, after, PURGE_BATCH));
  const events = await drainBatches((after) => retention.purgeEvents(projectId, Infinity, after, PURGE_BATCH));
  const receipts = await drainCount(() => retention.purgeReceipts(projectId, PURGE_BATCH));
  await retention.removeProject(projectId);
  const late = await drainBatches((after) => retention.purgeLogs(projectId, Infinity, after, PURGE_BATCH));
  const out: ProjectDeletion = {
    logs: logs.deleted + late.deleted,
    receipts: logs.receipts + late.receipts + receipts,
    events: events.deleted,
    keys: hashes.length,
    webhooks,
    deliveries,
  };
  for (const [table, n] of Object.entries(out)) if (n > 0) metrics.purgedRows.inc({ table }, n);
  return out;
}

function countPurged(p: ProjectPurge): void {
  if (p.logs > 0) metrics.purgedRows.inc({ table: 'logs' }, p.logs);
  if (p.receipts > 0) metrics.purgedRows.inc({ table: 'receipts' }, p.receipts);
  if (p.events > 0) metrics.purgedRows.inc({ table: 'events' }, p.events);
  if (p.deliveries > 0) metrics.purgedRows.inc({ table: 'deliveries' }, p.deliveries);
}
