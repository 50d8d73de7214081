import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';
import { base64Portable } from '../src/encoding.js';
import {
  CoreError,
  EnvelopeKeyring,
  agentContextHeaders,
  assertEnvelope,
  bytesEqual,
  canonicalEnvelopeText,
  canonicalize,
  deriveEnvelopeKey,
  envelopeText,
  detectCredentialHandover,
  fingerprintKid,
  fromBase64,
  fromHex,
  fromUtf8,
  generateApiKey,
  timeOrderedId,
  MAX_CANONICAL_DEPTH,
  MAX_JSON_DEPTH,
  hashApiKey,
  openBytes,
  openPayload,
  parseApiKey,
  payloadHashHex,
  randomNonce,
  sealPayload,
  sealBytesWithHash,
  sealBytesToText,
  sealPayloadWithHash,
  sha256,
  sha256Hex,
  toBase64,
  toBase64Url,
  toHex,
  utf8,
  utf8Transient,
  type Envelope,
} from '../src/index.js';

const isCode = (code: string) => (e: unknown) => e instanceof CoreError && e.code === code;

test('encodings round-trip and the native and portable base64 encoders agree', () => {
  for (let n = 0; n < 70; n++) {
    const bytes = new Uint8Array(n).map((_, i) => (i * 37 + n) & 0xff);
    assert.equal(toBase64(bytes), base64Portable(bytes));
    assert.equal(toBase64(bytes), Buffer.from(bytes).toString('base64'));
    assert.equal(toBase64Url(bytes), Buffer.from(bytes).toString('base64url'));
    assert.ok(bytesEqual(fromBase64(toBase64(bytes)), bytes));
    assert.ok(bytesEqual(fromBase64(toBase64Url(bytes)), bytes));
    assert.ok(bytesEqual(fromHex(toHex(bytes)), bytes));
  }
  // Every byte value's digit pair, and only a view's own bytes.
  const all = new Uint8Array(256).map((_, i) => i);
  assert.equal(toHex(all), Buffer.from(all).toString('hex'));
  assert.equal(toHex(all.subarray(250, 253)), 'fafbfc');
  // A view into a larger buffer encodes only its own bytes.
  const big = new Uint8Array([1, 2, 3, 4, 5, 6]);
  assert.equal(toBase64(big.subarray(2, 4)), Buffer.from([3, 4]).toString('base64'));
  assert.throws(() => fromHex('abc'), isCode('invalid_encoding'));
  assert.throws(() => fromHex('zz'), isCode('invalid_encoding'));
  // Either case, nothing but hex digits (a non-ASCII or a near-miss character anywhere is refused).
  assert.deepEqual([...fromHex('AbCd09fF')], [0xab, 0xcd, 0x09, 0xff]);
  assert.equal(fromHex('').length, 0);
  for (const bad of ['0g', 'g0', 'é1', '1é', '12 4', '@0', '`0', '/0', ':0', 'G0', '0\u0000'])
    assert.throws(() => fromHex(bad), isCode('invalid_encoding'), bad);
  for (let n = 0; n < 64; n++) {
    const hex = Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + n) & 255)).toString('hex');
    assert.ok(bytesEqual(fromHex(hex.toUpperCase()), Buffer.from(hex, 'hex')));
  }
  assert.throws(() => fromBase64('a'), isCode('invalid_encoding'));
  assert.throws(() => fromBase64('ab!d'), isCode('invalid_encoding'));
  assert.throws(() => fromUtf8(new Uint8Array([0xff, 0xfe])), isCode('invalid_encoding'));
  assert.equal(fromUtf8(utf8('héllo ✓')), 'héllo ✓');
  assert.equal(bytesEqual(new Uint8Array([1]), new Uint8Array([1, 2])), false);
});

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

