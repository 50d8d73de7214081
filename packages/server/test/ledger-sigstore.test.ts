/**
 * The embedded ledger as Rekor clients see it. sigstore-js (`@sigstore/verify`, the library
 * behind `npm audit signatures` and sigstore-js's `verify`) checks our entries: signed entry
 * timestamp, inclusion proof, checkpoint (whose signature name must be part of the ledger's base
 * URL) and the entry body, given only the ledger's public key and URL. Both a Merkle root the
 * proof batcher entered for a sealed receipt and an entry submitted by someone else pass; the
 * checkpoint name follows `--public-url` even when it was set after the first start; rekor-cli's
 * `treeID` query parameter is accepted; a start without a public URL warns.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createPublicKey } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { bundleFromJSON } from '@sigstore/bundle';
import { PublicKeyDetails, TrustedRoot } from '@sigstore/protobuf-specs';
import { Verifier, toSignedEntity, toTrustMaterial } from '@sigstore/verify';
import { parseCheckpoint, type ProofReceipt } from '@countersign/core';
import { buildApp } from '../src/app.js';
import { loadConfig, type Role } from '../src/config.js';
import { STORES, tempDir } from './helpers/server.js';
import { startWitnessApp, type WitnessApp } from './tsa-helpers.js';
import { fullProject } from './foundation-helpers.js';
import { ingestProofLogs, waitForReceipt } from './proofs-helpers.js';
import { json, newSubmitter } from './ledger-helpers.js';

type RekorEntry = {
  body: string;
  integratedTime: number;
  logID: string;
  logIndex: number;
  verification: {
    signedEntryTimestamp: string;
    inclusionProof: { logIndex: number; rootHash: string; treeSize: number; hashes: string[]; checkpoint: string };
  };
};

const b64 = (hex: string): string => Buffer.from(hex, 'hex').toString('base64');

/** What a verifier is given: the ledger's URL and, fetched once, its public key. */
async function ledgerKey(url: string): Promise<string> {
  const res = await fetch(`${url}/api/v1/log/publicKey`);
  assert.equal(res.status, 200);
  return res.text();
}

/** A Sigstore bundle v0.3 around one Rekor v1 entry: a message signature over `digestHex`, key by hint. */
function bundleOf(response: Record<string, RekorEntry>, digestHex: string, signatureB64: string) {
  const e = Object.values(response)[0]!;
  const p = e.verification.inclusionProof;
  return bundleFromJSON({
    mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json',
    verificationMaterial: {
      publicKey: { hint: 'signer' },
      tlogEntries: [
        {
          logIndex: String(e.logIndex),
          logId: { keyId: b64(e.logID) },
          kindVersion: { kind: 'hashedrekord', version: '0.0.1' },
          integratedTime: String(e.integratedTime),
          inclusionPromise: { signedEntryTimestamp: e.verification.signedEntryTimestamp },
          inclusionProof: {
            logIndex: String(p.logIndex),
            rootHash: b64(p.rootHash),
            treeSize: String(p.treeSize),
            hashes: p.hashes.map(b64),
            checkpoint: { envelope: p.checkpoint },
          },
          canonicalizedBody: e.body,
        },
      ],
      timestampVerificationData: { rfc3161Timestamps: [] },
    },
    messageSignature: { messageDigest: { algorithm: 'SHA2_256', digest: b64(digestHex) }, signature: signatureB64 },
  });
}

