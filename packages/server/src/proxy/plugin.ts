/**
 * The proxy capability: its runtime (SSRF guard, pooled upstream agent, exchanges in flight,
 * outcomes owed from a store outage), the sweeps that keep records whole across crashes and
 * outages, and its two doors: `POST /v1/proxy` (proxy-route.ts) and forward mode
 * (forward-route.ts), which both run the one exchange pipeline (pipeline.ts).
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Agent } from 'undici';
import { TargetGuard } from './ssrf.js';
import { createUpstreamAgent, type Exchange } from './upstream.js';
import { OwedOutcomes } from './owed-outcomes.js';
import { errorSummary } from './error-summary.js';
import { registerProxyRoute } from './proxy-route.js';
import { registerForwardRoutes } from './forward-route.js';
import { UpstreamTable } from './upstreams.js';
import { SlotSet } from '../slot-set.js';
import { monotonicMs } from '../monotonic-clock.js';

/** The proxy's moving parts, decorated on the app as `app.proxy` (tests swap the resolver). */
export interface ProxyRuntime {
  guard: TargetGuard;
  agent: Agent;
  /** Exchanges in flight (aborted when the server closes); a SlotSet, not a Set: see slot-set.ts. */
  active: SlotSet<Exchange>;
  /** Outcomes whose commit failed in a store outage, written again until the store takes them. */
  owed: OwedOutcomes;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The proxy runtime; see {@link ProxyRuntime}. */
    proxy: ProxyRuntime;
  }
}

/** How long a closing server lets exchanges finish before it interrupts them. */
const SHUTDOWN_GRACE_MS = 5_000;
/** How often pending records of instances that died are looked for (besides at start). */
const ORPHAN_SWEEP_MS = 30_000;
/** How often outcomes owed from a store outage are written again. */
const OWED_RETRY_MS = 2_000;

/** Proxy plugin (fastify-plugin, so `app.proxy` is visible to the whole app). */
async function proxyPlugin(app: FastifyInstance): Promise<void> {
  const { ctx } = app;
  const guard = new TargetGuard({ allowTargets: ctx.config.allowTargets });
  const agent = createUpstreamAgent(guard, ctx.config.proxyTimeouts);
  const runtime: ProxyRuntime = { guard, agent, active: new SlotSet(), owed: new OwedOutcomes(ctx.store.proxyOutcomes) };
  app.decorate('proxy', runtime);

  // A record still pending whose instance is gone belongs to an exchange that died with it:
  // at start (this process's predecessor) and then periodically (other instances that died).
  // Records of live instances are theirs to finish (store/instances.ts).
  const sweep = async () => {
    const marked = await ctx.store.markOrphanedRecordsInterrupted(ctx.now());
    if (marked > 0) ctx.log.warn({ marked }, 'marked proxy records of a process that died mid-exchange interrupted');
  };
  let retrying = false;
  const retryOwed = async () => {
    if (retrying || runtime.owed.size === 0) return;
    retrying = true;
    try {
      const r = await runtime.owed.retry();
      if (r.written + r.refused > 0) ctx.log.warn(r, 'wrote proxy outcomes owed since a store outage');
    } finally {
      retrying = false;
    }
  };
  const timers: NodeJS.Timeout[] = [];
  app.addHook('onReady', async () => {
    await sweep();
    const every = (ms: number, task: () => Promise<void>, what: string) => {
      const t = setInterval(
        () => task().catch((err: unknown) => ctx.log.warn({ err: errorSummary(err) }, `${what} failed; retrying later`)),
        ms,
      );
      t.unref();
      timers.push(t);
    };
    every(ORPHAN_SWEEP_MS, sweep, 'orphaned-record sweep');
    every(OWED_RETRY_MS, retryOwed, 'writing owed proxy outcomes');
  });
  app.addHook('onClose', async () => timers.forEach((t) => clearInterval(t)));
  app.addHook('preClose', async () => {
    if (runtime.active.size === 0) return;
    const deadline = monotonicMs() + SHUTDOWN_GRACE_MS;
    while (runtime.active.size > 0 && monotonicMs() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const x of runtime.active) x.abort('server_shutdown');
    while (runtime.active.size > 0) await new Promise((r) => setTimeout(r, 5));
  });
  // A last chance for outcomes owed since a store outage (what is still owed stays pending),
  // bounded so that a database that hangs cannot hold the shutdown.
  app.addHook('preClose', async () => {
    await Promise.race([retryOwed().catch(() => undefined), new Promise((r) => setTimeout(r, SHUTDOWN_GRACE_MS).unref())]);
  });
  ctx.onClose.push(() => agent.close());

  // Two doors, one pipeline (pipeline.ts): the spec's wrapped body, and the drop-in base URL.
  await registerProxyRoute(app, runtime);
  await registerForwardRoutes(app, runtime, new UpstreamTable(ctx.config.upstreams));
}

export default fp(proxyPlugin, { name: 'countersign-proxy' });
