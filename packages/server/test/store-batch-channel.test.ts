/**
 * The store writer's batches on their diagnostics channel (STORE_BATCH_CHANNEL, published by log-writer.ts),
 * which the tail benchmark reads (bench/proxy/store-batches.ts): a proxied call's write-ahead
 * insert and its outcome each arrive in a published batch, with the queue and the backend's
 * time in order, on both stores.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { STORES, startApp } from './helpers/server.js';
import { makeProjectKey, proxyCall, startUpstream } from './helpers/upstreams.js';
import type { BatchEvent } from '../src/store/log-writer.js';
import { STORE_BATCH_CHANNEL } from '../src/store/diagnostics-channels.js';

for (const store of STORES) {
  test(`a proxied call's insert and outcome are published as settled batches, times in order (${store})`, async () => {
    const up = await startUpstream();
    const t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort] } });
    const seen: BatchEvent[] = [];
    const onBatch = (m: unknown) => seen.push(m as BatchEvent);
    subscribe(STORE_BATCH_CHANNEL, onBatch);
    try {
      const { apiKey } = await makeProjectKey(t.app, 'agent');
      const before = Date.now();
      const r = await proxyCall(t.url, apiKey, { target: up.url + '/json', payload: { n: 1 } });
      assert.equal(r.status, 200, r.text);
      const inserts = seen.filter((b) => b.inserts > 0);
      const outcomes = seen.filter((b) => b.outcomes > 0);
      assert.ok(inserts.length >= 1 && outcomes.length >= 1, JSON.stringify(seen));
      for (const b of seen) {
        assert.equal(b.ok, true);
        // Epoch milliseconds, submitted ≤ handed over ≤ answered.
        assert.ok(b.submittedAt >= before - 1 && b.submittedAt <= b.sentAt && b.sentAt <= b.doneAt, JSON.stringify(b));
      }
      // The outcome's batch was submitted after the insert's was answered: write-ahead first.
      assert.ok(outcomes.at(-1)!.submittedAt >= inserts[0]!.doneAt, JSON.stringify(seen));
    } finally {
      unsubscribe(STORE_BATCH_CHANNEL, onBatch);
      await t.close();
      await up.close();
    }
  });
}
