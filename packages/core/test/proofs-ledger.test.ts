/**
 * Rekor v1 vectors (../shared/vectors/rekor): for every tlog entry of every bundle, the
 * ledger verifier's SET / inclusion / checkpoint results equal expected.json; and every bundle
 * reaches its expected verdict under a small bundle policy written here (the bundle-level checks
 * are not part of Countersign's ledger verifier: they compare the log entry with the material).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { fromBase64, toHex, fromUtf8 } from '../src/encoding.js';
import { sha256Hex } from '../src/hash.js';
import { ledgerEntryFromBundleTlogEntry } from '../src/proofs/bundle.js';
import { parseCheckpoint, verifyCheckpoint } from '../src/proofs/checkpoint.js';
import { parsePublicKey, pemBlocks } from '../src/proofs/crypto.js';
import { verifyLedgerEntry, type LedgerVerification, type RekorLogEntryResponse } from '../src/proofs/ledger.js';
import { certificateFromDer } from '../src/proofs/x509.js';
import { hashLeaf } from '../src/proofs/merkle.js';
import { vectorsDir } from './helpers/vectors.js';

const DIR = vectorsDir('rekor');
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- vector JSON is untyped

interface TlogExpect {
  logIndex: number;
  logId: string;
  integratedTime: number;
  leafHash: string;
  setValid: boolean | null;
  inclusionProof: { valid: boolean } | null;
  checkpoint: { matchesProof: boolean; signatures: Array<{ valid: boolean }> } | null;
}
interface Case {
  bundle: string;
  expected: string;
  trustedRoot: string;
  artifact?: string | null;
  artifactSha256?: string;
  publicKey?: string;
  tlogEntries?: TlogExpect[];
}
const cases = (JSON.parse(readFileSync(join(DIR, 'expected.json'), 'utf8')) as { cases: Case[] }).cases;

// Artifacts not shipped with the vectors; their digests are given in the README.
const ARTIFACT_SHA256: Record<string, string> = {
  'sigstore-python/Python-3.12.5.tgz.sigstore': '38dc4e2c261d49c661196066edbfb70fdb16be4a79cc8220c224dfeb5636d405',
  'sigstore-python/bundle_v3_github.whl.sigstore': 'c4e92e9ecc828bef2aa7dba1de8ac983511f7532a0df11c770d39099a25cf201',
};
// Certificate-chain policy is bundle verification, not ledger verification (README: "pick one policy").
const OUT_OF_SCOPE: Record<string, string> = {
  'conformance/bundle-with-root-cert_fail/bundle.sigstore.json':
    'Fulcio chain containing its root: a certificate-chain policy, not a ledger check',
};

function logKeys(rootFile: string): Map<string, { der: Uint8Array; start: number; end: number }> {
  const root = JSON.parse(readFileSync(join(DIR, rootFile), 'utf8')) as Json;
  const out = new Map<string, { der: Uint8Array; start: number; end: number }>();
  for (const t of root.tlogs as Json[]) {
    const v = t.publicKey.validFor ?? {};
    out.set(toHex(fromBase64(t.logId.keyId)), {
      der: fromBase64(t.publicKey.rawBytes),
      start: v.start ? Date.parse(v.start) / 1000 : -Infinity,
      end: v.end ? Date.parse(v.end) / 1000 : Infinity,
    });
  }
  return out;
}
const ALL_KEYS = new Map([...logKeys('trusted-roots/production-trusted_root.json'), ...logKeys('trusted-roots/staging-trusted_root.json')]);

/** Entries of a bundle in API form (Sigstore bundles and the legacy cosign bundle). */
function apiEntries(bundle: Json): RekorLogEntryResponse[] {
  if (bundle.rekorBundle) {
    const p = bundle.rekorBundle.Payload;
    const leaf = toHex(hashLeaf(fromBase64(p.body)));
    return [
      {
        [leaf]: {
          body: p.body,
          integratedTime: p.integratedTime,
          logID: p.logID,
          logIndex: p.logIndex,
          verification: { signedEntryTimestamp: bundle.rekorBundle.SignedEntryTimestamp },
        },
      },
    ];
  }
  return ((bundle.verificationMaterial?.tlogEntries ?? []) as unknown[]).map(ledgerEntryFromBundleTlogEntry);
}

const stepStatus = (r: LedgerVerification, id: string): string => r.steps.find((s) => s.id === id)!.status;
const want = (v: boolean | null | undefined): string => (v === null || v === undefined ? 'skip' : v ? 'pass' : 'fail');
const pemDer = (b64Pem: string): string => toHex(pemBlocks(fromUtf8(fromBase64(b64Pem)))[0]!.der);

