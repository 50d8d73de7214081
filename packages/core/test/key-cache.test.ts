/**
 * The derived-key cache (issue 8): keys live a short, stated time (ENVELOPE_KEY_CACHE_MS), are
 * found without keeping the key string, and are dropped when they expire, even with no further
 * call. SECURITY.md states the same.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ENVELOPE_KEY_CACHE_MS,
  deriveEnvelopeKey,
  envelopeKeyCacheSize,
  openPayload,
  sealPayload,
  setEnvelopeKeyCacheTtl,
} from '../src/index.js';

test('derived keys are cached for at most ENVELOPE_KEY_CACHE_MS (60 s), then forgotten even when idle', async () => {
  assert.equal(ENVELOPE_KEY_CACHE_MS, 60_000);
  try {
    setEnvelopeKeyCacheTtl(0);
    assert.equal(envelopeKeyCacheSize(), 0);
    // Without a cache every call derives afresh: distinct key objects, same key material.
    const a = await deriveEnvelopeKey('cache test key');
    const b = await deriveEnvelopeKey('cache test key');
    assert.notEqual(a, b);
    assert.equal(envelopeKeyCacheSize(), 0);
    const env = await sealPayload({ x: 1 }, a, 'log-cache-test-0001');
    assert.deepEqual(await openPayload(env, b, 'log-cache-test-0001'), { x: 1 });

    // With a lifetime, the same key string finds the same derived key (a keyring id is part of the entry).
    setEnvelopeKeyCacheTtl(ENVELOPE_KEY_CACHE_MS);
    const c = deriveEnvelopeKey('cache test key');
    assert.equal(deriveEnvelopeKey('cache test key'), c);
    assert.notEqual(deriveEnvelopeKey('cache test key', 'kr-1'), c);
    assert.equal(envelopeKeyCacheSize(), 2);

    // A short lifetime: the entries go by themselves (a timer), with no call to the cache.
    setEnvelopeKeyCacheTtl(30);
    await deriveEnvelopeKey('another key');
    for (let i = 0; i < 500 && envelopeKeyCacheSize() > 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(envelopeKeyCacheSize(), 0);
  } finally {
    setEnvelopeKeyCacheTtl(ENVELOPE_KEY_CACHE_MS);
  }
});

test('the cache is not keyed by the key string', async () => {
  // The lookup key is a salted hash: no entry of the (module-private) map can equal the string.
  // Observable consequence checked here: two different strings never share an entry.
  const x = deriveEnvelopeKey('k-one');
  const y = deriveEnvelopeKey('k-two');
  assert.notEqual(x, y);
  assert.notEqual((await x).kid, (await y).kid);
  assert.throws(() => setEnvelopeKeyCacheTtl(-1));
});
