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
 * Canonical JSON text of `value` (RFC 8785).
 *
 * Follows `JSON.stringify` semantics for what is representable (`toJSON` is honoured,
 * `undefined` members are dropped, `undefined` in arrays becomes `null`).
 * @throws CoreError `invalid_json` for non-finite numbers, BigInt, or cyclic structures.
 */
export function canonicalize(value: unknown): string {
  return serialize(value, []);
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
 * `ancestors` holds the objects on the path from the root (a cycle is an ancestor met again);
 * payloads are shallow, so a linear scan is cheaper than a Set.
 */
function serialize(value: unknown, ancestors: object[]): string {
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
      for (let i = 0; i < ancestors.length; i++) {
        if (ancestors[i] === value) throw new CoreError('invalid_json', 'cannot canonicalize a cyclic structure');
      }
      ancestors.push(value);
      let out: string;
      if (Array.isArray(value)) {
        out = '[';
        for (let i = 0; i < value.length; i++) {
          const v: unknown = value[i];
          if (i > 0) out += ',';
          out += v === undefined || typeof v === 'function' ? 'null' : serialize(v, ancestors);
        }
        out += ']';
      } else {
        const record = value as Record<string, unknown>;
        // Default sort compares UTF-16 code units, which is what RFC 8785 §3.2.3 asks for.
        const keys = Object.keys(record).sort();
        out = '{';
        let first = true;
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i]!;
          const v = record[key];
          if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
          if (!first) out += ',';
          first = false;
          out += quoteKey(key) + ':' + serialize(v, ancestors);
        }
        out += '}';
      }
      ancestors.pop();
      return out;
    }
    case 'bigint':
      throw new CoreError('invalid_json', 'JSON cannot represent BigInt values');
    default:
      throw new CoreError('invalid_json', `JSON cannot represent a ${typeof value}`);
  }
}
