/**
 * RFC 3161 vectors (../shared/vectors/rfc3161): every file reaches the verdict of
 * expected.json. Time is pinned: "now" is the collection date 2026-11-22T00:00:00Z, and the
 * pass-at-genTime cases are checked both at their genTime (pass) and at "now" (fail).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { digest, type HashName } from '../src/proofs/crypto.js';
import { parseTimestampToken, verifyTimestampToken, type TimestampVerification } from '../src/proofs/timestamp.js';
import { loadCertificates } from '../src/proofs/x509.js';
import { vectorsDir } from './helpers/vectors.js';

const DIR = vectorsDir('rfc3161');
const COLLECTED = new Date('2026-11-22T00:00:00Z');
const HELLO = new TextEncoder().encode('hello');

interface Case {
  file: string;
  expected: 'pass' | 'fail' | 'pass-at-genTime' | 'pass-unless-cn-pinned' | 'fail-chain';
  chain: string;
  verifyAt: string | null;
  policyOid: string;
  hashAlgorithm: string;
  hashedMessage: string;
  serialNumber: string;
  nonce: string;
  embeddedCertSubjects: string[];
}
const cases = (JSON.parse(readFileSync(join(DIR, 'expected.json'), 'utf8')) as { cases: Case[] }).cases;

/** Splits a chain file the way the README's openssl commands do: last cert = anchor, the rest untrusted. */
function chainOf(file: string): { anchors: string[]; intermediates: string[] } {
  const pem = readFileSync(join(DIR, file), 'utf8');
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return { anchors: [blocks[blocks.length - 1]!], intermediates: blocks.slice(0, -1) };
}

/** The digest each token must be compared with: H(preimage), or the known SHA-1 imprint. */
function expectedDigest(c: Case): Uint8Array {
  if (c.file.startsWith('pkijs/')) return Buffer.from(c.hashedMessage, 'hex');
  const preimage = c.file.startsWith('sigstore.mock/')
    ? readFileSync(join(DIR, 'sigstore.mock/payload'))
    : c.file.startsWith('sigstore-prod/')
      ? readFileSync(join(DIR, 'sigstore-prod/signature.bin'))
      : HELLO;
  return digest(c.hashAlgorithm as HashName, new Uint8Array(preimage));
}

function failing(r: TimestampVerification): string[] {
  return r.steps.filter((s) => s.status === 'fail').map((s) => `${s.id}: ${s.detail}`);
}

async function run(c: Case, at: Date, extra: Record<string, unknown> = {}): Promise<TimestampVerification> {
  const token = new Uint8Array(readFileSync(join(DIR, c.file)));
  const { anchors, intermediates } = chainOf(c.chain);
  return verifyTimestampToken(token, {
    trustAnchors: anchors,
    intermediates,
    expectedDigest: expectedDigest(c),
    at,
    // Policy: SHA-1 is refused by default; the 2014 GlobalSign token is verified with the opt-in.
    allowSha1: c.hashAlgorithm === 'sha1',
    ...extra,
  });
}

for (const c of cases) {
  test(`rfc3161 ${c.file}: ${c.expected}`, async () => {
    const at = c.verifyAt ? new Date(c.verifyAt) : COLLECTED;
    const r = await run(c, at);
    if (c.expected === 'fail') {
      assert.equal(r.ok, false);
      assert.deepEqual(
        r.steps.filter((s) => s.status === 'fail').map((s) => s.id),
        ['timestamp_signature'],
      );
    } else if (c.expected === 'fail-chain') {
      assert.equal(r.ok, false);
      assert.deepEqual(
        r.steps.filter((s) => s.status === 'fail').map((s) => s.id),
        ['timestamp_chain'],
      );
    } else {
      assert.equal(r.ok, true, failing(r).join('\n'));
      assert.equal(r.steps.length, 5);
      assert.ok(r.steps.every((s) => s.status === 'pass'));
    }
    if (c.expected === 'pass-at-genTime') {
      const now = await run(c, COLLECTED);
      assert.equal(now.ok, false);
      assert.deepEqual(
        now.steps.filter((s) => s.status === 'fail').map((s) => s.id),
        ['timestamp_chain'],
      );
      assert.match(now.steps.find((s) => s.id === 'timestamp_chain')!.detail, /expired/);
      // Default instant is genTime, which is what a long-lived receipt needs.
      const dflt = await run(c, undefined as unknown as Date, { at: undefined });
      assert.equal(dflt.ok, true, failing(dflt).join('\n'));
    }
    // TSTInfo facts are read correctly.
    const info = parseTimestampToken(new Uint8Array(readFileSync(join(DIR, c.file)))).info;
    assert.equal(info.policy, c.policyOid);
    assert.equal(info.hashAlgorithm, c.hashAlgorithm);
    assert.equal(info.hashedMessageHex, c.hashedMessage);
    const serial = c.serialNumber.startsWith('0x-') ? -BigInt('0x' + c.serialNumber.slice(3)) : BigInt(c.serialNumber);
    assert.equal(info.serialNumber, serial.toString());
    if (c.nonce !== 'unspecified') assert.equal(BigInt('0x' + info.nonceHex), BigInt(c.nonce));
    else assert.equal(info.nonceHex, undefined);
  });
}

