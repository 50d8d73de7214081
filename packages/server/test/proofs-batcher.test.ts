/**
 * The batcher's state machine on a real store (SQLite and PostgreSQL), driven pass by pass with
 * a controlled clock. The TSA and ledger here are small in-test witnesses, because the point is
 * their failures: a failing step leaves the batch pending with exponential backoff, a retry never
 * redoes a stored step, a new batcher (restart) continues the same batch with the same root,
 * late logs join the next batch, and two batchers on one PostgreSQL database make one batch per
 * window with every leaf once. (The real TSA and ledger are exercised in proofs-e2e and
 * proofs-scaleout.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { buildMerkleTree, fromHex, payloadHashHex, receiptLeafHash, toHex, verifyInclusion } from '@countersign/core';
import { Store, type NewLog } from '../src/store/index.js';
import { ProofBatcher } from '../src/proofs/batcher.js';
import { buildBatchTree, lastClosedWindow } from '../src/proofs/batch.js';
import type { TimestampWitness } from '../src/tsa/witness.js';
import type { LedgerWitness } from '../src/ledger/witness.js';
import { STORES, freshPostgresDatabase, tempDir, type StoreKind } from './helpers/server.js';
import { proofLog } from './proofs-helpers.js';

const W = 1000;
const GRACE = 100;
const BASE = 50;
const T0 = 1_700_000_000_000; // a window boundary (multiple of W)

/** A TSA that fails its first `failures` calls and records every digest it is asked for. */
class TestTsa implements TimestampWitness {
  readonly digests: string[] = [];
  constructor(public failures = 0) {}
  async timestamp(digest: Uint8Array): Promise<Uint8Array> {
    this.digests.push(toHex(digest));
    if (this.failures > 0) {
      this.failures--;
      throw new Error('TSA unreachable (test)');
    }
    return Uint8Array.from([0x30, 0x20, ...digest]);
  }
  async trustRootsPem(): Promise<string> {
    return '';
  }
}

/** A ledger that fails its first `failures` calls and numbers entries from 0. */
class TestLedger implements LedgerWitness {
  readonly roots: string[] = [];
  constructor(public failures = 0) {}
  async submit(root: string) {
    if (this.failures > 0) {
      this.failures--;
      throw new Error('ledger unreachable (test)');
    }
    this.roots.push(root);
    const logIndex = this.roots.length - 1;
    return { logIndex, uuid: root.padStart(80, '0'), ledgerUrl: 'http://ledger.test', integratedTime: 1 };
  }
  async getEntry(): Promise<Record<string, unknown>> {
    return {};
  }
  async publicKeyPem(): Promise<string> {
    return '';
  }
}

async function openStore(kind: StoreKind, where?: { dataDir: string; databaseUrl: string | undefined }) {
  const dataDir = where?.dataDir ?? tempDir();
  const databaseUrl = where ? where.databaseUrl : kind === 'postgres' ? await freshPostgresDatabase() : undefined;
  return { store: await Store.open({ dataDir, databaseUrl }), dataDir, databaseUrl };
}

const merkleTreeOf = (leaves: Array<{ payloadHash: string }>) => buildMerkleTree(leaves.map((l) => receiptLeafHash(l.payloadHash)));

function batcherOn(store: Store, clock: { now: number }, tsa: TimestampWitness, ledger: LedgerWitness): ProofBatcher {
  return new ProofBatcher({
    store,
    timestampWitness: async () => tsa,
    ledgerWitness: async () => ledger,
    windowMs: W,
    graceMs: GRACE,
    retryBaseMs: BASE,
    retryMaxMs: 10_000,
    now: () => clock.now,
    log: pino({ level: 'silent' }),
  });
}

async function insert(store: Store, logs: NewLog[]): Promise<NewLog[]> {
  await store.logs.insertMany(logs);
  return logs;
}

test('pure pieces: closed window, deterministic order, paths that verify', () => {
  assert.deepEqual(lastClosedWindow(T0 + W + GRACE, W, GRACE), { start: T0, end: T0 + W });
  assert.deepEqual(lastClosedWindow(T0 + W + GRACE - 1, W, GRACE), { start: T0 - W, end: T0 });
  const leaves = [3, 1, 2, 0, 4].map((i) => ({
    logId: `l${i}`,
    projectId: 'p',
    payloadHash: payloadHashHex({ i }),
    eligibleAt: i < 4 ? 5 : 1,
  }));
  const a = buildBatchTree(leaves);
  const b = buildBatchTree([...leaves].reverse());
  assert.equal(a.merkleRoot, b.merkleRoot, 'the order of claiming does not change the tree');
  const placed = Array.from({ length: a.size }, (_, i) => a.leaf(i));
  assert.deepEqual(
    placed.map((l) => l.logId),
    ['l4', 'l0', 'l1', 'l2', 'l3'],
  );
  for (const l of placed) {
    assert.ok(verifyInclusion(receiptLeafHash(l.payloadHash), l.leafIndex, a.size, l.merklePath.map(fromHex), fromHex(a.merkleRoot)));
    assert.deepEqual(l.merklePath, merkleTreeOf(placed).pathHex(l.leafIndex), "paths are core's own");
  }
});

