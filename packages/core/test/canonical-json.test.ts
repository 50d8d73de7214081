/**
 * RFC 8785 canonical JSON (canonical.ts): key order, numbers, strings and nesting, agreement with
 * a plain JCS oracle on random documents, and refusal of over-deep structures.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalize, MAX_CANONICAL_DEPTH, MAX_JSON_DEPTH, payloadHashHex, randomNonce, sha256Hex } from '../src/index.js';
import { isCode } from './helpers/core-error.js';

test('RFC 8785 canonical JSON: key order, numbers, strings, nesting', () => {
  // The RFC's own examples (§3.2.2, §3.2.3).
  assert.equal(
    canonicalize({
      // eslint-disable-next-line no-loss-of-precision -- the RFC example is exactly this literal
      numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001],
      string: '\u20ac$\u000F\u000aA\'\u0042\u0022\u005c\\"/',
      literals: [null, true, false],
    }),
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
  );
  assert.equal(
    canonicalize({
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    }),
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  );
  assert.equal(canonicalize({ b: 1, a: { d: [1, { z: 0, y: -0 }], c: undefined } }), '{"a":{"d":[1,{"y":0,"z":0}]},"b":1}');
  assert.equal(canonicalize([undefined, new Date(0)]), '[null,"1970-01-01T00:00:00.000Z"]');
  assert.throws(() => canonicalize({ n: NaN }), isCode('invalid_json'));
  assert.throws(() => canonicalize({ n: 1n }), isCode('invalid_json'));
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.throws(() => canonicalize(cyclic), isCode('invalid_json'));
  // A parsed object and its text hash the same.
  const text = '{ "b" : 2, "a" : [1, 2.50] }';
  assert.equal(payloadHashHex(JSON.parse(text)), sha256Hex('{"a":[1,2.5],"b":2}'));
  assert.match(randomNonce(), /^[0-9a-f]{32}$/);
  assert.notEqual(randomNonce(), randomNonce());
});

/** The JCS definition written plainly (sorted keys, JSON.stringify for keys and primitives): the oracle. */
function referenceJcs(v: unknown): string {
  if (Array.isArray(v)) return '[' + v.map((x) => (x === undefined ? 'null' : referenceJcs(x))).join(',') + ']';
  if (v !== null && typeof v === 'object') {
    const r = v as Record<string, unknown>;
    const keys = Object.keys(r)
      .filter((k) => r[k] !== undefined)
      .sort();
    return '{' + keys.map((k) => JSON.stringify(k) + ':' + referenceJcs(r[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}

test('canonical JSON agrees with the plain JCS definition on random documents (odd keys, escapes, shared subtrees)', () => {
  let seed = 42;
  const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  const pool = ['a', 'B', '1', '10', '9', '"', '\\', '\n', '\u0000', '\u007f', 'é', '€', '\ud83d\ude00', '\ud800', 'key', '-', ' '];
  const str = () => Array.from({ length: rnd(6) }, () => pool[rnd(pool.length)]).join('');
  const gen = (depth: number): unknown => {
    const kind = depth > 3 ? rnd(4) : rnd(7);
    if (kind === 0) return str();
    if (kind === 1) return [0, -0, 1.5, -1e21, 1e-7, 333333333.3333333, 2 ** 53][rnd(7)];
    if (kind === 2) return [true, false, null][rnd(3)];
    if (kind === 3) return rnd(2) ? undefined : str();
    if (kind === 4) return Array.from({ length: rnd(4) }, () => gen(depth + 1));
    const o: Record<string, unknown> = {};
    for (let i = rnd(6); i > 0; i--) o[str()] = gen(depth + 1);
    return o;
  };
  for (let i = 0; i < 2000; i++) {
    const doc = { x: gen(0), y: gen(0) };
    assert.equal(canonicalize(doc), referenceJcs(doc));
  }
  // The same subtree twice is not a cycle.
  const shared = { k: [1, 2] };
  assert.equal(
    canonicalize({ a: shared, b: shared, c: [shared, shared] }),
    '{"a":{"k":[1,2]},"b":{"k":[1,2]},"c":[{"k":[1,2]},{"k":[1,2]}]}',
  );
  const deep: unknown[] = [];
  deep.push([[deep]]);
  assert.throws(() => canonicalize(deep), isCode('invalid_json'));
});

test('canonical JSON refuses over-deep structures with invalid_json, never a stack overflow', () => {
  const nest = (depth: number): unknown => {
    let v: unknown = 1;
    for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
    return v;
  };
  assert.equal(MAX_JSON_DEPTH, 256);
  // The default leaves room for the records wrapped around a MAX_JSON_DEPTH input.
  assert.equal(MAX_CANONICAL_DEPTH, MAX_JSON_DEPTH + 64);
  assert.equal(canonicalize(nest(MAX_CANONICAL_DEPTH)), JSON.stringify(nest(MAX_CANONICAL_DEPTH)));
  assert.throws(
    () => canonicalize(nest(MAX_CANONICAL_DEPTH + 1)),
    (e: unknown) => isCode('invalid_json')(e) && /nested deeper than 320/.test((e as Error).message),
  );
  assert.equal(canonicalize([[[]]], { maxDepth: 3 }), '[[[]]]');
  assert.throws(() => canonicalize([[[]]], { maxDepth: 2 }), isCode('invalid_json'));
  // 20,000 levels (JSON.parse builds them without recursion): a refusal, not a RangeError.
  const parsed: unknown = JSON.parse('['.repeat(20_000) + ']'.repeat(20_000));
  assert.throws(() => canonicalize(parsed), isCode('invalid_json'));
  // A cycle is still named as one, however long.
  const ring: Array<Record<string, unknown>> = Array.from({ length: 50 }, () => ({}));
  ring.forEach((node, i) => (node.next = ring[(i + 1) % ring.length]));
  assert.throws(
    () => canonicalize(ring[0]),
    (e: unknown) => isCode('invalid_json')(e) && /cyclic/.test((e as Error).message),
  );
});

test('canonicalize orders keys by UTF-16 code units for any key set (the in-place sort agrees with Array.prototype.sort)', () => {
  const alphabet = ['a', 'B', '0', '9', '10', '2', 'é', 'ǅ', '\u{1F600}', '\uFB33', '_', ' ', '\u0000', 'aa', 'a\u0000'];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  for (let round = 0; round < 300; round++) {
    const obj: Record<string, number> = {};
    const size = round % 40; // also past the insertion sort's 32-key limit
    for (let i = 0; i < size; i++) {
      const key = Array.from({ length: 1 + (next() % 3) }, () => alphabet[next() % alphabet.length]).join('');
      obj[key] = i;
    }
    const expected =
      '{' +
      Object.keys(obj)
        .sort()
        .map((k) => JSON.stringify(k) + ':' + obj[k])
        .join(',') +
      '}';
    assert.equal(canonicalize(obj), expected, `round ${round}`);
  }
});