test('imprint: "hello\\n" does not match; wrong algorithm does not match', async () => {
  const c = cases.find((x) => x.file === 'sigstage/response-sha256.tsr')!;
  const r = await run(c, COLLECTED, { expectedDigest: digest('sha256', new TextEncoder().encode('hello\n')) });
  assert.deepEqual(
    r.steps.filter((s) => s.status === 'fail').map((s) => s.id),
    ['timestamp_imprint'],
  );
  const r2 = await run(c, COLLECTED, { expectedHashAlgorithm: 'sha512' });
  assert.deepEqual(
    r2.steps.filter((s) => s.status === 'fail').map((s) => s.id),
    ['timestamp_imprint'],
  );
});

test('no-embedded-cert: with only the root supplied the signer is not found', async () => {
  for (const file of ['sigstage/response-no-embedded-cert.tsr', 'sigstore-prod/response.tsr']) {
    const c = cases.find((x) => x.file === file)!;
    const r = await run(c, COLLECTED, { intermediates: [] });
    assert.equal(r.ok, false);
    assert.match(r.steps.find((s) => s.id === 'timestamp_signature')!.detail, /signer certificate not found/);
  }
});

test('sigstore-prod token fails against the sigstage chain', async () => {
  const c = cases.find((x) => x.file === 'sigstore-prod/response.tsr')!;
  const r = await run({ ...c, chain: 'sigstage/ts_chain.pem' }, COLLECTED);
  assert.equal(r.ok, false);
});

test('sigstage token fails against another root (unable to get issuer)', async () => {
  const c = cases.find((x) => x.file === 'sigstage/response-sha256.tsr')!;
  const r = await run(c, COLLECTED, { trustAnchors: chainOf('test_tsa/ts_chain.pem').anchors });
  assert.deepEqual(
    r.steps.filter((s) => s.status === 'fail').map((s) => s.id),
    ['timestamp_chain'],
  );
});

test('injected certs: signer is chosen by sid; CN pinning to the spoof fails, to the real TSA passes', async () => {
  const c = cases.find((x) => x.file === 'test_tsa/response-injected-certs.tsr')!;
  const spoof = await run(c, COLLECTED, { tsaCommonName: 'Spoofed TSA' });
  assert.equal(spoof.ok, false);
  assert.equal(spoof.steps.find((s) => s.id === 'timestamp_signature')!.status, 'fail');
  const real = await run(c, COLLECTED, { tsaCommonName: 'Test TSA Timestamping' });
  assert.equal(real.ok, true, failing(real).join('\n'));
  assert.equal(real.signerSubject, 'O=local, CN=Test TSA Timestamping');
});

test('sigstore.mock fails at 2025-07-21; SHA-1 token is refused without the opt-in', async () => {
  const mock = cases.find((x) => x.file === 'sigstore.mock/response-expired.tsr')!;
  assert.equal((await run(mock, new Date('2025-07-21T00:00:00Z'))).ok, false);
  const gs = cases.find((x) => x.file === 'pkijs/TestTSPresp.tsr')!;
  const r = await run(gs, new Date(gs.verifyAt!), { allowSha1: false });
  assert.equal(r.ok, false);
  assert.match(r.steps.find((s) => s.id === 'timestamp_signature')!.detail, /SHA-1/);
});

test('garbage and non-granted input produce a failing token step, never a throw', async () => {
  const anchors = chainOf('sigstage/ts_chain.pem').anchors;
  for (const bad of [new Uint8Array(0), new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x02]), new Uint8Array([1, 2, 3]), 'not base64!']) {
    const r = await verifyTimestampToken(bad, { trustAnchors: anchors });
    assert.equal(r.ok, false);
    assert.equal(r.steps[0]!.id, 'timestamp_token');
    assert.equal(r.steps[0]!.status, 'fail');
  }
  const rejected = await verifyTimestampToken(new Uint8Array([0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x02]), { trustAnchors: anchors });
  assert.match(rejected.steps[0]!.detail, /PKIStatus 2/);
  const badAnchor = await verifyTimestampToken(new Uint8Array(readFileSync(join(DIR, 'sigstage/response-sha256.tsr'))), {
    trustAnchors: 'nope',
  });
  assert.equal(badAnchor.ok, false);
  assert.equal(loadCertificates(readFileSync(join(DIR, 'identrust/root.der'))).length, 1);
});
