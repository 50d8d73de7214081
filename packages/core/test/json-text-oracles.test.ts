/**
 * inspectJson (json-text.ts) against independent oracles: JSON.parse on random documents and
 * their mutations, a BigInt number oracle, a duplicate-key scan; the container budget; and scans
 * that start clean after any earlier one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalize, inspectJson, jsonContainerBudget } from '../src/index.js';
import { enc, inspect, ok, nested } from './helpers/inspect-json.js';

/** Independent oracle for number exactness: BigInt scaled decimals, compared after trimming. */
function exactOracle(token: string): boolean {
  const norm = (t: string): string => {
    const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(t)!;
    let digits = (m[2]! + (m[3] ?? '')).replace(/^0+/, '');
    let exp = Number(m[4] ?? 0) - (m[3] ?? '').length;
    if (digits === '') return m[1] === '-' ? '-0' : '0';
    const trimmed = digits.replace(/0+$/, '');
    exp += digits.length - trimmed.length;
    digits = trimmed;
    return `${m[1]}${BigInt(digits)}e${exp}`;
  };
  const x = Number(token);
  return Number.isFinite(x) && !Object.is(x, -0) && !(x === 0 && norm(token) !== '0') && norm(token) === norm(String(x));
}

test('inspectJson agrees with JSON.parse on random documents and their mutations', () => {
  let seed = 7;
  const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  const ws = () => [' ', '', '\n', '\t', '\r\n ', ''][rnd(6)]!;
  const chars = [
    'a',
    'Z',
    ' ',
    '\\"',
    '\\\\',
    '\\/',
    '\\n',
    '\\u0041',
    '\\u00e9',
    'é',
    '€',
    '😀',
    '\\ud83d\\ude00',
    '\\ud800',
    '\\uDE00',
    '{',
    ']',
    ':',
    ',',
  ];
  const numbers = [
    '0',
    '-1',
    '1.5',
    '1e3',
    '2E-2',
    '1.0',
    '-0',
    '9007199254740993',
    '0.1',
    '1e400',
    '123.456e-7',
    '0.30000000000000001',
    '17',
  ];
  const str = () => '"' + Array.from({ length: rnd(5) }, () => chars[rnd(chars.length)]).join('') + '"';
  const gen = (depth: number): string => {
    const kind = depth > 4 ? rnd(4) : rnd(7);
    if (kind === 0) return str();
    if (kind === 1) return numbers[rnd(numbers.length)]!;
    if (kind === 2) return ['true', 'false', 'null'][rnd(3)]!;
    if (kind === 3) return String(rnd(1000) / 8);
    if (kind === 4) return '[' + ws() + Array.from({ length: rnd(4) }, () => gen(depth + 1)).join(ws() + ',' + ws()) + ws() + ']';
    const keys = ['"a"', '"b"', '"\\u0061"', '"é"', '"c"'];
    return '{' + Array.from({ length: rnd(4) }, () => keys[rnd(keys.length)] + ws() + ':' + ws() + gen(depth + 1)).join(',' + ws()) + '}';
  };
  const depthOf = (v: unknown): number =>
    v !== null && typeof v === 'object' ? 1 + Math.max(0, ...Object.values(v as Record<string, unknown>).map(depthOf)) : 0;
  const dec = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let mutantsChecked = 0;
  for (let i = 0; i < 3000; i++) {
    const text = ws() + gen(0) + ws();
    const bytes = enc.encode(text);
    const r = inspectJson(bytes);
    assert.ok(r.ok, text);
    const parsed: unknown = JSON.parse(text);
    assert.equal(r.value.depth, depthOf(parsed), text);
    // Lossless against independent oracles: every number token, keys, surrogates.
    const tokens = text.replace(/"(?:[^"\\]|\\.)*"/g, '""').match(/-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g) ?? [];
    const numbersExact = tokens.every(exactOracle);
    const noDuplicates = checkNoDuplicates(text);
    const noLone = !/\\ud[89a-f]/i.test(text.replace(/\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}/gi, ''));
    assert.equal(r.value.lossless, numbersExact && noDuplicates && noLone, text);
    // Lossless means the canonical text says the same: inspecting it finds it lossless too.
    if (r.value.lossless) assert.equal(ok(canonicalize(parsed)).lossless, true, text);
    // Mutate one byte: inspectJson accepts exactly what JSON.parse (over strict UTF-8) accepts.
    const mutant = bytes.slice();
    const at = rnd(mutant.length);
    mutant[at] = [0x22, 0x5c, 0x2c, 0x5d, 0x7d, 0x20, 0x30, 0x2d, 0x65, 0x2e, 0xc3, 0x01][rnd(12)]!;
    let parses = true;
    try {
      JSON.parse(dec.decode(mutant));
    } catch {
      parses = false;
    }
    const m = inspectJson(mutant);
    assert.equal(m.ok, parses, `${JSON.stringify(text)} byte ${at} -> ${mutant[at]}`);
    mutantsChecked++;
  }
  assert.equal(mutantsChecked, 3000);
});