/** sigstore-js's verdict; throws its VerificationError when it refuses. */
function sigstoreVerify(opts: {
  baseUrl: string;
  ledgerPem: string;
  signerPem: string;
  response: Record<string, RekorEntry>;
  artifact: Buffer;
}): void {
  const der = createPublicKey(opts.ledgerPem).export({ type: 'spki', format: 'der' });
  const logId = createHash('sha256').update(der).digest('base64');
  const root = TrustedRoot.fromJSON({
    mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1',
    tlogs: [
      {
        baseUrl: opts.baseUrl,
        hashAlgorithm: 'SHA2_256',
        publicKey: { rawBytes: der.toString('base64'), keyDetails: 'PKIX_ECDSA_P256_SHA_256', validFor: { start: '2020-01-01T00:00:00Z' } },
        logId: { keyId: logId },
      },
    ],
    certificateAuthorities: [],
    ctlogs: [],
    timestampAuthorities: [],
  });
  const signerDer = createPublicKey(opts.signerPem).export({ type: 'spki', format: 'der' });
  const trust = toTrustMaterial(root, { signer: { rawBytes: signerDer, keyDetails: PublicKeyDetails.PKIX_ECDSA_P256_SHA_256 } });
  const body = JSON.parse(Buffer.from(Object.values(opts.response)[0]!.body, 'base64').toString('utf8')) as {
    spec: { data: { hash: { value: string } }; signature: { content: string } };
  };
  const bundle = bundleOf(opts.response, body.spec.data.hash.value, body.spec.signature.content);
  new Verifier(trust, { tlogThreshold: 1, timestampThreshold: 1 }).verify(toSignedEntity(bundle, opts.artifact));
}

/** The checkpoint signature name of an entry (what sigstore-js matches against the base URL). */
function signatureName(response: Record<string, RekorEntry>): string {
  return parseCheckpoint(Object.values(response)[0]!.verification.inclusionProof.checkpoint).signatures[0]!.name;
}

for (const store of STORES) {
  describe(`ledger entries pass @sigstore/verify (${store})`, () => {
    let w: WitnessApp;
    let receipt: ProofReceipt;
    let leafData: Buffer;
    before(async () => {
      w = await startWitnessApp({ store, config: { proofWindowMs: 1000 } });
      const p = await fullProject({ ...w, masterKey: w.app.ctx.masterKey, config: w.app.ctx.config }, 'sigstore');
      const [log] = await ingestProofLogs(w.app, p.agent, 1, 'sigstore');
      receipt = await waitForReceipt(w.app, p.live, p.projectId, log!.id);
      leafData = Buffer.from(log!.payloadHash, 'hex');
    });
    after(() => w.close());

    it("accepts the entry of a sealed receipt's Merkle root, given only the ledger's key and URL", async () => {
      const ledgerPem = await ledgerKey(w.url);
      const response = (await json(`${w.url}/api/v1/log/entries?logIndex=${receipt.rekorLogIndex}`)).body as unknown as Record<
        string,
        RekorEntry
      >;
      // A one-log batch: the root is SHA-256(0x00 ‖ payloadHash bytes), so that preimage is the
      // "artifact" the ledger key signed (a hashedrekord signature covers the digest of it).
      assert.equal(receipt.treeSize, 1);
      const artifact = Buffer.concat([Buffer.from([0]), leafData]);
      assert.equal(createHash('sha256').update(artifact).digest('hex'), receipt.merkleRoot);
      sigstoreVerify({ baseUrl: w.url, ledgerPem, signerPem: ledgerPem, response, artifact });
      // sigstore-js 4.x compares literally (baseURL.includes(name)); 3.x as a pattern.
      assert.ok(w.url.includes(signatureName(response)));
    });

    it("accepts another submitter's entry, and refuses a wrong key, base URL or artifact", async () => {
      const ledgerPem = await ledgerKey(w.url);
      const submitter = newSubmitter();
      const artifact = 'release-1.2.3.tgz contents';
      const posted = await json(`${w.url}/api/v1/log/entries`, { body: submitter.entry(artifact) });
      assert.equal(posted.status, 201);
      const response = posted.body as unknown as Record<string, RekorEntry>;
      const ok = { baseUrl: w.url, ledgerPem, signerPem: submitter.publicKeyPem, response, artifact: Buffer.from(artifact) };
      sigstoreVerify(ok);
      // The checkpoint name must be part of the base URL the verifier trusts.
      assert.throws(() => sigstoreVerify({ ...ok, baseUrl: 'https://rekor.example.test' }), /checkpoint/);
      assert.throws(() => sigstoreVerify({ ...ok, ledgerPem: newSubmitter().publicKeyPem }), /inclusion promise|checkpoint/);
      assert.throws(() => sigstoreVerify({ ...ok, artifact: Buffer.from('other contents') }), /signature/);
    });

    it("answers rekor-cli's treeID parameter on the public key and consistency proof paths", async () => {
      const head = (await json(`${w.url}/api/v1/log`)).body as unknown as { treeID: string; treeSize: number };
      const key = await fetch(`${w.url}/api/v1/log/publicKey?treeID=${head.treeID}`);
      assert.equal(key.status, 200);
      assert.equal(await key.text(), await ledgerKey(w.url));
      const proof = await json(`${w.url}/api/v1/log/proof?firstSize=1&lastSize=${head.treeSize}&treeID=${head.treeID}`);
      assert.equal(proof.status, 200);
      for (const path of [`/api/v1/log/publicKey?treeID=${head.treeID}1`, `/api/v1/log/proof?lastSize=1&treeID=1`]) {
        const r = await json(w.url + path);
        assert.equal(r.status, 400, path);
        assert.equal((r.body.error as { code: string }).code, 'invalid_request');
        assert.match((r.body.error as { message: string }).message, /not a tree of this ledger/);
      }
      const notNumeric = await json(`${w.url}/api/v1/log/publicKey?treeID=abc`);
      assert.equal(notNumeric.status, 400);
    });
  });
}

