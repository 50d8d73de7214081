/**
 * What the JSON body parser does to a body's bytes, as one pure function so it runs the same on
 * the main thread (small bodies) and in the offload pool (large ones, offload/pool.ts): one
 * linear pass of core's `inspectJson` (depth limit, syntax, exactness, top-level member spans),
 * the container budget, then a prototype-poisoning-safe parse (secure-json-parse, the parser
 * Fastify itself uses, with `__proto__` and `constructor.prototype` refused).
 */
import sjson from 'secure-json-parse';
import { inspectJson, jsonContainerBudget, MAX_JSON_DEPTH, type JsonInspection } from '@countersign/core';
import type { ApiErrorCode } from '../errors.js';

/** A parsed body and its inspection, or the refusal (an error code of the catalogue and its message). */
export type InspectedBody = { ok: true; value: unknown; inspection: JsonInspection } | { ok: false; code: ApiErrorCode; message: string };

/** Inspects, budgets and parses a JSON body. Never throws for bad input. */
export function inspectBody(raw: Buffer): InspectedBody {
  if (raw.length === 0) return { ok: false, code: 'invalid_json', message: 'the body is empty; send a JSON object' };
  const inspected = inspectJson(raw, { maxDepth: MAX_JSON_DEPTH, allowInvalidUtf8: true });
  if (!inspected.ok) {
    return inspected.error === 'too_deep'
      ? { ok: false, code: 'json_too_deep', message: `the body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels; flatten it` }
      : { ok: false, code: 'invalid_json', message: `the body is not valid JSON (byte ${inspected.offset}: ${inspected.message})` };
  }
  // Parsing and sealing cost grows with the number of arrays and objects, not the bytes: a
  // body of 1.2 million empty arrays (2.4 MB) held the event loop for 0.7 s. Past the budget
  // the body is refused; forward mode streams any body without parsing it.
  const budget = jsonContainerBudget(raw.length);
  if (inspected.value.containers > budget) {
    return {
      ok: false,
      code: 'json_too_complex',
      message: `the body holds ${inspected.value.containers} arrays and objects, more than the ${budget} a body of ${raw.length} bytes may hold (16384 plus one per 64 bytes); send fewer, larger values, seal it client-side, or use forward mode (/v1/forward), which does not parse bodies`,
    };
  }
  try {
    const value: unknown = sjson.parse(raw.toString('utf8'), null, { protoAction: 'error', constructorAction: 'error' });
    return { ok: true, value, inspection: inspected.value };
  } catch {
    return { ok: false, code: 'invalid_json', message: 'the body is not valid JSON: it sets __proto__ or constructor.prototype' };
  }
}
