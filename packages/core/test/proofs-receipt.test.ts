/**
 * verifyReceipt end to end, with a test-only RFC 3161 TSA (pkijs + WebCrypto: self-signed root,
 * TSA certificate with critical EKU timeStamping) and a test-only Rekor-shaped ledger (ECDSA
 * P-256 via noble). Every receipt and payload field is tampered in turn and the failing step
 * ids are asserted. One generated token is also verified by `openssl ts -verify` (interop).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { p256 } from '@noble/curves/nist.js';
import { canonicalize } from '../src/canonical.js';
import { fromHex, toBase64, toHex, utf8 } from '../src/encoding.js';
import { sha256, sha256Hex } from '../src/hash.js';
import { buildMerkleTree, hashLeaf, receiptLeafHash } from '../src/proofs/merkle.js';
import { checkpointKeyHint, formatCheckpoint, formatCheckpointBody, ledgerSetPayload } from '../src/proofs/checkpoint.js';
import { verifyReceipt, verifyReceiptOk, type ProofReceipt, type VerifyReceiptInput } from '../src/proofs/verify.js';

const engine = new pkijs.CryptoEngine({ name: 'webcrypto', crypto: globalThis.crypto });
const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const T = (s: string): Date => new Date(s);

interface Issued {
  cert: pkijs.Certificate;
  der: Uint8Array;
  pem: string;
  keys: CryptoKeyPair;
}

function pem(der: Uint8Array): string {
  return `-----BEGIN CERTIFICATE-----\n${toBase64(der).replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----\n`;
}

function ext(oid: string, critical: boolean, value: asn1js.AsnType): pkijs.Extension {
  return new pkijs.Extension({ extnID: oid, critical, extnValue: value.toBER(false) });
}

/** Issues a certificate; a CA gets basicConstraints cA + keyCertSign, a TSA the timeStamping EKU. */
async function issue(cn: string, serial: number, kind: 'ca' | 'tsa', issuer?: Issued, ekuCritical = true): Promise<Issued> {
  const keys = (await globalThis.crypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = new pkijs.Certificate();
  cert.version = 2;
  cert.serialNumber = new asn1js.Integer({ value: serial });
  cert.subject.typesAndValues.push(new pkijs.AttributeTypeAndValue({ type: '2.5.4.3', value: new asn1js.Utf8String({ value: cn }) }));
  cert.issuer = issuer ? issuer.cert.subject : cert.subject;
  cert.notBefore.value = T('2025-01-01T00:00:00Z');
  cert.notAfter.value = T('2027-01-01T00:00:00Z');
  await cert.subjectPublicKeyInfo.importKey(keys.publicKey, engine);
  const ku = new asn1js.BitString({ valueHex: new Uint8Array([kind === 'ca' ? 0x06 : 0x80]).buffer, unusedBits: kind === 'ca' ? 1 : 7 });
  cert.extensions =
    kind === 'ca'
      ? [ext('2.5.29.19', true, new pkijs.BasicConstraints({ cA: true, pathLenConstraint: 0 }).toSchema()), ext('2.5.29.15', true, ku)]
      : [
          ext('2.5.29.15', true, ku),
          ext('2.5.29.37', ekuCritical, new pkijs.ExtKeyUsage({ keyPurposes: ['1.3.6.1.5.5.7.3.8'] }).toSchema()),
        ];
  await cert.sign((issuer ?? { keys }).keys.privateKey, 'SHA-256', engine);
  const der = new Uint8Array(cert.toSchema(true).toBER(false));
  return { cert, der, pem: pem(der), keys };
}

/** A DER TimeStampResp over SHA-256 `digest`, signed by `tsa`, with ESSCertIDv2 and the cert embedded. */
async function timestamp(tsa: Issued, digest: Uint8Array, genTime: Date): Promise<Uint8Array> {
  const tst = new pkijs.TSTInfo({
    version: 1,
    policy: '1.3.6.1.4.1.99999.1',
    messageImprint: new pkijs.MessageImprint({
      hashAlgorithm: new pkijs.AlgorithmIdentifier({ algorithmId: '2.16.840.1.101.3.4.2.1' }),
      hashedMessage: new asn1js.OctetString({ valueHex: digest.slice().buffer }),
    }),
    serialNumber: new asn1js.Integer({ value: 4242 }),
    genTime,
    nonce: new asn1js.Integer({ value: 12345 }),
  });
  const tstDer = new Uint8Array(tst.toSchema().toBER(false));
  const essCertIdV2 = new asn1js.Sequence({
    value: [
      new asn1js.Sequence({
        value: [new asn1js.Sequence({ value: [new asn1js.OctetString({ valueHex: sha256(tsa.der).slice().buffer })] })],
      }),
    ],
  });
  const signedData = new pkijs.SignedData({
    version: 3,
    encapContentInfo: new pkijs.EncapsulatedContentInfo({
      eContentType: '1.2.840.113549.1.9.16.1.4',
      eContent: new asn1js.OctetString({ valueHex: tstDer.slice().buffer }),
    }),
    signerInfos: [
      new pkijs.SignerInfo({
        version: 1,
        sid: new pkijs.IssuerAndSerialNumber({ issuer: tsa.cert.issuer, serialNumber: tsa.cert.serialNumber }),
        signedAttrs: new pkijs.SignedAndUnsignedAttributes({
          type: 0,
          attributes: [
            new pkijs.Attribute({
              type: '1.2.840.113549.1.9.3',
              values: [new asn1js.ObjectIdentifier({ value: '1.2.840.113549.1.9.16.1.4' })],
            }),
            new pkijs.Attribute({
              type: '1.2.840.113549.1.9.4',
              values: [new asn1js.OctetString({ valueHex: sha256(tstDer).slice().buffer })],
            }),
            new pkijs.Attribute({ type: '1.2.840.113549.1.9.16.2.47', values: [essCertIdV2] }),
          ],
        }),
      }),
    ],
    certificates: [tsa.cert],
  });
  await signedData.sign(tsa.keys.privateKey, 0, 'SHA-256', undefined, engine);
  const token = new pkijs.ContentInfo({ contentType: '1.2.840.113549.1.7.2', content: signedData.toSchema(true) });
  const resp = new pkijs.TimeStampResp({ status: new pkijs.PKIStatusInfo({ status: 0 }), timeStampToken: token });
  return new Uint8Array(resp.toSchema().toBER(false));
}

const SPKI_P256_PREFIX = fromHex('3059301306072a8648ce3d020106082a8648ce3d030107034200');
function p256Key(): { sk: Uint8Array; spki: Uint8Array; pem: string } {
  const sk = p256.utils.randomSecretKey();
  const spki = new Uint8Array([...SPKI_P256_PREFIX, ...p256.getPublicKey(sk, false)]);
  return { sk, spki, pem: `-----BEGIN PUBLIC KEY-----\n${toBase64(spki)}\n-----END PUBLIC KEY-----\n` };
}
const sign = (sk: Uint8Array, msg: Uint8Array): Uint8Array => p256.sign(msg, sk, { format: 'der', lowS: false });

/** A Rekor v1 API response for a hashedrekord of `merkleRoot`, at index 4 of a 7-entry log. */
function ledgerEntry(
  logKey: ReturnType<typeof p256Key>,
  signer: ReturnType<typeof p256Key>,
  merkleRoot: string,
): { response: Record<string, unknown>; uuid: string } {
  const body = toBase64(
    utf8(
      canonicalize({
        apiVersion: '0.0.1',
        kind: 'hashedrekord',
        spec: {
          data: { hash: { algorithm: 'sha256', value: merkleRoot } },
          signature: {
            content: toBase64(p256.sign(fromHex(merkleRoot), signer.sk, { prehash: false, format: 'der' })),
            publicKey: { content: toBase64(utf8(signer.pem)) },
          },
        },
      }),
    ),
  );
  const leaves = Array.from({ length: 7 }, (_, i) => hashLeaf(utf8(`other entry ${i}`)));
  leaves[4] = hashLeaf(utf8(atob(body)));
  const tree = buildMerkleTree(leaves);
  const logID = sha256Hex(logKey.spki);
  const fields = { body, integratedTime: Date.parse('2026-01-01T00:00:07Z') / 1000, logID, logIndex: 4 };
  const cpBody = formatCheckpointBody('countersign.test - 42', 7, tree.root);
  const checkpoint = formatCheckpoint(cpBody, [
    { name: 'countersign.test', keyHint: checkpointKeyHint(logID), signature: sign(logKey.sk, utf8(cpBody)) },
  ]);
  const uuid = '000000000000002a' + toHex(leaves[4]!);
  const verification = {
    inclusionProof: { logIndex: 4, rootHash: tree.rootHex, treeSize: 7, hashes: tree.pathHex(4), checkpoint },
    signedEntryTimestamp: toBase64(sign(logKey.sk, utf8(ledgerSetPayload(fields)))),
  };
  return { response: { [uuid]: { ...fields, verification } }, uuid };
}

// ---- fixture: one payload in a 5-leaf batch, timestamped and logged ----
const root = await issue('Countersign Test Root', 1, 'ca');
const tsa = await issue('Countersign Test TSA', 2, 'tsa', root);
const otherRoot = await issue('Other Root', 1, 'ca');
const weakTsa = await issue('Weak TSA', 3, 'tsa', root, false);
const logKey = p256Key();
const entrySigner = p256Key();

const payload = {
  request: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  response: { status: 200 },
  nonce: '0123456789abcdef0123456789abcdef',
};
const payloadHash = sha256Hex(utf8(canonicalize(payload)));
const batch = [sha256('a'), sha256('b'), fromHex(payloadHash), sha256('d'), sha256('e')].map(hashLeaf);
assert.deepEqual(batch[2], receiptLeafHash(payloadHash));
const tree = buildMerkleTree(batch);
const genTime = T('2026-01-01T00:00:06Z');
const tsr = await timestamp(tsa, tree.root, genTime);
const { response: entry, uuid } = ledgerEntry(logKey, entrySigner, tree.rootHex);

const receipt: ProofReceipt = {
  logId: 'log_1',
  payloadHash,
  merklePathJson: tree.pathHex(2),
  merkleRoot: tree.rootHex,
  leafIndex: 2,
  treeSize: 5,
  batchId: 'batch_1',
  windowStart: '2026-01-01T00:00:00.000Z',
  windowEnd: '2026-01-01T00:00:05.000Z',
  tsaResponse: toBase64(tsr),
  rekorLogIndex: 4,
  ledgerUrl: 'http://ledger.test',
  ledgerEntryUuid: uuid,
};
const trust = { tsaRoots: root.pem, ledgerPublicKey: logKey.pem, ledgerEntrySignerKey: entrySigner.pem };
const base: VerifyReceiptInput = { payload, receipt, trust, ledgerEntry: entry, now: T('2026-01-01T00:10:00Z') };

async function failing(over: Partial<VerifyReceiptInput> & { r?: Record<string, unknown> }): Promise<string[]> {
  const input = { ...base, ...over, receipt: { ...receipt, ...over.r } as ProofReceipt };
  const rep = await verifyReceipt(input);
  assert.equal(
    rep.ok,
    rep.steps.every((s) => s.status !== 'fail'),
  );
  return rep.steps.filter((s) => s.status === 'fail').map((s) => s.id);
}

test('a genuine receipt verifies: every step passes, in order', async () => {
  const rep = await verifyReceipt(base);
  assert.equal(rep.ok, true, JSON.stringify(rep.steps, null, 1));
  assert.deepEqual(
    rep.steps.map((s) => `${s.id}:${s.status}`),
    [
      'receipt_format',
      'payload_hash',
      'merkle_path',
      'timestamp_token',
      'timestamp_signature',
      'timestamp_chain',
      'timestamp_key_usage',
      'timestamp_imprint',
      'timestamp_time',
      'ledger_entry',
      'ledger_set',
      'ledger_inclusion',
      'ledger_checkpoint',
      'ledger_body_signature',
      'ledger_root_match',
    ].map((id) => `${id}:pass`),
  );
  assert.equal(rep.timestamp!.genTime.toISOString(), genTime.toISOString());
  assert.equal(rep.ledger!.dataHash, tree.rootHex);
  assert.equal(await verifyReceiptOk(base), true);
  // Payload as JSON text (any key order) and as bytes re-canonicalizes to the same hash.
  const text = JSON.stringify({ nonce: payload.nonce, response: payload.response, request: payload.request }, null, 2);
  assert.deepEqual(await failing({ payload: text }), []);
  assert.deepEqual(await failing({ payload: utf8(text) }), []);
  assert.deepEqual(await failing({ r: { merklePathJson: JSON.stringify(tree.pathHex(2)) } }), []);
  assert.deepEqual(await failing({ r: { ledgerEntryUuid: uuid.slice(16) } }), []);
  assert.deepEqual(await failing({ trust: { tsaRoots: [root.der], ledgerPublicKey: logKey.spki } }), []);
});

test('tampering each payload and receipt field fails the right step', async () => {
  const flip = (hex: string): string => (hex[0] === '0' ? '1' : '0') + hex.slice(1);
  assert.deepEqual(await failing({ payload: { ...payload, extra: 1 } }), ['payload_hash']);
  assert.deepEqual(await failing({ payload: { ...payload, nonce: flip(payload.nonce) } }), ['payload_hash']);
  assert.deepEqual(await failing({ r: { payloadHash: flip(payloadHash) } }), ['payload_hash', 'merkle_path']);
  assert.deepEqual(await failing({ r: { merklePathJson: [flip(tree.pathHex(2)[0]!), ...tree.pathHex(2).slice(1)] } }), ['merkle_path']);
  assert.deepEqual(await failing({ r: { merklePathJson: tree.pathHex(2).slice(1) } }), ['merkle_path']);
  assert.deepEqual(await failing({ r: { merkleRoot: flip(tree.rootHex) } }), ['merkle_path', 'timestamp_imprint', 'ledger_root_match']);
  assert.deepEqual(await failing({ r: { leafIndex: 3 } }), ['merkle_path']);
  assert.deepEqual(await failing({ r: { treeSize: 3 } }), ['merkle_path']);
  const bytes = tsr.slice();
  bytes[bytes.length - 5] = bytes[bytes.length - 5]! ^ 0x01; // inside the ECDSA signature value
  assert.deepEqual(await failing({ r: { tsaResponse: toBase64(bytes) } }), ['timestamp_signature']);
  assert.deepEqual(await failing({ r: { tsaResponse: toBase64(await timestamp(tsa, sha256('other root'), genTime)) } }), [
    'timestamp_imprint',
  ]);
  assert.deepEqual(await failing({ r: { tsaResponse: 'AAAA' } }), ['timestamp_token']);
  assert.deepEqual(await failing({ r: { windowStart: '2026-01-01T00:00:07Z', windowEnd: '2026-01-01T00:00:12Z' } }), ['timestamp_time']);
  assert.deepEqual(await failing({ r: { windowEnd: 'yesterday' } }), ['receipt_format']);
  assert.deepEqual(await failing({ r: { rekorLogIndex: 5 } }), ['ledger_entry']);
  assert.deepEqual(await failing({ r: { ledgerEntryUuid: uuid.slice(0, -1) + (uuid.endsWith('0') ? '1' : '0') } }), ['ledger_entry']);
  // Locators are not cryptographically bound (documented): changing them changes nothing.
  assert.deepEqual(await failing({ r: { logId: 'log_2', batchId: 'batch_9', ledgerUrl: 'http://elsewhere' } }), []);
});

test('trust, time and ledger policy', async () => {
  assert.deepEqual(await failing({ trust: { ...trust, tsaRoots: otherRoot.pem } }), ['timestamp_chain']);
  assert.deepEqual(await failing({ trust: { ...trust, tsaRoots: [] } }), ['timestamp_chain']);
  assert.deepEqual(await failing({ trust: { ...trust, tsaRoots: tsa.pem } }), []); // a pinned TSA certificate is an anchor
  assert.deepEqual(await failing({ trust: { ...trust, tsaCommonName: 'Someone Else' } }), ['timestamp_signature']);
  assert.deepEqual(await failing({ r: { tsaResponse: toBase64(await timestamp(weakTsa, tree.root, genTime)) } }), ['timestamp_key_usage']);
  assert.deepEqual(await failing({ now: T('2025-12-31T23:00:00Z') }), ['timestamp_time']); // genTime in the future
  assert.deepEqual(await failing({ now: T('2026-01-01T00:03:00Z') }), []); // within the 5-minute clock skew
  assert.deepEqual(await failing({ now: T('2028-01-01T00:00:00Z') }), []); // default: chain checked at genTime
  assert.deepEqual(await failing({ now: T('2028-01-01T00:00:00Z'), timestampCheckAt: 'now' }), ['timestamp_chain']);
  assert.deepEqual(await failing({ now: undefined, timestampCheckAt: 'now' }), ['timestamp_chain']);
  assert.deepEqual(await failing({ trust: { ...trust, ledgerPublicKey: p256Key().pem } }), [
    'ledger_entry',
    'ledger_set',
    'ledger_checkpoint',
  ]);
  assert.deepEqual(await failing({ trust: { ...trust, ledgerEntrySignerKey: p256Key().pem } }), ['ledger_body_signature']);
  assert.deepEqual(await failing({ trust: { tsaRoots: root.pem } }), ['ledger_entry']);
  const other = ledgerEntry(logKey, entrySigner, sha256Hex('another batch'));
  assert.deepEqual(await failing({ ledgerEntry: other.response, r: { ledgerEntryUuid: other.uuid } }), ['ledger_root_match']);

  const missing = await verifyReceipt({ ...base, ledgerEntry: undefined });
  assert.equal(missing.ok, false);
  const ledgerSteps = missing.steps.filter((s) => s.id.startsWith('ledger_'));
  assert.equal(ledgerSteps.length, 6);
  assert.ok(ledgerSteps.every((s) => s.status === 'fail' && s.detail === 'ledger entry not supplied'));

  const offline = await verifyReceipt({ ...base, ledgerEntry: undefined, offline: true });
  assert.equal(offline.ok, true);
  assert.ok(offline.steps.filter((s) => s.id.startsWith('ledger_')).every((s) => s.status === 'skip'));
  assert.equal((await verifyReceipt({ ...base, offline: true, payload: { x: 1 } })).ok, false);
});

test('malformed input never throws and fails the report', async () => {
  for (const bad of [null, undefined, 42, 'receipt', [], {}, { ...receipt, merklePathJson: 'not json' }, { ...receipt, leafIndex: -1 }]) {
    const rep = await verifyReceipt({ ...base, receipt: bad as unknown as ProofReceipt });
    assert.equal(rep.ok, false);
    assert.equal(rep.steps[0]!.id, 'receipt_format');
    assert.equal(rep.steps[0]!.status, 'fail');
  }
  for (const payloadIn of ['{not json', undefined, { n: Number.NaN }, new Uint8Array([0xff])]) {
    assert.deepEqual(await failing({ payload: payloadIn }), ['payload_hash']);
  }
  assert.equal(await verifyReceiptOk(undefined as unknown as VerifyReceiptInput), false);
  assert.equal((await verifyReceipt({ ...base, trust: undefined as unknown as VerifyReceiptInput['trust'] })).ok, false);
});

test('sample files for docs/verification.md (written only when COUNTERSIGN_SAMPLE_DIR is set)', () => {
  const dir = process.env.COUNTERSIGN_SAMPLE_DIR;
  if (!dir) return;
  writeFileSync(join(dir, 'payload.json'), JSON.stringify(payload, null, 2));
  writeFileSync(join(dir, 'receipt.json'), JSON.stringify(receipt, null, 2));
  writeFileSync(join(dir, 'entry.json'), JSON.stringify(entry, null, 2));
  writeFileSync(join(dir, 'ca.pem'), root.pem);
  writeFileSync(join(dir, 'tsa.pem'), tsa.pem);
  writeFileSync(join(dir, 'ledger.pub'), logKey.pem);
});

test('interop: openssl ts -verify accepts a generated token over the merkle root', () => {
  const dir = mkdtempSync(join(tmpdir(), 'countersign-ts-'));
  writeFileSync(join(dir, 'root.pem'), root.pem);
  writeFileSync(join(dir, 'tsa.pem'), tsa.pem);
  writeFileSync(join(dir, 'token.tsr'), tsr);
  const args = (digest: string): string[] => [
    'ts',
    '-verify',
    '-digest',
    digest,
    '-in',
    join(dir, 'token.tsr'),
    '-CAfile',
    join(dir, 'root.pem'),
    '-untrusted',
    join(dir, 'tsa.pem'),
    '-attime',
    String(genTime.getTime() / 1000),
  ];
  const out = execFileSync('/usr/bin/openssl', args(receipt.merkleRoot), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  assert.match(out, /Verification: OK/);
  assert.throws(() => execFileSync('/usr/bin/openssl', args(sha256Hex('wrong')), { stdio: ['ignore', 'pipe', 'pipe'] }));
  const text = execFileSync('/usr/bin/openssl', ['ts', '-reply', '-in', join(dir, 'token.tsr'), '-text'], { encoding: 'utf8' });
  assert.match(text, new RegExp(tree.rootHex.slice(0, 2), 'i'));
  assert.match(text, /Status: Granted/);
});
