/**
 * The SQLite WAL is checkpointed by the store's threads, not inside request commits. The
 * serving connection has automatic checkpoints off, so the database file itself only grows when
 * a checkpoint copies the WAL back: watching its size tells one did it. Under writes that never
 * pause, the background checkpointer copies and the writer's closing passes let the WAL start
 * over (sqlite-checkpointer.ts), right after a background pass: the checkpoint events show both.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { metrics } from '../src/metrics/registry.js';
import { Store, type NewLog } from '../src/store/index.js';
import { CHECKPOINT_POLICY, type CheckpointEvent } from '../src/store/sqlite-checkpointer.js';
import { CHECKPOINT_CHANNEL } from '../src/store/diagnostics-channels.js';
import { SqliteWriter } from '../src/store/sqlite-writer.js';
import { startApp } from './helpers/server.js';
import { fullProject, postLog } from './foundation-helpers.js';
import { monotonicMs } from '../src/monotonic-clock.js';

test('SQLite: the background worker checkpoints the WAL into the database file', async () => {
  const t = await startApp({ store: 'sqlite' });
  const dbFile = path.join(t.config.dataDir, 'countersign.db');
  try {
    const p = await fullProject(t, 'wal');
    await new Promise((r) => setTimeout(r, 600)); // let the worker settle what migrations wrote
    const before = fs.statSync(dbFile).size;
    const logs = Array.from({ length: 200 }, (_, i) => ({ payload: { i, text: 'x'.repeat(4000) } }));
    for (let i = 0; i < 4; i++) {
      const r = await postLog(t.app, p.agent, { logs: logs.slice(i * 50, i * 50 + 50) }, { 'x-service-encryption-key': 'k' });
      assert.equal(r.statusCode, 201, r.body);
    }
    let grown = 0;
    for (let i = 0; i < 100 && grown < 500_000; i++) {
      await new Promise((r) => setTimeout(r, 50));
      grown = fs.statSync(dbFile).size - before;
    }
    assert.ok(grown >= 500_000, `the database file grew by ${grown} bytes only`);
  } finally {
    await t.close();
  }
});

test("SQLite: under writes that never pause, background passes copy the WAL and the writer's closing passes restart it", async () => {
  const t = await startApp({ store: 'sqlite' });
  const events: CheckpointEvent[] = [];
  const listen = (m: unknown) => void events.push(m as CheckpointEvent);
  subscribe(CHECKPOINT_CHANNEL, listen);
  const counted = async (thread: string) =>
    (await metrics.sqliteCheckpointSeconds.get()).values
      .filter((v) => v.metricName === 'countersign_sqlite_checkpoint_seconds_count' && v.labels.thread === thread)
      .reduce((n, v) => n + v.value, 0);
  const backgroundBefore = await counted('background');
  const writerBefore = await counted('writer');
  try {
    const p = await fullProject(t, 'wal-cycles');
    const logs = Array.from({ length: 5 }, (_, i) => ({ payload: { i, text: 'y'.repeat(1500) } }));
    const until = Date.now() + 2600;
    // One writer of requests at a time, back to back: the store is never idle long enough to truncate.
    while (Date.now() < until) {
      const r = await postLog(t.app, p.agent, { logs }, { 'x-service-encryption-key': 'k' });
      assert.equal(r.statusCode, 201, r.body);
    }
    const copied = events.filter((e) => !e.busy && e.copied > 0);
    const background = copied.filter((e) => e.by === 'background');
    const closing = copied.filter((e) => e.by === 'writer' && e.mode === 'PASSIVE');
    assert.ok(background.length >= 5, `${background.length} background passes copied frames`);
    assert.ok(closing.length >= 1, 'the writer closed at least one cycle');
    // After a closing pass the writer's next commit starts the WAL over: a later pass sees fewer
    // frames. Not after every one: a read transaction of the main connection open at that moment
    // (other tests share the machine) keeps the old WAL for one more cycle, so some, not the first.
    const seen = closing.map((close) => [close.log, background.find((e) => e.at > close.at + close.ms)?.log] as const);
    assert.ok(
      seen.some(([before, after]) => after !== undefined && after < before),
      `the WAL started over after a closing pass (frames at each close and at the next background pass: ${JSON.stringify(seen)})`,
    );
    // A closing pass waits for a background pass to end that it had not seen yet, so that it
    // copies only what came since, unless it is twice overdue (the writer says which). Checked by
    // order, not by time (a busy machine may delay the writer's next look by any amount): each one
    // that waited saw more passes than the one before it, and a background pass ended between them.
    // A pass that found nothing new to copy counts too but publishes no event: before the first
    // closing pass every pass may be such a one (the WAL emptied at startup), so from the second on.
    // (Under writes that never pause, a writer that closed on time alone would pass this too: with
    // passes every 100 ms and closes every 500, a new pass always ends between two closes. The
    // next test tells them apart.)
    const ends = events.filter((e) => e.by === 'background' && !e.busy).map((e) => e.at + e.ms);
    const waited = closing.filter((close) => !close.overdue);
    assert.ok(waited.length >= 1, 'a closing pass waited for a background pass');
    const unordered = waited.filter((close, k) => {
      const previous = k > 0 ? waited[k - 1]! : undefined;
      const newPass = close.afterPass !== undefined && (previous === undefined || close.afterPass > previous.afterPass!);
      const endedBetween = previous === undefined || ends.some((end) => end <= close.at + 1 && end > previous.at);
      return !(newPass && endedBetween);
    });
    assert.deepEqual(unordered, [], 'every closing pass started after a background pass it had not seen');
    assert.ok((await counted('background')) > backgroundBefore, 'background passes are in the metric');
    assert.ok((await counted('writer')) > writerBefore, 'closing passes are in the metric');
  } finally {
    unsubscribe(CHECKPOINT_CHANNEL, listen);
    await t.close();
  }
});

test("SQLite: the writer's closing pass waits for a background pass; with none ending, it closes only when twice overdue", async () => {
  // The check above cannot tell a writer that waits from one that closes on time alone (a pass
  // always ends between two closes). Here no background pass ends during the run (one a minute):
  // a writer that waits closes every 2 × closeEveryMs, saying it was overdue; one that did not
  // wait would close every closeEveryMs.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-close-wait-'));
  await (await Store.open({ dataDir: dir })).close();
  const policy = { ...CHECKPOINT_POLICY, backgroundEveryMs: 60_000 };
  const writer = await SqliteWriter.start({ file: path.join(dir, 'countersign.db'), synchronous: 'NORMAL', timeoutMs: 5000, policy });
  const events: CheckpointEvent[] = [];
  const listen = (m: unknown) => void events.push(m as CheckpointEvent);
  subscribe(CHECKPOINT_CHANNEL, listen);
  try {
    const until = Date.now() + 2 * policy.closeEveryMs * 2 + 600;
    for (let i = 0; Date.now() < until; i++) {
      const r = await writer.write({ inserts: [closeWaitLog(`log_close_wait_${i}`)], outcomes: [], refusals: [] }, monotonicMs() + 5000);
      assert.equal(r.inserted[0], 1);
    }
    const closing = events.filter((e) => e.by === 'writer' && e.mode === 'PASSIVE' && !e.busy);
    assert.ok(closing.length >= 2, `${closing.length} closing passes`);
    assert.deepEqual(
      closing.filter((e) => e.overdue !== true),
      [],
      'with no background pass ending, every closing pass ran overdue',
    );
    for (let k = 1; k < closing.length; k++) {
      const gap = closing[k]!.at - closing[k - 1]!.at;
      assert.ok(gap >= 2 * policy.closeEveryMs - 20, `closing passes ${gap} ms apart`);
    }
  } finally {
    unsubscribe(CHECKPOINT_CHANNEL, listen);
    await writer.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('SQLite: after a slow background pass the writer defers its closing pass (its syncs would hold every commit) for up to slowDeferMs', async () => {
  // slowPassMs 0 makes every background pass count as slow: the writer then closes only every
  // slowDeferMs, saying so (overdue, with the last pass's duration), however many passes end.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-close-slow-'));
  await (await Store.open({ dataDir: dir })).close();
  const policy = { ...CHECKPOINT_POLICY, backgroundEveryMs: 50, slowPassMs: 0, slowDeferMs: 1200 };
  const writer = await SqliteWriter.start({ file: path.join(dir, 'countersign.db'), synchronous: 'NORMAL', timeoutMs: 5000, policy });
  const events: CheckpointEvent[] = [];
  const listen = (m: unknown) => void events.push(m as CheckpointEvent);
  subscribe(CHECKPOINT_CHANNEL, listen);
  try {
    const until = Date.now() + 2 * policy.slowDeferMs + 700;
    for (let i = 0; Date.now() < until; i++) {
      const r = await writer.write({ inserts: [closeWaitLog(`log_close_slow_${i}`)], outcomes: [], refusals: [] }, monotonicMs() + 5000);
      assert.equal(r.inserted[0], 1);
    }
    const background = events.filter((e) => e.by === 'background' && !e.busy);
    assert.ok(background.length >= 5, `${background.length} background passes copied frames`);
    const closing = events.filter((e) => e.by === 'writer' && e.mode === 'PASSIVE' && !e.busy);
    assert.ok(closing.length >= 1, `${closing.length} closing passes`);
    assert.deepEqual(
      closing.filter((e) => e.overdue !== true || e.slowPass === undefined),
      [],
      'every closing pass waited out the slow passes',
    );
    for (let k = 1; k < closing.length; k++) {
      const gap = closing[k]!.at - closing[k - 1]!.at;
      assert.ok(gap >= policy.slowDeferMs - 20, `closing passes ${gap} ms apart`);
    }
  } finally {
    unsubscribe(CHECKPOINT_CHANNEL, listen);
    await writer.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** A /v1/log row for the writer tests above. */
function closeWaitLog(id: string): NewLog {
  return {
    id,
    projectId: 'prj_close_wait',
    keyId: 'key_close_wait',
    receivedAt: Date.now(),
    occurredAt: null,
    actor: 'test',
    action: 'write',
    traceId: null,
    actorType: 'service',
    credentialHandoverDetected: false,
    source: 'log',
    status: 'complete',
    requestProof: false,
    payloadHash: null,
    payload: 'z'.repeat(1500),
    metadata: null,
  };
}
