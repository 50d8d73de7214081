/**
 * `POST /v1/proxy` (spec 4.1, 2.1; DESIGN "Proxy"): guard the target, write the request record
 * ahead, forward, stream the answer back as it arrives, and commit the outcome before the
 * caller sees the end. The order is what makes the audit trail complete:
 *
 * 1. key, encryption key and body are checked; the target is parsed, resolved and every address
 *    classified (a refusal is recorded and answered 403, nothing is sent);
 * 2. the pending record (request half, sealed) is committed; if the store refuses it the call
 *    gets 503 and nothing goes upstream;
 * 3. the request goes upstream through the guarded connector; the answer streams back;
 * 4. the outcome (complete / failed / interrupted) is committed, then the response is ended.
 *
 * A process killed between 2 and 4 leaves a pending record; the next start marks it interrupted.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Agent, Dispatcher } from 'undici';
import { canonicalize, deriveEnvelopeKey, HEADERS, PROXY_DEFAULTS, randomId, randomNonce } from '@countersign/core';
import { requireIngestKey } from '../auth/guards.js';
import type { IngestPrincipal } from '../auth/principal.js';
import { ApiError, type ApiErrorCode } from '../errors.js';
import { recordHandoverEvent } from '../events/security.js';
import { stampFromRequest } from '../ingest/stamp.js';
import { acceptJsonOnly, errorResponses } from '../management/schemas.js';
import { redactHeaders, upstreamRequestHeaders } from './headers.js';
import { finalPayload, newProxyLog, sealProxyPayload, statusOf, type ProxyPayload, type ProxyRecordFields } from './record.js';
import { TargetBlockedError, TargetGuard, TargetInvalidError, TargetUnresolvableError } from './ssrf.js';
import { createUpstreamAgent, Exchange, type ExchangeOutcome } from './upstream.js';
import { OwedOutcomes } from './owed-outcomes.js';
import type { LogCompletion } from '../store/index.js';

/** The proxy's moving parts, decorated on the app as `app.proxy` (tests swap the resolver). */
export interface ProxyRuntime {
  guard: TargetGuard;
  agent: Agent;
  /** Exchanges in flight (aborted when the server closes). */
  active: Set<Exchange>;
  /** Outcomes whose commit failed in a store outage, written again until the store takes them. */
  owed: OwedOutcomes;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The proxy runtime; see {@link ProxyRuntime}. */
    proxy: ProxyRuntime;
  }
}

/** Body of `POST /v1/proxy` (spec 2.1 plus the optional `method`). */
interface ProxyBody {
  target: string;
  payload: Record<string, unknown>;
  requestProof?: boolean;
  method?: Dispatcher.HttpMethod;
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;
const MAX_LABEL = 512;
/** How long a closing server lets exchanges finish before it interrupts them. */
const SHUTDOWN_GRACE_MS = 5_000;
/** How often pending records of instances that died are looked for (besides at start). */
const ORPHAN_SWEEP_MS = 30_000;
/** How often outcomes owed from a store outage are written again. */
const OWED_RETRY_MS = 2_000;

const bodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['target', 'payload'],
  properties: {
    target: { type: 'string', minLength: 1, maxLength: 8192, description: 'Destination URL (http or https)' },
    payload: { type: 'object', description: 'Request body forwarded to the destination as JSON' },
    requestProof: { type: 'boolean', description: 'Produce an RFC 3161 proof receipt (5-second batches)' },
    method: { type: 'string', enum: METHODS, description: 'HTTP method upstream (default POST); GET and HEAD need payload {}' },
  },
} as const;

const headersSchema = {
  type: 'object',
  properties: {
    'x-service-encryption-key': { type: 'string', description: 'Required: key string that encrypts the record (never forwarded)' },
    'x-service-agent-id': { type: 'string', description: 'actor (default proxy)' },
    'x-service-action': { type: 'string', description: 'action (default proxy.request)' },
    'x-service-run-id': { type: 'string', description: 'traceId' },
    'x-service-upstream-authorization': { type: 'string', description: 'Sent upstream as Authorization' },
  },
} as const;

