/**
 * A restart keeps every project, key and log (SQLite data dir, PostgreSQL database): the same
 * keys work after the restart, revoked keys stay revoked, logs read back identical.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deriveEnvelopeKey, openPayload } from '@countersign/core';
import { STORES, freshPostgresDatabase, startApp, tempDir } from './helpers/server.js';
import { addKey, assertError, fullProject, getWith, postLog } from './foundation-helpers.js';

const KEY = 'restart-key';

for (const store of STORES) {
  test(`a restart keeps projects, keys and logs on ${store}`, async () => {
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const first = await startApp({ store, dataDir, databaseUrl });
    const p = await fullProject(first);
    const dead = await addKey(first, p.projectId, 'agent');
    await first.app.inject({
      method: 'DELETE',
      url: `/v1/projects/${p.projectId}/keys/${dead.keyId}`,
      headers: { authorization: `Bearer ${first.masterKey}` },
    });
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await postLog(first.app, p.agent, { traceId: 'rt', action: `a${i}`, payload: { i } }, { 'x-service-encryption-key': KEY });
      ids.push(r.json().id);
    }
    await postLog(first.app, p.human, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-agent-rationale': 'r' });
    const before = (await getWith(first.app, p.live, `/v1/projects/${p.projectId}/logs?limit=500`)).json().logs;
    const keysBefore = (await getWith(first.app, first.masterKey, `/v1/projects/${p.projectId}/keys`)).json().keys;
    // A log sent right before close is flushed by the graceful shutdown.
    const last = postLog(first.app, p.service, { action: 'last', payload: {} }, { 'x-service-encryption-key': KEY });
    const lastId = (await last).json().id;
    await first.close();

    const second = await startApp({ store, dataDir, databaseUrl });
    try {
      assert.equal(second.masterKey, first.masterKey, 'the generated master key is kept in the data dir');
      const after = (await getWith(second.app, p.live, `/v1/projects/${p.projectId}/logs?limit=500`)).json().logs;
      assert.equal(after.length, before.length + 1);
      assert.deepEqual(after.slice(1), before);
      assert.equal(after[0].id, lastId);
      assert.deepEqual((await getWith(second.app, second.masterKey, `/v1/projects/${p.projectId}/keys`)).json().keys, keysBefore);
      // Trace pages carry envelopes only when asked (issue 8, DESIGN §4 "Reading").
      const trace = (await getWith(second.app, p.live, `/v1/projects/${p.projectId}/traces/rt?include=payload`)).json().logs;
      assert.deepEqual(
        trace.map((l: { id: string }) => l.id),
        ids,
      );
      const opened = await openPayload(trace[5].payload, await deriveEnvelopeKey(KEY), ids[5]!);
      assert.equal(opened.i, 5);
      assert.equal((await getWith(second.app, p.live, `/v1/projects/${p.projectId}/events`)).json().events.length, 1);
      // Keys still work (every class), the revoked one still fails.
      assert.equal((await postLog(second.app, p.agent, { payload: {} }, { 'x-service-encryption-key': KEY })).statusCode, 201);
      assert.equal((await postLog(second.app, p.human, { payload: {} }, { 'x-service-encryption-key': KEY })).statusCode, 201);
      assertError(await postLog(second.app, dead.apiKey, { payload: {} }, { 'x-service-encryption-key': KEY }), 401, 'invalid_api_key');
      // New ids after the restart do not collide with earlier ones.
      const again = await postLog(second.app, p.agent, { payload: {} }, { 'x-service-encryption-key': KEY });
      assert.ok(!ids.includes(again.json().id));
    } finally {
      await second.close();
    }
  });
}
