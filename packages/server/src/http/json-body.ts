/**
 * The JSON body parser of every route. Before anything parses a body into objects, one linear
 * pass over its bytes (core's `inspectJson`) refuses nesting deeper than {@link MAX_JSON_DEPTH}
 * (a payload nested 6,000 deep used to hang `/v1/proxy` and 8,000 gave 500s: the recursion of
 * canonical JSON) and malformed text, with a 400 that states the limit. The raw bytes and the
 * inspection stay on the request, so `/v1/proxy` can forward the exact bytes of its `payload`
 * member instead of a re-serialization (issue "Hardening": 64-bit ids, `-0`, duplicate keys).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { inspectJson, jsonContainerBudget, MAX_JSON_DEPTH, type JsonInspection } from '@countersign/core';
import { ApiError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The raw bytes of a JSON body and their inspection (set by the JSON parser). */
    jsonBody?: { raw: Buffer; inspection: JsonInspection };
  }
}

/**
 * Replaces Fastify's JSON parser with one that inspects the bytes first, then parses with
 * Fastify's own (prototype-poisoning-safe) parser.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parseText = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request: FastifyRequest, raw: Buffer, done) => {
    if (raw.length === 0) {
      done(new ApiError('invalid_json', 'the body is empty; send a JSON object'), undefined);
      return;
    }
    const inspected = inspectJson(raw, { maxDepth: MAX_JSON_DEPTH, allowInvalidUtf8: true });
    if (!inspected.ok) {
      const error =
        inspected.error === 'too_deep'
          ? new ApiError('json_too_deep', `the body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels; flatten it`)
          : new ApiError('invalid_json', `the body is not valid JSON (byte ${inspected.offset}: ${inspected.message})`);
      done(error, undefined);
      return;
    }
    // Parsing and sealing cost grows with the number of arrays and objects, not the bytes: a
    // body of 1.2 million empty arrays (2.4 MB) held the event loop for 0.7 s. Past the budget
    // the body is refused; forward mode streams any body without parsing it.
    const budget = jsonContainerBudget(raw.length);
    if (inspected.value.containers > budget) {
      done(
        new ApiError(
          'json_too_complex',
          `the body holds ${inspected.value.containers} arrays and objects, more than the ${budget} a body of ${raw.length} bytes may hold (16384 plus one per 64 bytes); send fewer, larger values, seal it client-side, or use forward mode (/v1/forward), which does not parse bodies`,
        ),
        undefined,
      );
      return;
    }
    request.jsonBody = { raw, inspection: inspected.value };
    parseText(request, raw.toString('utf8'), done);
  });
}
