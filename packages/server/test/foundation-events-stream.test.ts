/**
 * The SSE event stream over a real socket: a handover is pushed to the project's subscribers
 * (and only theirs), Last-Event-ID replays stored events, revoking the key ends the stream.
 * With PostgreSQL the push goes through LISTEN/NOTIFY, also between two app instances. An event
 * published after one with a higher seq (two instances', or two concurrent calls', notifications
 * arriving in the other order) still reaches the stream: it used to be dropped as already sent.
 * A reconnect replays the events below Last-Event-ID that may have committed after it (one held
 * in an open transaction on PostgreSQL while a later one is sent): it used to skip them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { STORES, startApp, freshPostgresDatabase, type TestApp } from './helpers/server.js';
import { addKey, fullProject, postLog } from './foundation-helpers.js';
import pg from 'pg';
import { toSecurityEvent } from '../src/events/security.js';

const KEY = 'sse-key';

/** An open SSE connection that collects `data:` frames. */
interface Stream {
  status: number;
  events: Array<Record<string, unknown>>;
  ids: string[];
  ended: Promise<void>;
  next: (n: number) => Promise<void>;
  close: () => void;
}

function openStream(base: string, path: string, key: string, lastEventId?: string): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      base + path,
      { headers: { authorization: `Bearer ${key}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) } },
      (res: IncomingMessage) => {
        const events: Array<Record<string, unknown>> = [];
        const ids: string[] = [];
        const waiters: Array<{ n: number; done: () => void }> = [];
        let buf = '';
        const ended = new Promise<void>((r) => res.on('end', r).on('close', r));
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buf += chunk;
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const frame = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const data = /^data: (.*)$/m.exec(frame)?.[1];
            const id = /^id: (.*)$/m.exec(frame)?.[1];
            if (data) events.push(JSON.parse(data));
            if (id) ids.push(id);
          }
          for (const w of [...waiters]) {
            if (events.length < w.n) continue;
            waiters.splice(waiters.indexOf(w), 1);
            w.done();
          }
        });
        resolve({
          status: res.statusCode ?? 0,
          events,
          ids,
          ended,
          next: (n) => (events.length >= n ? Promise.resolve() : new Promise((done) => waiters.push({ n, done }))),
          close: () => req.destroy(),
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * Stores a handover event `evt_<name>` of `projectId` straight into the store (no call behind
 * it, nothing published), and returns it as the stream sends it.
 */
async function storeEvent(t: TestApp, projectId: string, name: string, createdAt = Date.now()) {
  const row = {
    id: `evt_${name}`,
    projectId,
    type: 'security.policy_violation',
    reason: 'credential_handover',
    logId: `log_${name}`,
    createdAt,
    body: { actor: `actor-${name}`, credentialClass: 'human', agentHeaders: ['x-agent-run'] },
  };
  return toSecurityEvent({ ...row, seq: await t.app.ctx.store.events.insert(row) });
}

/** Waits until the app has `n` live subscribers of a project (the stream is registered). */
async function subscribed(app: { ctx: { events: { subscriberCount: (p: string) => number } } }, projectId: string, n = 1) {
  while (app.ctx.events.subscriberCount(projectId) < n) await new Promise((r) => setTimeout(r, 5));
}

for (const store of STORES) {
  test(`events/stream pushes handover events on ${store}`, async () => {
    const t = await startApp({ store, listen: true });
    try {
      const a = await fullProject(t, 'a');
      const b = await fullProject(t, 'b');
      const sa = await openStream(t.url, `/v1/projects/${a.projectId}/events/stream`, a.live);
      const sb = await openStream(t.url, `/v1/projects/${b.projectId}/events/stream`, b.live);
      assert.equal(sa.status, 200);
      await subscribed(t.app, a.projectId);
      await subscribed(t.app, b.projectId);
      const r = await postLog(
        t.app,
        a.human,
        { actor: 'alice', payload: {} },
        { 'x-service-encryption-key': KEY, 'x-agent-rationale': 'because' },
      );
      assert.equal(r.statusCode, 201);
      await sa.next(1);
      assert.equal(sa.events[0]!.type, 'security.policy_violation');
      assert.equal(sa.events[0]!.reason, 'credential_handover');
      assert.equal(sa.events[0]!.logId, r.json().id);
      assert.equal(sa.events[0]!.projectId, a.projectId);
      // A second event reaches A; B, subscribed all along, got nothing of A's.
      await postLog(t.app, b.human, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-agent-run': 'bot' });
      await sb.next(1);
      assert.equal(sb.events.length, 1);
      assert.equal(sb.events[0]!.projectId, b.projectId);
      assert.equal(sa.events.length, 1);

      // Reconnect with Last-Event-ID replays what came after it.
      await postLog(t.app, a.human, { actor: 'again', payload: {} }, { 'x-service-encryption-key': KEY, 'x-agent-x': '1' });
      await sa.next(2);
      const replay = await openStream(t.url, `/v1/projects/${a.projectId}/events/stream`, a.live, sa.ids[0]);
      await replay.next(1);
      assert.equal(replay.events[0]!.actor, 'again');
      replay.close();

      // Revoking the live key ends its stream at once.
      const live2 = await addKey(t, a.projectId, 'live');
      const s2 = await openStream(t.url, `/v1/projects/${a.projectId}/events/stream`, live2.apiKey);
      await subscribed(t.app, a.projectId, 2);
      const del = await t.app.inject({
        method: 'DELETE',
        url: `/v1/projects/${a.projectId}/keys/${live2.keyId}`,
        headers: { authorization: `Bearer ${t.masterKey}` },
      });
      assert.equal(del.statusCode, 200);
      await s2.ended;
      sa.close();
      sb.close();
    } finally {
      await t.close();
    }
  });
}

for (const store of STORES) {
  test(
    `events/stream on ${store}: an event published after a later one is sent, not dropped; a replay sends each event once`,
    { timeout: 20_000 },
    async () => {
      const t = await startApp({ store, listen: true });
      try {
        const p = await fullProject(t, 'late');
        // Two stored events, seq a < b, whose notifications arrive b first.
        const stored = (n: number) => storeEvent(t, p.projectId, `late_${n}`);
        const first = await stored(1);
        const s = await openStream(t.url, `/v1/projects/${p.projectId}/events/stream`, p.live);
        await subscribed(t.app, p.projectId);
        const a = await stored(2);
        const b = await stored(3);
        assert.ok(a.seq < b.seq);
        await t.app.ctx.events.publish(b);
        await t.app.ctx.events.publish(a);
        await s.next(2);
        assert.deepEqual(
          s.events.map((e) => e.id),
          [b.id, a.id],
        );
        assert.deepEqual(s.ids, [String(b.seq), String(a.seq)]);

        // A reconnect after the first replays the two stored since, once each, in seq order, and
        // a live notification of one of them arriving during or after the replay is not sent again.
        const replay = await openStream(t.url, `/v1/projects/${p.projectId}/events/stream`, p.live, String(first.seq));
        await replay.next(2);
        await subscribed(t.app, p.projectId, 2);
        await t.app.ctx.events.publish(a);
        const c = await stored(4);
        await t.app.ctx.events.publish(c);
        await replay.next(3);
        assert.deepEqual(
          replay.events.map((e) => e.id),
          [a.id, b.id, c.id],
        );
        s.close();
        replay.close();
      } finally {
        await t.close();
      }
    },
  );
}

for (const store of STORES) {
  test(
    `events/stream on ${store}: a replay also sends the events below Last-Event-ID that may have committed after it`,
    { timeout: 20_000 },
    async () => {
      const t = await startApp({ store, listen: true });
      try {
        const p = await fullProject(t, 'below');
        const other = await fullProject(t, 'other');
        const stored = (n: number, createdAt: number, projectId = p.projectId) => storeEvent(t, projectId, `below_${n}`, createdAt);
        // An old event (long before the window), one that committed while the client was away
        // (its notification reached no stream), then the one the client last got, then another project's.
        const old = await stored(1, Date.now() - 120_000);
        const away = await stored(2, Date.now());
        const last = await stored(3, Date.now());
        const foreign = await stored(4, Date.now(), other.projectId);
        assert.ok(old.seq < away.seq && away.seq < last.seq);
        const replay = await openStream(t.url, `/v1/projects/${p.projectId}/events/stream`, p.live, String(last.seq));
        await subscribed(t.app, p.projectId);
        const next = await stored(5, Date.now());
        await t.app.ctx.events.publish(next);
        await replay.next(2);
        // A late notification of the replayed one is not sent again (the sentinel comes next).
        await t.app.ctx.events.publish(away);
        const sentinel = await stored(6, Date.now());
        await t.app.ctx.events.publish(sentinel);
        await replay.next(3);
        assert.deepEqual(
          replay.events.map((e) => e.id),
          [away.id, next.id, sentinel.id],
        );
        // Resuming from a seq that is not one of the project's events replays only what follows it.
        const fromForeign = await openStream(t.url, `/v1/projects/${p.projectId}/events/stream`, p.live, String(foreign.seq));
        await fromForeign.next(2);
        assert.deepEqual(
          fromForeign.events.map((e) => e.id),
          [next.id, sentinel.id],
        );
        replay.close();
        fromForeign.close();
      } finally {
        await t.close();
      }
    },
  );
}

if (STORES.includes('postgres')) {
  test(
    'events/stream on PostgreSQL: an event whose insert commits after a later one is replayed after a reconnect',
    { timeout: 20_000 },
    async () => {
      const t = await startApp({ store: 'postgres', listen: true });
      const held = new pg.Client({ connectionString: t.config.databaseUrl! });
      await held.connect();
      try {
        const p = await fullProject(t, 'held');
        const s = await openStream(t.url, `/v1/projects/${p.projectId}/events/stream`, p.live);
        await subscribed(t.app, p.projectId);
        // Another instance's insert: its seq is taken, its commit comes later and notifies no one here.
        await held.query('begin');
        await held.query(
          "insert into events (id, project_id, type, reason, log_id, created_at, body) values ('evt_held', $1, 'security.policy_violation', 'credential_handover', 'log_held', $2, '{}')",
          [p.projectId, Date.now()],
        );
        const r = await postLog(t.app, p.human, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-agent-run': 'bot' });
        assert.equal(r.statusCode, 201);
        await s.next(1);
        const resumeFrom = s.ids.at(-1)!;
        s.close();
        await held.query('commit');
        const replay = await openStream(t.url, `/v1/projects/${p.projectId}/events/stream`, p.live, resumeFrom);
        await replay.next(1);
        assert.equal(replay.events[0]!.id, 'evt_held');
        replay.close();
      } finally {
        await held.end();
        await t.close();
      }
    },
  );

  test('two instances on one PostgreSQL: events and revocations cross over (LISTEN/NOTIFY)', async () => {
    const databaseUrl = await freshPostgresDatabase();
    const one = await startApp({ store: 'postgres', databaseUrl, listen: true });
    const two = await startApp({ store: 'postgres', databaseUrl, listen: true, config: { masterKey: one.masterKey } });
    try {
      const p = await fullProject(one);
      const stream = await openStream(two.url, `/v1/projects/${p.projectId}/events/stream`, p.live);
      await subscribed(two.app, p.projectId);
      const r = await postLog(one.app, p.human, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-agent-rationale': 'r' });
      await stream.next(1);
      assert.equal(stream.events[0]!.logId, r.json().id);
      // Warm instance two's key cache, revoke on instance one, and two refuses at once.
      assert.equal((await postLog(two.app, p.agent, { payload: {} }, { 'x-service-encryption-key': KEY })).statusCode, 201);
      const keys = (
        await one.app.inject({ url: `/v1/projects/${p.projectId}/keys`, headers: { authorization: `Bearer ${one.masterKey}` } })
      ).json().keys;
      const agentKey = keys.find((k: { credentialClass: string }) => k.credentialClass === 'agent');
      await one.app.inject({
        method: 'DELETE',
        url: `/v1/projects/${p.projectId}/keys/${agentKey.id}`,
        headers: { authorization: `Bearer ${one.masterKey}` },
      });
      // NOTIFY is asynchronous: wait for instance two to hear it, then the key must fail.
      let status = 201;
      for (let i = 0; i < 500 && status !== 401; i++) {
        await new Promise((r) => setTimeout(r, 10));
        status = (await postLog(two.app, p.agent, { payload: {} }, { 'x-service-encryption-key': KEY })).statusCode;
      }
      assert.equal(status, 401);
      stream.close();
    } finally {
      await two.close();
      await one.close();
    }
  });
}
