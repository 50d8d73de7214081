/**
 * inspectJson (json-text.ts), case by case: depth and its limit, exact numbers, duplicate keys,
 * lone surrogates, top-level value offsets, syntax errors with their offsets, invalid UTF-8.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspectJson, MAX_JSON_DEPTH } from '../src/index.js';
import { enc, inspect, ok, nested } from './helpers/inspect-json.js';

test('inspectJson: depth of scalars, arrays and objects', () => {
  assert.equal(ok('1').depth, 0);
  assert.equal(ok(' "x" ').depth, 0);
  assert.equal(ok('[]').depth, 1);
  assert.equal(ok('{}').depth, 1);
  assert.equal(ok('[1,[2,[3]],{"a":{"b":[]}}]').depth, 4);
  assert.equal(ok('\n\t {"a" : [ ] , "b":{ }}\r\n').depth, 2);
});

test('inspectJson: the nesting limit is MAX_JSON_DEPTH (256) by default, exactly', () => {
  assert.equal(MAX_JSON_DEPTH, 256);
  assert.equal(ok(nested(256)).depth, 256);
  const objects = '{"a":'.repeat(255) + '{}' + '}'.repeat(255);
  assert.equal(ok(objects).depth, 256);
  const over = inspect(nested(257));
  assert.deepEqual(over, { ok: false, error: 'too_deep', offset: 256, message: 'nested deeper than 256 levels' });
  const overObjects = inspect('{"a":'.repeat(256) + '[]' + '}'.repeat(256));
  assert.equal(overObjects.ok === false && overObjects.error, 'too_deep');
  // The limit is an option.
  assert.equal(ok('[[1]]', { maxDepth: 2 }).depth, 2);
  assert.equal(inspect('[[1]]', { maxDepth: 1 }).ok, false);
  assert.equal(ok('7', { maxDepth: 0 }).depth, 0);
});

test('inspectJson: 20,000-deep arrays are refused without recursion, and measured when allowed', () => {
  const deep = nested(20_000);
  const r = inspect(deep);
  assert.equal(r.ok === false && r.error, 'too_deep');
  assert.equal(ok(deep, { maxDepth: Infinity }).depth, 20_000);
  const deepObjects = '{"k":'.repeat(20_000) + '1' + '}'.repeat(20_000);
  assert.equal(ok(deepObjects, { maxDepth: Infinity }).depth, 20_000);
  // Unclosed, the same depth is a syntax error at the end.
  const unclosed = inspect('['.repeat(20_000), { maxDepth: Infinity });
  assert.equal(unclosed.ok === false && unclosed.error, 'syntax');
});

test('inspectJson: number tokens are exact only when canonical JSON writes the same decimal', () => {
  const exact = [
    '0',
    '1',
    '1.0',
    '1e0',
    '1E+0',
    '10e-1',
    '0.0',
    '0e7',
    '-1',
    '0.1',
    '1.5e300',
    '123456789012345',
    '9007199254740992',
    '-0.006929283495992422',
    '333333333.3333333',
    '1e21',
    '100000000000000000000000',
    '5e-324',
    '1.7976931348623157e308',
    '0.000001',
    '1.000000000000000000000000000000000000000000000',
    '12345678901234500000e-5',
  ];
  for (const t of exact) assert.equal(ok(t).lossless, true, t);
  const inexact = [
    '9007199254740993',
    '1e400',
    '-1e400',
    '1E309',
    '1e-400',
    '-1e-400',
    '-0',
    '-0.0',
    '-0e10',
    '0.30000000000000001',
    '0.1000000000000000000001',
    '123456789012345678901234567890',
    '4.9406564584124654e-324',
    '1.7976931348623159e308',
  ];
  for (const t of inexact) {
    const v = ok(t);
    assert.equal(v.lossless, false, t);
    assert.equal(v.lossyReason, 'number', t);
  }
  // Inside a document, at any depth.
  assert.equal(ok('{"a":[1,2,{"id":9007199254740993}]}').lossyReason, 'number');
  assert.equal(ok('{"a":[1,2,{"id":"9007199254740993"}]}').lossless, true);
  // A very long token is read (in chunks), not refused.
  assert.equal(ok('0.' + '0'.repeat(200_000) + '1e200000').lossless, true);
  assert.equal(ok('1' + '0'.repeat(200_000)).lossyReason, 'number');
});

test('inspectJson: duplicate keys at any level, compared after unescaping', () => {
  assert.equal(ok('{"a":1,"a":2}').lossyReason, 'duplicate_key');
  assert.equal(ok('{"a":1,"\\u0061":2}').lossyReason, 'duplicate_key');
  assert.equal(ok('{"x":{"y":[{"z":1,"w":2,"z":3}]}}').lossyReason, 'duplicate_key');
  assert.equal(ok('[{"é":1},{"\\u00e9":1,"é":2}]').lossyReason, 'duplicate_key');
  // The same name in different objects, or as a value, is not a duplicate.
  const fine = ok('{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}],"c":"a"}');
  assert.equal(fine.lossless, true);
  // Sibling objects at the same depth do not share their key sets.
  assert.equal(ok('[{"k":1},{"k":2},[{"k":3}]]').lossless, true);
  // Many names (the check switches from byte comparison to a Set of names): a duplicate on
  // either side of the switch, and escaped names meeting plain ones.
  const many = (names: string[]) => '[{' + names.map((n, i) => `"${n}":${i}`).join(',') + '}]';
  const names = Array.from({ length: 40 }, (_, i) => 'k' + i);
  assert.equal(ok(many(names)).lossless, true);
  assert.equal(ok(many([...names.slice(0, 20), 'k3'])).lossyReason, 'duplicate_key');
  assert.equal(ok(many(['k1', 'k2', 'k3', 'k1'])).lossyReason, 'duplicate_key');
  assert.equal(ok(many(['é', 'k', '\\u00e9'])).lossyReason, 'duplicate_key');
  assert.equal(ok(many(['\\u006b', 'x', 'k'])).lossyReason, 'duplicate_key');
  assert.equal(ok(many(['\\u006b', 'x', 'y'])).lossless, true);
  // Deep objects with several names each (the name stack grows) stay independent.
  const chain = (depth: number, dupAt: number) => {
    let text = '1';
    for (let d = 0; d < depth; d++) text = `{"a":1,"b":2,"c":3,${d === dupAt ? '"b":0,' : ''}"next":${text}}`;
    return text;
  };
  assert.equal(ok(chain(100, -1)).lossless, true);
  assert.equal(ok(chain(100, 3)).lossyReason, 'duplicate_key');
  assert.equal(ok(chain(100, 97)).lossyReason, 'duplicate_key');
  // The first reason is kept.
  assert.equal(ok('[-0,{"a":1,"a":2}]').lossyReason, 'number');
  assert.equal(ok('[{"a":1,"a":2},-0]').lossyReason, 'duplicate_key');
});

test('inspectJson: lone surrogate escapes are not lossless, pairs are', () => {
  for (const s of [
    '"\\ud800"',
    '"\\uDBFF x"',
    '"\\udc00"',
    '"a\\ude00b"',
    '"\\ud83d\\ud83d\\ude00"',
    '"\\ud83d\\n"',
    '{"\\ud800":1}',
    '["\\ud83d"]',
  ]) {
    assert.equal(ok(s).lossyReason, 'lone_surrogate', s);
  }
  for (const s of ['"\\ud83d\\ude00"', '"\\uD83D\\uDE00"', '"😀"', '"\\u00e9\\u20ac"', '{"\\ud83d\\ude00":"\\ud83d\\ude00"}']) {
    assert.equal(ok(s).lossless, true, s);
  }
});

test('inspectJson: top-level member value offsets, with whitespace, Unicode and escapes', () => {
  const text = ' {\n  "plain" : 12 ,"é\\"q": "x\\"}y" ,\t"emoji😀":[1, {"plain":2}],\n "\\u0041": {"n":null} ,"s":"😀"\n} ';
  const bytes = enc.encode(text);
  const r = inspectJson(bytes);
  assert.ok(r.ok);
  const members = r.value.members!;
  assert.deepEqual([...members.keys()], ['plain', 'é"q', 'emoji😀', 'A', 's']);
  const parsed = JSON.parse(text) as Record<string, unknown>;
  const dec = new TextDecoder();
  for (const [key, spans] of members) {
    assert.equal(spans.length, 1);
    const [start, end] = spans[0]!;
    assert.deepEqual(JSON.parse(dec.decode(bytes.subarray(start, end))), parsed[key], key);
    // The span is the value alone: no surrounding whitespace.
    assert.notEqual(bytes[start], 0x20);
    assert.notEqual(bytes[end - 1], 0x20);
  }
  // Duplicates list every occurrence, in order.
  const dup = ok('{"a":1,"b":2,"a":[3]}');
  assert.deepEqual(dup.members!.get('a'), [
    [5, 6],
    [17, 20],
  ]);
  assert.equal(dup.lossyReason, 'duplicate_key');
  assert.deepEqual([...ok('{}').members!], []);
  assert.equal(ok('[{"a":1}]').members, undefined);
  assert.equal(ok('"{}"').members, undefined);
});

test('inspectJson: syntax errors with their byte offsets', () => {
  const cases: Array<[string, number]> = [
    ['', 0],
    ['   ', 3],
    ['[1,]', 3],
    ['{"a":1,}', 7],
    ['[1 2]', 3],
    ['01', 1],
    ['-01', 2],
    ['-', 1],
    ['1.', 2],
    ['.5', 0],
    ['1e', 2],
    ['1e+', 3],
    ['+1', 0],
    ['"abc', 4],
    ['["a\\x"]', 3],
    ['"\\u12"', 1],
    ['"\t"', 1],
    ['{"a" 1}', 5],
    ['{a:1}', 1],
    ["{'a':1}", 1],
    ['tru', 3],
    ['nul', 3],
    ['[1]]', 3],
    ['[1', 2],
    ['{"a":1', 6],
    ['1 2', 2],
    ['NaN', 0],
    ['\ufeff{}', 0],
    ['[1,,2]', 3],
    ['{"a":1 "b":2}', 7],
  ];
  for (const [text, offset] of cases) {
    const r = inspect(text);
    assert.equal(r.ok, false, text);
    if (!r.ok) {
      assert.equal(r.error, 'syntax', text);
      assert.equal(r.offset, offset, `${JSON.stringify(text)}: ${r.message}`);
      assert.ok(r.message.length > 0);
    }
    assert.throws(() => JSON.parse(text), SyntaxError, text);
  }
});

test('inspectJson: invalid UTF-8 in strings is an error, or reported as validUtf8 false when allowed', () => {
  const wrap = (...inner: number[]) => new Uint8Array([0x7b, 0x22, 0x6b, 0x22, 0x3a, 0x22, ...inner, 0x22, 0x7d]);
  const invalid = [
    [0xff],
    [0xc0, 0x80],
    [0xc3],
    [0xe0, 0x80, 0x80],
    [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80],
    [0xf5, 0x80, 0x80, 0x80],
    [0x80],
  ];
  for (const seq of invalid) {
    const strict = inspectJson(wrap(...seq));
    assert.deepEqual(strict.ok === false && [strict.error, strict.offset], ['invalid_utf8', 6], seq.join(','));
    const lenient = inspectJson(wrap(...seq), { allowInvalidUtf8: true });
    assert.ok(lenient.ok && lenient.value.validUtf8 === false && lenient.value.lossless, seq.join(','));
  }
  for (const seq of [
    [0xc3, 0xa9],
    [0xe2, 0x82, 0xac],
    [0xef, 0xbf, 0xbf],
    [0xf0, 0x9f, 0x98, 0x80],
    [0xf4, 0x8f, 0xbf, 0xbf],
  ]) {
    const r = inspectJson(wrap(...seq));
    assert.ok(r.ok && r.value.validUtf8, seq.join(','));
  }
  // Outside a string, a non-ASCII byte is a syntax error either way.
  const outside = inspectJson(new Uint8Array([0x5b, 0xc3, 0xa9, 0x5d]), { allowInvalidUtf8: true });
  assert.equal(outside.ok === false && outside.error, 'syntax');
  // Keys with invalid bytes decode as JSON.parse sees them (U+FFFD), so their duplicates show.
  const keys = inspectJson(new Uint8Array([...enc.encode('{"\uFFFD":1,"'), 0xff, ...enc.encode('":2}')]), { allowInvalidUtf8: true });
  assert.ok(keys.ok && keys.value.lossyReason === 'duplicate_key');
});
