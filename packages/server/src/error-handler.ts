/**
 * Maps every failure to the one error shape `{success:false,error:{code,message,requestId}}`
 * with a catalogue code. Fastify's own errors (bad JSON, media type, body limit, schema
 * validation) are translated here so no route needs to know about them.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isCoreError } from '@countersign/core';
import { ApiError } from './errors.js';
import { isStoreUnavailable } from './store/availability.js';

/** Fastify's schema message, naming the unknown field that `additionalProperties: false` refused. */
function validationMessage(e: FastifyError & { validation?: unknown; validationContext?: string }): string {
  const first = Array.isArray(e.validation)
    ? (e.validation[0] as { keyword?: string; instancePath?: string; params?: Record<string, unknown> })
    : undefined;
  if (first?.keyword === 'additionalProperties' && typeof first.params?.additionalProperty === 'string') {
    const where = `${e.validationContext ?? 'body'}${first.instancePath ?? ''}`;
    return `${where} has an unknown field "${first.params.additionalProperty}"; remove it`;
  }
  return e.message;
}

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
    if (e.statusCode === 413) return new ApiError('payload_too_large', 'the request body is larger than the server accepts');
    if (e.statusCode === 415) return new ApiError('unsupported_media_type', 'send Content-Type: application/json');
    if (e.statusCode === 400) return new ApiError('invalid_request', 'the request is malformed');
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

/** Installs the error and not-found handlers. */
export function installErrorHandling(app: FastifyInstance): void {
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
