/**
 * A proof batch is built in short steps (proofs/build.ts, store/proof-claims.ts): claimed a
 * chunk at a time, frozen with its root, its receipts stored a chunk at a time, then handed to
 * the timestamp step. On both stores: every receipt of a chunked build verifies against the
 * batch's root; a batch left `claiming` or `building` (a crash between two steps) is finished
 * with the same result as a build that never stopped; one whose claimed logs changed meanwhile
 * gets a new root and receipts that all verify; nothing half built is due for a timestamp; and a
 * window with nothing to claim makes no batch.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fromHex, receiptLeafHash, verifyInclusion } from '@countersign/core';
import type { Kysely } from 'kysely';
import { Store, type ProofBatchRow } from '../src/store/index.js';
import type { ProofDatabase } from '../src/store/proofs.js';
import { buildBatchTree } from '../src/proofs/batch.js';
import { claimAndBuild, continueBatch } from '../src/proofs/build.js';
import { STORES, freshPostgresDatabase, tempDir } from './helpers/server.js';
import { proofLog } from './proofs-helpers.js';

const WINDOW = { windowStart: 0, windowEnd: 1_000_000 };
const opts = { chunk: 100, now: () => 2_000_000 };

async function openStore(kind: string): Promise<Store> {
  return Store.open({ dataDir: tempDir(), databaseUrl: kind === 'postgres' ? await freshPostgresDatabase() : undefined });
}

/** `n` final logs that asked for a proof, inside the window. */
async function seed(st: Store, n: number, projectId = 'prj_steps'): Promise<void> {
  for (let i = 0; i < n; i += 250) {
    const rows = Array.from({ length: Math.min(250, n - i) }, (_, k) => proofLog(1000 + i + k, { projectId }));
    await st.logs.insertMany(rows);
  }
}

/** Every receipt of the batch, checked against its root; returns them by log id. */
async function assertReceiptsVerify(st: Store, batch: ProofBatchRow): Promise<Map<string, string[]>> {
  const leaves = await st.proofs.leaves(batch.id);
  assert.equal(leaves.length, batch.treeSize, 'one receipt per leaf');
  const root = fromHex(batch.merkleRoot);
  for (const l of leaves)
    assert.ok(
      verifyInclusion(receiptLeafHash(l.payloadHash), l.leafIndex, batch.treeSize, l.merklePath.map(fromHex), root),
      `receipt of ${l.logId} verifies`,
    );
  return new Map(leaves.map((l) => [l.logId, l.merklePath]));
}

/**
 * What a crash while building leaves: the window claimed (100 at a time) and frozen, the first
 * `stored` receipts stored. Returns the frozen tree.
 */
async function stopWhileBuilding(st: Store, batchId: string, stored: number): Promise<ReturnType<typeof buildBatchTree>> {
  const req = { batchId, ...WINDOW, now: 2_000_000 };
  while ((await st.proofs.build.claimChunk(req, 100)) === 100);
  const tree = buildBatchTree(await st.proofs.build.claimedLeaves(batchId));
  await st.proofs.build.freeze(batchId, tree.size, tree.merkleRoot);
  await st.proofs.build.storeReceipts(
    batchId,
    Array.from({ length: stored }, (_, i) => tree.leaf(i)),
  );
  return tree;
}

for (const kind of STORES) {
  test(`proof batches in steps (${kind})`, async (s) => {
    await s.test(
      'a window of 1,203 leaves claimed 100 at a time: one batch, every receipt verifies, the root is the claimed set’s',
      async () => {
        const st = await openStore(kind);
        try {
          await seed(st, 1203);
          const batch = await claimAndBuild(st, { batchId: 'bat_steps_1', ...WINDOW }, opts);
          assert.ok(batch);
          assert.equal(batch.state, 'timestamping');
          assert.equal(batch.treeSize, 1203);
          assert.equal(batch.merkleRoot, buildBatchTree(await st.proofs.build.claimedLeaves(batch.id)).merkleRoot);
          await assertReceiptsVerify(st, batch);
          assert.equal(await claimAndBuild(st, { batchId: 'bat_steps_again', ...WINDOW }, opts), undefined, 'the window is done');
        } finally {
          await st.close();
        }
      },
    );

    await s.test('a batch left claiming is finished like one that never stopped; nothing half built is due', async () => {
      const st = await openStore(kind);
      try {
        await seed(st, 350);
        assert.equal(await st.proofs.build.claimChunk({ batchId: 'bat_steps_2', ...WINDOW, now: 2_000_000 }, 100), 100);
        const [left] = await st.proofs.unfinishedBatches();
        assert.equal(left?.state, 'claiming');
        assert.deepEqual(await st.proofs.dueBatches(Number.MAX_SAFE_INTEGER), [], 'no timestamp for a batch still claiming');
        const done = await continueBatch(st, left, opts);
        assert.equal(done?.state, 'timestamping');
        assert.equal(done?.treeSize, 350);
        await assertReceiptsVerify(st, done!);
        assert.deepEqual(await st.proofs.unfinishedBatches(), []);
        assert.deepEqual(
          (await st.proofs.dueBatches(Number.MAX_SAFE_INTEGER)).map((b) => b.id),
          ['bat_steps_2'],
        );
      } finally {
        await st.close();
      }
    });

    await s.test('a batch left building with part of its receipts stored keeps its root and those receipts', async () => {
      const st = await openStore(kind);
      try {
        await seed(st, 420);
        const tree = await stopWhileBuilding(st, 'bat_steps_3', 150);
        const early = new Map((await st.proofs.leaves('bat_steps_3')).map((l) => [l.logId, l.merklePath]));
        assert.equal(early.size, 150);
        const [left] = await st.proofs.unfinishedBatches();
        assert.equal(left?.state, 'building');
        const done = await continueBatch(st, left!, opts);
        assert.equal(done?.merkleRoot, tree.merkleRoot, 'same root');
        assert.equal(done?.treeSize, 420);
        const all = await assertReceiptsVerify(st, done!);
        for (const [id, path] of early) assert.deepEqual(all.get(id), path, 'receipts stored before the stop are unchanged');
      } finally {
        await st.close();
      }
    });

    await s.test('a batch whose claimed logs changed while building gets a new root, and every receipt verifies against it', async () => {
      const st = await openStore(kind);
      try {
        await seed(st, 200, 'prj_steps_keep');
        await seed(st, 30, 'prj_steps_gone');
        const tree = await stopWhileBuilding(st, 'bat_steps_4', 120);
        // A project deleted meanwhile: its logs and receipts go (retention/purge.ts does the same).
        const db = st.db as unknown as Kysely<ProofDatabase>;
        await db.deleteFrom('proof_receipts').where('project_id', '=', 'prj_steps_gone').execute();
        await db.deleteFrom('logs').where('project_id', '=', 'prj_steps_gone').execute();
        const [left] = await st.proofs.unfinishedBatches();
        const done = await continueBatch(st, left!, opts);
        assert.equal(done?.treeSize, 200);
        assert.notEqual(done?.merkleRoot, tree.merkleRoot);
        const all = await assertReceiptsVerify(st, done!);
        assert.equal(all.size, 200);
      } finally {
        await st.close();
      }
    });

    await s.test('a window with nothing to claim makes no batch', async () => {
      const st = await openStore(kind);
      try {
        await st.logs.insertMany([proofLog(5_000_000)]); // after the window
        assert.equal(await claimAndBuild(st, { batchId: 'bat_steps_5', ...WINDOW }, opts), undefined);
        assert.deepEqual(await st.proofs.listBatches(), []);
      } finally {
        await st.close();
      }
    });
  });
}
