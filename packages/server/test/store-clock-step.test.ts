/**
 * The store deadline against a step of the wall clock (monotonic-clock.ts). In the fifty-fourth
 * session's PostgreSQL soak a VM snapshot set the wall clock ~7 s ahead while calls were waiting
 * for their write-ahead commits, and 62 of them were refused with 503 `log_store_unavailable`:
 * their deadlines were wall-clock times. Here the logs table is held by another session (as in
 * store-deadline.test.ts) so that writes are waiting when the clock steps.
 *
 * The step is made by replacing `Date.now` in this process, the test's only stand-in: setting
 * the machine's clock would move every other process on it (and needs root). The server runs in
 * this process, so every wall-clock read of its main thread sees the step; the SQLite writer's
 * thread does not, and needs no test of its own for that: it compares the deadlines the main
 * thread made, on the same monotonic clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import { lockLogs } from './helpers/lock-logs.js';
import { makeProjectKey, proxyCall, startUpstream } from './helpers/upstreams.js';
import { sleep } from './proofs-helpers.js';

const HOUR_MS = 3_600_000;

async function statuses(t: TestApp): Promise<Record<string, number>> {
  const r = await sql<{ status: string; n: number }>`select status, count(*) as n from logs group by status`.execute(t.app.ctx.store.db);
  return Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
}

/** Runs `body` with the wall clock of this process `byMs` away from the machine's. */
async function withWallClockStep<T>(byMs: number, body: () => Promise<T>): Promise<T> {
  const real = Date.now;
  Date.now = () => real() + byMs;
  try {
    return await body();
  } finally {
    Date.now = real;
  }
}

for (const store of STORES) {
  test(`the wall clock stepping an hour ahead while calls wait for the store refuses none of them, and every record completes (${store})`, async () => {
    const up = await startUpstream();
    // A deadline the held lock stays well inside, and a sweep (every 250 ms) that runs while the
    // clock is stepped: a wall-clock deadline would have expired every waiting write.
    const t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort], storeTimeoutMs: 3000 } });
    try {
      const { apiKey } = await makeProjectKey(t.app, 'agent');
      assert.equal((await proxyCall(t.url, apiKey, { target: up.url + '/json', payload: { n: 0 } })).status, 200);

      const lock = await lockLogs(t);
      let released = false;
      try {
        const calls = [1, 2, 3, 4, 5].map((n) => proxyCall(t.url, apiKey, { target: up.url + '/json', payload: { n } }));
        await sleep(150); // their write-ahead records are now waiting behind the lock
        const answers = await withWallClockStep(HOUR_MS, async () => {
          await sleep(700);
          await lock.release();
          released = true;
          return Promise.all(calls);
        });
        for (const a of answers) assert.equal(a.status, 200, a.text);
      } finally {
        if (!released) await lock.release();
      }
      assert.equal(up.requests.length, 6, 'the upstream received every call');
      await t.app.ctx.store.drain();
      assert.deepEqual(await statuses(t), { complete: 6 });
    } finally {
      await t.close();
      await up.close();
    }
  });

  test(`the wall clock stepping an hour back does not lengthen the store deadline: a held store still answers 503 at it (${store})`, async () => {
    const up = await startUpstream();
    const deadlineMs = 400;
    const t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort], storeTimeoutMs: deadlineMs } });
    try {
      const { apiKey } = await makeProjectKey(t.app, 'agent');
      assert.equal((await proxyCall(t.url, apiKey, { target: up.url + '/json', payload: { n: 0 } })).status, 200);
      const lock = await lockLogs(t);
      try {
        const started = performance.now();
        const during = proxyCall(t.url, apiKey, { target: up.url + '/json', payload: { n: 1 } });
        await sleep(50);
        const answer = await withWallClockStep(-HOUR_MS, () => during);
        // The deadline with tenfold slack (not a speed figure): an hour would be the defect.
        assert.ok(performance.now() - started < deadlineMs * 10, `answered after ${performance.now() - started} ms`);
        assert.equal(answer.status, 503, answer.text);
        assert.equal(answer.json.error.code, 'log_store_unavailable');
        assert.equal(up.requests.length, 1, 'the upstream received nothing while the store was held');
      } finally {
        await lock.release();
      }
    } finally {
      await t.close();
      await up.close();
    }
  });
}
