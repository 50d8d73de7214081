/**
 * The one exchange pipeline behind `POST /v1/proxy` and the forward mode (`/v1/forward/…`).
 * The two doors differ only in how they read a call (proxy-route.ts, forward-route.ts); from a
 * {@link ProxyCall} on, everything is this file, in this order, which is what makes the audit
 * trail complete:
 *
 * 1. the target is resolved and every address classified (a refusal is recorded and answered
 *    403; nothing is sent);
 * 2. the pending record (request half, sealed) is committed; if the store refuses it the call
 *    gets 503 and nothing goes upstream;
 * 3. the request goes upstream through the guarded connector; the answer streams back;
 * 4. the outcome (complete / failed / interrupted) is committed, then the response is ended.
 *
 * A process killed between 2 and 4 leaves a pending record; the next start marks it interrupted.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { deriveEnvelopeKey, HEADERS, randomNonce, timeOrderedId, type EnvelopeKey } from '@countersign/core';
import type { IngestPrincipal } from '../auth/principal.js';
import { ApiError, type ApiErrorCode } from '../errors.js';
import { recordHandoverEvent } from '../events/security.js';
import type { IngestStamp } from '../ingest/stamp.js';
import type { RowRef } from '../store/index.js';
import { BodyCapture, type CapturedBody } from './capture.js';
import { observeProxyCall } from './call-metrics.js';
import { errorSummary } from './error-summary.js';
import { commitOutcome } from './outcome.js';
import { redactHeaders } from './headers.js';
import { summarizeLlmExchange, type LlmExchangeInput } from './llm/index.js';
import { decodeEncodedAnswer } from './llm/encoded.js';
import type { ProxyRuntime } from './plugin.js';
import {
  finalPayload,
  newProxyLog,
  round,
  requestJcsOf,
  sealProxyPayload,
  type ProxyPayload,
  type ProxyRecordFields,
  type RecordedRequest,
} from './record.js';
import { TargetBlockedError, TargetInvalidError, TargetUnresolvableError, type CheckedTarget } from './ssrf.js';
import { Exchange, type ExchangeOutcome, type ExchangeResult } from './upstream.js';
import { callSpanOf, upstreamTraceparent } from '../http/trace-context.js';

/** The body a call sends upstream. */
export type OutgoingBody =
  | { kind: 'none' }
  /** Known before anything is written (`/v1/proxy`: the exact bytes of the `payload` member). */
  | { kind: 'bytes'; bytes: Buffer; recorded: CapturedBody }
  /** The caller's body as it arrives (forward mode): captured (2 MB) and hashed while it streams. */
  | { kind: 'stream'; source: Readable; contentType: string | undefined; contentEncoding: string | undefined };

/** One call, as either door reads it. */
export interface ProxyCall {
  via: 'proxy' | 'forward';
  principal: IngestPrincipal;
  /** X-Service-Encryption-Key (checked non-empty by the door). */
  keyString: string;
  /** The absolute upstream URL. */
  target: string;
  /** The forward-mode preset or operator-defined upstream name, when one was used. */
  upstreamName?: string;
  method: Dispatcher.HttpMethod;
  /** Headers for upstream (already filtered by headers.ts for the door's mode). */
  upstreamHeaders: Record<string, string | string[]>;
  body: OutgoingBody;
  requestProof: boolean;
  actor: string;
  action: string;
  traceId: string | null;
  stamp: IngestStamp;
  /** The `X-Agent-Rationale` value, kept sealed in the record. */
  agentRationale?: string;
  /** True when the caller's own request is HEAD (its answer keeps Content-Length). */
  callerHead: boolean;
}

