import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBuckets } from '../src/ratelimit/token-bucket.js';
import { STORES, startApp } from './helpers/server.js';
import { fullProject, getWith, postLog } from './foundation-helpers.js';

test('token buckets: burst, refill at the rate, Retry-After, one bucket per caller', () => {
  const b = new TokenBuckets(2, 4);
  for (let i = 0; i < 4; i++) assert.equal(b.take('a', 0).allowed, true);
  const refused = b.take('a', 0);
  assert.deepEqual(refused, { allowed: false, retryAfterSeconds: 1 });
  assert.equal(b.take('b', 0).allowed, true, 'another caller has its own budget');
  assert.equal(b.take('a', 500).allowed, true, 'half a second at 2/s refills one token');
  assert.equal(b.take('a', 500).allowed, false);
  assert.equal(b.take('a', 60_000).allowed, true);
});

for (const store of STORES) {
  test(`COUNTERSIGN_RATE_LIMIT: a key over its budget gets 429 rate_limited with Retry-After and nothing is written (${store})`, async () => {
    const t = await startApp({ store, config: { rateLimit: 3 } });
    try {
      const p = await fullProject(t, 'rl');
      const answers = [];
      for (let i = 0; i < 10; i++) answers.push(await postLog(t.app, p.agent, { payload: { i } }, { 'x-service-encryption-key': 'k' }));
      const ok = answers.filter((r) => r.statusCode === 201);
      const limited = answers.filter((r) => r.statusCode === 429);
      assert.ok(ok.length >= 6 && ok.length <= 7, `burst of 6 (+ at most one refill), got ${ok.length}`);
      assert.equal(ok.length + limited.length, 10);
      for (const r of limited) {
        assert.equal(r.json().error.code, 'rate_limited');
        assert.match(String(r.headers['retry-after']), /^\d+$/);
      }
      // Another key of the same project is not charged for the first one's traffic.
      const other = await postLog(t.app, p.service, { payload: { other: true } }, { 'x-service-encryption-key': 'k' });
      assert.equal(other.statusCode, 201, other.body);
      // Exactly the accepted entries exist.
      const list = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?limit=100`);
      assert.equal(list.json().logs.length, ok.length + 1);
    } finally {
      await t.close();
    }
  });
}

test('token buckets: at 100,000 callers, refilled buckets make room and a caller out of tokens stays limited', () => {
  const b = new TokenBuckets(0.1, 4); // one token back every 10 s
  for (let i = 0; i < 4; i++) b.take('first', 0);
  assert.equal(b.take('first', 0).allowed, false);
  for (let i = 1; i < 100_000; i++) b.take(`c${i}`, 1000); // the others spend one token of four
  assert.equal(b.take('first', 1100).allowed, false, 'still limited');
  // 10 s later every other bucket is full again: a new caller makes room by dropping those, not 'first'.
  assert.equal(b.take('newcomer', 11_100).allowed, true);
  assert.equal(b.take('first', 11_100).allowed, true, 'one token back, counted from its own history');
  assert.equal(b.take('first', 11_100).allowed, false, 'its bucket was kept: no fresh burst of 4');
});
