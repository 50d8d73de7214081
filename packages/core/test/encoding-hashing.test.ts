/**
 * Encodings and hashing: base64, hex and UTF-8 round trips (native and portable encoders), and
 * SHA-256 agreeing across the native threshold and between the native and portable digests.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';
import { base64Portable } from '../src/encoding.js';
import {
  bytesEqual,
  fromBase64,
  fromHex,
  fromUtf8,
  sha256,
  sha256Hex,
  toBase64,
  toBase64Url,
  toHex,
  utf8,
  utf8Transient,
} from '../src/index.js';
import { isCode } from './helpers/core-error.js';

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

test('sha256: native and portable digests agree at every size around the switch-over', async () => {
  const { sha256: noble } = await import('@noble/hashes/sha2.js');
  const { sha256 } = await import('../src/hash.js');
  for (const n of [0, 1, 55, 64, 511, 512, 513, 4096, 100_000]) {
    const data = new Uint8Array(n).map((_, i) => (i * 7) & 0xff);
    assert.equal(toHex(sha256(data)), toHex(noble(data)), `size ${n}`);
    assert.equal(toHex(sha256(data)), Buffer.from(await crypto.subtle.digest('SHA-256', data)).toString('hex'));
  }
});
