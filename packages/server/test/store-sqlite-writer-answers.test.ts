/**
 * The SQLite writer thread's messages (sqlite-writer-worker.ts `BatchMessage`, `DoneMessage`):
 * flat lists both ways. Every row of every batch gets its own code back, also when several
 * batches share one transaction: written (with its seq), a duplicate insert, an outcome that
 * matched no row, a batch past its deadline; a failed transaction rejects each of its batches
 * with SQLite's code, and the thread goes on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { tempDir } from './helpers/server.js';
import { proofLog } from './proofs-helpers.js';
import { Store } from '../src/store/index.js';
import { EXPIRED, WRITTEN } from '../src/store/log-writer.js';
import { SqliteWriter } from '../src/store/sqlite-writer.js';
import { monotonicMs } from '../src/monotonic-clock.js';

const PROJECT = 'prj_answers';
const far = () => monotonicMs() + 5000;
const done = (payload: string) => ({ status: 'complete' as const, payload, payloadHash: 'cd'.repeat(32), completedAt: Date.now() });
const pending = () => proofLog(Date.now(), { projectId: PROJECT, source: 'proxy', status: 'pending', requestProof: false });

test('SQLite writer thread: each row of each batch gets its code back, within one transaction and across a failed one', async () => {
  const dataDir = tempDir();
  const st = await Store.open({ dataDir });
  const writer = await SqliteWriter.start({ file: path.join(dataDir, 'countersign.db'), synchronous: 'NORMAL', timeoutMs: 5000 });
  try {
    const [a, b, c] = [pending(), pending(), pending()];
    // Submitted in one turn: the thread receives them together and commits them as one transaction.
    const [first, second, late] = await Promise.all([
      writer.write({ inserts: [a, b], outcomes: [], refusals: [] }, far()),
      writer.write({ inserts: [a, c], outcomes: [{ ref: { projectId: PROJECT, id: 'log_nowhere' }, c: done('{}') }], refusals: [] }, far()),
      writer.write(
        { inserts: [pending()], outcomes: [{ ref: { projectId: PROJECT, id: b.id }, c: done('{}') }], refusals: [] },
        monotonicMs() - 1,
      ),
    ]);
    assert.deepEqual(first.inserted, [WRITTEN, WRITTEN]);
    assert.equal((await st.logs.get(PROJECT, a.id))?.seq, first.seqs[0]);
    assert.equal((await st.logs.get(PROJECT, b.id))?.seq, first.seqs[1]);
    assert.deepEqual(second.inserted, [0, 1], 'a duplicate insert is not written');
    assert.equal(second.seqs[0], 0);
    assert.equal((await st.logs.get(PROJECT, c.id))?.seq, second.seqs[1]);
    assert.deepEqual(second.completed, [0], 'an outcome for no row completes nothing');
    assert.deepEqual(late.inserted, [EXPIRED], 'past its deadline: not written');
    assert.deepEqual(late.completed, [EXPIRED]);
    assert.equal((await st.logs.get(PROJECT, b.id))?.status, 'pending');

    const byKeyAndSeq = await writer.write(
      {
        inserts: [],
        outcomes: [
          { ref: { projectId: PROJECT, id: a.id, seq: first.seqs[0]! }, c: done('{"a":1}') },
          { ref: { projectId: PROJECT, id: b.id }, c: done('{"b":1}') },
        ],
        refusals: [],
      },
      far(),
    );
    assert.deepEqual(byKeyAndSeq.completed, [1, 1]);
    assert.equal((await st.logs.get(PROJECT, a.id))?.payload, '{"a":1}');

    // A row SQLite refuses fails its transaction: each batch in it is rejected with SQLite's code.
    const broken = { ...pending(), id: null as unknown as string };
    const failed = await Promise.allSettled([
      writer.write({ inserts: [broken], outcomes: [], refusals: [] }, far()),
      writer.write({ inserts: [pending()], outcomes: [], refusals: [] }, far()),
    ]);
    assert.equal(failed[0].status, 'rejected');
    assert.match(String((failed[0] as PromiseRejectedResult).reason.code), /^SQLITE_CONSTRAINT/);
    // The thread goes on.
    const after = await writer.write({ inserts: [pending()], outcomes: [], refusals: [] }, far());
    assert.deepEqual(after.inserted, [1]);
    assert.ok(after.seqs[0]! > second.seqs[1]!);
  } finally {
    await writer.close();
    await st.close();
  }
});
