/**
 * The payload envelope (envelope.ts): seal and open, refusal of a wrong key, log id or any altered
 * byte, the envelope's text on every path, its strict shape check, the keyring, and the Node fast
 * path against WebCrypto.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  EnvelopeKeyring,
  assertEnvelope,
  canonicalEnvelopeText,
  canonicalize,
  deriveEnvelopeKey,
  envelopeText,
  fingerprintKid,
  fromBase64,
  openBytes,
  openPayload,
  payloadHashHex,
  randomNonce,
  sealPayload,
  sealBytesWithHash,
  sealBytesToText,
  sealPayloadWithHash,
  sha256Hex,
  toBase64Url,
  utf8,
  type Envelope,
} from '../src/index.js';
import { isCode } from './helpers/core-error.js';

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
