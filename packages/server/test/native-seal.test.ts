/**
 * The native seal (packages/server/native/seal.c, src/native-seal.ts) makes the records core
 * makes with Node's cipher: what it seals opens with core's own `openBytes` under the same key
 * and log id, its hash is core's `sha256Hex` of the same bytes, and its envelope text has core's
 * shape. CI builds it and requires it (COUNTERSIGN_REQUIRE_NATIVE_SEAL=1), so these never skip
 * there; a machine without a compiler skips them and seals with Node's cipher.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import {
  deriveEnvelopeKey,
  fromBase64,
  installSealAccelerator,
  openBytes,
  sealBytesToText,
  sealBytesWithHash,
  sha256Hex,
  type Envelope,
} from '@countersign/core';
import { loadConfig } from '../src/config.js';
import { nativeSeal, useNativeSeal } from '../src/native-seal.js';

const addon = nativeSeal();
const required = process.env.COUNTERSIGN_REQUIRE_NATIVE_SEAL === '1';
const skip = addon === null && !required ? 'the native seal is not built here (no compiler)' : false;

test('the native seal is built where CI requires it', { skip: !required && 'COUNTERSIGN_REQUIRE_NATIVE_SEAL is not set' }, () => {
  assert.ok(addon, 'packages/server/native/build/Release/countersign_seal.node did not load');
});

test("what the native seal seals opens with core, and its hash is core's, at every size up to 64 KiB", { skip }, async () => {
  const key = await deriveEnvelopeKey('native seal test key');
  assert.ok(useNativeSeal(true));
  try {
    for (const size of [0, 1, 2, 3, 4, 15, 16, 17, 31, 32, 33, 350, 1400, 4096, 8191, 8192, 8193, 65535]) {
      const bytes = crypto.randomBytes(size);
      const logId = `log_${size}`;
      const { text, payloadHash } = await sealBytesToText(bytes, key, logId);
      const envelope = JSON.parse(text) as Envelope;
      assert.deepEqual(Object.keys(envelope), ['v', 'alg', 'kid', 'iv', 'ct', 'tag']);
      assert.equal(envelope.kid, key.kid);
      assert.equal(fromBase64(envelope.iv).length, 12);
      assert.equal(fromBase64(envelope.tag).length, 16);
      assert.match(envelope.ct, /^[A-Za-z0-9_-]*$/);
      assert.equal(payloadHash, sha256Hex(bytes));
      // Opened by core (Node's decipher, not the addon): the same algorithm, key and AAD.
      assert.deepEqual(Buffer.from(await openBytes(envelope, key, logId)), bytes, `size ${size}`);
      await assert.rejects(openBytes(envelope, key, logId + 'x'), { code: 'decryption_failed' });
    }
  } finally {
    installSealAccelerator(undefined);
  }
});

test('the native seal draws a fresh IV per record, binds the UTF-8 log id, and keeps keys apart', { skip }, async () => {
  const a = await deriveEnvelopeKey('native key a');
  const b = await deriveEnvelopeKey('native key b');
  assert.ok(useNativeSeal(true));
  try {
    const bytes = new TextEncoder().encode('{"prompt":"hello"}');
    const ivs = new Set<string>();
    for (let i = 0; i < 200; i++) ivs.add((JSON.parse((await sealBytesToText(bytes, i % 2 ? a : b, 'log_x')).text) as Envelope).iv);
    assert.equal(ivs.size, 200);
    const logId = 'log_é🙂';
    const byA = (await sealBytesWithHash(bytes, a, logId)).envelope;
    const byB = (await sealBytesWithHash(bytes, b, logId)).envelope;
    assert.deepEqual(Buffer.from(await openBytes(byA, a, logId)), Buffer.from(bytes));
    assert.deepEqual(Buffer.from(await openBytes(byB, b, logId)), Buffer.from(bytes));
    await assert.rejects(openBytes(byA, b, logId), { code: 'decryption_failed' });
  } finally {
    installSealAccelerator(undefined);
  }
});

test("inputs the native seal does not take go to core's own path, and bad arguments throw", { skip }, async () => {
  const key = await deriveEnvelopeKey('native key large');
  assert.ok(addon);
  // 64 KiB and more: core hashes and seals those with WebCrypto, off the event loop.
  const context = addon.context(new Uint8Array(32));
  assert.equal(addon.seal(context, 'log_big', new Uint8Array(64 * 1024 + 1)), undefined);
  assert.equal(addon.seal(context, 'l'.repeat(600), new Uint8Array(1)), undefined);
  assert.throws(() => addon.context(new Uint8Array(31)), /32 bytes/);
  assert.throws(() => addon.seal({}, 'log', new Uint8Array(1)), /context/);
  assert.throws(() => addon.seal(context, 'log', 'text' as unknown as Uint8Array), /Uint8Array/);
  assert.ok(useNativeSeal(true));
  try {
    const big = crypto.randomBytes(70_000);
    const { text, payloadHash } = await sealBytesToText(big, key, 'log_big');
    assert.equal(payloadHash, sha256Hex(big));
    assert.deepEqual(Buffer.from(await openBytes(JSON.parse(text) as Envelope, key, 'log_big')), big);
  } finally {
    installSealAccelerator(undefined);
  }
});

test("COUNTERSIGN_NATIVE_SEAL=off leaves sealing to Node's cipher", () => {
  const config = loadConfig({}, { COUNTERSIGN_NATIVE_SEAL: 'off' });
  assert.equal(config.nativeSeal, false);
  assert.equal(useNativeSeal(config.nativeSeal), false);
  assert.equal(loadConfig({}, {}).nativeSeal, true);
  assert.throws(() => loadConfig({}, { COUNTERSIGN_NATIVE_SEAL: 'yes' }), /must be on or off/);
});