function bundleVersion(mediaType: unknown): number | undefined {
  const m = /^application\/vnd\.dev\.sigstore\.bundle(?:\+json;version=0\.([123])|\.v0\.(3)\+json)$/.exec(String(mediaType));
  return m ? Number(m[1] ?? m[2]) : undefined;
}

/** Bundle-level verdict: returns the reasons it fails (empty = pass). */
async function bundleProblems(c: Case, text: string): Promise<string[]> {
  let bundle: Json;
  try {
    bundle = JSON.parse(text) as Json;
  } catch {
    return ['bundle is not JSON'];
  }
  try {
    return await materialProblems(c, bundle);
  } catch (err) {
    return [`bundle is malformed: ${err instanceof Error ? err.message : String(err)}`];
  }
}

async function materialProblems(c: Case, bundle: Json): Promise<string[]> {
  const problems: string[] = [];
  const legacy = Boolean(bundle.rekorBundle);
  const version = legacy ? 1 : bundleVersion(bundle.mediaType);
  if (version === undefined) return [`unknown mediaType ${bundle.mediaType}`];
  const entries = apiEntries(bundle);
  if (entries.length !== 1) return [`expected exactly one log entry, found ${entries.length}`];
  const entry = Object.values(entries[0]!)[0]!;
  const keys = logKeys(c.trustedRoot);
  const key = keys.get(String(entry.logID).toLowerCase());
  if (!key) return [`unknown log ${entry.logID}`];
  if (entry.integratedTime < key.start || entry.integratedTime > key.end) problems.push('integratedTime outside the log key validity');
  const vm = bundle.verificationMaterial ?? {};
  const signedTime =
    Boolean(entry.verification?.signedEntryTimestamp) || (vm.timestampVerificationData?.rfc3161Timestamps ?? []).length > 0;
  if (!signedTime) problems.push('no signed time source');
  const artifactSha = c.artifactSha256 ?? ARTIFACT_SHA256[c.bundle];
  const body = JSON.parse(fromUtf8(fromBase64(entry.body))) as Json;
  const r = await verifyLedgerEntry(entries[0], {
    publicKey: key.der,
    requireSet: false, // signed time is checked above (SET or RFC 3161)
    requireInclusionProof: version >= 2, // bundle v0.1 allows SET-only entries
    requireCheckpoint: version >= 2,
    ...(body.kind === 'hashedrekord' && artifactSha ? { expectedDataHash: artifactSha } : {}),
  });
  for (const s of r.steps) if (s.status === 'fail') problems.push(`${s.id}: ${s.detail}`);
  try {
    compareMaterial(c, bundle, body, entry.integratedTime, artifactSha, problems);
  } catch (err) {
    problems.push(`entry body does not describe a bundle: ${err instanceof Error ? err.message : String(err)}`);
  }
  return problems;
}

/** The log entry must describe this bundle's signature, key/certificate and artifact. */
function compareMaterial(
  c: Case,
  bundle: Json,
  body: Json,
  integratedTime: number,
  artifactSha: string | undefined,
  problems: string[],
): void {
  const legacy = Boolean(bundle.rekorBundle);
  const vm = bundle.verificationMaterial ?? {};
  const certB64: string | undefined = legacy
    ? undefined
    : (vm.certificate?.rawBytes ?? (vm.x509CertificateChain ? (vm.x509CertificateChain.certificates?.[0]?.rawBytes ?? null) : undefined));
  if (certB64 === null) problems.push('empty certificate chain');
  let signerDer: string | undefined = certB64 ? toHex(fromBase64(certB64)) : undefined;
  if (legacy) signerDer = toHex(pemBlocks(fromUtf8(fromBase64(bundle.cert)))[0]!.der);
  if (vm.publicKey) {
    if (!c.publicKey) problems.push('public-key bundle but no key supplied');
    else {
      try {
        signerDer = toHex(parsePublicKey(readFileSync(join(DIR, c.publicKey), 'utf8')).spki);
      } catch {
        problems.push('supplied key unreadable');
      }
    }
  }
  if (certB64) {
    const cert = certificateFromDer(fromBase64(certB64)).cert;
    const t = integratedTime * 1000;
    if (t < cert.notBefore.value.getTime() || t > cert.notAfter.value.getTime())
      problems.push('integratedTime outside the certificate validity');
  }
  const md = bundle.messageSignature?.messageDigest?.digest;
  if (md && artifactSha && toHex(fromBase64(md)) !== artifactSha) problems.push('bundle message digest is not the artifact digest');
  const sameKey = (b64: string): boolean => signerDer !== undefined && pemDer(b64) === signerDer;
  if (body.kind === 'hashedrekord') {
    const sig = legacy ? bundle.base64Signature : bundle.messageSignature?.signature;
    if (body.spec.signature.content !== sig) problems.push('entry signature differs from the bundle signature');
    if (!sameKey(body.spec.signature.publicKey.content)) problems.push('entry key/certificate differs from the bundle');
  } else {
    const env = bundle.dsseEnvelope as Json;
    const payloadHash = sha256Hex(fromBase64(env.payload));
    const sigs: string[] = env.signatures.map((s: Json) => s.sig);
    if (body.kind === 'dsse') {
      if (body.spec.payloadHash.value !== payloadHash) problems.push('dsse payloadHash differs');
      if (JSON.stringify(body.spec.signatures.map((s: Json) => s.signature)) !== JSON.stringify(sigs))
        problems.push('dsse signatures differ');
      if (!body.spec.signatures.every((s: Json) => sameKey(s.verifier))) problems.push('dsse verifier differs');
    } else if (body.kind === 'intoto') {
      if (body.spec.content.payloadHash.value !== payloadHash) problems.push('intoto payloadHash differs');
      const logged = body.spec.content.envelope.signatures.map((s: Json) => fromUtf8(fromBase64(s.sig)));
      if (JSON.stringify(logged) !== JSON.stringify(sigs)) problems.push('intoto signatures differ');
    }
    if (artifactSha) {
      const statement = JSON.parse(fromUtf8(fromBase64(env.payload))) as Json;
      if (!statement.subject?.some((s: Json) => s.digest?.sha256 === artifactSha)) problems.push('statement subject is not the artifact');
    }
  }
}

