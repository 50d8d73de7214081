/**
 * The embedded ledger as its own role (`--roles ledger`), through its Rekor v1 API: append
 * and fetch by index and UUID; inclusion proofs, SETs and checkpoints verified by core's
 * verifier; consistency proofs between tree sizes; refusal of tampered submissions;
 * append-only storage; restart; concurrent appends (two instances on one PostgreSQL).
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  buildMerkleTree,
  checkConsistency,
  fromBase64,
  fromHex,
  hashLeaf,
  verifyCheckpoint,
  parsePublicKey,
  EMPTY_TREE_ROOT,
  toHex,
} from '@countersign/core';
import { STORES } from './helpers/server.js';
import { startWitnessApp, type WitnessApp } from './tsa-helpers.js';
import { assertEntryVerifies, json, newSubmitter } from './ledger-helpers.js';
import { createLedgerWitness, type LedgerSubmission } from '../src/ledger/witness.js';
import type { Role } from '../src/config.js';

const LEDGER_ONLY = { roles: new Set<Role>(['ledger']) };
const rootOf = (i: number): string => createHash('sha256').update(`batch ${i}`).digest('hex');

interface Head {
  treeSize: number;
  rootHash: string;
  signedTreeHead: string;
  treeID: string;
}

for (const store of STORES) {
  describe(`embedded ledger, --roles ledger (${store})`, () => {
    let ledger: WitnessApp;
    let publicKeyPem: string;
    const heads: Head[] = [];
    const submissions: LedgerSubmission[] = [];
    const head = async (): Promise<Head> => (await json(`${ledger.url}/api/v1/log`)).body as unknown as Head;

    before(async () => {
      ledger = await startWitnessApp({ store, config: LEDGER_ONLY });
    });
    after(() => ledger.close());

    it('runs alone: only the ledger routes (and health) are served', async () => {
      assert.equal((await fetch(`${ledger.url}/healthz`)).status, 200);
      assert.equal((await fetch(`${ledger.url}/tsa/root.pem`)).status, 404);
      assert.equal((await json(`${ledger.url}/v1/log`, { body: {} })).status, 404);
    });

    it('serves its public key and an empty, signed tree head', async () => {
      const res = await fetch(`${ledger.url}/api/v1/log/publicKey`);
      assert.equal(res.status, 200);
      publicKeyPem = await res.text();
      assert.match(publicKeyPem, /^-----BEGIN PUBLIC KEY-----/);
      const h = await head();
      assert.equal(h.treeSize, 0);
      assert.equal(h.rootHash, toHex(EMPTY_TREE_ROOT));
      assert.match(h.treeID, /^\d+$/);
      const cp = verifyCheckpoint(h.signedTreeHead, parsePublicKey(publicKeyPem));
      assert.ok(cp.signatureValid, cp.detail);
      // No public URL here: the checkpoint name is the listen address, the ledger's natural base URL.
      assert.equal(cp.checkpoint!.origin, `${new URL(ledger.url).host} - ${h.treeID}`);
      assert.equal(cp.checkpoint!.signatures[0]!.name, new URL(ledger.url).host);
      heads.push(h);
    });

    it('submit() appends hashedrekord entries of Merkle roots at dense indices', async () => {
      const witness = await createLedgerWitness(ledger.app.ctx);
      assert.equal(await witness.publicKeyPem(), publicKeyPem);
      for (let i = 0; i < 7; i++) {
        const s = await witness.submit(rootOf(i));
        assert.equal(s.logIndex, i);
        assert.match(s.uuid, /^[0-9a-f]{80}$/);
        assert.ok(Number.isInteger(s.integratedTime));
        submissions.push(s);
        heads.push(await head());
      }
      assert.equal(heads.at(-1)!.treeSize, 7);
    });

    it('submit() of a root already in the ledger answers with the stored entry (a retry after a crash)', async () => {
      const witness = await createLedgerWitness(ledger.app.ctx);
      const again = await witness.submit(rootOf(2));
      assert.equal(again.logIndex, submissions[2]!.logIndex);
      assert.equal(again.uuid, submissions[2]!.uuid);
      assert.equal((await head()).treeSize, 7);
    });

    it('every entry fetched by index verifies with core: SET, inclusion proof, checkpoint, body signature, root match', async () => {
      const witness = await createLedgerWitness(ledger.app.ctx);
      for (const s of submissions) {
        const entry = await witness.getEntry(s.logIndex);
        assert.deepEqual(Object.keys(entry), [s.uuid]);
        const report = await assertEntryVerifies(entry, {
          publicKey: publicKeyPem,
          expectedDataHash: rootOf(s.logIndex),
          expectedLogIndex: s.logIndex,
          expectedUuid: s.uuid,
          entrySignerKey: publicKeyPem,
        });
        assert.deepEqual(
          report.steps.map((st) => `${st.id}:${st.status}`),
          ['ledger_entry', 'ledger_set', 'ledger_inclusion', 'ledger_checkpoint', 'ledger_body_signature', 'ledger_root_match'].map(
            (id) => `${id}:pass`,
          ),
        );
        // The inclusion proof is for the current tree, even for old entries.
        const proof = (entry[s.uuid] as { verification: { inclusionProof: { treeSize: number } } }).verification.inclusionProof;
        assert.equal(proof.treeSize, 7);
      }
    });

    it('GET by index, by 80-hex UUID and by 64-hex UUID return the same entry', async () => {
      const s = submissions[3]!;
      const byIndex = await json(`${ledger.url}/api/v1/log/entries?logIndex=3`);
      const byUuid = await json(`${ledger.url}/api/v1/log/entries/${s.uuid}`);
      const byLeaf = await json(`${ledger.url}/api/v1/log/entries/${s.uuid.slice(16).toUpperCase()}`);
      assert.equal(byIndex.status, 200);
      assert.deepEqual(byUuid.body, byIndex.body);
      assert.deepEqual(byLeaf.body, byIndex.body);
      const retrieved = await json(`${ledger.url}/api/v1/log/entries/retrieve`, { body: { entryUUIDs: [s.uuid], logIndexes: [3, 99] } });
      assert.equal(retrieved.status, 200);
      assert.deepEqual(retrieved.body, [byIndex.body, byIndex.body]);
    });

    it('the tree head root is the RFC 9162 root over SHA-256(0x00 ‖ body) of every entry', async () => {
      const leaves: Uint8Array[] = [];
      for (let i = 0; i < 7; i++) {
        const e = (await json(`${ledger.url}/api/v1/log/entries?logIndex=${i}`)).body;
        const body = (Object.values(e)[0] as { body: string }).body;
        leaves.push(hashLeaf(fromBase64(body)));
        const decoded = JSON.parse(Buffer.from(body, 'base64').toString('utf8')) as {
          kind: string;
          spec: { data: { hash: { value: string } } };
        };
        assert.equal(decoded.kind, 'hashedrekord');
        assert.equal(decoded.spec.data.hash.value, rootOf(i));
      }
      assert.equal(heads.at(-1)!.rootHash, buildMerkleTree(leaves).rootHex);
      const cp = verifyCheckpoint(heads.at(-1)!.signedTreeHead, parsePublicKey(publicKeyPem));
      assert.ok(cp.signatureValid);
      assert.equal(cp.checkpoint!.treeSize, 7);
      assert.equal(toHex(cp.checkpoint!.rootHash), heads.at(-1)!.rootHash);
    });

    it('consistency proofs between every pair of sizes verify against the heads seen then', async () => {
      for (let first = 1; first <= 7; first++) {
        for (let last = first; last <= 7; last++) {
          const r = await json(`${ledger.url}/api/v1/log/proof?firstSize=${first}&lastSize=${last}`);
          assert.equal(r.status, 200);
          assert.equal(r.body.rootHash, heads[last]!.rootHash);
          const hashes = (r.body.hashes as unknown as string[]).map(fromHex);
          const check = checkConsistency(first, last, hashes, fromHex(heads[first]!.rootHash), fromHex(heads[last]!.rootHash));
          assert.ok(check.ok, `${first}→${last}: ${'reason' in check ? check.reason : ''}`);
          if (last > first && hashes.length > 0) {
            const bad = hashes.map((h) => h.slice());
            bad[0]![0]! ^= 1;
            assert.equal(checkConsistency(first, last, bad, fromHex(heads[first]!.rootHash), fromHex(heads[last]!.rootHash)).ok, false);
          }
        }
      }
    });

    it('refuses bad reads with catalogue errors', async () => {
      const cases: Array<[string, number, string]> = [
        ['/api/v1/log/entries?logIndex=99', 404, 'not_found'],
        ['/api/v1/log/entries?logIndex=-1', 400, 'invalid_request'],
        ['/api/v1/log/entries?logIndex=abc', 400, 'invalid_request'],
        ['/api/v1/log/entries', 400, 'invalid_request'],
        [`/api/v1/log/entries/${'ab'.repeat(32)}`, 404, 'not_found'],
        [`/api/v1/log/entries/${'0'.repeat(16)}${submissions[0]!.uuid.slice(16)}`, 404, 'not_found'],
        ['/api/v1/log/entries/not-a-uuid', 400, 'invalid_request'],
        ['/api/v1/log/proof?firstSize=5&lastSize=3', 400, 'invalid_request'],
        ['/api/v1/log/proof?firstSize=1&lastSize=8', 400, 'invalid_request'],
        ['/api/v1/log/proof?firstSize=0&lastSize=3', 400, 'invalid_request'],
        ['/api/v1/log/proof', 400, 'invalid_request'],
      ];
      for (const [path, status, code] of cases) {
        const r = await json(ledger.url + path);
        assert.equal(r.status, status, path);
        assert.equal((r.body.error as unknown as { code: string }).code, code, path);
      }
    });

    describe('POST /api/v1/log/entries', () => {
      const submitter = newSubmitter();

      it('accepts a hashedrekord whose signature verifies, answering 201 with Location', async () => {
        const r = await json(`${ledger.url}/api/v1/log/entries`, { body: submitter.entry('an artifact') });
        assert.equal(r.status, 201);
        const uuid = Object.keys(r.body)[0]!;
        assert.equal(r.headers.get('location'), `/api/v1/log/entries/${uuid}`);
        await assertEntryVerifies(r.body, {
          publicKey: publicKeyPem,
          entrySignerKey: submitter.publicKeyPem,
          expectedDataHash: createHash('sha256').update('an artifact').digest('hex'),
        });
      });

      it('the same entry again → 409 ledger_entry_exists naming the existing one', async () => {
        // ECDSA signatures differ each time, so resubmit the stored body exactly.
        const first = await json(`${ledger.url}/api/v1/log/entries?logIndex=7`);
        const entry = Object.values(first.body)[0] as { body: string };
        const again = await json(`${ledger.url}/api/v1/log/entries`, { body: JSON.parse(Buffer.from(entry.body, 'base64').toString()) });
        assert.equal(again.status, 409);
        assert.equal((again.body.error as unknown as { code: string }).code, 'ledger_entry_exists');
        assert.equal(again.headers.get('location'), `/api/v1/log/entries/${Object.keys(first.body)[0]}`);
      });

      const refused = async (body: unknown, pattern: RegExp, code = 'invalid_ledger_entry', status = 400) => {
        const before = (await json(`${ledger.url}/api/v1/log`)).body.treeSize;
        const r = await json(`${ledger.url}/api/v1/log/entries`, typeof body === 'string' ? { raw: body } : { body });
        assert.equal(r.status, status);
        const err = r.body.error as unknown as { code: string; message: string };
        assert.equal(err.code, code);
        assert.match(err.message, pattern);
        assert.equal((await json(`${ledger.url}/api/v1/log`)).body.treeSize, before, 'nothing was appended');
      };

      it('refuses a tampered digest', () => {
        const e = submitter.entry('tamper me');
        (e.spec as { data: { hash: { value: string } } }).data.hash.value = createHash('sha256').update('tampered').digest('hex');
        return refused(e, /does not verify/);
      });
      it('refuses a signature by another key than the one named', () => {
        const e = submitter.entry('x');
        (e.spec as { signature: { publicKey: { content: string } } }).signature.publicKey.content = Buffer.from(
          newSubmitter().publicKeyPem,
        ).toString('base64');
        return refused(e, /does not verify/);
      });
      it('refuses a corrupted signature', () => {
        const e = submitter.entry('y');
        const sig = e.spec as { signature: { content: string } };
        const bytes = Buffer.from(sig.signature.content, 'base64');
        bytes[bytes.length - 1]! ^= 1;
        sig.signature.content = bytes.toString('base64');
        return refused(e, /does not verify/);
      });
      it('refuses an Ed25519 key (its signature cannot cover a digest)', () => refused(newSubmitter('ed25519').entry('z'), /only ECDSA/));
      it('refuses other kinds and versions', async () => {
        await refused({ ...submitter.entry('k'), kind: 'rekord' }, /not supported/);
        await refused({ ...submitter.entry('k'), apiVersion: '0.0.2' }, /apiVersion/);
      });
      it('refuses a digest of the wrong length, bad base64 and a missing spec part', async () => {
        const e = submitter.entry('l');
        (e.spec as { data: { hash: { value: string } } }).data.hash.value = 'abcd';
        await refused(e, /64 hex digits/);
        const f = submitter.entry('m');
        (f.spec as { signature: { content: string } }).signature.content = '!!!';
        await refused(f, /base64/);
        await refused({ apiVersion: '0.0.1', kind: 'hashedrekord', spec: { data: {} } }, /spec must hold/);
      });
      it('refuses bodies that are not entries', async () => {
        await refused('{not json', /JSON/, 'invalid_json');
        await refused({ hello: 'world' }, /kind|spec|apiVersion/, 'invalid_request');
      });
    });

    it('storage is append-only: the database refuses UPDATE and DELETE', async () => {
      const db = ledger.app.ctx.store.db;
      await assert.rejects(
        db.updateTable('ledger_entries').set({ integrated_time: 0 }).where('log_index', '=', 0).execute(),
        /append-only/,
      );
      await assert.rejects(db.deleteFrom('ledger_entries').where('log_index', '=', 0).execute(), /append-only/);
    });

    it('a restart keeps the entries, the key and the tree; appends continue consistently', async () => {
      const before = await head();
      await ledger.close();
      ledger = await startWitnessApp({
        store,
        dataDir: ledger.dataDir,
        ...(ledger.databaseUrl ? { databaseUrl: ledger.databaseUrl } : {}),
        config: LEDGER_ONLY,
      });
      assert.deepEqual(await head(), { ...before, signedTreeHead: (await head()).signedTreeHead });
      assert.equal(await (await fetch(`${ledger.url}/api/v1/log/publicKey`)).text(), publicKeyPem);
      const witness = await createLedgerWitness(ledger.app.ctx);
      const s = await witness.submit(rootOf(100));
      assert.equal(s.logIndex, before.treeSize);
      await assertEntryVerifies(await witness.getEntry(0), {
        publicKey: publicKeyPem,
        expectedDataHash: rootOf(0),
        expectedUuid: submissions[0]!.uuid,
      });
      const after = await head();
      const r = await json(`${ledger.url}/api/v1/log/proof?firstSize=${before.treeSize}&lastSize=${after.treeSize}`);
      const ok = checkConsistency(
        before.treeSize,
        after.treeSize,
        (r.body.hashes as unknown as string[]).map(fromHex),
        fromHex(before.rootHash),
        fromHex(after.rootHash),
      );
      assert.ok(ok.ok);
    });

    it('concurrent submissions get distinct, dense indices', async () => {
      const witness = await createLedgerWitness(ledger.app.ctx);
      const start = (await head()).treeSize;
      const got = await Promise.all(Array.from({ length: 20 }, (_, i) => witness.submit(rootOf(1000 + i))));
      assert.deepEqual(
        got.map((g) => g.logIndex).sort((a, b) => a - b),
        Array.from({ length: 20 }, (_, i) => start + i),
      );
      // Concurrent reads catch up the in-memory tree together without doubling any leaf.
      const entries = await Promise.all(got.map((g) => witness.getEntry(g.logIndex)));
      for (const [i, entry] of entries.entries()) {
        await assertEntryVerifies(entry, { publicKey: publicKeyPem, expectedUuid: got[i]!.uuid, expectedDataHash: rootOf(1000 + i) });
      }
      // …and the tree keeps matching the stored entries as it grows afterwards.
      await witness.submit(rootOf(2000));
      const h = await head();
      assert.equal(h.treeSize, start + 21);
      const stored = await ledger.app.ctx.store.ledger.leafHashes(0, h.treeSize);
      assert.equal(h.rootHash, buildMerkleTree(stored.map(fromHex)).rootHex);
    });
  });
}

describe('two ledger instances on one PostgreSQL database', { skip: !STORES.includes('postgres') }, () => {
  it('serialize their appends (dense, unique indices) and serve the same tree', async () => {
    const a = await startWitnessApp({ store: 'postgres', config: LEDGER_ONLY });
    const b = await startWitnessApp({ store: 'postgres', databaseUrl: a.databaseUrl!, config: LEDGER_ONLY });
    try {
      assert.equal(
        await (await fetch(`${a.url}/api/v1/log/publicKey`)).text(),
        await (await fetch(`${b.url}/api/v1/log/publicKey`)).text(),
      );
      const [wa, wb] = await Promise.all([createLedgerWitness(a.app.ctx), createLedgerWitness(b.app.ctx)]);
      const got = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? wa : wb).submit(rootOf(5000 + i))));
      assert.deepEqual(
        got.map((g) => g.logIndex).sort((x, y) => x - y),
        Array.from({ length: 30 }, (_, i) => i),
      );
      const [ha, hb] = await Promise.all([json(`${a.url}/api/v1/log`), json(`${b.url}/api/v1/log`)]);
      assert.equal(ha.body.treeSize, 30);
      assert.equal(ha.body.rootHash, hb.body.rootHash);
      const key = await (await fetch(`${a.url}/api/v1/log/publicKey`)).text();
      for (const g of got.slice(0, 5)) await assertEntryVerifies(await wb.getEntry(g.logIndex), { publicKey: key, expectedUuid: g.uuid });
    } finally {
      await b.close();
      await a.close();
    }
  });
});
