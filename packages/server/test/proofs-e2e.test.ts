/**
 * Proof receipts end to end through a real listening server (SQLite and PostgreSQL): logs from
 * `POST /v1/log` (two projects) and `POST /v1/proxy` ask for proofs; while the clock is held
 * inside the window the endpoint answers pending; once the window closes one batch seals them
 * all, and every receipt passes core's verifier (with the ledger entry), `openssl ts -verify`
 * against the published root, and `countersign verify` as a user runs it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { deriveEnvelopeKey, openPayload, verifyReceipt, type Envelope, type ProofReceipt } from '@countersign/core';
import { STORES, tempDir } from './helpers/server.js';
import { startUpstream, proxyCall } from './helpers/upstreams.js';
import { startWitnessApp } from './tsa-helpers.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';
import { fetchLedgerEntry, fetchTrust, getProof, ingestProofLogs, openssl, runCli, waitForReceipt, writeFiles } from './proofs-helpers.js';

for (const store of STORES) {
  test(`proof receipts end to end (${store})`, async (s) => {
    const up = await startUpstream();
    // Held inside one window until released, so "pending" is certain and every log shares a window.
    // Windows are whole seconds: the TSA's genTime has one-second precision, and a verifier
    // checks that genTime is not before the window start.
    let frozen: number | undefined = Date.now();
    const w = await startWitnessApp({
      store,
      now: () => frozen ?? Date.now(),
      config: { proofWindowMs: 1000, allowTargets: [up.hostPort] },
    });
    const dir = tempDir('countersign-proofs-');
    try {
      const t = { ...w, masterKey: w.app.ctx.masterKey, config: w.app.ctx.config };
      const a = await fullProject(t, 'a');
      const b = await fullProject(t, 'b');
      const logsA = await ingestProofLogs(w.app, a.agent, 3, 'a');
      const logsB = await ingestProofLogs(w.app, b.service, 2, 'b');
      const plain = await postLog(
        w.app,
        a.human,
        { requestProof: true, payload: { step: 'plain' } },
        { 'x-service-encryption-key': 'plain key' },
      );
      assert.equal(plain.statusCode, 201, plain.body);
      const noProof = await postLog(w.app, a.agent, { payload: { step: 'no proof' } }, { 'x-service-encryption-key': 'plain key' });
      assert.equal(noProof.statusCode, 201, noProof.body);
      const proxied = await proxyCall(
        w.url,
        a.agent,
        { target: up.url + '/status/200', payload: { q: 1 }, requestProof: true },
        {},
        'proxy key',
      );
      assert.equal(proxied.status, 200);
      const proxiedId = proxied.logId!;

      await s.test('pending (202, not an error) while the window is open', async () => {
        for (const id of [logsA[0]!.id, plain.json().id, proxiedId]) {
          const r = await getProof(w.app, a.live, a.projectId, id);
          assert.equal(r.statusCode, 202, r.body);
          const body = r.json();
          assert.equal(body.success, true);
          assert.equal(body.status, 'pending');
          assert.equal(body.stage, 'awaiting_window');
          assert.equal(body.batchId, null);
          assert.ok(Date.parse(body.windowEnd) > Date.parse(body.windowStart));
          assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
        }
      });

      await s.test('404 for a log without requestProof or not in the project; 401/403 for the wrong caller', async () => {
        assertError(await getProof(w.app, a.live, a.projectId, noProof.json().id), 404, 'not_found');
        assertError(await getProof(w.app, a.live, a.projectId, 'no-such-log-0000000000'), 404, 'not_found');
        // Project B's live key: 403 on A's path, 404 for A's log under B's own path.
        assertError(await getProof(w.app, b.live, a.projectId, logsA[0]!.id), 403, 'project_forbidden');
        assertError(await getProof(w.app, b.live, b.projectId, logsA[0]!.id), 404, 'not_found');
        assertError(await getProof(w.app, a.agent, a.projectId, logsA[0]!.id), 403, 'wrong_credential_class');
        assertError(await getProof(w.app, w.app.ctx.masterKey, a.projectId, logsA[0]!.id), 403, 'wrong_credential_class');
        assertError(await getProof(w.app, undefined, a.projectId, logsA[0]!.id), 401, 'missing_api_key');
        assertError(await getProof(w.app, a.live, a.projectId, 'bad id!'), 400, 'invalid_request');
      });

      frozen = undefined;
      const receiptsA = await Promise.all(logsA.map((l) => waitForReceipt(w.app, a.live, a.projectId, l.id)));
      const receiptsB = await Promise.all(logsB.map((l) => waitForReceipt(w.app, b.live, b.projectId, l.id)));
      const plainReceipt = await waitForReceipt(w.app, a.live, a.projectId, plain.json().id);
      const proxiedReceipt = await waitForReceipt(w.app, a.live, a.projectId, proxiedId);
      const all = [...receiptsA, ...receiptsB, plainReceipt, proxiedReceipt];
      const trust = await fetchTrust(w.app);

      await s.test('one batch per window across projects and sources, each leaf once', async () => {
        const batchIds = new Set(all.map((r) => r.batchId));
        assert.equal(batchIds.size, 1, 'every log of the window is in one batch');
        assert.equal(new Set(all.map((r) => r.merkleRoot)).size, 1);
        assert.ok(all.every((r) => r.treeSize === all.length));
        assert.deepEqual(
          all.map((r) => r.leafIndex).sort((x, y) => x - y),
          all.map((_, i) => i),
        );
        const leaves = await w.app.ctx.store.proofs.leaves(all[0]!.batchId);
        assert.equal(leaves.length, all.length);
        assert.equal(new Set(leaves.map((l) => l.logId)).size, all.length);
        for (const [r, l] of [...receiptsA.map((r, i) => [r, logsA[i]!] as const), ...receiptsB.map((r, i) => [r, logsB[i]!] as const)]) {
          assert.equal(r.logId, l.id);
          assert.equal(r.payloadHash, l.payloadHash);
        }
      });

      // The decrypted payloads a verifier holds: the client's own, and the server-sealed ones opened with their keys.
      const openLog = async (id: string, key: string) => {
        const r = await getWith(w.app, a.live, `/v1/projects/${a.projectId}/logs/${id}`);
        return openPayload(r.json().log.payload as Envelope, await deriveEnvelopeKey(key), id);
      };
      const plainPayload = await openLog(plain.json().id, 'plain key');
      const proxiedPayload = await openLog(proxiedId, 'proxy key');
      const pairs: Array<[ProofReceipt, unknown]> = [
        ...receiptsA.map((r, i) => [r, logsA[i]!.payload] as [ProofReceipt, unknown]),
        ...receiptsB.map((r, i) => [r, logsB[i]!.payload] as [ProofReceipt, unknown]),
        [plainReceipt, plainPayload],
        [proxiedReceipt, proxiedPayload],
      ];

      await s.test("core's verifier passes every step with the ledger entry, and offline", async () => {
        const ledgerEntry = await fetchLedgerEntry(w.app, all[0]!.rekorLogIndex);
        for (const [receipt, payload] of pairs) {
          const trustIn = { tsaRoots: trust.tsaRootsPem, ledgerPublicKey: trust.ledgerPublicKeyPem };
          const report = await verifyReceipt({ payload, receipt, trust: trustIn, ledgerEntry, now: new Date() });
          assert.ok(report.ok, JSON.stringify(report.steps, null, 1));
          assert.ok(report.steps.some((st) => st.id === 'ledger_root_match' && st.status === 'pass'));
          const offline = await verifyReceipt({ payload, receipt, trust: trustIn, offline: true, now: new Date() });
          assert.ok(offline.ok);
          assert.ok(offline.steps.filter((st) => st.id.startsWith('ledger_')).every((st) => st.status === 'skip'));
        }
      });

      await s.test('openssl ts -verify accepts the token over merkleRoot with the published root', async () => {
        const chain = await w.app.inject({ method: 'GET', url: '/tsa/certs.pem' });
        assert.equal(chain.statusCode, 200);
        const files = writeFiles(dir, {
          'root.pem': trust.tsaRootsPem,
          'chain.pem': chain.body,
          'tsa.der': Buffer.from(all[0]!.tsaResponse, 'base64'),
        });
        const ok = await openssl([
          'ts',
          '-verify',
          '-digest',
          all[0]!.merkleRoot,
          '-in',
          files['tsa.der'],
          '-CAfile',
          files['root.pem'],
          '-untrusted',
          files['chain.pem'],
        ]);
        assert.equal(ok.code, 0, ok.out);
        assert.match(ok.out, /Verification: OK/);
        const otherDigest = all[0]!.merkleRoot.replace(/^./, (c) => (c === '0' ? '1' : '0'));
        const bad = await openssl([
          'ts',
          '-verify',
          '-digest',
          otherDigest,
          '-in',
          files['tsa.der'],
          '-CAfile',
          files['root.pem'],
          '-untrusted',
          files['chain.pem'],
        ]);
        assert.notEqual(bad.code, 0, 'a different digest must not verify');
      });

      await s.test('countersign verify: exit 0 on a good receipt, 1 on a tampered payload, 2 on usage errors', async () => {
        const [receipt, payload] = pairs[0]!;
        const answer = await getProof(w.app, a.live, a.projectId, receipt.logId);
        const files = writeFiles(dir, {
          'payload.json': JSON.stringify(payload),
          'tampered.json': JSON.stringify({ ...(payload as object), nonce: 'f'.repeat(32) }),
          'answer.json': answer.body,
          'receipt.json': JSON.stringify(receipt),
          'pending.json': JSON.stringify({ success: true, status: 'pending', logId: receipt.logId }),
          'roots.pem': trust.tsaRootsPem,
          'ledger.pem': trust.ledgerPublicKeyPem,
        });
        const base = ['verify', '--tsa-roots', files['roots.pem'], '--ledger-key', files['ledger.pem'], '--ledger-url', w.url];
        // Independent runs of the CLI, started together (each is a fresh Node process).
        const P = files['payload.json'];
        const [good, raw, viaTrust, offline, tampered, noRoots, missing, unknownFlag, noFile, pending] = await Promise.all([
          runCli([...base, '--payload', P, '--receipt', files['answer.json']]),
          runCli([...base, '--payload', P, '--receipt', files['receipt.json'], '--json']),
          runCli(['verify', '--trust-url', w.url, '--ledger-url', w.url, '--payload', P, '--receipt', files['answer.json']]),
          runCli(['verify', '--tsa-roots', files['roots.pem'], '--offline', '--payload', P, '--receipt', files['receipt.json']]),
          runCli([...base, '--payload', files['tampered.json'], '--receipt', files['answer.json']]),
          runCli(['verify', '--payload', P, '--receipt', files['receipt.json']]),
          runCli(['verify', '--receipt', files['receipt.json']]),
          runCli([...base, '--payload', P, '--receipt', files['receipt.json'], '--bogus']),
          runCli([...base, '--payload', path.join(dir, 'absent.json'), '--receipt', files['receipt.json']]),
          runCli([...base, '--payload', P, '--receipt', files['pending.json']]),
        ]);
        assert.equal(good.code, 0, good.stdout + good.stderr);
        assert.match(good.stdout, /PASS\s+payload_hash/);
        assert.match(good.stdout, /PASS\s+ledger_root_match/);
        assert.match(good.stdout, /VERIFIED/);
        assert.equal(raw.code, 0, raw.stdout + raw.stderr);
        assert.equal(JSON.parse(raw.stdout).ok, true);
        assert.equal(viaTrust.code, 0, viaTrust.stdout + viaTrust.stderr);
        assert.equal(offline.code, 0, offline.stdout + offline.stderr);
        assert.match(offline.stdout, /SKIP\s+ledger_entry/);
        assert.equal(tampered.code, 1, tampered.stdout + tampered.stderr);
        assert.match(tampered.stdout, /FAIL\s+payload_hash/);
        assert.match(tampered.stdout, /NOT VERIFIED/);
        assert.equal(noRoots.code, 2, noRoots.stderr);
        assert.match(noRoots.stderr, /--tsa-roots/);
        assert.equal(missing.code, 2, missing.stderr);
        assert.equal(unknownFlag.code, 2, unknownFlag.stderr);
        assert.equal(noFile.code, 2, noFile.stderr);
        assert.equal(pending.code, 2, pending.stderr);
        assert.match(pending.stderr, /pending/);
      });

      await s.test('the trust endpoint is public and carries no private key', async () => {
        assert.match(trust.tsaRootsPem, /BEGIN CERTIFICATE/);
        assert.match(trust.ledgerPublicKeyPem, /BEGIN PUBLIC KEY/);
        assert.doesNotMatch(JSON.stringify(trust), /PRIVATE KEY/);
      });
    } finally {
      await w.close();
      await up.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}