/** True when no object in `text` repeats a key (a token scan with a stack of key sets). */
function checkNoDuplicates(text: string): boolean {
  let unique = true;
  const stack: Array<Set<string> | null> = [];
  const re = /"(?:[^"\\]|\\.)*"|[{}[\]:]/g;
  let pendingKey: string | undefined;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const t = m[0];
    if (t === '{') stack.push(new Set());
    else if (t === '[') stack.push(null);
    else if (t === '}' || t === ']') stack.pop();
    else if (t === ':') {
      const keys = stack[stack.length - 1];
      if (keys && pendingKey !== undefined) {
        if (keys.has(pendingKey)) unique = false;
        keys.add(pendingKey);
      }
    } else pendingKey = JSON.parse(t) as string;
  }
  return unique;
}

test('containers are counted, and the budget grows with the size of the text', () => {
  const count = (text: string) => {
    const r = inspectJson(new TextEncoder().encode(text));
    assert.ok(r.ok);
    return r.value.containers;
  };
  assert.equal(count('1'), 0);
  assert.equal(count('[]'), 1);
  assert.equal(count('{"a":[1,{"b":[]}],"c":{}}'), 5);
  assert.equal(count('"[{}]"'), 0, 'brackets inside strings are not containers');
  assert.equal(jsonContainerBudget(0), 16_384);
  assert.equal(jsonContainerBudget(64 * 1000), 16_384 + 1000);
  // The attack shape is far over budget; records, messages and embeddings are far under it.
  const empties = '[' + Array.from({ length: 200_000 }, () => '[]').join(',') + ']';
  assert.ok(count(empties) > jsonContainerBudget(empties.length));
  const rows = JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ id: i, name: `user ${i}`, email: `u${i}@example.com` })));
  assert.ok(count(rows) < jsonContainerBudget(rows.length));
});

test('inspectJson: each scan starts clean, whatever the one before it did (its working arrays are reused)', () => {
  const keys = (n: number, prefix = 'k') => Array.from({ length: n }, (_, i) => `"${prefix}${i}":${i}`).join(',');
  // An object with more names than the byte comparison takes switches to a Set of names; the
  // names must not carry over into the next text's objects at that depth.
  assert.equal(ok(`{"a":{${keys(40)}}}`).lossless, true);
  assert.equal(ok(`{"a":{"\\u006b3":1,${keys(3, 'j')}}}`).lossless, true, 'k3 of the previous text is no duplicate here');
  assert.equal(ok(`{"a":{${keys(20)},"k7":1}}`).lossyReason, 'duplicate_key');
  assert.equal(ok(`{"a":{"k7":1}}`).lossless, true);
  // A scan that stopped midway (a syntax error three levels down), then whole ones.
  assert.equal(inspect('{"a":[{"b":{"c":').ok, false);
  const after = ok('{"a":[{"b":1}],"c":{"b":1}}');
  assert.equal(after.lossless, true);
  assert.equal(after.depth, 3);
  assert.equal(ok('[{"x":1},{"x":1}]').lossless, true, 'sibling objects each have their own names');
  // A scan that stopped after finding a lossy number and top-level members leaves neither behind.
  assert.equal(inspect('{"m":1,"big":1e400,"z":').ok, false);
  const fresh = ok('{"only":2}');
  assert.equal(fresh.lossless, true);
  assert.deepEqual([...fresh.members!.keys()], ['only']);
  // A text that grew the arrays past what is kept, then a shallow one: duplicates still found.
  assert.equal(ok('{"x":'.repeat(700) + '1' + '}'.repeat(700), { maxDepth: 1000 }).depth, 700);
  assert.equal(ok(nested(600), { maxDepth: 1000 }).depth, 600);
  assert.equal(ok('{"a":{"x":1,"x":2}}').lossyReason, 'duplicate_key');
  assert.equal(ok('{"a":{"x":1,"y":2}}').lossless, true);
  // Many scans in a row agree with a fresh understanding of each text.
  for (let i = 0; i < 200; i++) {
    const dup = i % 3 === 0;
    const members = [keys(i % 25), dup ? '"k0":0' : ''].filter(Boolean).join(',');
    const text = `{"o":{${members}},"n":${i}}`;
    const r = ok(text);
    assert.equal(r.lossless, !(dup && i % 25 > 0), text);
  }
});
