/**
 * Forward mode (DESIGN §4, spec 1.2: "callers change only the destination URL and headers"):
 * `{ingest_url}/v1/forward/{upstream}/{rest…}` → `{base of upstream}/{rest…}?{query}`, or with
 * `X-Service-Target-Base` the whole rest appended to that base (the header wins). Any method and
 * content type; the body streams upstream byte for byte (never parsed), and the answer streams
 * back. Our key travels in `X-Service-Key`, so the SDK's own `Authorization` / `x-api-key`
 * reach the provider untouched. From the {@link ProxyCall} on, this is the same pipeline as
 * `POST /v1/proxy` (pipeline.ts): same guard, write-ahead record, capture and outcome rules.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import { HEADERS, PROXY_DEFAULTS } from '@countersign/core';
import { requireForwardKey } from '../auth/guards.js';
import type { IngestPrincipal } from '../auth/principal.js';
import { ApiError } from '../errors.js';
import { serviceHeaderText } from '../http/service-headers.js';
import { admitCall } from '../http/admission.js';
import { stampFromRequest } from '../ingest/stamp.js';
import { upstreamRequestHeaders } from './headers.js';
import { forwardBody, readAheadLength, readAheadParser } from './forward-body.js';
import { callLabels } from './labels.js';
import { runExchange } from './pipeline.js';
import type { ProxyRuntime } from './plugin.js';
import { normaliseBase, type UpstreamTable } from './upstreams.js';

/** The path prefix of forward mode. */
export const FORWARD_PREFIX = '/v1/forward';

/** Registers `/v1/forward/*` (every method) in its own context, where bodies are never parsed. */
export async function registerForwardRoutes(app: FastifyInstance, runtime: ProxyRuntime, upstreams: UpstreamTable): Promise<void> {
  await app.register(async (routes) => {
    // The body is the upstream's business, never parsed: a short one is read whole (its record
    // is then written ahead with it), a long or chunked one left unread to stream (forward-body.ts).
    routes.removeAllContentTypeParsers();
    // Also named for JSON, the SDKs' type: Fastify caches the parser it finds for a named type,
    // while it parses the Content-Type header again on every request that falls to the catch-all.
    routes.addContentTypeParser(['application/json', '*'], readAheadParser);
    routes.all(
      `${FORWARD_PREFIX}/*`,
      {
        // Key first, then a call slot of the in-flight budget (http/admission.ts), with the bytes
        // of a body read ahead; a streamed body holds at most its 2 MB capture.
        onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
          await requireForwardKey(request);
          admitCall(request, reply, readAheadLength(request.headers) ?? 0);
        },
        schema: {
          tags: ['proxy'],
          summary: 'Forward mode: a drop-in base URL for SDKs and HTTP clients (any method, any body, streamed both ways)',
          description:
            '/v1/forward/{upstream}/{rest} goes to the base of {upstream} (a preset such as openai or anthropic, or a COUNTERSIGN_UPSTREAMS name); with X-Service-Target-Base the whole rest goes to that base. Our key in X-Service-Key; Authorization and every other non-X-Service-*/X-Agent-* header go upstream untouched. The answer is the upstream answer plus X-Service-Log-ID.',
        },
      },
      async (request, reply) => {
        const principal = request.principal as IngestPrincipal;
        const keyString = request.headers[HEADERS.encryptionKey];
        if (typeof keyString !== 'string' || keyString.trim() === '') {
          throw new ApiError('missing_encryption_key', 'send X-Service-Encryption-Key: the key string that encrypts this record');
        }
        const { target, upstreamName } = resolveTarget(request, upstreams);
        const method = request.method as Dispatcher.HttpMethod;
        const body = forwardBody(request);
        await runExchange(
          app,
          runtime,
          {
            via: 'forward',
            principal,
            keyString,
            target,
            ...(upstreamName !== undefined ? { upstreamName } : {}),
            method,
            upstreamHeaders: upstreamRequestHeaders(request.headers, body.kind !== 'none', 'forward'),
            body,
            requestProof: requestProofAsked(request),
            ...callLabels(request.headers, PROXY_DEFAULTS),
            stamp: stampFromRequest(principal, request.headers),
            callerHead: method === 'HEAD',
          },
          request,
          reply,
        );
      },
    );
  });
}

/** The upstream URL of a forward-mode request (the raw path and query, as the caller sent them). */
function resolveTarget(request: FastifyRequest, upstreams: UpstreamTable): { target: string; upstreamName?: string } {
  const raw = request.raw.url ?? '';
  const q = raw.indexOf('?');
  const path = (q === -1 ? raw : raw.slice(0, q)).slice(FORWARD_PREFIX.length);
  const query = q === -1 ? '' : raw.slice(q);
  refuseDotSegments(path);
  const baseHeader = serviceHeaderText(request.headers, HEADERS.targetBase);
  if (baseHeader !== undefined && baseHeader !== '') {
    const checked = normaliseBase(baseHeader);
    if ('error' in checked) throw new ApiError('invalid_request', `X-Service-Target-Base: ${checked.error}`);
    return { target: checked.base + path + query };
  }
  const slash = path.indexOf('/', 1);
  const name = (slash === -1 ? path.slice(1) : path.slice(1, slash)).toLowerCase();
  const base = upstreams.base(name);
  if (base === undefined) {
    throw new ApiError(
      'unknown_upstream',
      `no upstream named "${name.slice(0, 64)}"; use one of ${upstreams.names().join(', ')}, define one with COUNTERSIGN_UPSTREAMS, or send X-Service-Target-Base`,
    );
  }
  return { target: base + (slash === -1 ? '' : path.slice(slash)) + query, upstreamName: name };
}

/**
 * A `.` or `..` segment (also percent-encoded, `%2e`), between `/` or `\` (which the URL parser
 * reads as `/` in http and https URLs, and Node's HTTP parser lets through).
 */
const DOT_SEGMENT = /(?:^|[/\\])(?:\.|%2e){1,2}(?=[/\\]|$)/i;

/**
 * Dot segments would be resolved by the URL parser and could climb out of a preset's base path;
 * a real API path never has them. One regular expression, no per-call split.
 */
function refuseDotSegments(path: string): void {
  if (DOT_SEGMENT.test(path)) throw new ApiError('invalid_request', 'the forward path must not contain "." or ".." segments');
}

/** `X-Service-Request-Proof: true` asks for a receipt; anything but true/false is a mistake worth a 400. */
function requestProofAsked(request: FastifyRequest): boolean {
  const v = serviceHeaderText(request.headers, HEADERS.requestProof);
  if (v === undefined || v === '') return false;
  const lower = v.toLowerCase();
  if (lower === 'true') return true;
  if (lower === 'false') return false;
  throw new ApiError('invalid_request', `X-Service-Request-Proof must be true or false, got "${v.slice(0, 32)}"`);
}
