/**
 * ServiceClient.verifyProof against a REAL server's receipts (embedded TSA and ledger): a log
 * written with requestProof is sealed into a batch; core's verifier (called through the client)
 * says true for the decrypted payload and false for any change, with a step report beside it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ServiceClient, type ReadLog } from '../src/index.js';
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

    it('is false without trust roots (never "whatever certificate is inside")', async () => {
      assert.equal(
        await ServiceClient.verifyProof(log.decryptedPayload, answer, { ledgerPublicKey: trust.ledgerPublicKeyPem, ledgerUrl: srv.url }),
        false,
      );
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