for (const c of cases) {
  test(`rekor ${c.bundle}: ${c.expected}`, async () => {
    const text = readFileSync(join(DIR, c.bundle), 'utf8');
    // Per-entry tlog results equal expected.json.
    let bundle: Json | undefined;
    try {
      bundle = JSON.parse(text) as Json;
    } catch {
      /* malformed-json case */
    }
    if (bundle) {
      const entries = apiEntries(bundle);
      assert.equal(entries.length, c.tlogEntries?.length ?? 0);
      for (const [i, exp] of (c.tlogEntries ?? []).entries()) {
        const entry = Object.values(entries[i]!)[0]!;
        const key = ALL_KEYS.get(exp.logId)!;
        const r = await verifyLedgerEntry(entries[i], {
          publicKey: key.der,
          requireSet: false,
          requireInclusionProof: false,
          requireCheckpoint: false,
        });
        if (exp.logIndex < 0) {
          assert.equal(stepStatus(r, 'ledger_entry'), 'fail'); // negative index is rejected up front
          assert.equal(exp.setValid, false);
          continue;
        }
        // Stub bodies ({"apiVersion":"0.0.1"} without kind) are not entries; SET and proof are still checked.
        const b = JSON.parse(fromUtf8(fromBase64(entry.body))) as Json;
        assert.equal(stepStatus(r, 'ledger_entry'), typeof b.kind === 'string' ? 'pass' : 'fail', JSON.stringify(r.steps));
        assert.equal(r.entry!.leafHash, exp.leafHash);
        assert.equal(entry.integratedTime, exp.integratedTime);
        assert.equal(stepStatus(r, 'ledger_set'), want(exp.setValid), 'SET');
        assert.equal(stepStatus(r, 'ledger_inclusion'), want(exp.inclusionProof?.valid), 'inclusion proof');
        const cp = exp.checkpoint;
        assert.equal(
          stepStatus(r, 'ledger_checkpoint'),
          want(cp ? cp.matchesProof && cp.signatures.some((s) => s.valid) : null),
          'checkpoint',
        );
      }
    }
    const problems = await bundleProblems(c, text);
    if (process.env.SHOW_PROBLEMS) console.log(c.bundle, c.expected, problems);
    const expected = c.expected === 'see-notes' ? 'pass' : c.expected; // Python-3.12.5: v0.1 allows a proof without checkpoint
    if (OUT_OF_SCOPE[c.bundle]) {
      assert.deepEqual(problems, [], `out of scope (${OUT_OF_SCOPE[c.bundle]}), tlog and material must still verify`);
      return;
    }
    if (expected === 'pass') assert.deepEqual(problems, []);
    else assert.ok(problems.length > 0, 'should fail');
  });
}

const derived = JSON.parse(readFileSync(join(DIR, 'derived/api-logentry-happy-path-v0.1.json'), 'utf8')) as Json;
const prodKey = readFileSync(join(DIR, 'trusted-roots/rekor.sigstore.dev.pub'), 'utf8');
const A_TXT = 'a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf';
const uuid = Object.keys(derived)[0]!;