for (const kind of STORES) {
  test(`a failing TSA or ledger leaves the batch pending with backoff; stored steps are not redone (${kind})`, async () => {
    const { store } = await openStore(kind);
    try {
      const clock = { now: T0 + 10 };
      const tsa = new TestTsa(2);
      const ledger = new TestLedger(1);
      const batcher = batcherOn(store, clock, tsa, ledger);
      const logs = await insert(store, [proofLog(T0 + 1), proofLog(T0 + 2), proofLog(T0 + 3)]);

      assert.equal((await batcher.pass()).claimed, undefined, 'the window is still open');
      clock.now = T0 + W + GRACE;
      const first = await batcher.pass();
      assert.equal(first.claimed?.treeSize, 3);
      const batchId = first.claimed!.id;
      assert.deepEqual(first.failed, [batchId]);
      let b = (await store.proofs.getBatch(batchId))!;
      assert.equal(b.state, 'timestamping');
      assert.equal(b.attempts, 1);
      assert.equal(b.nextAttemptAt, clock.now + BASE);
      assert.match(b.lastError ?? '', /TSA unreachable/);

      // Not due yet: nothing is tried.
      assert.deepEqual((await batcher.pass()).failed, []);
      assert.equal(tsa.digests.length, 1);

      clock.now += BASE;
      await batcher.pass();
      b = (await store.proofs.getBatch(batchId))!;
      assert.equal(b.attempts, 2);
      assert.equal(b.nextAttemptAt, clock.now + 2 * BASE, 'the delay doubles');

      clock.now += 2 * BASE;
      await batcher.pass(); // TSA answers, the ledger fails
      b = (await store.proofs.getBatch(batchId))!;
      assert.equal(b.state, 'ledger');
      assert.ok(b.tsaResponse);
      assert.equal(b.attempts, 3);

      clock.now += 4 * BASE;
      const last = await batcher.pass();
      assert.deepEqual(last.sealed, [batchId]);
      b = (await store.proofs.getBatch(batchId))!;
      assert.equal(b.state, 'sealed');
      assert.equal(b.rekorLogIndex, 0);
      assert.equal(b.lastError, null);
      assert.equal(tsa.digests.length, 3, 'the TSA is not asked again once its token is stored');
      assert.ok(
        tsa.digests.every((d) => d === b.merkleRoot),
        'every attempt timestamps the same root',
      );
      assert.deepEqual(ledger.roots, [b.merkleRoot]);

      const leaves = await store.proofs.leaves(batchId);
      assert.deepEqual(leaves.map((l) => l.logId).sort(), logs.map((l) => l.id).sort());
      for (const l of leaves) {
        const r = (await store.proofs.receipt(l.projectId, l.logId))!;
        assert.ok(
          verifyInclusion(
            receiptLeafHash(r.payloadHash),
            r.leafIndex,
            r.batch.treeSize,
            r.merklePath.map(fromHex),
            fromHex(r.batch.merkleRoot),
          ),
        );
      }
    } finally {
      await store.close();
    }
  });

  test(`a restart resumes the pending batch with the same root (${kind})`, async () => {
    const first = await openStore(kind);
    const clock = { now: T0 + W + GRACE };
    let batchId: string;
    let root: string;
    try {
      await insert(first.store, [proofLog(T0 + 5), proofLog(T0 + 6)]);
      const dead = batcherOn(first.store, clock, new TestTsa(Infinity), new TestLedger());
      const pass = await dead.pass();
      batchId = pass.claimed!.id;
      root = pass.claimed!.merkleRoot;
      await dead.stop();
    } finally {
      await first.store.close();
    }
    const again = await openStore(kind, first);
    try {
      clock.now += 10 * BASE;
      const tsa = new TestTsa();
      const pass = await batcherOn(again.store, clock, tsa, new TestLedger()).pass();
      assert.equal(pass.claimed, undefined, 'no new batch: the logs are already claimed');
      assert.deepEqual(pass.sealed, [batchId]);
      assert.deepEqual(tsa.digests, [root]);
      assert.equal((await again.store.proofs.listBatches()).length, 1);
    } finally {
      await again.store.close();
    }
  });

  test(`late and proxied logs join the next batch; nothing is lost or claimed twice (${kind})`, async () => {
    const { store } = await openStore(kind);
    try {
      const clock = { now: T0 + W + GRACE };
      const batcher = batcherOn(store, clock, new TestTsa(), new TestLedger());
      const early = await insert(store, [proofLog(T0 + 1), proofLog(T0 + 2)]);
      const inFlight = proofLog(T0 + 3, { source: 'proxy', status: 'pending', payloadHash: null });
      const noProof = proofLog(T0 + 4, { requestProof: false });
      const noHash = proofLog(T0 + 4, { payloadHash: null });
      await insert(store, [inFlight, noProof, noHash]);
      const p1 = await batcher.pass();
      assert.equal(p1.claimed?.treeSize, 2);

      // A write stamped inside the first window that commits after it was claimed, and one of the next window.
      const late = await insert(store, [proofLog(T0 + 999), proofLog(T0 + W + 1)]);
      // The proxied exchange ends in the third window; its completion time decides its window.
      await store.proxyOutcomes.complete(
        { projectId: inFlight.projectId, id: inFlight.id },
        {
          status: 'complete',
          payload: '{}',
          payloadHash: payloadHashHex({ done: 1 }),
          completedAt: T0 + 2 * W + 1,
        },
      );
      clock.now = T0 + 2 * W + GRACE;
      const p2 = await batcher.pass();
      assert.equal(p2.claimed?.treeSize, 2, 'both late logs, but not the exchange that ended in the next window');
      clock.now = T0 + 3 * W + GRACE;
      const p3 = await batcher.pass();
      assert.equal(p3.claimed?.treeSize, 1);
      clock.now = T0 + 4 * W + GRACE;
      assert.equal((await batcher.pass()).claimed, undefined, 'an empty window makes no batch');

      const batches = await store.proofs.listBatches();
      assert.equal(batches.length, 3);
      assert.ok(batches.every((b) => b.state === 'sealed'));
      const claimed = (await Promise.all(batches.map((b) => store.proofs.leaves(b.id)))).flat().map((l) => l.logId);
      assert.equal(new Set(claimed).size, claimed.length, 'no log is a leaf twice');
      assert.deepEqual(claimed.sort(), [...early, ...late, inFlight].map((l) => l.id).sort());
      assert.equal(await store.proofs.receipt('prj_live_test', noProof.id), undefined);
      assert.equal(await store.proofs.receipt('prj_live_test', noHash.id), undefined);
      assert.equal(await store.proofs.receipt('prj_live_other', early[0]!.id), undefined, 'a receipt is read within its project only');
    } finally {
      await store.close();
    }
  });
}

