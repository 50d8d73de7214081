/**
 * The JSON body parser of every route. Before anything parses a body into objects, one linear
 * pass over its bytes (core's `inspectJson`) refuses nesting deeper than `MAX_JSON_DEPTH`
 * (a payload nested 6,000 deep used to hang `/v1/proxy` and 8,000 gave 500s: the recursion of
 * canonical JSON), malformed text and bodies over the container budget, with a 400 that states
 * the limit (json-inspect.ts). The raw bytes and the inspection stay on the request, so
 * `/v1/proxy` can forward the exact bytes of its `payload` member instead of a
 * re-serialization (issue "Hardening": 64-bit ids, `-0`, duplicate keys). Large bodies are
 * inspected and parsed in the offload pool, off the event loop (offload/pool.ts).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { JsonInspection } from '@countersign/core';
import { ApiError } from '../errors.js';
import { offload, OFFLOAD_FROM_BYTES } from '../offload/pool.js';
import { inspectBody, type InspectedBody } from './json-inspect.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The raw bytes of a JSON body and their inspection (set by the JSON parser). */
    jsonBody?: { raw: Buffer; inspection: JsonInspection };
  }
}

/** Replaces Fastify's JSON parser with one that inspects the bytes before parsing them. */
export function installJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, async (request: FastifyRequest, raw: Buffer) => {
    const r: InspectedBody = raw.length < OFFLOAD_FROM_BYTES ? inspectBody(raw) : await offload({ kind: 'parse', raw });
    if (!r.ok) throw new ApiError(r.code, r.message);
    request.jsonBody = { raw, inspection: r.inspection };
    return r.value;
  });
}