test('SHA-256 is the same digest on both sides of the native threshold', () => {
  for (const size of [0, 1, 31, 32, 63, 64, 65, 300, 511, 512, 4096]) {
    const data = new Uint8Array(size).map((_, i) => (i * 7 + size) & 0xff);
    const expected = createHash('sha256').update(data).digest('hex');
    assert.equal(toHex(nobleSha256(data)), expected, `noble, ${size} bytes`);
    assert.equal(sha256Hex(data), expected, `sha256Hex, ${size} bytes`);
    assert.equal(toHex(sha256(data)), expected, `sha256, ${size} bytes`);
  }
  assert.equal(sha256Hex('key_agent_x'), createHash('sha256').update('key_agent_x').digest('hex'));
});

test('text is hashed and encoded as the same UTF-8 bytes on every path (lone surrogates included)', () => {
  const texts = ['', 'key_agent_x', 'héllo wörld', '\u{1F600}', '\ud800', 'a\udc00b', 'x'.repeat(4095), 'é'.repeat(3000), 'y'.repeat(5000)];
  for (const text of texts) {
    const bytes = utf8(text);
    const label = `${text.length} units`;
    // Node's native string digest and the bytes TextEncoder gives.
    assert.equal(sha256Hex(text), toHex(nobleSha256(bytes)), label);
    assert.equal(toHex(sha256(text)), toHex(nobleSha256(bytes)), label);
    const transient = utf8Transient(text);
    assert.deepEqual([...transient], [...bytes], label);
    // A plain Uint8Array (not a Buffer view with Buffer's slice), so slice() copies.
    assert.equal(Object.getPrototypeOf(transient), Uint8Array.prototype, label);
    if (transient.length > 0) {
      const copy = transient.slice(0, 1);
      copy[0] = copy[0]! ^ 0xff;
      assert.notEqual(transient[0], copy[0], label);
    }
  }
});

test('envelope: seals, opens, and refuses a wrong key, a wrong log id, or any altered byte', async () => {
  const key = await deriveEnvelopeKey('correct horse battery staple');
  assert.equal(key.kid, fingerprintKid('correct horse battery staple'));
  assert.match(key.kid, /^sha256:[0-9a-f]{16}$/);
  const payload = { prompt: 'hello', n: 1, nonce: randomNonce() };
  const env = await sealPayload(payload, key, 'log_1');
  assert.deepEqual(Object.keys(env), ['v', 'alg', 'kid', 'iv', 'ct', 'tag']);
  assert.equal(fromBase64(env.iv).length, 12);
  assert.equal(fromBase64(env.tag).length, 16);
  assert.deepEqual(await openPayload(env, key, 'log_1'), payload);
  await assert.rejects(openPayload(env, await deriveEnvelopeKey('wrong'), 'log_1'), isCode('decryption_failed'));
  await assert.rejects(openPayload(env, key, 'log_2'), isCode('decryption_failed'));
  const ct = fromBase64(env.ct);
  ct[0] = ct[0]! ^ 1;
  await assert.rejects(openPayload({ ...env, ct: toBase64Url(ct) }, key, 'log_1'), isCode('decryption_failed'));
  // Same plaintext, fresh IV: ciphertexts differ.
  assert.notEqual((await sealPayload(payload, key, 'log_1')).ct, env.ct);
  await assert.rejects(deriveEnvelopeKey(''), isCode('invalid_key'));
});

test('sealPayloadWithHash: the hash is payloadHashHex and the envelope opens, below and above the asynchronous-hash size', async () => {
  const key = await deriveEnvelopeKey('k');
  for (const payload of [{ small: 'x' }, { large: 'y'.repeat(200_000), nonce: randomNonce() }]) {
    const { envelope, payloadHash } = await sealPayloadWithHash(payload, key, 'log_h');
    assert.equal(payloadHash, payloadHashHex(payload));
    assert.deepEqual(await openPayload(envelope, key, 'log_h'), payload);
  }
});