function label(request: FastifyRequest, name: string, fallback: string | null): string | null {
  const v = request.headers[name];
  if (v === undefined || v === '') return fallback;
  const text = Array.isArray(v) ? v.join(', ') : v;
  if (text.length > MAX_LABEL) throw new ApiError('invalid_request', `${name} is longer than ${MAX_LABEL} characters`);
  return text;
}

/** Proxy plugin (fastify-plugin, so `app.proxy` is visible to the whole app). */
async function proxyPlugin(app: FastifyInstance): Promise<void> {
  const { ctx } = app;
  const guard = new TargetGuard({ allowTargets: ctx.config.allowTargets });
  const agent = createUpstreamAgent(guard, ctx.config.proxyTimeouts);
  const runtime: ProxyRuntime = { guard, agent, active: new Set(), owed: new OwedOutcomes(ctx.store.proxyOutcomes) };
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
    const deadline = Date.now() + SHUTDOWN_GRACE_MS;
    while (runtime.active.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const x of runtime.active) x.abort('server_shutdown');
    while (runtime.active.size > 0) await new Promise((r) => setTimeout(r, 5));
  });
  // A last chance for outcomes owed since a store outage (what is still owed stays pending),
  // bounded so that a database that hangs cannot hold the shutdown.
  app.addHook('preClose', async () => {
    await Promise.race([retryOwed().catch(() => undefined), new Promise((r) => setTimeout(r, SHUTDOWN_GRACE_MS).unref())]);
  });
  ctx.onClose.push(() => agent.close());

  // The route lives in its own encapsulated context so that JSON-only parsing applies to it alone.
  await app.register(async (routes) => {
    acceptJsonOnly(routes);
    routes.post<{ Body: ProxyBody }>(
      '/v1/proxy',
      {
        onRequest: async (request) => {
          await requireIngestKey(request);
        },
        schema: {
          tags: ['proxy'],
          summary: 'Forward a payload to a target and record the exchange (streams the upstream answer back)',
          description:
            'Answers with the upstream status, headers and body as they arrive, plus X-Service-Log-ID. Refusals and failures use the error body.',
          body: bodySchema,
          headers: headersSchema,
          response: errorResponses(400, 401, 403, 415, 502, 503, 504),
        },
      },
      async (request, reply) => handleProxy(app, runtime, request, reply),
    );
  });
}

