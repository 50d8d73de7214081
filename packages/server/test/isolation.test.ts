/**
 * Project isolation and read paths: filters, cursor pagination, one log, a trace in order,
 * events; no key of one project reaches another project's data on any path.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { STORES, startApp } from './helpers/server.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';

const KEY = 'isolation-key';
const enc = { 'x-service-encryption-key': KEY };

for (const store of STORES) {
  test(`reads and isolation on ${store}`, async (s) => {
    const t = await startApp({ store });
    const a = await fullProject(t, 'a');
    const b = await fullProject(t, 'b');
    try {
      // Project A: 7 entries in two traces, with mixed classes.
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) {
        const key = i % 3 === 0 ? a.service : a.agent;
        const r = await postLog(
          t.app,
          key,
          { actor: i % 2 ? 'odd' : 'even', action: `act.${i}`, traceId: i < 4 ? 'trace-1' : 'trace-2', payload: { i } },
          enc,
        );
        assert.equal(r.statusCode, 201);
        ids.push(r.json().id);
      }
      const bLog = (await postLog(t.app, b.human, { traceId: 'trace-1', payload: {} }, { ...enc, 'x-agent-rationale': 'x' })).json().id;

      await s.test('listing pages newest first with a cursor, and filters', async () => {
        const seen: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const r = await getWith(
            t.app,
            a.live,
            `/v1/projects/${a.projectId}/logs?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          );
          assert.equal(r.statusCode, 200, r.body);
          const body = r.json();
          assert.equal(body.success, true);
          seen.push(...body.logs.map((l: { id: string }) => l.id));
          cursor = body.nextCursor;
          pages++;
        } while (cursor);
        assert.equal(pages, 3);
        assert.deepEqual(seen, [...ids].reverse());
        const q = async (qs: string) =>
          (await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs?${qs}`)).json().logs.map((l: { action: string }) => l.action);
        assert.deepEqual(await q('traceId=trace-2'), ['act.6', 'act.5', 'act.4']);
        assert.deepEqual(await q('actor=odd'), ['act.5', 'act.3', 'act.1']);
        assert.deepEqual(await q('actorType=service'), ['act.6', 'act.3', 'act.0']);
        assert.deepEqual(await q('action=act.2'), ['act.2']);
        assert.deepEqual(await q('handover=true'), []);
        assert.equal((await q('from=2000-01-01T00:00:00Z&to=2999-01-01T00:00:00Z')).length, 7);
        assert.deepEqual(await q('to=2000-01-01T00:00:00Z'), []);
        assertError(await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs?cursor=bogus`), 400, 'invalid_cursor');
        assertError(await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs?limit=0`), 400, 'invalid_request');
        assertError(await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs?colour=red`), 400, 'invalid_request');
        assertError(await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs?from=yesterday`), 400, 'invalid_request');
      });

      await s.test('a trace comes back in order and only from its project', async () => {
        const r = (await getWith(t.app, a.live, `/v1/projects/${a.projectId}/traces/trace-1`)).json();
        assert.deepEqual(
          r.logs.map((l: { id: string }) => l.id),
          ids.slice(0, 4),
        );
        const rb = (await getWith(t.app, b.live, `/v1/projects/${b.projectId}/traces/trace-1`)).json();
        assert.deepEqual(
          rb.logs.map((l: { id: string }) => l.id),
          [bLog],
        );
        assertError(await getWith(t.app, a.live, `/v1/projects/${a.projectId}/traces/nope`), 404, 'not_found');
      });

      await s.test("no key of project B reaches project A's data, on any path", async () => {
        const paths = [
          `/v1/projects/${a.projectId}/logs`,
          `/v1/projects/${a.projectId}/logs/${ids[0]}`,
          `/v1/projects/${a.projectId}/traces/trace-1`,
          `/v1/projects/${a.projectId}/events`,
          `/v1/projects/${a.projectId}/events/stream`,
        ];
        for (const path of paths) {
          assertError(await getWith(t.app, b.live, path), 403, 'project_forbidden');
          for (const key of [b.agent, b.human, b.service, a.agent])
            assertError(await getWith(t.app, key, path), 403, 'wrong_credential_class');
          assertError(await getWith(t.app, t.masterKey, path), 403, 'wrong_credential_class');
          assertError(await getWith(t.app, undefined, path), 401, 'missing_api_key');
        }
        // A's live key asking for B's log through A's path finds nothing.
        assertError(await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs/${bLog}`), 404, 'not_found');
        // B's handover event is not in A's events, and A's listing has none of B's logs.
        assert.deepEqual((await getWith(t.app, a.live, `/v1/projects/${a.projectId}/events`)).json().events, []);
        assert.equal((await getWith(t.app, b.live, `/v1/projects/${b.projectId}/events`)).json().events.length, 1);
        const all = (await getWith(t.app, a.live, `/v1/projects/${a.projectId}/logs?limit=500`)).json().logs;
        assert.ok(all.every((l: { projectId: string }) => l.projectId === a.projectId));
        // Key administration of A with B's keys.
        for (const key of [b.live, b.agent]) {
          assertError(await getWith(t.app, key, `/v1/projects/${a.projectId}/keys`), 403, 'wrong_credential_class');
        }
      });
    } finally {
      await t.close();
    }
  });
}