test('envelope text: written by concatenation for envelopes made here, identical to JSON.stringify and canonicalize on every path', async () => {
  // A kid that needs escaping (keyring ids are the operator's text), the synchronous cipher, the
  // WebCrypto path (over 256 KiB) and the asynchronous hash (sealBytesWithHash over 64 KiB).
  const keys = [await deriveEnvelopeKey('k'), await deriveEnvelopeKey('k2', 'ring "one" \\ \u00e9\u2028')];
  for (const key of keys) {
    for (const size of [0, 5, 70_000, 300_000]) {
      const made = [
        await sealPayload({ m: 'x'.repeat(size) }, key, 'log_t'),
        (await sealBytesWithHash(utf8('y'.repeat(size)), key, 'log_t')).envelope,
      ];
      for (const env of made) {
        assert.equal(envelopeText(env), JSON.stringify(env));
        assert.equal(canonicalEnvelopeText(env), canonicalize(env));
        assertEnvelope(JSON.parse(envelopeText(env)));
      }
      // The text straight from the seal (no envelope object on the synchronous path): the same
      // text an envelope of these bytes gives, and it opens to them.
      const bytes = utf8('z'.repeat(size));
      const { text, payloadHash } = await sealBytesToText(bytes, key, 'log_t');
      const parsed = JSON.parse(text) as Envelope;
      assertEnvelope(parsed);
      assert.equal(text, JSON.stringify(parsed));
      assert.deepEqual(Object.keys(parsed), ['v', 'alg', 'kid', 'iv', 'ct', 'tag']);
      assert.equal(parsed.kid, key.kid);
      assert.equal(payloadHash, sha256Hex(bytes));
      assert.deepEqual(await openBytes(parsed, key, 'log_t'), bytes);
    }
  }
  // An envelope not made here (a copy, or one a client sent) is serialized the general way: a
  // field that would need escaping stays escaped, never spliced in as it is.
  const env = await sealPayload({ a: 1 }, keys[0]!, 'log_t');
  const foreign = { ...env, ct: 'a"b' };
  assert.equal(envelopeText(foreign), JSON.stringify(foreign));
  assert.equal(canonicalEnvelopeText(foreign), canonicalize(foreign));
  assert.deepEqual(JSON.parse(envelopeText(foreign)), foreign);
});

test('envelope shape is checked strictly', () => {
  const good = { v: 1, alg: 'A256GCM', kid: 'k1', iv: toBase64Url(new Uint8Array(12)), ct: '', tag: toBase64Url(new Uint8Array(16)) };
  assertEnvelope(good);
  const bad: unknown[] = [
    null,
    [],
    { ...good, v: 2 },
    { ...good, alg: 'A128GCM' },
    { ...good, kid: '' },
    { ...good, iv: toBase64Url(new Uint8Array(11)) },
    { ...good, tag: toBase64Url(new Uint8Array(8)) },
    { ...good, ct: 'a+b/' },
    { ...good, extra: 1 },
  ];
  for (const b of bad) assert.throws(() => assertEnvelope(b), isCode('invalid_envelope'), JSON.stringify(b));
});

test('keyring: the active key seals, every key opens, bare-key envelopes open by fingerprint', async () => {
  const old = new EnvelopeKeyring({ k1: 'first secret' }, 'k1');
  const env1 = await sealPayload({ a: 1 }, await old.activeKey(), 'log_a');
  assert.equal(env1.kid, 'k1');
  const ring = new EnvelopeKeyring({ k1: 'first secret', k2: 'second secret' }, 'k2');
  const env2 = await sealPayload({ a: 2 }, await ring.activeKey(), 'log_b');
  assert.equal(env2.kid, 'k2');
  assert.deepEqual(await openPayload(env1, await ring.keyFor(env1), 'log_a'), { a: 1 });
  assert.deepEqual(await openPayload(env2, await ring.keyFor(env2), 'log_b'), { a: 2 });
  const proxied = await sealPayload({ a: 3 }, await deriveEnvelopeKey('second secret'), 'log_c');
  assert.deepEqual(await openPayload(proxied, await ring.keyFor(proxied), 'log_c'), { a: 3 });
  await assert.rejects(ring.keyFor({ kid: 'k9' }), isCode('unknown_key_id'));
  assert.throws(() => new EnvelopeKeyring({ k1: 'x' }, 'k2'), isCode('unknown_key_id'));
});