async function handleProxy(app: FastifyInstance, runtime: ProxyRuntime, request: FastifyRequest<{ Body: ProxyBody }>, reply: FastifyReply) {
  const { ctx } = app;
  const principal = request.principal as IngestPrincipal;
  const keyString = request.headers[HEADERS.encryptionKey];
  if (typeof keyString !== 'string' || keyString.trim() === '') {
    throw new ApiError('missing_encryption_key', 'send X-Service-Encryption-Key: the key string that encrypts this record');
  }
  const { target, payload } = request.body;
  const method = request.body.method ?? 'POST';
  const bodyless = method === 'GET' || method === 'HEAD';
  if (bodyless && Object.keys(payload).length > 0) {
    throw new ApiError('invalid_request', `${method} requests carry no body: send "payload": {} with method ${method}`);
  }
  const keyPromise = deriveEnvelopeKey(keyString);
  const stamp = stampFromRequest(principal, request.headers);
  const fields: ProxyRecordFields = {
    id: 'log_' + randomId(24),
    projectId: principal.projectId,
    keyId: principal.keyId,
    receivedAt: ctx.now(),
    actor: label(request, HEADERS.agentId, PROXY_DEFAULTS.actor)!,
    action: label(request, HEADERS.action, PROXY_DEFAULTS.action)!,
    traceId: label(request, HEADERS.runId, null),
    actorType: stamp.actorType,
    credentialHandoverDetected: stamp.credentialHandoverDetected,
    requestProof: request.body.requestProof === true,
  };
  const upstreamHeaders = upstreamRequestHeaders(request.headers, !bodyless);
  const pending: ProxyPayload = {
    nonce: randomNonce(),
    source: 'proxy',
    outcome: 'pending',
    request: { method, target, headers: redactHeaders(upstreamHeaders), body: payload },
  };
  const started = performance.now();
  // The request half is in every record of this call: serialize it once (record.ts).
  const requestJcs = canonicalize(pending.request);
  // Seal the request half while the target is checked (large payloads seal in WebCrypto's thread pool).
  const pendingSealed = keyPromise.then((key) => sealProxyPayload(pending, key, fields.id, requestJcs));
  pendingSealed.catch(() => undefined); // awaited below; a refusal path may never await it

  let checked;
  try {
    checked = await runtime.guard.check(target);
  } catch (e) {
    if (e instanceof TargetInvalidError) throw new ApiError('invalid_request', e.message);
    const refused = e instanceof TargetBlockedError;
    const code: ApiErrorCode = refused ? 'target_blocked' : 'upstream_unreachable';
    const outcome: ExchangeOutcome = refused ? 'target_blocked' : 'upstream_unreachable';
    const message = e instanceof TargetBlockedError || e instanceof TargetUnresolvableError ? e.message : 'the target could not be checked';
    // Refusals are audit events too: record them (best effort; the answer does not wait on it failing).
    const key = await keyPromise;
    const sealed = await sealProxyPayload(
      { ...pending, outcome, timings: { totalMs: performance.now() - started }, error: message },
      key,
      fields.id,
      requestJcs,
    );
    try {
      await ctx.store.logs.insert(newProxyLog(fields, sealed, 'failed'));
      await afterInsert(app, fields, principal, stamp.agentHeaders);
    } catch (err) {
      request.log.error({ err: errorSummary(err), logId: fields.id }, 'could not record a refused proxy call');
    }
    void reply.header('x-service-log-id', fields.id);
    throw new ApiError(code, message);
  }

  // Write ahead: the request half is committed before anything goes upstream.
  const key = await keyPromise;
  const sealedPending = await pendingSealed;
  try {
    const inserted = await ctx.store.logs.insert({ ...newProxyLog(fields, sealedPending, 'pending'), instanceId: ctx.store.instance.id });
    if (!inserted) throw new Error('log id collision');
  } catch (err) {
    request.log.error({ err: errorSummary(err), logId: fields.id }, 'write-ahead record refused; call not forwarded');
    throw new ApiError('log_store_unavailable', 'the audit store cannot take the record right now; nothing was forwarded, retry later');
  }
  await afterInsert(app, fields, principal, stamp.agentHeaders);

  reply.hijack();
  const res = reply.raw;
  const exchange = new Exchange(res, {
    origin: checked.origin,
    path: checked.url.pathname + checked.url.search,
    method,
    headers: upstreamHeaders,
    body: bodyless ? null : Buffer.from(JSON.stringify(payload)),
    extraHeaders: { [HEADERS.logId]: fields.id },
  });
  runtime.active.add(exchange);
  const onClose = () => {
    if (!res.writableFinished) exchange.abort('client_disconnected');
  };
  res.on('close', onClose);
  // A caller that left during the write-ahead commit: the exchange aborts before anything is written upstream.
  if (res.destroyed) exchange.abort('client_disconnected');
  try {
    exchange.start(runtime.agent);
    const result = await exchange.done;
    const final = finalPayload(pending, result, performance.now() - started);
    let completion: LogCompletion | undefined;
    try {
      const sealed = await sealProxyPayload(final, key, fields.id, requestJcs);
      completion = { status: statusOf(result.outcome), payload: sealed.envelope, payloadHash: sealed.payloadHash, completedAt: ctx.now() };
      const written = await ctx.store.proxyOutcomes.complete(fields.id, completion);
      if (!written) request.log.error({ logId: fields.id }, 'proxy outcome not written: the record was already sealed into a proof batch');
    } catch (err) {
      // The caller still gets its answer. The sealed outcome is kept and written once the store
      // is back (owed-outcomes.ts); if it cannot be kept, the record stays pending and becomes
      // interrupted once this instance is gone.
      const kept = completion !== undefined && runtime.owed.add(fields.id, completion);
      request.log.error(
        { err: errorSummary(err), logId: fields.id, kept },
        kept ? 'could not commit a proxy outcome; kept to write again' : 'could not commit a proxy outcome',
      );
    }
    if (result.outcome !== 'complete' && result.error) {
      request.log.debug({ logId: fields.id, outcome: result.outcome, error: result.error }, 'proxied call failed');
    }
    finishResponse(exchange, res, request, result, fields.id);
  } catch (err) {
    // After hijack nothing upstream of here answers for us: never leave the caller hanging.
    request.log.error({ err: errorSummary(err), logId: fields.id }, 'proxy exchange failed unexpectedly');
    if (!res.headersSent) {
      res.writeHead(500, { 'content-type': 'application/json; charset=utf-8', [HEADERS.logId]: fields.id });
      res.end(
        JSON.stringify({
          success: false,
          error: { code: 'internal_error', message: 'the proxy failed unexpectedly', requestId: String(request.id) },
        }),
      );
    } else res.destroy();
  } finally {
    res.off('close', onClose);
    runtime.active.delete(exchange);
  }
}

