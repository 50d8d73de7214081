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
  return serialize(value, new Set());
}

/** UTF-8 bytes of {@link canonicalize}. */
export function canonicalBytes(value: unknown): Uint8Array {
  return utf8(canonicalize(value));
}

function serialize(value: unknown, seen: Set<object>): string {
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
      if (seen.has(value)) throw new CoreError('invalid_json', 'cannot canonicalize a cyclic structure');
      seen.add(value);
      let out: string;
      if (Array.isArray(value)) {
        out = '[' + value.map((v) => (v === undefined || typeof v === 'function' ? 'null' : serialize(v, seen))).join(',') + ']';
      } else {
        const record = value as Record<string, unknown>;
        const parts: string[] = [];
        // Default sort compares UTF-16 code units, which is what RFC 8785 §3.2.3 asks for.
        for (const key of Object.keys(record).sort()) {
          const v = record[key];
          if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
          parts.push(JSON.stringify(key) + ':' + serialize(v, seen));
        }
        out = '{' + parts.join(',') + '}';
      }
      seen.delete(value);
      return out;
    }
    case 'bigint':
      throw new CoreError('invalid_json', 'JSON cannot represent BigInt values');
    default:
      throw new CoreError('invalid_json', `JSON cannot represent a ${typeof value}`);
  }
}