test('API keys: class prefix, checksum, prefix shown, hash stored', () => {
  for (const c of ['human', 'agent', 'service', 'live', 'master'] as const) {
    const key = generateApiKey(c);
    assert.match(key, new RegExp(`^key_${c}_[0-9A-Za-z]{38}$`));
    const parsed = parseApiKey(key);
    assert.equal(parsed.credentialClass, c);
    assert.equal(parsed.apiKeyPrefix, key.slice(0, `key_${c}_`.length + 8));
    assert.equal(hashApiKey(key), sha256Hex(key));
  }
  const key = generateApiKey('agent');
  const flipped = key.slice(0, 12) + (key[12] === 'a' ? 'b' : 'a') + key.slice(13);
  assert.throws(() => parseApiKey(flipped), isCode('invalid_key'));
  assert.throws(() => parseApiKey(key.slice(0, -1)), isCode('invalid_key'));
  assert.throws(() => parseApiKey(key.replace('key_agent_', 'key_human_')), isCode('invalid_key'));
  assert.throws(() => parseApiKey('key_robot_' + key.slice(10)), isCode('invalid_key'));
  assert.throws(() => parseApiKey('Bearer ' + key), isCode('invalid_key'));
});

test('credential handover: a human key with agent context, in any header spelling', () => {
  assert.deepEqual(agentContextHeaders(['X-Agent-Rationale', 'x_agent_tool', 'X-Service-Agent-ID', 'content-type']), [
    'x-agent-rationale',
    'x-agent-tool',
  ]);
  assert.equal(detectCredentialHandover('human', ['x-agent-rationale']).detected, true);
  // Every spelling the normalised rule (lower case, underscores as dashes, prefix x-agent-) takes.
  const names = [
    'X_Agent-Mixed',
    'x-AGENT_under',
    'X-AGENT-',
    'xagent-no',
    'x-agentno',
    'x--agent-no',
    'x-agen-t-no',
    'X-Agent',
    'y-agent-no',
  ];
  const reference = names
    .map((n) => n.toLowerCase().replace(/_/g, '-'))
    .filter((n) => n.startsWith('x-agent-'))
    .sort();
  assert.deepEqual(agentContextHeaders(names), reference);
  assert.deepEqual(reference, ['x-agent-', 'x-agent-mixed', 'x-agent-under']);
  // X-Service-Agent-ID alone is the actor label a human's CLI may set: not a handover.
  assert.equal(detectCredentialHandover('human', ['X-SERVICE-AGENT-ID']).detected, false);
  assert.equal(detectCredentialHandover('human', ['x_service_agent_id', 'x-service-run-id']).detected, false);
  assert.deepEqual(detectCredentialHandover('human', ['X-Service-Agent-ID', 'X-Agent-Rationale']), {
    detected: true,
    agentHeaders: ['x-agent-rationale'],
  });
  assert.equal(detectCredentialHandover('human', ['x-service-action', 'x-service-run-id']).detected, false);
  assert.equal(detectCredentialHandover('agent', ['x-agent-rationale']).detected, false);
  assert.equal(detectCredentialHandover('service', ['x-agent-rationale']).detected, false);
});

