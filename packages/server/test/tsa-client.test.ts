/**
 * The TimestampWitness, both ways: embedded (in process) and external (RFC 3161 over a real
 * socket to another instance's /tsa), including TSAs that misbehave: refusals, replayed
 * answers, wrong nonces, a signer outside the configured roots, no TSA at all.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import path from 'node:path';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { STORES, tempDir } from './helpers/server.js';
import { openssl, rejectsWith, startWitnessApp, writeFile, type WitnessApp } from './tsa-helpers.js';
import { createTimestampWitness } from '../src/tsa/witness.js';
import { createTsaMaterial } from '../src/tsa/identity.js';
import { verifyTimestampToken } from '@countersign/core';

const sha = (s: string): Uint8Array => new Uint8Array(createHash('sha256').update(s).digest());
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** A loopback HTTP server answering every request with `handler`. */
async function fakeServer(
  handler: (body: Buffer) => Promise<{ status: number; type: string; body: Uint8Array | string }>,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void handler(Buffer.concat(chunks)).then((r) => {
        res.writeHead(r.status, { 'content-type': r.type });
        res.end(r.body);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/tsa`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

for (const store of STORES) {
  describe(`TimestampWitness (${store})`, () => {
    let tsa: WitnessApp;
    let client: WitnessApp;
    let dir: string;
    let rootPem: string;

    before(async () => {
      tsa = await startWitnessApp({ store });
      dir = tempDir('countersign-tsa-client-');
      rootPem = await (await fetch(`${tsa.url}/tsa/root.pem`)).text();
      writeFile(dir, 'root.pem', rootPem);
    });
    after(async () => {
      await tsa.close();
      await client?.close();
    });

    it('embedded: timestamps the 32 digest bytes themselves; openssl ts -verify -digest passes', async () => {
      const witness = await createTimestampWitness(tsa.app.ctx);
      assert.equal(await witness.trustRootsPem(), rootPem);
      const root = sha('merkle root of a batch');
      const der = await witness.timestamp(root);
      writeFile(dir, 'w.tsr', der);
      assert.match(await openssl(['ts', '-verify', '-in', 'w.tsr', '-digest', hex(root), '-CAfile', 'root.pem'], dir), /Verification: OK/);
      // The imprint is the root itself, not a hash of it.
      assert.match(await openssl(['ts', '-reply', '-in', 'w.tsr', '-text'], dir), /Hash Algorithm: sha256/);
      await assert.rejects(openssl(['ts', '-verify', '-in', 'w.tsr', '-digest', hex(sha(hex(root))), '-CAfile', 'root.pem'], dir));
    });

    it("embedded: core's verifier passes every step on the token, and fails it for another digest or other roots", async () => {
      const witness = await createTimestampWitness(tsa.app.ctx);
      const root = sha('root for the core verifier');
      const der = await witness.timestamp(root);
      const report = await verifyTimestampToken(der, {
        trustAnchors: await witness.trustRootsPem(),
        expectedDigest: root,
        expectedHashAlgorithm: 'sha256',
        tsaCommonName: 'Countersign Embedded TSA',
      });
      const failed = report.steps.filter((st) => st.status !== 'pass');
      assert.ok(report.ok, JSON.stringify(failed));
      assert.deepEqual(failed, []);
      assert.equal((await verifyTimestampToken(der, { trustAnchors: rootPem, expectedDigest: sha('other') })).ok, false);
      const otherRoot = (await createTsaMaterial(Date.now())).rootCert!;
      assert.equal((await verifyTimestampToken(der, { trustAnchors: otherRoot, expectedDigest: root })).ok, false);
    });

    it('embedded: refuses a digest that is not 32 bytes', async () => {
      const witness = await createTimestampWitness(tsa.app.ctx);
      await assert.rejects(witness.timestamp(new Uint8Array(20)), TypeError);
    });

    it('external: an RFC 3161 client over a real socket, chained to the configured roots', async () => {
      client = await startWitnessApp({ store, listen: false, config: { tsaUrl: `${tsa.url}/tsa`, tsaRoots: path.join(dir, 'root.pem') } });
      const witness = await createTimestampWitness(client.app.ctx);
      assert.equal(await witness.trustRootsPem(), rootPem);
      const digest = sha('another root');
      writeFile(dir, 'x.tsr', await witness.timestamp(digest));
      assert.match(await openssl(['ts', '-verify', '-in', 'x.tsr', '-digest', hex(digest), '-CAfile', 'root.pem'], dir), /OK/);
    });

    it('external: a signer outside the configured roots → tsa_response_invalid', async () => {
      writeFile(dir, 'other-root.pem', (await createTsaMaterial(Date.now())).rootCert!);
      const witness = await createTimestampWitness({
        ...client.app.ctx,
        config: { ...client.app.ctx.config, tsaRoots: path.join(dir, 'other-root.pem') },
      });
      await rejectsWith(witness.timestamp(sha('x')), 'tsa_response_invalid', /chain|verify/);
    });

    /** An app (on the client's database when PostgreSQL) whose witness calls the TSA at `tsaUrl`. */
    const appUsingTsa = (tsaUrl: string) =>
      startWitnessApp({ store, listen: false, ...(client.databaseUrl ? { databaseUrl: client.databaseUrl } : {}), config: { tsaUrl } });

    it('external: no TSA listening → tsa_unavailable', async () => {
      const gone = await fakeServer(async () => ({ status: 200, type: 'text/plain', body: '' }));
      await gone.close();
      const app = await appUsingTsa(gone.url);
      try {
        await rejectsWith((await createTimestampWitness(app.app.ctx)).timestamp(sha('x')), 'tsa_unavailable', /did not answer/);
      } finally {
        await app.close();
      }
    });

    describe('external: misbehaving TSAs', () => {
      const withFake = async (handler: Parameters<typeof fakeServer>[0], check: (p: Promise<Uint8Array>) => Promise<void>) => {
        const fake = await fakeServer(handler);
        try {
          const app = await appUsingTsa(fake.url);
          try {
            await check((await createTimestampWitness(app.app.ctx)).timestamp(sha('the real root')));
          } finally {
            await app.close();
          }
        } finally {
          await fake.close(); // also when the app fails to start, or the fake keeps the run alive
        }
      };
      const forward = async (body: Uint8Array): Promise<Uint8Array> => {
        const r = await fetch(`${tsa.url}/tsa`, {
          method: 'POST',
          headers: { 'content-type': 'application/timestamp-query' },
          body: Buffer.from(body),
        });
        return new Uint8Array(await r.arrayBuffer());
      };

      it('answers JSON with HTTP 500 → tsa_unavailable', () =>
        withFake(
          async () => ({ status: 500, type: 'application/json', body: '{}' }),
          (p) => rejectsWith(p, 'tsa_unavailable', /HTTP 500/),
        ));

      it('answers 200 with the wrong content type → tsa_unavailable', () =>
        withFake(
          async () => ({ status: 200, type: 'text/html', body: '<html>' }),
          (p) => rejectsWith(p, 'tsa_unavailable', /text\/html/),
        ));

      it('answers bytes that are not a TimeStampResp → tsa_response_invalid', () =>
        withFake(
          async () => ({ status: 200, type: 'application/timestamp-reply', body: 'garbage' }),
          (p) => rejectsWith(p, 'tsa_response_invalid', /not a DER/),
        ));

      it('refuses (status rejection) → tsa_response_invalid naming the refusal', () =>
        withFake(
          async () => ({ status: 200, type: 'application/timestamp-reply', body: await forward(new Uint8Array([1, 2, 3])) }),
          (p) => rejectsWith(p, 'tsa_response_invalid', /refused the request: status 2/),
        ));

      it('replays a valid token for another digest → imprint mismatch', async () => {
        const other = await (await createTimestampWitness(tsa.app.ctx)).timestamp(sha('some other root'));
        await withFake(
          async () => ({ status: 200, type: 'application/timestamp-reply', body: other }),
          (p) => rejectsWith(p, 'tsa_response_invalid', /different digest/),
        );
      });

      it('answers with a token for a different nonce → nonce mismatch', () =>
        withFake(
          async (body) => {
            const req = pkijs.TimeStampReq.fromBER(new Uint8Array(body));
            req.nonce = new asn1js.Integer({ value: 12345 });
            return { status: 200, type: 'application/timestamp-reply', body: await forward(new Uint8Array(req.toSchema().toBER())) };
          },
          (p) => rejectsWith(p, 'tsa_response_invalid', /nonce/),
        ));

      it('answers with a token whose signature was altered → bad signature', () =>
        withFake(
          async (body) => {
            const good = Buffer.from(await forward(new Uint8Array(body)));
            good[good.length - 3]! ^= 0x01; // inside the ECDSA signature value at the end of the SignerInfo
            return { status: 200, type: 'application/timestamp-reply', body: good };
          },
          (p) => rejectsWith(p, 'tsa_response_invalid', /signature|malformed|not a DER|TSTInfo/),
        ));
    });
  });
}