describe('checkpoint name follows the public URL', () => {
  it('a public URL set after the first start renames the checkpoint signer, and sigstore-js accepts it', async () => {
    const dataDir = tempDir();
    const first = await startWitnessApp({ store: 'sqlite', dataDir, config: { roles: new Set<Role>(['ledger']) } });
    const submitter = newSubmitter();
    let response: Record<string, RekorEntry>;
    try {
      const posted = await json(`${first.url}/api/v1/log/entries`, { body: submitter.entry('first') });
      assert.equal(posted.status, 201);
      assert.equal(signatureName(posted.body as never), new URL(first.url).host);
    } finally {
      await first.close();
    }
    const publicUrl = 'https://audit.example.test';
    const second = await startWitnessApp({ store: 'sqlite', dataDir, config: { roles: new Set<Role>(['ledger']), publicUrl } });
    try {
      const posted = await json(`${second.url}/api/v1/log/entries`, { body: submitter.entry('second') });
      assert.equal(posted.status, 201);
      response = posted.body as never;
      assert.equal(signatureName(response), 'audit.example.test');
      const ledgerPem = await ledgerKey(second.url);
      sigstoreVerify({ baseUrl: publicUrl, ledgerPem, signerPem: submitter.publicKeyPem, response, artifact: Buffer.from('second') });
      // The first entry, served now, carries a checkpoint under the new name too.
      const again = (await json(`${second.url}/api/v1/log/entries?logIndex=0`)).body as never;
      sigstoreVerify({ baseUrl: publicUrl, ledgerPem, signerPem: submitter.publicKeyPem, response: again, artifact: Buffer.from('first') });
    } finally {
      await second.close();
    }
  });

  it('warns at start when no public URL is set, and not when one is', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const start = async (publicUrl: string | undefined) => {
      const config = { ...loadConfig({ dataDir: tempDir(), port: '0' }, {}), roles: new Set<Role>(['ledger']), publicUrl };
      const app = await buildApp(config, { logger: pino({ level: 'warn' }, sink) });
      await app.close();
    };
    await start(undefined);
    const warned = lines.filter((l) => l.includes('public-url'));
    assert.equal(warned.length, 1, lines.join(''));
    assert.equal(JSON.parse(warned[0]!).level, 40);
    lines.length = 0;
    await start('https://audit.example.test');
    assert.equal(lines.filter((l) => l.includes('public-url')).length, 0);
  });
});