/** Runs one call to its end; answers the caller (streamed) or throws an ApiError before anything was sent. */
export async function runExchange(
  app: FastifyInstance,
  runtime: ProxyRuntime,
  call: ProxyCall,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  const { ctx } = app;
  const started = performance.now();
  // The entry's span (DESIGN §4), from the caller's span headers; a bad one is a 400 before any record.
  const span = callSpanOf(request.headers);
  const keyPromise = deriveEnvelopeKey(call.keyString);
  const receivedAt = ctx.now();
  const fields: ProxyRecordFields = {
    id: 'log_' + timeOrderedId(24, receivedAt),
    projectId: call.principal.projectId,
    keyId: call.principal.keyId,
    receivedAt,
    actor: call.actor,
    action: call.action,
    traceId: call.traceId,
    actorType: call.stamp.actorType,
    credentialHandoverDetected: call.stamp.credentialHandoverDetected,
    requestProof: call.requestProof,
    spanId: span.spanId,
    parentSpanId: span.parentSpanId ?? null,
    startedAt: receivedAt,
  };
  // The upstream's spans nest under this entry: its traceparent carries our span as parent-id.
  const traceparent = upstreamTraceparent(span);
  if (traceparent !== undefined && call.upstreamHeaders.traceparent !== undefined) call.upstreamHeaders.traceparent = traceparent;
  const recordedRequest: RecordedRequest = { method: call.method, target: call.target, headers: redactHeaders(call.upstreamHeaders) };
  if (call.body.kind === 'bytes') Object.assign(recordedRequest, call.body.recorded);
  const pending: ProxyPayload = { nonce: randomNonce(), source: 'proxy', via: call.via, outcome: 'pending', request: recordedRequest };
  if (call.agentRationale !== undefined) pending.agentRationale = call.agentRationale;
  // The request half is in every record of this call: serialize it once (record.ts), unless it
  // is large and its records are sealed in the pool (offload/pool.ts).
  const requestJcs = requestJcsOf(recordedRequest);
  // Seal the request half while the target is checked (large records seal in the offload pool).
  const pendingSealed = keyPromise.then((key) => sealProxyPayload(pending, key, fields.id, requestJcs));
  pendingSealed.catch(() => undefined); // awaited below; a refusal path may never await it

  let checked: CheckedTarget;
  try {
    checked = await runtime.guard.check(call.target);
  } catch (e) {
    await recordRefusal(app, call, fields, pending, requestJcs, keyPromise, started, e);
    void reply.header(HEADERS.logId, fields.id).header(HEADERS.spanId, span.spanId);
    throw refusalError(e);
  }

  // Write ahead: the request half is committed before anything goes upstream.
  const key = await keyPromise;
  const sealedPending = await pendingSealed;
  // The row the outcome completes: found by the seq this insert returns (proxy-outcomes.ts).
  const row: RowRef = { projectId: fields.projectId, id: fields.id, seq: 0 };
  try {
    row.seq = await ctx.store.logs.insertReturningSeq(newProxyLog(fields, sealedPending, 'pending', { instanceId: ctx.store.instance.id }));
    if (row.seq === 0) throw new Error('log id collision');
  } catch (err) {
    request.log.error({ err: errorSummary(err), logId: fields.id }, 'write-ahead record refused; call not forwarded');
    throw new ApiError('log_store_unavailable', 'the audit store cannot take the record right now; nothing was forwarded, retry later');
  }
  if (fields.credentialHandoverDetected) await afterInsert(app, fields, call);

  reply.hijack();
  const res = reply.raw;
  const requestCapture = call.body.kind === 'stream' ? new BodyCapture() : undefined;
  const exchange = new Exchange(res, {
    origin: checked.origin,
    path: checked.url.pathname + checked.url.search,
    method: call.method,
    headers: call.upstreamHeaders,
    body: outgoingBody(call.body, requestCapture),
    extraHeaders: { [HEADERS.logId]: fields.id, [HEADERS.spanId]: span.spanId },
    callerHead: call.callerHead,
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
    const finalRequest =
      requestCapture && call.body.kind === 'stream' ? withBody(recordedRequest, requestCapture, call.body) : recordedRequest;
    const final = finalPayload(pending, result, performance.now() - started, finalRequest);
    const llm = summarize(call, checked.url, final, result);
    if (llm) final.llm = llm;
    await commitOutcome(app, runtime, request, row, final, result, key, finalRequest === recordedRequest ? requestJcs : undefined);
    finishResponse(exchange, res, request, result, fields.id);
    observeProxyCall(call.via, result, performance.now() - started);
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

/** The body handed to undici: the bytes, or the caller's stream seen through the capture. */
function outgoingBody(body: OutgoingBody, capture: BodyCapture | undefined): Buffer | Readable | null {
  if (body.kind === 'none') return null;
  if (body.kind === 'bytes') return body.bytes;
  const source = body.source;
  // 'data' listeners see every chunk undici reads (it pauses and resumes this same stream for
  // backpressure), so the capture costs no extra stream. It is attached here, synchronously
  // before dispatch, and the stream stays paused until undici starts reading it.
  source.on('data', (chunk: Buffer) => capture!.add(chunk));
  source.pause();
  return source;
}

/** The request half with the streamed body as it was captured. */
function withBody(request: RecordedRequest, capture: BodyCapture, body: Extract<OutgoingBody, { kind: 'stream' }>): RecordedRequest {
  return { ...request, ...capture.finish(body.contentType, body.contentEncoding) };
}

/**
 * The `llm` member for a recognised LLM API; never throws (a hostile answer only loses the summary).
 * `url` is the target as the guard parsed it (read, never changed), not parsed a second time.
 */
function summarize(call: ProxyCall, url: URL, final: ProxyPayload, result: ExchangeResult) {
  try {
    const response = final.response;
    const headers = result.upstreamHeaders ?? {};
    const contentType = typeof headers['content-type'] === 'string' ? headers['content-type'] : undefined;
    const encoding = typeof headers['content-encoding'] === 'string' ? headers['content-encoding'] : undefined;
    // A compressed answer is recorded as the bytes sent; its summary reads what is inside.
    const decoded = response ? decodeEncodedAnswer(response, encoding, contentType) : {};
    // Built by assignment, not by spreading conditional members into a literal: a literal that
    // starts with a spread is cloned on V8's slow path (~1.4 µs a call, measured).
    const input: LlmExchangeInput = { method: call.method, url, requestJson: final.request.body };
    if (call.upstreamName !== undefined) input.preset = call.upstreamName;
    if (response) {
      input.status = response.status;
      input.responseJson = decoded.json ?? response.body;
      input.responseEvents = decoded.events ?? response.events;
    }
    if (contentType !== undefined) input.responseContentType = contentType;
    if (result.firstByteMs !== undefined) input.firstByteMs = round(result.firstByteMs);
    if (result.firstChunkMs !== undefined) input.firstChunkMs = round(result.firstChunkMs);
    return summarizeLlmExchange(input);
  } catch {
    return undefined;
  }
}

/** Records a refused target (best effort: the answer does not wait on it failing). */
async function recordRefusal(
  app: FastifyInstance,
  call: ProxyCall,
  fields: ProxyRecordFields,
  pending: ProxyPayload,
  requestJcs: string | undefined,
  keyPromise: Promise<EnvelopeKey>,
  started: number,
  e: unknown,
): Promise<void> {
  if (e instanceof TargetInvalidError) return;
  const outcome: ExchangeOutcome = e instanceof TargetBlockedError ? 'target_blocked' : 'upstream_unreachable';
  try {
    const key = await keyPromise;
    const error = refusalError(e).message;
    const sealed = await sealProxyPayload(
      { ...pending, outcome, timings: { totalMs: round(performance.now() - started) }, error },
      key,
      fields.id,
      requestJcs,
    );
    await app.ctx.store.logs.insert(newProxyLog(fields, sealed, 'failed', { endedAt: app.ctx.now() }));
    await afterInsert(app, fields, call);
  } catch (err) {
    app.ctx.log.error({ err: errorSummary(err), logId: fields.id }, 'could not record a refused proxy call');
  }
}

/** The API error for a target the guard refused. */
function refusalError(e: unknown): ApiError {
  if (e instanceof TargetInvalidError) return new ApiError('invalid_request', e.message);
  if (e instanceof TargetBlockedError) return new ApiError('target_blocked', e.message);
  if (e instanceof TargetUnresolvableError) return new ApiError('upstream_unreachable', e.message);
  return new ApiError('upstream_unreachable', 'the target could not be checked');
}

/** Raises the handover event once the record it names is stored. */
async function afterInsert(app: FastifyInstance, fields: ProxyRecordFields, call: ProxyCall): Promise<void> {
  if (!fields.credentialHandoverDetected) return;
  try {
    await recordHandoverEvent(app.ctx, {
      projectId: fields.projectId,
      logId: fields.id,
      actor: fields.actor,
      credentialClass: call.principal.credentialClass,
      agentHeaders: call.stamp.agentHeaders,
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
  result: ExchangeResult,
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
