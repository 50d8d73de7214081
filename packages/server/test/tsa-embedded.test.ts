/**
 * The embedded TSA against OpenSSL: queries made by `openssl ts -query`, sent with curl,
 * verified by `openssl ts -verify`; bad queries answered with RFC 3161 rejections; one
 * identity that survives restarts (and is shared by a PostgreSQL fleet).
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { STORES, tempDir } from './helpers/server.js';
import { openssl, replyStatus, shell, startWitnessApp, writeFile, type WitnessApp } from './tsa-helpers.js';
import { FAILURE } from '../src/tsa/responder.js';

const REPLY_TYPE = 'application/timestamp-reply';

async function postQuery(url: string, body: Uint8Array | string, type = 'application/timestamp-query'): Promise<Response> {
  return fetch(`${url}/tsa`, {
    method: 'POST',
    headers: { 'content-type': type },
    body: typeof body === 'string' ? body : Buffer.from(body),
  });
}

for (const store of STORES) {
  describe(`embedded TSA (${store})`, () => {
    let tsa: WitnessApp;
    let dir: string;
    // A fixed clock a little in the past: the certificates made at start must already be valid
    // for openssl, which checks them against the real time.
    const fixedNow = Math.floor(Date.now() / 1000) * 1000 - 120_000 + 789;
    const opensslTime = (ms: number): string => {
      const d = new Date(ms);
      const mon = d.toLocaleString('en-US', { month: 'short', timeZone: 'UTC' });
      const hms = d.toISOString().slice(11, 19);
      return `${mon} ${String(d.getUTCDate()).padStart(2, ' ')} ${hms} ${d.getUTCFullYear()} GMT`;
    };

    before(async () => {
      tsa = await startWitnessApp({ store, now: () => fixedNow });
      dir = tempDir('countersign-tsa-');
      writeFile(dir, 'data.txt', 'the merkle root stands in for this file\n');
      for (const name of ['root.pem', 'tsa.pem', 'certs.pem']) {
        const res = await fetch(`${tsa.url}/tsa/${name}`);
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-type') ?? '', /application\/pem-certificate-chain/);
        writeFile(dir, name, await res.text());
      }
    });
    after(() => tsa.close());

    it('publishes the chain: signer first, then the root; the signer has critical EKU timeStamping', async () => {
      const chain = fs.readFileSync(path.join(dir, 'certs.pem'), 'utf8');
      const root = fs.readFileSync(path.join(dir, 'root.pem'), 'utf8');
      const signer = fs.readFileSync(path.join(dir, 'tsa.pem'), 'utf8');
      assert.equal(chain, signer + root);
      const text = await openssl(['x509', '-in', path.join(dir, 'tsa.pem'), '-noout', '-text']);
      assert.match(text, /X509v3 Extended Key Usage: critical\s+Time Stamping/);
      await openssl(['verify', '-CAfile', path.join(dir, 'root.pem'), '-purpose', 'timestampsign', path.join(dir, 'tsa.pem')]);
    });

    it('openssl ts -query | curl | openssl ts -verify -data passes (certReq, nonce, ESSCertIDv2, policy)', async () => {
      await shell(
        `openssl ts -query -data data.txt -sha256 -cert -out q.tsq && openssl ts -query -in q.tsq -out - | curl -sS --fail --data-binary @- -H 'Content-Type: application/timestamp-query' ${tsa.url}/tsa > r.tsr`,
        dir,
      );
      const out = await openssl(
        ['ts', '-verify', '-in', 'r.tsr', '-data', 'data.txt', '-CAfile', 'root.pem', '-untrusted', 'tsa.pem'],
        dir,
      );
      assert.match(out, /Verification: OK/);
      // The nonce of the query is echoed, which -queryfile checks; certReq put the signer in.
      assert.match(await openssl(['ts', '-verify', '-in', 'r.tsr', '-queryfile', 'q.tsq', '-CAfile', 'root.pem'], dir), /Verification: OK/);
      const text = await openssl(['ts', '-reply', '-in', 'r.tsr', '-text'], dir);
      assert.match(text, /Status: Granted/);
      assert.match(text, /Policy OID: 2\.25\.\d+/);
      assert.ok(text.includes(`Time stamp: ${opensslTime(fixedNow)}`), 'genTime is the injected clock, in whole seconds');
      assert.match(text, /Accuracy: 0x01 seconds/);
      assert.match(text, /Nonce: 0x[0-9A-F]+/);
      const token = await openssl(['ts', '-reply', '-in', 'r.tsr', '-token_out', '-out', 'token.der'], dir);
      void token;
      const cms = await openssl(['cms', '-cmsout', '-print', '-inform', 'DER', '-in', 'token.der'], dir);
      assert.match(cms, /id-smime-aa-signingCertificateV2/);
      assert.match(cms, /certificates:/, 'certReq: the signer certificate is included');
    });

    it('a digest query (-digest <hex>) verifies with openssl ts -verify -digest', async () => {
      const hex = createHash('sha256').update('a batch root').digest('hex');
      await shell(`openssl ts -query -digest ${hex} -sha256 -cert -out qd.tsq`, dir);
      const res = await postQuery(tsa.url, new Uint8Array(fs.readFileSync(path.join(dir, 'qd.tsq'))));
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), REPLY_TYPE);
      writeFile(dir, 'rd.tsr', new Uint8Array(await res.arrayBuffer()));
      const out = await openssl(['ts', '-verify', '-in', 'rd.tsr', '-digest', hex, '-CAfile', 'root.pem', '-untrusted', 'tsa.pem'], dir);
      assert.match(out, /Verification: OK/);
      await assert.rejects(
        openssl(
          [
            'ts',
            '-verify',
            '-in',
            'rd.tsr',
            '-digest',
            hex.replace(/^./, hex[0] === '0' ? '1' : '0'),
            '-CAfile',
            'root.pem',
            '-untrusted',
            'tsa.pem',
          ],
          dir,
        ),
        /message imprint mismatch/,
      );
    });

    it('without certReq the token carries no certificate, and still verifies with -untrusted tsa.pem', async () => {
      await shell(`openssl ts -query -data data.txt -sha512 -no_nonce -out qn.tsq`, dir);
      const res = await postQuery(tsa.url, new Uint8Array(fs.readFileSync(path.join(dir, 'qn.tsq'))));
      writeFile(dir, 'rn.tsr', new Uint8Array(await res.arrayBuffer()));
      await openssl(['ts', '-reply', '-in', 'rn.tsr', '-token_out', '-out', 'tn.der'], dir);
      const cms = await openssl(['cms', '-cmsout', '-print', '-inform', 'DER', '-in', 'tn.der'], dir);
      assert.match(cms, /certificates:\s*<ABSENT>/);
      assert.match(
        await openssl(['ts', '-verify', '-in', 'rn.tsr', '-data', 'data.txt', '-CAfile', 'root.pem', '-untrusted', 'tsa.pem'], dir),
        /OK/,
      );
      await assert.rejects(openssl(['ts', '-verify', '-in', 'rn.tsr', '-data', 'data.txt', '-CAfile', 'root.pem'], dir));
    });

    it('serial numbers are unique and increasing', async () => {
      const serials: bigint[] = [];
      for (let i = 0; i < 5; i++) {
        await shell(`openssl ts -query -data data.txt -sha256 -cert -out qs${i}.tsq`, dir);
        const res = await postQuery(tsa.url, new Uint8Array(fs.readFileSync(path.join(dir, `qs${i}.tsq`))));
        writeFile(dir, `rs${i}.tsr`, new Uint8Array(await res.arrayBuffer()));
        const text = await openssl(['ts', '-reply', '-in', `rs${i}.tsr`, '-text'], dir);
        serials.push(BigInt(/Serial number: (0x[0-9A-F]+)/.exec(text)![1]!));
      }
      for (let i = 1; i < serials.length; i++) assert.ok(serials[i]! > serials[i - 1]!, `serial ${serials[i]} after ${serials[i - 1]}`);
    });

    describe('bad queries get RFC 3161 rejections, not crashes', () => {
      const rejected = async (body: Uint8Array | string, bit: number, text: RegExp) => {
        const res = await postQuery(tsa.url, body);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), REPLY_TYPE);
        const s = replyStatus(new Uint8Array(await res.arrayBuffer()));
        assert.equal(s.status, 2, 'status rejection');
        assert.deepEqual(s.failBits, [bit]);
        assert.match(s.text, text);
      };

      it('garbage bytes → badDataFormat', () => rejected(new Uint8Array([0x30, 0x03, 0x02, 0x01]), FAILURE.badDataFormat, /DER/));
      it('an empty body → badDataFormat', () => rejected(new Uint8Array(0), FAILURE.badDataFormat, /empty/));
      it('valid DER that is not a TimeStampReq → badDataFormat', () =>
        rejected(new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x05]), FAILURE.badDataFormat, /TimeStampReq/));

      it('a SHA-1 imprint → badAlg', async () => {
        await shell(`openssl ts -query -data data.txt -sha1 -cert -out q1.tsq`, dir);
        await rejected(new Uint8Array(fs.readFileSync(path.join(dir, 'q1.tsq'))), FAILURE.badAlg, /SHA-256/);
      });

      it('an imprint of the wrong length → badDataFormat', async () => {
        const good = fs.readFileSync(path.join(dir, 'q.tsq'));
        // Shorten the 32-byte OCTET STRING by one byte and fix the lengths around it.
        const hex = good.toString('hex');
        const at = hex.indexOf('0420');
        assert.ok(at > 0);
        const shortened = hex.slice(0, at) + '041f' + hex.slice(at + 4 + 2, hex.length);
        const bytes = Buffer.from(shortened, 'hex');
        bytes[1]! -= 1; // outer SEQUENCE
        bytes[5]! -= 1; // MessageImprint SEQUENCE
        const s = replyStatus(new Uint8Array(await (await postQuery(tsa.url, new Uint8Array(bytes))).arrayBuffer()));
        assert.equal(s.status, 2);
        assert.deepEqual(s.failBits, [FAILURE.badDataFormat]);
      });

      it('an unknown policy → unacceptedPolicy', async () => {
        await shell(`openssl ts -query -data data.txt -sha256 -tspolicy 1.2.3.4.5 -out qp.tsq`, dir);
        await rejected(new Uint8Array(fs.readFileSync(path.join(dir, 'qp.tsq'))), FAILURE.unacceptedPolicy, /policy/);
      });

      it('openssl reads the rejection', async () => {
        const res = await postQuery(tsa.url, 'not a query');
        writeFile(dir, 'bad.tsr', new Uint8Array(await res.arrayBuffer()));
        const text = await openssl(['ts', '-reply', '-in', 'bad.tsr', '-text'], dir);
        assert.match(text, /Status: Rejected/);
        assert.match(text, /the data submitted has the wrong format/);
      });

      it('a JSON body → 415 with the JSON error shape', async () => {
        const res = await postQuery(tsa.url, '{"digest":"00"}', 'application/json');
        assert.equal(res.status, 415);
        const body = (await res.json()) as { success: boolean; error: { code: string; message: string } };
        assert.equal(body.success, false);
        assert.equal(body.error.code, 'unsupported_media_type');
        assert.match(body.error.message, /timestamp-query/);
      });

      it('a body over the query limit → 413', async () => {
        const res = await postQuery(tsa.url, new Uint8Array(65 * 1024));
        assert.equal(res.status, 413);
        assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'payload_too_large');
      });
    });
  });

  describe(`TSA identity persistence (${store})`, () => {
    it('a restart keeps the same root and signer; a token from before verifies after', async () => {
      const first = await startWitnessApp({ store });
      const dir = tempDir('countersign-tsa-restart-');
      const root1 = await (await fetch(`${first.url}/tsa/root.pem`)).text();
      const signer1 = await (await fetch(`${first.url}/tsa/tsa.pem`)).text();
      const hex = createHash('sha256').update('before the restart').digest('hex');
      await shell(`openssl ts -query -digest ${hex} -sha256 -cert -out q.tsq`, dir);
      const before = await postQuery(first.url, new Uint8Array(fs.readFileSync(path.join(dir, 'q.tsq'))));
      writeFile(dir, 'r.tsr', new Uint8Array(await before.arrayBuffer()));
      await first.close();
      const second = await startWitnessApp({
        store,
        dataDir: first.dataDir,
        ...(first.databaseUrl ? { databaseUrl: first.databaseUrl } : {}),
      });
      try {
        assert.equal(await (await fetch(`${second.url}/tsa/root.pem`)).text(), root1);
        assert.equal(await (await fetch(`${second.url}/tsa/tsa.pem`)).text(), signer1);
        writeFile(dir, 'root.pem', await (await fetch(`${second.url}/tsa/root.pem`)).text());
        assert.match(await openssl(['ts', '-verify', '-in', 'r.tsr', '-digest', hex, '-CAfile', 'root.pem'], dir), /Verification: OK/);
      } finally {
        await second.close();
      }
      if (store === 'sqlite') {
        const keyFile = path.join(first.dataDir, 'tsa', 'tsa-key.pem');
        assert.equal(fs.statSync(keyFile).mode & 0o777, 0o600, 'private keys are 0600');
        assert.equal(fs.statSync(path.join(first.dataDir, 'tsa', 'root-key.pem')).mode & 0o777, 0o600);
      } else {
        assert.equal(fs.existsSync(path.join(first.dataDir, 'tsa')), false, 'with PostgreSQL no key file is written');
      }
    });

    // Store-specific cases are registered only for their store (no skipped tests).
    if (store === 'sqlite')
      it('an incomplete key folder is refused instead of silently replaced', async () => {
        const first = await startWitnessApp({ store, listen: false });
        await first.close();
        fs.rmSync(path.join(first.dataDir, 'tsa', 'tsa-key.pem'));
        await assert.rejects(startWitnessApp({ store, dataDir: first.dataDir, listen: false }), /only part of the tsa key material/);
      });

    if (store === 'postgres')
      it('instances sharing one PostgreSQL database start together and share ONE identity', async () => {
        const a0 = await startWitnessApp({ store, listen: false });
        await a0.close(); // a migrated, empty database
        const fleet = await Promise.all([0, 1, 2].map(() => startWitnessApp({ store, databaseUrl: a0.databaseUrl! })));
        try {
          const roots = await Promise.all(fleet.map(async (i) => (await fetch(`${i.url}/tsa/certs.pem`)).text()));
          assert.equal(new Set(roots).size, 1);
        } finally {
          await Promise.all(fleet.map((i) => i.close()));
        }
      });
  });
}
