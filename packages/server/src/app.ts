/**
 * `buildApp(config)`: the whole service as a Fastify instance, apart from listening, so tests
 * drive it through `inject()` and the CLI decides where it listens. One plugin per capability;
 * `config.roles` picks which are mounted (DESIGN §1: one process, all roles or a subset).
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { randomId } from '@countersign/core';
import type { ServerConfig } from './config.js';
import { Store } from './store/index.js';
import { KeyResolver } from './auth/key-resolver.js';
import { embedTokenVerifier } from './auth/embed-token.js';
import { EventHub } from './events/hub.js';
import { loadMasterKey } from './master-key.js';
import { installErrorHandling } from './error-handler.js';
import type { AppContext } from './app-context.js';
import openapiPlugin from './management/openapi.js';
import healthPlugin from './management/health.js';
import rateLimitPlugin from './ratelimit/plugin.js';
import projectsPlugin from './projects/plugin.js';
import ingestPlugin from './ingest/plugin.js';
import logsPlugin from './logs/plugin.js';
import eventsPlugin from './events/plugin.js';
import proxyPlugin from './proxy/plugin.js';
import proofsPlugin from './proofs/plugin.js';
import tsaPlugin from './tsa/plugin.js';
import ledgerPlugin from './ledger/plugin.js';
import dashboardPlugin from './dashboard/plugin.js';

/** Things a test or embedding program may supply instead of the defaults. */
export interface AppOverrides {
  /** An already open store (the app then does not close it). */
  store?: Store;
  /** Clock in epoch ms. */
  now?: () => number;
  /** Logger (defaults to pino at `config.logLevel`). */
  logger?: Logger;
}

/** Builds the app: opens the store, loads the master key, mounts the plugins of the configured roles. */
export async function buildApp(config: ServerConfig, overrides: AppOverrides = {}): Promise<FastifyInstance> {
  const logger =
    overrides.logger ??
    pino({
      level: config.logLevel,
      redact: ['req.headers.authorization', 'req.headers["x-service-encryption-key"]', 'req.headers["x-service-upstream-authorization"]'],
    });
  const store =
    overrides.store ?? (await Store.open({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, sqliteSync: config.sqliteSync }));
  const master = loadMasterKey(config.dataDir, config.masterKey);
  const now = overrides.now ?? Date.now;

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: config.bodyLimit,
    genReqId: () => 'req_' + randomId(16),
    requestIdHeader: false,
    // Per-request info lines cost throughput on the hot path; they come back at debug level.
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', allErrors: false } },
  });

  const ctx: AppContext = {
    config,
    store,
    keys: new KeyResolver(store, master.key, now, embedTokenVerifier(store, now)),
    events: new EventHub(store.notifier),
    masterKey: master.key,
    masterKeyGenerated: master.generated,
    log: logger,
    baseUrl: () => config.publicUrl ?? listeningUrl(app) ?? `http://${bracketed(config.host)}:${config.port}`,
    now,
    onClose: [],
  };
  app.decorate('ctx', ctx);
  app.decorateRequest('principal', undefined);
  installErrorHandling(app);

  // Long-lived streams (SSE) end before the server waits for connections to drain.
  app.addHook('preClose', async () => ctx.events.close());
  app.addHook('onClose', async () => {
    for (const task of [...ctx.onClose].reverse()) {
      try {
        await task();
      } catch (err) {
        logger.error({ err }, 'shutdown task failed');
      }
    }
    if (!overrides.store) await store.close();
    else await store.drain();
  });

  await app.register(openapiPlugin);
  await app.register(healthPlugin);
  await app.register(rateLimitPlugin);
  const roles = config.roles;
  if (roles.has('management')) {
    await app.register(projectsPlugin);
    await app.register(logsPlugin);
    await app.register(eventsPlugin);
  }
  if (roles.has('ingest')) {
    await app.register(ingestPlugin);
    await app.register(proxyPlugin);
  }
  if (roles.has('proofs') || roles.has('management')) await app.register(proofsPlugin);
  if (roles.has('tsa')) await app.register(tsaPlugin);
  if (roles.has('ledger')) await app.register(ledgerPlugin);
  if (roles.has('dashboard')) await app.register(dashboardPlugin);
  await app.ready();
  return app;
}

function bracketed(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** `http://host:port` of the socket the app listens on, or undefined before `listen`. */
function listeningUrl(app: FastifyInstance): string | undefined {
  const a = app.server.address();
  if (!a || typeof a === 'string') return undefined;
  return `http://${bracketed(a.address)}:${a.port}`;
}
