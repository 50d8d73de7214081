/**
 * The live log stream and entries that commit out of `seq` order (store/seq-gaps.ts). On a
 * PostgreSQL fleet each instance has its own writer, so a `seq` taken first on one instance can
 * commit after a later one of another. Here the other instance is a second store on the same
 * database, and its insert is held in the database for real: a third session holds an
 * uncommitted row with the same project and id, and PostgreSQL's `on conflict` waits for it,
 * after the insert has taken its `seq`. Meanwhile this instance stores a later entry, which the
 * stream sends; once the held insert commits, the stream must send it too, and keep its resume
 * position below it while it is missing. Plus the watch's own rules (late-entries.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { sql } from 'kysely';
import { request } from 'undici';
import { STORES, startApp, tempDir } from './helpers/server.js';
import { waitFor } from './helpers/upstreams.js';
import { fullProject, postLog } from './foundation-helpers.js';
import { proofLog } from './proofs-helpers.js';
import { Store } from '../src/store/index.js';
import { INSERT_COLUMNS, pushInsert } from '../src/store/write-rows.js';
import { LateEntryWatch, MAX_WATCHED } from '../src/logs/late-entries.js';

const KEY = 'late entries key';

test('late-entry watch: gives numbers up after their time, keeps the resume position below the rest, stays bounded', () => {
  const w = new LateEntryWatch(1000);
  w.watch([10, 12], 0);
  w.watch([12, 15], 500);
  assert.deepEqual(w.open(999).sort(), [10, 12, 15]);
  assert.equal(w.resumeFrom(20), 9);
  w.arrived([10]);
  assert.equal(w.resumeFrom(20), 11);
  assert.deepEqual(w.open(1000), [15], 'seen missing at 0: given up at 1000');
  assert.equal(w.resumeFrom(14), 14, 'a position already below every watched number stays');
  assert.deepEqual(w.open(1500), []);
  assert.equal(w.resumeFrom(20), 20);
  w.watch(
    Array.from({ length: MAX_WATCHED + 5 }, (_, i) => i + 1),
    0,
  );
  assert.equal(w.size, MAX_WATCHED);
  assert.equal(w.resumeFrom(1e9), 5, 'the oldest five went');
});

// PostgreSQL only (CI always has it: COUNTERSIGN_REQUIRE_POSTGRES); SQLite has one writer, whose commits keep seq order.
for (const _ of STORES.filter((s) => s === 'postgres'))
  test('live stream on PostgreSQL: an entry another instance commits after a later one is still sent, and a reconnect gets it', async () => {
    const t = await startApp({ store: 'postgres', listen: true });
    const other = await Store.open({ dataDir: tempDir(), databaseUrl: t.config.databaseUrl });
    const blocker = new pg.Client({ connectionString: t.config.databaseUrl });
    await blocker.connect();
    let blocking = false;
    let stream: Awaited<ReturnType<typeof request>> | undefined;
    try {
      const p = await fullProject(t, 'late');
      const url = `${t.url}/v1/projects/${p.projectId}/logs/stream?actorPrefix=late-`;
      stream = await request(url, { headers: { authorization: `Bearer ${p.live}` } });
      assert.equal(stream.statusCode, 200);
      let text = '';
      stream.body.setEncoding('utf8');
      stream.body.on('data', (c: string) => (text += c));
      await waitFor(() => (text.includes('\n\n') ? true : undefined), 200, 20);

      // The other instance's entry: its insert takes a seq, then waits on the third session's row.
      const held = proofLog(Date.now(), { projectId: p.projectId, actor: 'late-held', action: 'x', requestProof: false });
      const values: unknown[] = [];
      pushInsert(values, held);
      await blocker.query('begin');
      blocking = true;
      await blocker.query(
        `insert into logs (${INSERT_COLUMNS.join(', ')}) values (${INSERT_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`,
        values,
      );
      const heldInsert = other.logs.insert(held);
      await waitFor(
        async () => {
          const r = await sql<{
            n: string;
          }>`select count(*) as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`.execute(
            t.app.ctx.store.db,
          );
          return Number(r.rows[0]!.n) > 0 ? true : undefined;
        },
        200,
        25,
      );

      // This instance stores a later entry; the stream sends it.
      const later = await postLog(t.app, p.agent, { actor: 'late-later', action: 'x', payload: {} }, { 'x-service-encryption-key': KEY });
      assert.equal(later.statusCode, 201, later.body);
      const laterId = (later.json() as { id: string }).id;
      await waitFor(() => (text.includes(laterId) ? true : undefined), 200, 25);

      // The held insert commits (the third session gives its row up): the stream sends it, late.
      await blocker.query('rollback');
      blocking = false;
      assert.equal(await heldInsert, true);
      await waitFor(() => (text.includes(held.id) ? true : undefined), 200, 25);
      const frames = text.split('\n\n').filter((f) => f.includes('event: log'));
      const ids = frames.map((f) => (JSON.parse(/^data: (.*)$/m.exec(f)![1]!) as { id: string }).id);
      assert.deepEqual(ids, [laterId, held.id], 'each once, the late one after');
      const seqOf = (id: string) => Number(/^id: (\d+)$/m.exec(frames[ids.indexOf(id)]!)![1]!);
      assert.ok(seqOf(held.id) < seqOf(laterId), 'the late entry has the lower seq');

      // While it was missing the stream moved the resume position below it.
      const before = text.slice(0, text.lastIndexOf('\n\n', text.indexOf(held.id)));
      const positions = [...before.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      assert.ok(positions.at(-1)! < seqOf(held.id), `resume position ${positions.at(-1)} below ${seqOf(held.id)}`);

      // A reader that resumes from there gets it (and the later one again).
      const again = await request(url, { headers: { authorization: `Bearer ${p.live}`, 'last-event-id': String(positions.at(-1)) } });
      let replay = '';
      again.body.setEncoding('utf8');
      again.body.on('data', (c: string) => (replay += c));
      await waitFor(() => (replay.includes(held.id) && replay.includes(laterId) ? true : undefined), 200, 25);
      again.body.destroy();
    } finally {
      stream?.body.destroy();
      if (blocking) await blocker.query('rollback').catch(() => undefined);
      await blocker.end();
      await other.close();
      await t.close();
    }
  });
