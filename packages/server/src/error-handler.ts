/**
 * Maps every failure to the one error shape `{success:false,error:{code,message,requestId}}`
 * with a catalogue code. Fastify's own errors (bad JSON, media type, body limit, schema
 * validation) are translated here so no route needs to know about them, and so are the ones
 * Fastify answers by itself unless told otherwise: bad URL and over-long path parameter
 * (`frameworkErrors`), malformed HTTP, oversized headers and timeouts before any request exists
 * (`clientErrorHandler`), and requests that arrive while the server closes (503 `not_ready`).
 */
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MAX_ID_LENGTH, isCoreError, randomId } from '@countersign/core';
import { ApiError, type ApiErrorCode } from './errors.js';
import { isStoreUnavailable } from './store/availability.js';

/** One Ajv error, as Fastify keeps it on a validation failure. */
interface SchemaError {
  keyword?: string;
  instancePath?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/**
 * The schema failure in one sentence naming the field: `body/requestProof must be boolean`,
 * `querystring/limit must be <= 500`, or for `additionalProperties: false` the unknown field.
 */
function validationMessage(e: FastifyError & { validation?: unknown; validationContext?: string }): string {
  const first = Array.isArray(e.validation) ? (e.validation[0] as SchemaError | undefined) : undefined;
  if (!first) return e.message;
  const where = `${e.validationContext ?? 'body'}${first.instancePath ?? ''}`;
  if (first.keyword === 'additionalProperties' && typeof first.params?.additionalProperty === 'string')
    return `${where} has an unknown field "${first.params.additionalProperty}"; remove it`;
  if (first.keyword === 'required' && typeof first.params?.missingProperty === 'string')
    return `${where} must have the field "${first.params.missingProperty}"`;
  return first.message ? `${where} ${first.message}` : e.message;
}

/**
 * The catalogue code for a framework error's HTTP status (Fastify's `FST_ERR_*` and Node's own
 * carry one), so a framework error that has no case of its own still answers in our shape.
 */
const FRAMEWORK_STATUS: Record<number, ApiErrorCode> = {
  400: 'invalid_request',
  404: 'not_found',
  408: 'request_timeout',
  413: 'payload_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  431: 'headers_too_large',
  503: 'not_ready',
};

/** What a client is told for each framework status (the framework's own text can be cryptic). */
const FRAMEWORK_MESSAGE: Partial<Record<ApiErrorCode, string>> = {
  payload_too_large: 'the request body is larger than the server accepts',
  unsupported_media_type: 'send Content-Type: application/json',
  uri_too_long: `a path segment is longer than the server accepts (ids and labels: ${MAX_ID_LENGTH} characters)`,
  headers_too_large: 'the request headers are larger than the server accepts',
  request_timeout: 'the request did not arrive in time',
  not_ready: 'the server is not ready; retry',
};

/** Translates any thrown value into an ApiError. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (isCoreError(error)) {
    // Core throws only for bad input reaching it: a malformed envelope has its own code.
    return new ApiError(error.code === 'invalid_envelope' ? 'invalid_envelope' : 'invalid_request', error.message);
  }
  const e = error as FastifyError & { validation?: unknown };
  if (e && typeof e === 'object') {
    if (e.validation) return new ApiError('invalid_request', validationMessage(e) || 'the request does not match the schema');
    switch (e.code) {
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return new ApiError('unsupported_media_type', 'send Content-Type: application/json');
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return new ApiError('payload_too_large', 'the request body is larger than the server accepts');
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return new ApiError('invalid_json', 'the body is empty; send a JSON object');
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return new ApiError('invalid_json', 'the body is not valid JSON');
      default:
        break;
    }
    if (e instanceof SyntaxError || (e as { type?: string }).type === 'entity.parse.failed')
      return new ApiError('invalid_json', 'the body is not valid JSON');
    const fromFastify = typeof e.code === 'string' && e.code.startsWith('FST_');
    // 503 only from Fastify itself: a store outage has its own code below.
    const code = typeof e.statusCode === 'number' && (e.statusCode !== 503 || fromFastify) ? FRAMEWORK_STATUS[e.statusCode] : undefined;
    if (code !== undefined) {
      // A framework error's own message names what was wrong (a bad URL, a missing field);
      // it carries no secret. The statuses with a fixed sentence use it instead.
      return new ApiError(code, FRAMEWORK_MESSAGE[code] ?? (e.message || 'the request is malformed'));
    }
    if (fromFastify && typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500)
      return new ApiError('invalid_request', e.message || 'the request is malformed');
  }
  if (isStoreUnavailable(error)) {
    return new ApiError('log_store_unavailable', 'the store is unavailable right now; nothing was written, retry later', { cause: error });
  }
  return new ApiError('internal_error', 'an unexpected error happened; the requestId finds it in the server log', { cause: error });
}

/** Sends the error answer for `code` (used by handlers that must answer without throwing). */
export function sendError(reply: FastifyReply, request: FastifyRequest, error: ApiError): FastifyReply {
  if (error.headers) void reply.headers(error.headers);
  return reply
    .code(error.statusCode)
    .type('application/json')
    .send({
      success: false,
      error: { code: error.code, message: error.message, requestId: String(request.id) },
    });
}

/**
 * Fastify's `frameworkErrors` option: errors found while routing, before any hook runs (a URL
 * that does not decode, a path parameter over `maxParamLength`), answered in our shape.
 */
export function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const apiError = toApiError(error);
  request.log.debug({ code: apiError.code, fastifyCode: error.code }, apiError.message);
  void sendError(reply, request, apiError);
}

/**
 * Fastify's `clientErrorHandler` option: Node's HTTP parser refused the bytes before there was a
 * request (malformed HTTP, headers over the size limit, a request that did not arrive in time).
 * The answer is written on the socket, in our shape with a fresh request id, then the socket is
 * closed, as Node and Fastify do by default.
 */
export function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const code: ApiErrorCode =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? 'headers_too_large'
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'HPE_HEADERS_TIMEOUT'
        ? 'request_timeout'
        : 'invalid_request';
  const apiError = new ApiError(code, FRAMEWORK_MESSAGE[code] ?? 'the request is not valid HTTP');
  const requestId = 'req_' + randomId(16);
  this.log.debug({ err, code, requestId }, 'client error');
  // As Node's own handler: no answer on a socket whose response has begun (it would corrupt it).
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const body = JSON.stringify({ success: false, error: { code, message: apiError.message, requestId } });
    const reason =
      code === 'headers_too_large' ? 'Request Header Fields Too Large' : code === 'request_timeout' ? 'Request Timeout' : 'Bad Request';
    socket.write(
      `HTTP/1.1 ${apiError.statusCode} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** Installs the error and not-found handlers, and the 503 of a closing server in our shape. */
export function installErrorHandling(app: FastifyInstance): void {
  // Replaces Fastify's own `return503OnClosing` answer (app.ts turns it off), which is not in
  // our shape: once close starts, every new request is 503 not_ready and the connection closes.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // A callback hook: every request passes here, and this spares it a promise.
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    void reply.header('connection', 'close');
    done(new ApiError('not_ready', 'the server is shutting down; retry on another instance or later'));
  });
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.code === 'internal_error') request.log.error({ err: error }, 'unhandled error');
    else if (apiError.code === 'log_store_unavailable') request.log.warn({ err: error }, 'store unavailable');
    else request.log.debug({ code: apiError.code }, apiError.message);
    return sendError(reply, request, apiError);
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, request, new ApiError('not_found', `no route ${request.method} ${request.url.split('?')[0]}`)),
  );
}
