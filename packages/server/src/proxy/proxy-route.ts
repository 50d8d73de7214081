/**
 * `POST /v1/proxy` (spec 4.1, 2.1): the caller wraps its request as `{target, payload}`. This
 * door reads the call and hands it to the one pipeline (pipeline.ts). The payload goes upstream
 * "as is" (spec 2.1): the exact bytes of the `payload` member of the body, never a
 * re-serialization (which would turn 9007199254740993 into 9007199254740992, `-0` into `0`,
 * and collapse duplicate keys), and the record says exactly what was sent.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import { HEADERS, inspectJson, PROXY_DEFAULTS, sha256Hex } from '@countersign/core';
import { requireIngestKey } from '../auth/guards.js';
import { admitIngest } from '../http/admission.js';
import type { IngestPrincipal } from '../auth/principal.js';
import { ApiError } from '../errors.js';
import { stampFromRequest } from '../ingest/stamp.js';
import { acceptJsonOnly, errorResponses } from '../management/schemas.js';
import type { CapturedBody } from './capture.js';
import { upstreamRequestHeaders } from './headers.js';
import { callLabels } from './labels.js';
import { runExchange, type OutgoingBody } from './pipeline.js';
import type { ProxyRuntime } from './plugin.js';

/** Body of `POST /v1/proxy` (spec 2.1 plus the optional `method`). */
interface ProxyBody {
  target: string;
  payload: Record<string, unknown>;
  requestProof?: boolean;
  method?: Dispatcher.HttpMethod;
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

const bodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['target', 'payload'],
  properties: {
    target: { type: 'string', minLength: 1, maxLength: 8192, description: 'Destination URL (http or https)' },
    payload: { type: 'object', description: 'Request body forwarded to the destination byte for byte, as it appears in this body' },
    requestProof: { type: 'boolean', description: 'Produce an RFC 3161 proof receipt (5-second batches)' },
    method: { type: 'string', enum: METHODS, description: 'HTTP method upstream (default POST); GET and HEAD need payload {}' },
  },
} as const;

const headersSchema = {
  type: 'object',
  properties: {
    'x-service-encryption-key': { type: 'string', description: 'Required: key string that encrypts the record (never forwarded)' },
    'x-service-agent-id': { type: 'string', description: 'actor (default proxy); UTF-8' },
    'x-service-action': { type: 'string', description: 'action (default proxy.request); UTF-8' },
    'x-service-run-id': { type: 'string', description: 'traceId' },
    'x-service-upstream-authorization': { type: 'string', description: 'Sent upstream as Authorization' },
    'x-service-span-id': {
      type: 'string',
      description: "Span id for this call's entry (16 hex digits); default a new one, answered in X-Service-Span-ID",
    },
    'x-service-parent-span-id': { type: 'string', description: "Parent span of this call's entry; default the traceparent parent-id" },
  },
} as const;

/** Registers `POST /v1/proxy` in its own context (JSON only). */
export async function registerProxyRoute(app: FastifyInstance, runtime: ProxyRuntime): Promise<void> {
  await app.register(async (routes) => {
    acceptJsonOnly(routes);
    routes.post<{ Body: ProxyBody }>(
      '/v1/proxy',
      {
        // Key first, then the in-flight budget (http/admission.ts), both before the body is read.
        onRequest: async (request, reply) => {
          await requireIngestKey(request);
          admitIngest(request, reply);
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
      async (request, reply) => {
        const principal = request.principal as IngestPrincipal;
        const keyString = request.headers[HEADERS.encryptionKey];
        if (typeof keyString !== 'string' || keyString.trim() === '') {
          throw new ApiError('missing_encryption_key', 'send X-Service-Encryption-Key: the key string that encrypts this record');
        }
        const method = request.body.method ?? 'POST';
        const bodyless = method === 'GET' || method === 'HEAD';
        if (bodyless && Object.keys(request.body.payload).length > 0) {
          throw new ApiError('invalid_request', `${method} requests carry no body: send "payload": {} with method ${method}`);
        }
        const labels = callLabels(request.headers, PROXY_DEFAULTS);
        await runExchange(
          app,
          runtime,
          {
            via: 'proxy',
            principal,
            keyString,
            target: request.body.target,
            method,
            upstreamHeaders: upstreamRequestHeaders(request.headers, !bodyless),
            body: bodyless ? { kind: 'none' } : payloadBytes(request),
            requestProof: request.body.requestProof === true,
            ...labels,
            stamp: stampFromRequest(principal, request.headers),
            callerHead: false,
          },
          request,
          reply,
        );
      },
    );
  });
}

/**
 * The exact bytes of the body's `payload` member and how the record states them. A body with
 * two `payload` (or other repeated top-level) members is refused: which one a parser keeps is
 * parser-defined, so the record and the upstream could disagree.
 */
function payloadBytes(request: FastifyRequest<{ Body: ProxyBody }>): OutgoingBody {
  const parsed = request.jsonBody;
  const spans = parsed?.inspection.members;
  if (!parsed || !spans) throw new ApiError('invalid_json', 'the body must be a JSON object');
  for (const [name, at] of spans) {
    if (at.length > 1) throw new ApiError('invalid_request', `the body has the member "${name}" ${at.length} times; send it once`);
  }
  const [start, end] = spans.get('payload')![0]!;
  const bytes = parsed.raw.subarray(start, end);
  const recorded: CapturedBody = { bytes: bytes.length, sha256: sha256Hex(bytes), truncated: false };
  // The whole body being lossless implies the payload is; only a lossy body needs a second look.
  const lossless = parsed.inspection.lossless || isLossless(bytes);
  if (lossless && parsed.inspection.validUtf8 !== false) recorded.body = request.body.payload;
  else if (isUtf8(bytes)) recorded.bodyText = bytes.toString('utf8');
  else recorded.bodyBase64 = bytes.toString('base64');
  return { kind: 'bytes', bytes, recorded };
}

function isLossless(bytes: Buffer): boolean {
  const r = inspectJson(bytes, { allowInvalidUtf8: true });
  return r.ok && r.value.lossless && r.value.validUtf8 !== false;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

function isUtf8(bytes: Buffer): boolean {
  try {
    strictUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}
