/**
 * ServiceClient.verifyProof against a REAL server's receipts (embedded TSA and ledger): a log
 * written with requestProof is sealed into a batch; core's verifier (called through the client)
 * says true for the decrypted payload and false for any change, with a step report beside it.
 * The spec's two-argument form works once trust is configured for the process (configureTrust or
 * COUNTERSIGN_TSA_ROOTS / COUNTERSIGN_LEDGER_KEY); without any trust it throws, never "false".
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ServiceClient, isClientError, type ReadLog } from '../src/index.js';

/** A CA of nobody's TSA: trusting it instead of the deployment's must fail the chain step. */
const OTHER_ROOT = execFileSync(
  '/usr/bin/openssl',
  [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-subj',
    '/CN=Other CA',
    '-days',
    '2',
    '-keyout',
    '/dev/null',
  ],
  { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
);
const TRUST_ENV = ['COUNTERSIGN_TSA_ROOTS', 'COUNTERSIGN_LEDGER_KEY', 'COUNTERSIGN_LEDGER_URL'] as const;
const untrusted = (e: unknown): boolean => isClientError(e) && e.code === 'trust_not_configured' && /configureTrust/.test(e.message);
import { STORES, startServer, type ClientTestServer } from './helpers/server.js';

for (const storeKind of STORES) {
  describe(`verifyProof (${storeKind})`, () => {
    let srv: ClientTestServer;
    let client: ServiceClient;
    let log: ReadLog;
    let answer: Record<string, unknown>;
    let trust: { tsaRootsPem: string; ledgerPublicKeyPem: string };
    before(async () => {
      // One-second windows keep the test short; they start on whole seconds like the 5 s default.
      srv = await startServer({ store: storeKind, config: { proofWindowMs: 1000 } });
      client = new ServiceClient({ apiKey: srv.project.keys.service, encryptionKey: 'proof key', endpoint: srv.url, flushOnExit: false });
      const id = await client.log({ action: 'contract.sign', requestProof: true, payload: { contract: 'C-17', amount: 1200 } });
      await client.flush();
      const reader = client.reader({ projectId: srv.project.id, readKey: srv.project.keys.live });
      // Wait for the batch to be sealed (the endpoint says "pending" until then): not a timing assertion.
      for (let i = 0; i < 100; i++) {
        answer = await reader.getProof(id);
        if (answer.status === 'sealed') break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      assert.equal(answer.status, 'sealed');
      log = await reader.getLog(id);
      trust = (await (await fetch(srv.url + '/v1/proofs/trust')).json()) as typeof trust;
    });
    after(async () => {
      await client.shutdown();
      await srv.close();
    });
    afterEach(() => {
      ServiceClient.configureTrust(null);
      for (const name of TRUST_ENV) delete process.env[name];
    });

    const options = () => ({ tsaRoots: trust.tsaRootsPem, ledgerPublicKey: trust.ledgerPublicKeyPem, ledgerUrl: srv.url });

    it('is true for the decrypted payload, given the endpoint answer or the bare receipt', async () => {
      assert.equal(await ServiceClient.verifyProof(log.decryptedPayload, answer, options()), true);
      assert.equal(await ServiceClient.verifyProof(JSON.stringify(log.decryptedPayload), answer.receipt, options()), true);
      const report = await ServiceClient.verifyProofReport(log.decryptedPayload, answer, options());
      assert.equal(report.ok, true);
      assert.ok(report.steps.some((s) => s.id === 'ledger_root_match' && s.status === 'pass'));
    });

    it('is false for an altered payload, naming the payload hash step', async () => {
      const altered = { ...log.decryptedPayload, payload: { contract: 'C-17', amount: 9200 } };
      assert.equal(await ServiceClient.verifyProof(altered, answer, options()), false);
      const report = await ServiceClient.verifyProofReport(altered, answer, options());
      assert.equal(report.steps.find((s) => s.id === 'payload_hash')?.status, 'fail');
    });

    it('throws trust_not_configured without trust roots (never "false", never "whatever certificate is inside")', async () => {
      await assert.rejects(ServiceClient.verifyProof(log.decryptedPayload, answer), untrusted);
      await assert.rejects(ServiceClient.verifyProof(log.decryptedPayload, answer.receipt), untrusted);
      await assert.rejects(
        ServiceClient.verifyProof(log.decryptedPayload, answer, { ledgerPublicKey: trust.ledgerPublicKeyPem, ledgerUrl: srv.url }),
        untrusted,
      );
      // Online verification needs the ledger key as well.
      await assert.rejects(ServiceClient.verifyProofReport(log.decryptedPayload, answer, { tsaRoots: trust.tsaRootsPem }), untrusted);
    });

    it('the two-argument form verifies once trust is configured for the process', async () => {
      ServiceClient.configureTrust({ tsaRoots: trust.tsaRootsPem, ledgerKey: trust.ledgerPublicKeyPem });
      assert.equal(await ServiceClient.verifyProof(log.decryptedPayload, answer), true);
      assert.equal(await ServiceClient.verifyProof({ ...log.decryptedPayload, nonce: '0'.repeat(32) }, answer), false);
      // A pinned ledger URL wins over the receipt's, per call options over both.
      ServiceClient.configureTrust({ tsaRoots: trust.tsaRootsPem, ledgerKey: trust.ledgerPublicKeyPem, ledgerUrl: 'http://127.0.0.1:1' });
      assert.equal(await ServiceClient.verifyProof(log.decryptedPayload, answer), false);
      assert.equal(await ServiceClient.verifyProof(log.decryptedPayload, answer, { ledgerUrl: srv.url }), true);
      // Trust of another deployment makes a genuine receipt fail its timestamp chain.
      ServiceClient.configureTrust({ tsaRoots: OTHER_ROOT, ledgerKey: trust.ledgerPublicKeyPem });
      const report = await ServiceClient.verifyProofReport(log.decryptedPayload, answer);
      assert.equal(report.steps.find((s) => s.id === 'timestamp_chain')?.status, 'fail');
      ServiceClient.configureTrust(null);
      await assert.rejects(ServiceClient.verifyProof(log.decryptedPayload, answer), untrusted);
      assert.throws(
        () => ServiceClient.configureTrust({} as never),
        (e: unknown) => isClientError(e) && e.code === 'invalid_config',
      );
    });

    it('reads COUNTERSIGN_TSA_ROOTS and COUNTERSIGN_LEDGER_KEY (files or PEM text)', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-trust-'));
      fs.writeFileSync(path.join(dir, 'tsa-roots.pem'), trust.tsaRootsPem);
      process.env.COUNTERSIGN_TSA_ROOTS = path.join(dir, 'tsa-roots.pem');
      process.env.COUNTERSIGN_LEDGER_KEY = trust.ledgerPublicKeyPem;
      assert.equal(await ServiceClient.verifyProof(log.decryptedPayload, answer), true);
      process.env.COUNTERSIGN_TSA_ROOTS = path.join(dir, 'missing.pem');
      await assert.rejects(
        ServiceClient.verifyProof(log.decryptedPayload, answer),
        (e: unknown) => isClientError(e) && e.code === 'invalid_config',
      );
      delete process.env.COUNTERSIGN_TSA_ROOTS;
      await assert.rejects(ServiceClient.verifyProof(log.decryptedPayload, answer), untrusted);
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('offline mode skips the ledger and still checks hash, path and timestamp', async () => {
      const report = await ServiceClient.verifyProofReport(log.decryptedPayload, answer, { tsaRoots: trust.tsaRootsPem, offline: true });
      assert.equal(report.ok, true);
      assert.ok(report.steps.filter((s) => s.id.startsWith('ledger_')).every((s) => s.status === 'skip'));
      assert.equal(
        await ServiceClient.verifyProof({ ...log.decryptedPayload, nonce: '0'.repeat(32) }, answer, {
          tsaRoots: trust.tsaRootsPem,
          offline: true,
        }),
        false,
      );
    });

    it('an unreachable ledger makes verification fail, not throw', async () => {
      assert.equal(await ServiceClient.verifyProof(log.decryptedPayload, answer, { ...options(), ledgerUrl: 'http://127.0.0.1:1' }), false);
    });
  });
}
