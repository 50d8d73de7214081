/**
 * `countersign webhooks …`: a project's outbound webhooks through the HTTP API with the master
 * key: `webhooks add <projectId> <endpointUrl> [--events t1,t2]`, `webhooks list <projectId>`,
 * `webhooks remove <projectId> <webhookId>`, `webhooks deliveries <projectId> <webhookId>`,
 * `webhooks redeliver <projectId> <webhookId> <deliveryId>`. The signing secret is printed once,
 * as the API returns it.
 */
import type { Command } from 'commander';
import { call, print, run, withConnection, type Connection } from './api.js';

const path = (projectId: string, ...rest: string[]) =>
  ['/v1/projects', projectId, 'webhooks', ...rest].map((p, i) => (i === 0 ? p : encodeURIComponent(p))).join('/');

/** Registers the `webhooks` command group. */
export function registerWebhooks(program: Command): void {
  const webhooks = program.command('webhooks').description("manage a project's outbound webhooks (master key)");

  withConnection(webhooks.command('add <projectId> <endpointUrl>').description('add a webhook; prints its signing secret once'))
    .option('--events <types>', 'comma-separated event types (security.policy_violation, retention.purged) or * (default)')
    .action((projectId: string, endpointUrl: string, o: Connection & { events?: string }) =>
      run(async () => {
        const events = o.events
          ?.split(',')
          .map((s) => s.trim())
          .filter(Boolean);
        const a = await call(o, 'POST', path(projectId), { url: endpointUrl, ...(events ? { events } : {}) });
        const w = a.webhook as { id: string; url: string; events: string[]; secret: string };
        print(o, a, () => [
          `webhook  ${w.id}  ${w.url}  events ${w.events.join(',')}`,
          `secret   ${w.secret}   (shown once; verifies webhook-signature)`,
        ]);
      }),
    );

  withConnection(webhooks.command('list <projectId>').description("list a project's webhooks (no secrets)")).action(
    (projectId: string, o: Connection) =>
      run(async () => {
        const a = await call(o, 'GET', path(projectId));
        const list = a.webhooks as Array<{ id: string; url: string; events: string[] }>;
        print(o, a, () => list.map((w) => `${w.id}  ${w.url}  ${w.events.join(',')}`));
      }),
  );

  withConnection(webhooks.command('remove <projectId> <webhookId>').description('remove a webhook and its delivery log')).action(
    (projectId: string, webhookId: string, o: Connection) =>
      run(async () => {
        const a = await call(o, 'DELETE', path(projectId, webhookId));
        print(o, a, () => [`${webhookId} removed`]);
      }),
  );

  withConnection(
    webhooks.command('deliveries <projectId> <webhookId>').description("a webhook's deliveries with their attempts, newest first"),
  )
    .option('--limit <n>', 'how many deliveries (1-200, default 50)')
    .action((projectId: string, webhookId: string, o: Connection & { limit?: string }) =>
      run(async () => {
        const a = await call(o, 'GET', path(projectId, webhookId, 'deliveries') + (o.limit ? `?limit=${encodeURIComponent(o.limit)}` : ''));
        const list = a.deliveries as Array<{
          id: string;
          eventType: string;
          state: string;
          attempts: Array<{ attemptedAt: string; statusCode: number | null; error: string | null }>;
        }>;
        print(o, a, () =>
          list.flatMap((d) => [
            `${d.id}  ${d.eventType}  ${d.state}  ${d.attempts.length} attempt(s)`,
            ...d.attempts.map((t) => `    ${t.attemptedAt}  ${t.statusCode ?? '-'}  ${t.error ?? 'ok'}`),
          ]),
        );
      }),
    );

  withConnection(
    webhooks.command('redeliver <projectId> <webhookId> <deliveryId>').description('send a delivery again now (same webhook-id and body)'),
  ).action((projectId: string, webhookId: string, deliveryId: string, o: Connection) =>
    run(async () => {
      const a = await call(o, 'POST', path(projectId, webhookId, 'deliveries', deliveryId, 'redeliver'));
      print(o, a, () => [`${deliveryId} queued for redelivery`]);
    }),
  );
}
