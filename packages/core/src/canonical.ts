/**
 * RFC 8785 JSON Canonicalization Scheme (JCS).
 *
 * The payload hash is taken over these bytes, so the server, the client, the CLI and the browser
 * must agree on them to the byte. JCS is defined on top of ECMAScript's own serialisation of
 * numbers and strings, which is why this is short: object keys sorted by UTF-16 code units,
 * no whitespace, and `JSON.stringify` for every primitive.
 */
import { CoreError } from './errors.js';
import { utf8 } from './encoding.js';

/**
 * The nesting limit for every JSON input of the service: arrays and objects at most this deep
 * (a scalar document has depth 0, `[]` has depth 1). Inputs are checked against it on their bytes
 * (see `inspectJson`) before anything parses them into objects.
 */
export const MAX_JSON_DEPTH = 256;

/**
 * The nesting limit of {@link canonicalize}: {@link MAX_JSON_DEPTH} plus room for the records
 * the service wraps around an input (a proxy payload holds a request body three levels down).
 * Beyond it canonicalization refuses instead of recursing into a stack overflow.
 */
export const MAX_CANONICAL_DEPTH = MAX_JSON_DEPTH + 64;

/**
 * Canonical JSON text of `value` (RFC 8785).
 *
 * Follows `JSON.stringify` semantics for what is representable (`toJSON` is honoured,
 * `undefined` members are dropped, `undefined` in arrays becomes `null`).
 * Runs in time linear in the size of `value`, whatever its shape.
 * @param options.maxDepth - deepest nesting of arrays/objects accepted (default {@link MAX_CANONICAL_DEPTH});
 *   serialization recurses once per level, so a limit of many thousands can overflow the stack.
 * @throws CoreError `invalid_json` for non-finite numbers, BigInt, cyclic structures, or nesting
 *   deeper than `maxDepth`.
 */
export function canonicalize(value: unknown, options?: { maxDepth?: number }): string {
  const maxDepth = options?.maxDepth ?? MAX_CANONICAL_DEPTH;
  const path: object[] = [];
  try {
    return serialize(value, 0, maxDepth, path);
  } catch (e) {
    if (e !== tooDeep) throw e;
    // A cycle also ends here (it is infinitely deep): `path` holds the chain that ran too deep.
    const cyclic = new Set(path).size < path.length;
    throw new CoreError('invalid_json', cyclic ? 'cannot canonicalize a cyclic structure' : `JSON nested deeper than ${maxDepth} levels`);
  }
}

/** UTF-8 bytes of {@link canonicalize}. */
export function canonicalBytes(value: unknown): Uint8Array {
  return utf8(canonicalize(value));
}

/**
 * A key as a JSON string. Plain printable ASCII needs no escaping, and checking that is cheaper
 * than a native `JSON.stringify` call per key (the proxy canonicalizes two records per call);
 * anything else goes through `JSON.stringify`, which is what JCS prescribes.
 */
function quoteKey(key: string): string {
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0x7e) return JSON.stringify(key);
  }
  return '"' + key + '"';
}

/**
 * The keys of `record` in UTF-16 code-unit order (RFC 8785 §3.2.3; JavaScript's `<` on strings
 * compares code units). Most objects have few keys, often already in order: an insertion sort in
 * place allocates nothing, where `Array.prototype.sort` copies into a work array on every call
 * (measured: ~8 % of the proxy's allocations per call went to sorting keys).
 */
function sortedKeys(record: Record<string, unknown>): string[] {
  const keys = Object.keys(record);
  if (keys.length > 32) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i]!;
    let j = i - 1;
    if (!(k < keys[j]!)) continue;
    while (j >= 0 && k < keys[j]!) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = k;
  }
  return keys;
}

/** Thrown inside {@link serialize} when nesting passes the limit; {@link canonicalize} explains it. */
const tooDeep = new Error('too deep');

/**
 * `depth` counts the arrays/objects open above `value`, and `path[d]` is the one open at depth
 * `d` (a store per node, no scan: scanning the ancestors for cycles made deep inputs quadratic).
 * A cycle runs past `maxDepth` like any over-deep structure; the caller tells them apart.
 */
function serialize(value: unknown, depth: number, maxDepth: number, path: object[]): string {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new CoreError('invalid_json', 'JSON cannot represent NaN or Infinity');
      // ECMAScript Number-to-String is exactly the JCS number form (-0 becomes "0").
      return JSON.stringify(value);
    case 'object': {
      if (value === null) return 'null';
      if (depth === maxDepth) throw tooDeep;
      path[depth] = value;
      const below = depth + 1;
      let out: string;
      if (Array.isArray(value)) {
        out = '[';
        for (let i = 0; i < value.length; i++) {
          const v: unknown = value[i];
          if (i > 0) out += ',';
          out += v === undefined || typeof v === 'function' ? 'null' : serialize(v, below, maxDepth, path);
        }
        out += ']';
      } else {
        const record = value as Record<string, unknown>;
        const keys = sortedKeys(record);
        out = '{';
        let first = true;
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i]!;
          const v = record[key];
          if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
          if (!first) out += ',';
          first = false;
          out += quoteKey(key) + ':' + serialize(v, below, maxDepth, path);
        }
        out += '}';
      }
      return out;
    }
    case 'bigint':
      throw new CoreError('invalid_json', 'JSON cannot represent BigInt values');
    default:
      throw new CoreError('invalid_json', `JSON cannot represent a ${typeof value}`);
  }
}
