/**
 * Graceful shutdown: requests in flight when close() starts are answered, and every log that
 * was answered 201 is in the store after a restart; new requests are refused, never lost halfway.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { STORES, freshPostgresDatabase, startApp, tempDir } from './helpers/server.js';
import { fullProject, getWith } from './foundation-helpers.js';

for (const store of STORES) {
  test(`close() drains requests and flushes writes on ${store}`, async () => {
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const first = await startApp({ store, dataDir, databaseUrl, listen: true });
    const p = await fullProject(first);
    const send = (i: number) =>
      fetch(`${first.url}/v1/log`, {
        method: 'POST',
        headers: { authorization: `Bearer ${p.agent}`, 'content-type': 'application/json', 'x-service-encryption-key': 'k' },
        body: JSON.stringify({ action: `n${i}`, payload: { i } }),
      }).then(
        async (r) => ({ status: r.status, body: (await r.json()) as { id?: string } }),
        () => ({ status: 0, body: {} as { id?: string } }),
      );
    const inFlight = Array.from({ length: 50 }, (_, i) => send(i));
    // Let the requests reach the server, then close while they are being handled.
    await new Promise((r) => setImmediate(r));
    const closing = first.close();
    const answers = await Promise.all(inFlight);
    await closing;
    const accepted = answers.filter((a) => a.status === 201).map((a) => a.body.id!);
    for (const a of answers) assert.ok([201, 503, 0].includes(a.status), `unexpected status ${a.status}`);

    const second = await startApp({ store, dataDir, databaseUrl });
    try {
      const stored = new Set(
        (await getWith(second.app, p.live, `/v1/projects/${p.projectId}/logs?limit=500`)).json().logs.map((l: { id: string }) => l.id),
      );
      for (const id of accepted) assert.ok(stored.has(id), `log ${id} was answered 201 but is not stored`);
    } finally {
      await second.close();
    }
  });
}
