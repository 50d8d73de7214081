/**
 * Proofs across failures and instances, with the real embedded TSA and ledger:
 * - the TSA is unreachable: the batch stays pending (the endpoint says so), survives a
 *   restart, and seals with the same batch once a TSA answers;
 * - two server instances on one PostgreSQL database: every log is a leaf exactly once, one
 *   batch per window, and every receipt verifies whichever instance is asked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { verifyReceipt, type ProofReceipt } from '@countersign/core';
import { STORES, freshPostgresDatabase, startApp, tempDir } from './helpers/server.js';
import { closedPort } from './helpers/upstreams.js';
import { fullProject } from './foundation-helpers.js';
import {
  fetchLedgerEntry,
  fetchTrust,
  getProof,
  ingestProofLogs,
  waitForReceipt,
  waitUntil,
  sleep,
  type ProofLog,
} from './proofs-helpers.js';
import type { FastifyInstance } from 'fastify';

async function verifyAll(app: FastifyInstance, pairs: Array<[ProofReceipt, unknown]>): Promise<void> {
  const trust = await fetchTrust(app);
  for (const [receipt, payload] of pairs) {
    const report = await verifyReceipt({
      payload,
      receipt,
      trust: { tsaRoots: trust.tsaRootsPem, ledgerPublicKey: trust.ledgerPublicKeyPem },
      ledgerEntry: await fetchLedgerEntry(app, receipt.rekorLogIndex),
      now: new Date(),
    });
    assert.ok(report.ok, JSON.stringify(report.steps.filter((s) => s.status === 'fail')));
  }
}

for (const store of STORES) {
  test(`an unreachable TSA keeps the batch pending across a restart; it seals once a TSA answers (${store})`, async () => {
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const down = await startApp({
      dataDir,
      databaseUrl,
      config: { proofWindowMs: 1000, tsaUrl: `http://127.0.0.1:${await closedPort()}` },
    });
    let p: Awaited<ReturnType<typeof fullProject>>;
    let logs: ProofLog[];
    let batchId: string;
    try {
      p = await fullProject(down, 'tsa-down');
      logs = await ingestProofLogs(down.app, p.agent, 2, 'down');
      // Claimed into a batch, then stuck at the timestamp step.
      await waitUntil('the batch to fail its timestamp step', async () => {
        const r = await getProof(down.app, p.live, p.projectId, logs[0]!.id);
        assert.equal(r.statusCode, 202, r.body);
        if (r.json().stage !== 'timestamping') return false;
        const batch = await down.app.ctx.store.proofs.getBatch(r.json().batchId);
        return (batch?.attempts ?? 0) >= 1;
      });
      const pending = (await getProof(down.app, p.live, p.projectId, logs[0]!.id)).json();
      batchId = pending.batchId;
      assert.match(String(pending.batchId), /^bat_/);
      const batch = (await down.app.ctx.store.proofs.getBatch(batchId))!;
      assert.equal(batch.state, 'timestamping');
      assert.equal(batch.tsaResponse, null);
      assert.ok(batch.lastError);
    } finally {
      await down.close();
    }

    const up = await startApp({ dataDir, databaseUrl, config: { proofWindowMs: 1000 } });
    try {
      const receipts = await Promise.all(logs.map((l) => waitForReceipt(up.app, p.live, p.projectId, l.id)));
      assert.ok(
        receipts.every((r) => r.batchId === batchId && r.treeSize === 2),
        'the same batch, resumed',
      );
      assert.equal((await up.app.ctx.store.proofs.listBatches()).length, 1);
      await verifyAll(
        up.app,
        receipts.map((r, i) => [r, logs[i]!.payload]),
      );
    } finally {
      await up.close();
    }
  });
}

if (STORES.includes('postgres')) {
  test('two instances on one PostgreSQL database: every leaf once, one batch per window', async () => {
    const databaseUrl = await freshPostgresDatabase();
    const one = await startApp({ databaseUrl, config: { proofWindowMs: 1000 } });
    const two = await startApp({ databaseUrl, config: { proofWindowMs: 1000 } });
    try {
      const p = await fullProject(one, 'fleet');
      const made: Array<[ProofLog, FastifyInstance]> = [];
      // Spread over several windows, alternating instances.
      for (let round = 0; round < 6; round++) {
        const via = round % 2 === 0 ? one.app : two.app;
        for (const l of await ingestProofLogs(via, p.agent, 5, `r${round}`)) made.push([l, via]);
        await sleep(400);
      }
      const receipts = await Promise.all(made.map(([l], i) => waitForReceipt(i % 2 ? one.app : two.app, p.live, p.projectId, l.id)));
      const batches = await one.app.ctx.store.proofs.listBatches();
      assert.ok(batches.length >= 2, `logs spread over ${batches.length} windows`);
      assert.equal(new Set(batches.map((b) => b.windowStart)).size, batches.length, 'one batch per window');
      assert.equal(
        batches.reduce((n, b) => n + b.treeSize, 0),
        made.length,
        'every leaf once',
      );
      const leafIds = (await Promise.all(batches.map((b) => one.app.ctx.store.proofs.leaves(b.id)))).flat().map((l) => l.logId);
      assert.deepEqual(leafIds.sort(), made.map(([l]) => l.id).sort());
      assert.ok(batches.every((b) => b.state === 'sealed'));
      await verifyAll(
        two.app,
        receipts.map((r, i) => [r, made[i]![0].payload]),
      );
    } finally {
      await two.close();
      await one.close();
    }
  });
}