test('envelope: the Node fast path and WebCrypto produce the same format both ways', async () => {
  const secret = 'interop key';
  const key = await deriveEnvelopeKey(secret);
  const raw = await crypto.subtle.importKey('raw', Buffer.from(sha256Hex(secret), 'hex'), { name: 'AES-GCM' }, false, [
    'encrypt',
    'decrypt',
  ]);
  // Sealed by core (synchronous path for a small payload), opened by plain WebCrypto.
  const small = await sealPayload({ m: 'small' }, key, 'log_x');
  const joined = Buffer.concat([Buffer.from(small.ct, 'base64url'), Buffer.from(small.tag, 'base64url')]);
  const plain = await crypto.subtle.decrypt(
    { name: 'AES-GCM', iv: Buffer.from(small.iv, 'base64url'), additionalData: Buffer.from('log_x'), tagLength: 128 },
    raw,
    joined,
  );
  assert.equal(Buffer.from(plain).toString(), '{"m":"small"}');
  // Sealed by plain WebCrypto, opened by core.
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = Buffer.from(
    await crypto.subtle.encrypt(
      { name: 'AES-GCM', iv, additionalData: Buffer.from('log_y'), tagLength: 128 },
      raw,
      Buffer.from('{"m":"web"}'),
    ),
  );
  const env = {
    v: 1 as const,
    alg: 'A256GCM' as const,
    kid: key.kid,
    iv: Buffer.from(iv).toString('base64url'),
    ct: sealed.subarray(0, -16).toString('base64url'),
    tag: sealed.subarray(-16).toString('base64url'),
  };
  assert.deepEqual(await openPayload(env, key, 'log_y'), { m: 'web' });
  // A payload above the synchronous limit goes through WebCrypto and round-trips too.
  const big = { blob: 'x'.repeat(300 * 1024) };
  assert.deepEqual(await openPayload(await sealPayload(big, key, 'log_z'), key, 'log_z'), big);
  await assert.rejects(openPayload(await sealPayload(big, key, 'log_z'), key, 'log_other'), isCode('decryption_failed'));
});

test('sha256: native and portable digests agree at every size around the switch-over', async () => {
  const { sha256: noble } = await import('@noble/hashes/sha2.js');
  const { sha256 } = await import('../src/hash.js');
  for (const n of [0, 1, 55, 64, 511, 512, 513, 4096, 100_000]) {
    const data = new Uint8Array(n).map((_, i) => (i * 7) & 0xff);
    assert.equal(toHex(sha256(data)), toHex(noble(data)), `size ${n}`);
    assert.equal(toHex(sha256(data)), Buffer.from(await crypto.subtle.digest('SHA-256', data)).toString('hex'));
  }
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

test('timeOrderedId: base62 of the asked length, sorting by time in byte order, random after the time', () => {
  const t0 = Date.UTC(2026, 10, 26, 12, 0, 0);
  const ids: string[] = [];
  for (let i = 0; i < 2000; i++) ids.push(timeOrderedId(24, t0 + i * 37));
  for (const id of ids) assert.match(id, /^[0-9a-z]{9}[0-9A-Za-z]{15}$/);
  // Later ids sort after earlier ones, also as JavaScript and SQLite's BINARY collation compare.
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1]!.slice(0, 9) < ids[i]!.slice(0, 9));
  assert.deepEqual([...ids].reverse().sort(), ids);
  // Ids of the same millisecond differ in their random part.
  const same = new Set(Array.from({ length: 1000 }, () => timeOrderedId(24, t0)));
  assert.equal(same.size, 1000);
  assert.equal(new Set([...same].map((id) => id.slice(0, 9))).size, 1);
  // The prefix is the time: year 5000 still fits and still sorts after today.
  assert.ok(timeOrderedId(24, Date.UTC(5000, 0, 1)) > timeOrderedId(24, t0));
  assert.equal(parseInt(timeOrderedId(24, t0).slice(0, 9), 36), t0);
  assert.throws(() => timeOrderedId(20), RangeError);
  assert.match(timeOrderedId(21, -5), /^0{9}[0-9A-Za-z]{12}$/);
});