test('API-form entry (derived/api-logentry-happy-path-v0.1.json) verifies with every step passing', async () => {
  const r = await verifyLedgerEntry(derived, {
    publicKey: prodKey,
    expectedDataHash: A_TXT,
    expectedLogIndex: 27246492,
    expectedUuid: uuid,
  });
  assert.equal(r.ok, true, JSON.stringify(r.steps, null, 1));
  assert.ok(r.steps.every((s) => s.status === 'pass'));
  assert.equal(r.entry!.dataHash, A_TXT);
  assert.equal(r.entry!.kind, 'hashedrekord');
  // The 64-hex form of the UUID is accepted too.
  assert.equal((await verifyLedgerEntry(derived, { publicKey: prodKey, expectedUuid: uuid.slice(16) })).ok, true);
});

test('API-form entry: each tampering fails the right step', async () => {
  const e = derived[uuid] as Json;
  const clone = (f: (x: Json) => void): Json => {
    const x = structuredClone(e);
    f(x);
    return { [uuid]: x };
  };
  const failed = async (input: unknown, opts: Json = {}): Promise<string[]> =>
    (await verifyLedgerEntry(input, { publicKey: prodKey, expectedDataHash: A_TXT, ...opts })).steps
      .filter((s) => s.status === 'fail')
      .map((s) => s.id);
  assert.deepEqual(
    await failed(
      clone((x) => {
        x.integratedTime += 1;
      }),
    ),
    ['ledger_set'],
  );
  assert.deepEqual(
    await failed(
      clone((x) => {
        x.logIndex += 1;
      }),
    ),
    ['ledger_set'],
  );
  assert.deepEqual(
    await failed(
      clone((x) => {
        x.verification.inclusionProof.hashes[0] = '00'.repeat(32);
      }),
    ),
    ['ledger_inclusion'],
  );
  assert.deepEqual(
    await failed(
      clone((x) => {
        x.verification.inclusionProof.checkpoint = x.verification.inclusionProof.checkpoint.replace('23083062', '23083063');
      }),
    ),
    ['ledger_checkpoint'],
  );
  assert.deepEqual(
    await failed(
      clone((x) => {
        delete x.verification.inclusionProof.checkpoint;
      }),
    ),
    ['ledger_checkpoint'],
  );
  assert.deepEqual(
    await failed(
      clone((x) => {
        delete x.verification.inclusionProof;
      }),
    ),
    ['ledger_inclusion'],
  );
  assert.deepEqual(
    await failed(
      clone((x) => {
        delete x.verification.signedEntryTimestamp;
      }),
    ),
    ['ledger_set'],
  );
  assert.deepEqual(await failed(derived, { expectedDataHash: '00'.repeat(32) }), ['ledger_root_match']);
  assert.deepEqual(await failed(derived, { expectedLogIndex: 1 }), ['ledger_entry']);
  assert.deepEqual(await failed({ ['00'.repeat(32)]: e }), ['ledger_entry']);
  assert.deepEqual(await failed(derived, { publicKey: readFileSync(join(DIR, 'trusted-roots/rekor.sigstage.dev.pub'), 'utf8') }), [
    'ledger_entry',
    'ledger_set',
    'ledger_checkpoint',
  ]);
  assert.deepEqual(await failed(derived, { entrySignerKey: prodKey }), ['ledger_body_signature']);
  for (const junk of [null, 42, 'x', [], {}, { a: 1, b: 2 }, { u: { body: '!!' } }, { u: { ...e, body: 'e30=' } }]) {
    const r = await verifyLedgerEntry(junk, { publicKey: prodKey });
    assert.equal(r.ok, false);
    assert.equal(r.steps[0]!.id, 'ledger_entry');
  }
  assert.equal((await verifyLedgerEntry(derived, { publicKey: 'not a key' })).ok, false);
});

test('checkpoint parsing: fields, key hint, strictness', () => {
  const text = (derived[uuid] as Json).verification.inclusionProof.checkpoint as string;
  const cp = parseCheckpoint(text);
  assert.equal(cp.origin, 'rekor.sigstore.dev - 2605736670972794746');
  assert.equal(cp.treeSize, 23083062);
  assert.deepEqual(cp.extensions, ['Timestamp: 1689177396617352539']);
  assert.equal(toHex(cp.signatures[0]!.keyHint), 'c0d23d6a');
  assert.equal(verifyCheckpoint(text, parsePublicKey(prodKey)).signatureValid, true);
  for (const bad of ['', 'a\n1\n', text.replace('\n\n', '\n'), text.replace('\u2014', '-'), text.slice(0, -1)]) {
    assert.throws(() => parseCheckpoint(bad), { name: 'CoreError' });
  }
  assert.ok(existsSync(join(DIR, 'conformance/a.txt')));
});
