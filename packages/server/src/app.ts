/**
 * `buildApp(config)`: the whole service as a Fastify instance, apart from listening, so tests
 * drive it through `inject()` and the CLI decides where it listens. One plugin per capability;
 * `config.roles` picks which are mounted (DESIGN §1: one process, all roles or a subset).
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { MAX_ID_LENGTH, randomId } from '@countersign/core';
import type { ServerConfig } from './config.js';
import { Store } from './store/index.js';
import { KeyResolver } from './auth/key-resolver.js';
import { embedTokenVerifier } from './auth/embed-token.js';
import { EventHub } from './events/hub.js';
import { loadMasterKey } from './master-key.js';
import { describePreparedDataDir, prepareDataDir } from './data-dir.js';
import { clientErrorHandler, frameworkErrorHandler, installErrorHandling } from './error-handler.js';
import { installServiceHeaderChecks } from './http/service-headers.js';
import { deferredRequestLogger } from './http/request-logger.js';
import { strictBodyValidator } from './http/schema-validators.js';
import { installJsonBodyParser } from './http/json-body.js';
import { acquireOffloadPool, releaseOffloadPool } from './offload/pool.js';
import { installAdmission } from './http/admission.js';
import { installConnectionLimits } from './http/connection-limits.js';
import { installEmbedCors } from './http/embed-cors.js';
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
import metricsPlugin from './metrics/plugin.js';
import { metrics } from './metrics/registry.js';
import { useNativeSeal } from './native-seal.js';
import projectSettingsPlugin from './projects/settings.js';
import retentionPlugin from './retention/plugin.js';
import webhooksPlugin from './webhooks/plugin.js';

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
  // The data dir holds the SQLite store and/or the master key file: private, or refused (data-dir.ts).
  if (!config.databaseUrl || !config.masterKey) {
    const note = describePreparedDataDir(config.dataDir, prepareDataDir(config.dataDir, config.allowSharedDataDir));
    if (note) logger.warn(note);
  }
  const store =
    overrides.store ??
    (await Store.open({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      sqliteSync: config.sqliteSync,
      timeoutMs: config.storeTimeoutMs,
    }));
  // A start that fails after the store opened must not leave its writer thread or pool behind
  // (the process would never exit): close what was opened, then report the cause.
  const opened: Array<() => Promise<void>> = [];
  try {
    return await assemble(config, overrides, logger, store, opened);
  } catch (err) {
    for (const task of opened.reverse()) await task().catch(() => undefined);
    if (!overrides.store) await store.close().catch(() => undefined);
    throw err;
  }
}

async function assemble(
  config: ServerConfig,
  overrides: AppOverrides,
  logger: Logger,
  store: Store,
  opened: Array<() => Promise<void>>,
): Promise<FastifyInstance> {
  const master = loadMasterKey(config.dataDir, config.masterKey, config.masterKeyPrevious);
  const native = useNativeSeal(config.nativeSeal);
  metrics.nativeSeal.set(native ? 1 : 0);
  if (!native && config.nativeSeal) logger.info("the native seal is not built: records are sealed with Node's cipher");
  if (master.keys.previousUntil === null)
    logger.warn('the previous master key is accepted without an end: set COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL, or remove it');
  const now = overrides.now ?? Date.now;

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: config.bodyLimit,
    genReqId: () => 'req_' + randomId(16),
    // A request's pino child is made only when it logs (http/request-logger.ts).
    childLoggerFactory: deferredRequestLogger,
    requestIdHeader: false,
    // Per-request info lines cost throughput on the hot path; they come back at debug level.
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
    // Closing answers 503 not_ready in our shape (error-handler.ts), not Fastify's own body.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Coercion for querystrings, params and headers (text on the wire); bodies get none
    // (http/schema-validators.ts).
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', allErrors: false } },
    schemaController: { compilersFactory: { buildValidator: strictBodyValidator() } },
    // One limit for ids and labels (core MAX_ID_LENGTH, in code points): a decoded path segment
    // may take two UTF-16 units per character, so every id accepted on ingest can be read back.
    routerOptions: { maxParamLength: 2 * MAX_ID_LENGTH },
    // Errors Fastify and Node answer by themselves, in our shape.
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  });

  const ctx: AppContext = {
    config,
    store,
    keys: new KeyResolver(store, master.keys, now, embedTokenVerifier(store, now)),
    events: new EventHub(store.notifier),
    masterKey: master.key,
    masterKeyGenerated: master.generated,
    log: logger,
    baseUrl: () => config.publicUrl ?? listeningUrl(app) ?? `http://${bracketed(config.host)}:${config.port}`,
    now,
    onClose: opened,
  };
  app.decorate('ctx', ctx);
  app.decorateRequest('principal', undefined);
  installErrorHandling(app);
  installServiceHeaderChecks(app);
  installJsonBodyParser(app);
  // Large bodies and records are handled in a worker pool shared by the process (offload/pool.ts).
  acquireOffloadPool();
  ctx.onClose.push(() => releaseOffloadPool());
  // Bounded time and memory under hostile clients (issue 8): in-flight admission, timeouts, connection caps.
  installAdmission(app, config.admission);
  installConnectionLimits(app.server, config.connections, app.log);

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
  // Before every other plugin: its onResponse hook times the routes they add.
  await app.register(metricsPlugin);
  await app.register(rateLimitPlugin);
  const roles = config.roles;
  if (roles.has('management')) {
    await app.register(projectsPlugin);
    installEmbedCors(app);
    await app.register(logsPlugin);
    await app.register(eventsPlugin);
    await app.register(projectSettingsPlugin);
    await app.register(retentionPlugin);
  }
  // Routes with `management`; the delivery loop also on `ingest` instances (webhooks/plugin.ts).
  if (roles.has('management') || roles.has('ingest')) await app.register(webhooksPlugin);
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