if (STORES.includes('postgres')) {
  test('two batchers on one PostgreSQL database: one batch per window, every leaf once', async () => {
    const a = await openStore('postgres');
    const b = await openStore('postgres', a);
    try {
      const clock = { now: T0 + W + GRACE };
      const tsaA = new TestTsa();
      const tsaB = new TestTsa();
      const batcherA = batcherOn(a.store, clock, tsaA, new TestLedger());
      const batcherB = batcherOn(b.store, clock, tsaB, new TestLedger());
      const logs = [
        ...(await insert(
          a.store,
          Array.from({ length: 60 }, (_, i) => proofLog(T0 + i)),
        )),
        ...(await insert(
          b.store,
          Array.from({ length: 60 }, (_, i) => proofLog(T0 + i)),
        )),
      ];
      for (let round = 0; round < 5; round++) await Promise.all([batcherA.pass(), batcherB.pass(), batcherA.pass(), batcherB.pass()]);
      const batches = await a.store.proofs.listBatches();
      assert.equal(batches.length, 1);
      assert.equal(batches[0]!.treeSize, logs.length);
      assert.equal(batches[0]!.state, 'sealed');
      assert.equal(tsaA.digests.length + tsaB.digests.length, 1, 'one instance timestamped the window, once');
      const leaves = await a.store.proofs.leaves(batches[0]!.id);
      assert.deepEqual(leaves.map((l) => l.logId).sort(), logs.map((l) => l.id).sort());
    } finally {
      await b.store.close();
      await a.store.close();
    }
  });
}
