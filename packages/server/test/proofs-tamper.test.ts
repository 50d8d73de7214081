/**
 * Tampering with any single field of the payload or a real receipt, or swapping receipts
 * between logs, fails verification at the step that should catch it. Receipts come from the
 * real service (embedded TSA and ledger); the ledger entry is fetched by the receipt's
 * rekorLogIndex exactly as `countersign verify` does, so a tampered index fetches another entry.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { verifyReceipt, type ProofReceipt, type VerificationStepId } from '@countersign/core';
import { STORES, tempDir } from './helpers/server.js';
import { closedPort } from './helpers/upstreams.js';
import { startWitnessApp } from './tsa-helpers.js';
import { fullProject } from './foundation-helpers.js';
import { fetchTrust, ingestProofLogs, runCli, waitForReceipt, writeFiles } from './proofs-helpers.js';

const flipHex = (hex: string, at = 0): string => hex.slice(0, at) + (hex[at] === '0' ? '1' : '0') + hex.slice(at + 1);

for (const store of STORES) {
  test(`tampering with a receipt or its payload fails at the right step (${store})`, async (s) => {
    const w = await startWitnessApp({ store, config: { proofWindowMs: 1000 } });
    const dir = tempDir('countersign-tamper-');
    try {
      const p = await fullProject({ ...w, masterKey: w.app.ctx.masterKey, config: w.app.ctx.config }, 'tamper');
      const logs = await ingestProofLogs(w.app, p.agent, 3, 'first');
      const receipts = await Promise.all(logs.map((l) => waitForReceipt(w.app, p.live, p.projectId, l.id)));
      // A second batch, so another ledger entry and another token exist to swap in.
      const [other] = await ingestProofLogs(w.app, p.agent, 1, 'second');
      const otherReceipt = await waitForReceipt(w.app, p.live, p.projectId, other!.id);
      assert.notEqual(otherReceipt.batchId, receipts[0]!.batchId);
      const trust = await fetchTrust(w.app);

      const verify = async (payload: unknown, receipt: ProofReceipt) => {
        const entry = await w.app.inject({ method: 'GET', url: `/api/v1/log/entries?logIndex=${receipt.rekorLogIndex}` });
        return verifyReceipt({
          payload,
          receipt,
          trust: { tsaRoots: trust.tsaRootsPem, ledgerPublicKey: trust.ledgerPublicKeyPem },
          ...(entry.statusCode === 200 ? { ledgerEntry: entry.json() } : {}),
          now: new Date(),
        });
      };
      const failing = async (payload: unknown, receipt: ProofReceipt): Promise<VerificationStepId[]> =>
        (await verify(payload, receipt)).steps.filter((st) => st.status === 'fail').map((st) => st.id);

      // The middle leaf of three: its audit path has two siblings, and a smaller treeSize changes its shape.
      const at = receipts.findIndex((r) => r.leafIndex === 1);
      const R = receipts[at]!;
      const P = logs[at]!.payload;
      const neighbour = receipts[(at + 1) % receipts.length]!;

      await s.test('the untouched receipt verifies', async () => {
        assert.deepEqual(await failing(P, R), []);
      });

      const tsaDer = Buffer.from(R.tsaResponse, 'base64');
      const flippedSignature = Buffer.from(tsaDer);
      flippedSignature[flippedSignature.length - 1]! ^= 0x01;
      const cases: Array<[string, unknown, ProofReceipt, VerificationStepId[]]> = [
        ['payload: a field changed', { ...P, response: { ok: false } }, R, ['payload_hash']],
        ['payload: a field added', { ...P, extra: 1 }, R, ['payload_hash']],
        ['payloadHash: another leaf of the batch', P, { ...R, payloadHash: neighbour.payloadHash }, ['payload_hash', 'merkle_path']],
        [
          'merklePathJson: one sibling changed',
          P,
          { ...R, merklePathJson: [flipHex(R.merklePathJson[0]!), ...R.merklePathJson.slice(1)] },
          ['merkle_path'],
        ],
        ['merklePathJson: a sibling dropped', P, { ...R, merklePathJson: R.merklePathJson.slice(1) }, ['merkle_path']],
        ['merkleRoot: changed', P, { ...R, merkleRoot: flipHex(R.merkleRoot) }, ['merkle_path', 'timestamp_imprint', 'ledger_root_match']],
        ['leafIndex: changed', P, { ...R, leafIndex: (R.leafIndex + 1) % R.treeSize }, ['merkle_path']],
        ['treeSize: changed', P, { ...R, treeSize: 2 }, ['merkle_path']],
        // A start after the token's genTime is also after windowEnd, which the format check sees first.
        [
          'windowStart: after the timestamp',
          P,
          { ...R, windowStart: new Date(Date.now() + 3_600_000).toISOString() },
          ['receipt_format', 'timestamp_time'],
        ],
        ['tsaResponse: signature byte flipped', P, { ...R, tsaResponse: flippedSignature.toString('base64') }, ['timestamp_signature']],
        ['tsaResponse: another batch token', P, { ...R, tsaResponse: otherReceipt.tsaResponse }, ['timestamp_imprint']],
        ['tsaResponse: not DER', P, { ...R, tsaResponse: Buffer.from('not a token').toString('base64') }, ['timestamp_token']],
        [
          'rekorLogIndex: another batch entry',
          P,
          { ...R, rekorLogIndex: otherReceipt.rekorLogIndex },
          ['ledger_entry', 'ledger_root_match'],
        ],
        [
          'ledgerEntryUuid: changed',
          P,
          { ...R, ledgerEntryUuid: flipHex(R.ledgerEntryUuid, R.ledgerEntryUuid.length - 1) },
          ['ledger_entry'],
        ],
        ['swap: another log receipt of the same batch', P, neighbour, ['payload_hash']],
        ['swap: a receipt from another batch', P, otherReceipt, ['payload_hash']],
      ];
      for (const [name, payload, receipt, expected] of cases) {
        await s.test(`${name} → fails ${expected.join(', ')}`, async () => {
          const got = await failing(payload, receipt);
          assert.equal(got[0], expected[0], `first failing step; all failing: ${got.join(', ')}`);
          for (const id of expected) assert.ok(got.includes(id), `${id} should fail; failing: ${got.join(', ')}`);
        });
      }

      await s.test('logId and batchId are locators: changing them alone does not change the verdict', async () => {
        // The payload, path, token and entry bind the proof; these fields only say where to look.
        assert.deepEqual(await failing(P, { ...R, logId: 'log_someoneElse0000000000' }), []);
        assert.deepEqual(await failing(P, { ...R, batchId: 'bat_other' }), []);
      });

      await s.test('ledgerUrl: pointing elsewhere fails the ledger steps in countersign verify', async () => {
        const files = writeFiles(dir, {
          'payload.json': JSON.stringify(P),
          'receipt.json': JSON.stringify({ ...R, ledgerUrl: `http://127.0.0.1:${await closedPort()}` }),
          'roots.pem': trust.tsaRootsPem,
          'ledger.pem': trust.ledgerPublicKeyPem,
        });
        const r = await runCli([
          'verify',
          '--payload',
          files['payload.json'],
          '--receipt',
          files['receipt.json'],
          '--tsa-roots',
          files['roots.pem'],
          '--ledger-key',
          files['ledger.pem'],
        ]);
        assert.equal(r.code, 1, r.stdout + r.stderr);
        assert.match(r.stdout, /FAIL\s+ledger_entry/);
        assert.match(r.stdout, /could not fetch the ledger entry/);
      });
    } finally {
      await w.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}