/** Raises the handover event once the record it names is stored. */
async function afterInsert(app: FastifyInstance, fields: ProxyRecordFields, principal: IngestPrincipal, agentHeaders: string[]) {
  if (!fields.credentialHandoverDetected) return;
  try {
    await recordHandoverEvent(app.ctx, {
      projectId: fields.projectId,
      logId: fields.id,
      actor: fields.actor,
      credentialClass: principal.credentialClass,
      agentHeaders,
    });
  } catch (err) {
    app.ctx.log.error({ err: errorSummary(err), logId: fields.id }, 'could not record a credential handover event');
  }
}

const ERROR_FOR: Partial<Record<ExchangeOutcome, [ApiErrorCode, string]>> = {
  target_blocked: ['target_blocked', 'the target now resolves to a blocked address; nothing was sent'],
  upstream_unreachable: ['upstream_unreachable', 'could not connect to the target'],
  upstream_reset: ['upstream_unreachable', 'the target closed the connection before answering'],
  connect_timeout: ['upstream_timeout', 'the target did not accept a connection in time'],
  first_byte_timeout: ['upstream_timeout', 'the target did not start answering in time'],
  idle_timeout: ['upstream_timeout', 'the target stopped sending before its answer was complete'],
  server_shutdown: ['not_ready', 'the server is shutting down'],
};

/** Ends the caller's response: the streamed answer, an error answer, or a cut connection. */
function finishResponse(
  exchange: Exchange,
  res: FastifyReply['raw'],
  request: FastifyRequest,
  result: Awaited<Exchange['done']>,
  logId: string,
): void {
  if (res.destroyed) return;
  if (result.headersSent) {
    // A stream that failed midway must not look complete to the caller: cut the connection.
    if (result.outcome === 'complete') exchange.endResponse();
    else res.destroy();
    return;
  }
  const [code, message] = ERROR_FOR[result.outcome] ?? ['upstream_unreachable', 'the upstream call failed'];
  const e = new ApiError(code, message);
  const body = JSON.stringify({ success: false, error: { code: e.code, message: e.message, requestId: String(request.id) } });
  res.writeHead(e.statusCode, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    [HEADERS.logId]: logId,
  });
  res.end(body);
}

/** An error reduced to what is safe to log (never headers or bodies, which may hold secrets). */
function errorSummary(err: unknown): { name: string; code?: string; message: string } {
  const e = err as { name?: string; code?: string; message?: string };
  return {
    name: String(e?.name ?? 'Error'),
    ...(e?.code ? { code: String(e.code) } : {}),
    message: String(e?.message ?? err).slice(0, 300),
  };
}

export default fp(proxyPlugin, { name: 'countersign-proxy' });
