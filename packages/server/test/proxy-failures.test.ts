/**
 * `POST /v1/proxy` ugly paths: refusals before anything is sent, blocked targets, unreachable
 * and resetting upstreams, the three timeouts, streams that die midway, callers that hang up,
 * and a store that cannot take the write-ahead record. Every outcome must be answered clearly
 * and recorded (or, for refusals without a key or body, leave nothing behind).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import {
  addKey,
  closedPort,
  decryptRecord,
  makeProjectKey,
  proxyCall,
  startSilentServer,
  startUpstream,
  waitFor,
  type Upstream,
} from './helpers/upstreams.js';

const ENC = 'failures-suite-key';

for (const store of STORES) {
  describe(`proxy failures on ${store}`, () => {
    let t: TestApp;
    let up: Upstream;
    let silent: Awaited<ReturnType<typeof startSilentServer>>;
    let deadPort: number;
    let projectId: string;
    let apiKey: string;
    const call = (body: unknown, headers: Record<string, string> = {}) => proxyCall(t.url, apiKey, body, headers, ENC);
    const record = async (logId: string) => {
      const row = await t.app.ctx.store.logs.get(projectId, logId);
      assert.ok(row, `record ${logId} exists`);
      return { row, payload: (await decryptRecord(row.payload, ENC, logId)) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
    };
    const recordCount = async () => (await t.app.ctx.store.logs.list(projectId, {}, 1000)).length;

    before(async () => {
      up = await startUpstream();
      silent = await startSilentServer();
      deadPort = await closedPort();
      t = await startApp({
        store,
        listen: true,
        config: {
          allowTargets: [up.hostPort, silent.hostPort, `127.0.0.1:${deadPort}`, `upstream.test:${up.port}`],
          proxyTimeouts: { connect: 300, firstByte: 300, idle: 300 },
        },
      });
      ({ projectId, apiKey } = await makeProjectKey(t.app, 'service'));
    });
    after(async () => {
      await t.close();
      await silent.close();
      await up.close();
    });

    test('refusals before anything is sent: no key, bad key, live key, no encryption key, bad body, bad URL', async () => {
      const liveKey = await addKey(t.app, projectId, 'live');
      const good = { target: up.url + '/echo', payload: { a: 1 } };
      const beforeUp = up.requests.length;
      const beforeRecords = await recordCount();
      const cases: Array<[Promise<Awaited<ReturnType<typeof proxyCall>>>, number, string]> = [
        [proxyCall(t.url, undefined, good, {}, ENC), 401, 'missing_api_key'],
        [proxyCall(t.url, 'key_agent_nope', good, {}, ENC), 401, 'invalid_api_key'],
        [proxyCall(t.url, liveKey, good, {}, ENC), 403, 'wrong_credential_class'],
        [proxyCall(t.url, t.masterKey, good, {}, ENC), 403, 'wrong_credential_class'],
        [proxyCall(t.url, apiKey, good, {}, null), 400, 'missing_encryption_key'],
        [proxyCall(t.url, apiKey, good, { 'x-service-encryption-key': '' }, null), 400, 'missing_encryption_key'],
        [proxyCall(t.url, apiKey, good, { 'x-service-encryption-key': '   ' }, null), 400, 'missing_encryption_key'],
        [proxyCall(t.url, apiKey, '{"target":', {}, ENC), 400, 'invalid_json'],
        [proxyCall(t.url, apiKey, JSON.stringify(good), { 'content-type': 'text/plain' }, ENC), 415, 'unsupported_media_type'],
        [call({ payload: {} }), 400, 'invalid_request'],
        [call({ target: up.url + '/echo' }), 400, 'invalid_request'],
        [call({ target: up.url + '/echo', payload: [1, 2] }), 400, 'invalid_request'],
        [call({ target: up.url + '/echo', payload: {}, extra: true }), 400, 'invalid_request'],
        [call({ target: 'not a url', payload: {} }), 400, 'invalid_request'],
        [call({ target: '/relative', payload: {} }), 400, 'invalid_request'],
        [call({ target: up.url + '/echo', payload: {} }, { 'x-service-agent-id': 'a'.repeat(600) }), 400, 'invalid_request'],
        // (`{"n":1e400}` is no refusal: its exact bytes go upstream and are recorded as text,
        // hardening-exchange.test.ts.)
      ];
      for (const [pending, status, code] of cases) {
        const r = await pending;
        assert.equal(r.status, status, `${code}: ${r.text}`);
        assert.equal(r.json.success, false);
        assert.equal(r.json.error.code, code);
        assert.match(r.json.error.requestId, /^req_/);
      }
      assert.equal(up.requests.length, beforeUp, 'no refused call reached the upstream');
      assert.equal(await recordCount(), beforeRecords, 'refusals without a usable request leave no record');
    });

    test('a blocked target is refused with 403 target_blocked, nothing is sent, and the attempt is recorded', async () => {
      const beforeUp = up.requests.length;
      // The upstream really listens on these ports: only the guard stands between.
      for (const target of [
        `http://localhost:${up.port}/echo`,
        `http://[::ffff:127.0.0.1]:${up.port}/echo`,
        `http://[::1]:${up.port}/echo`,
        `http://0.0.0.0:${up.port}/echo`,
      ]) {
        const r = await call({ target, payload: { secret: 'do not send' } });
        assert.equal(r.status, 403, target);
        assert.equal(r.json.error.code, 'target_blocked');
        assert.ok(r.logId);
        const { row, payload } = await record(r.logId!);
        assert.equal(row.status, 'failed');
        assert.equal(payload.outcome, 'target_blocked');
        assert.equal(payload.request.target, target);
        assert.equal(payload.response, undefined);
      }
      assert.equal(up.requests.length, beforeUp);
    });

    test('an upstream that refuses connections is 502 upstream_unreachable, recorded failed', async () => {
      const r = await call({ target: `http://127.0.0.1:${deadPort}/x`, payload: {} });
      assert.equal(r.status, 502);
      assert.equal(r.json.error.code, 'upstream_unreachable');
      const { row, payload } = await record(r.logId!);
      assert.equal(row.status, 'failed');
      assert.equal(payload.outcome, 'upstream_unreachable');
      assert.match(payload.error, /ECONNREFUSED/);
    });

    test('an upstream that resets before answering is 502, recorded failed', async () => {
      const r = await call({ target: up.url + '/reset', payload: {} });
      assert.equal(r.status, 502);
      assert.equal(r.json.error.code, 'upstream_unreachable');
      const { row, payload } = await record(r.logId!);
      assert.equal(row.status, 'failed');
      assert.equal(payload.outcome, 'upstream_reset');
    });

    test('a host name that does not resolve is 502, recorded failed', async () => {
      const r = await call({ target: 'https://no-such-host.invalid/x', payload: {} });
      assert.equal(r.status, 502);
      assert.equal(r.json.error.code, 'upstream_unreachable');
      const { row } = await record(r.logId!);
      assert.equal(row.status, 'failed');
    });

    test('connect, first-byte and idle timeouts: 504 before the status line, a cut stream after it; all recorded', async () => {
      const connect = await call({ target: `https://${silent.hostPort}/x`, payload: {} });
      assert.equal(connect.status, 504);
      assert.equal(connect.json.error.code, 'upstream_timeout');
      assert.equal((await record(connect.logId!)).payload.outcome, 'connect_timeout');

      const firstByte = await call({ target: up.url + '/no-answer', payload: {} });
      assert.equal(firstByte.status, 504);
      assert.equal(firstByte.json.error.code, 'upstream_timeout');
      assert.equal((await record(firstByte.logId!)).payload.outcome, 'first_byte_timeout');
      await up.requests.at(-1)!.ended;
      assert.equal(up.requests.at(-1)!.closedEarly, true, 'the upstream call was abandoned');

      const r = await request(t.url + '/v1/proxy', {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': ENC },
        body: JSON.stringify({ target: up.url + '/stall', payload: {} }),
      });
      assert.equal(r.statusCode, 200);
      const logId = r.headers['x-service-log-id'] as string;
      await assert.rejects(r.body.text(), 'a stream cut by the idle timeout must not look complete');
      const { row, payload } = await record(logId);
      assert.equal(row.status, 'failed');
      assert.equal(payload.outcome, 'idle_timeout');
      assert.equal(payload.response.status, 200);
      assert.equal(payload.response.bodyText, 'first chunk then silence');
    });

    test('an upstream that dies mid-stream cuts the caller too; recorded failed with what was sent', async () => {
      const r = await request(t.url + '/v1/proxy', {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': ENC },
        body: JSON.stringify({ target: up.url + '/reset-mid', payload: {} }),
      });
      assert.equal(r.statusCode, 200);
      const logId = r.headers['x-service-log-id'] as string;
      await assert.rejects(r.body.text());
      const { row, payload } = await waitFor(async () => {
        const got = await record(logId);
        return got.row.status === 'pending' ? undefined : got;
      });
      assert.equal(row.status, 'failed');
      assert.equal(payload.outcome, 'upstream_reset');
      assert.equal(payload.response.bodyText, 'half an answer');
    });

    test('a caller that hangs up aborts the upstream call; the record is marked interrupted', async () => {
      const r = await request(t.url + '/v1/proxy', {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': ENC },
        body: JSON.stringify({ target: up.url + '/sse-hang?n=1', payload: {} }),
      });
      const logId = r.headers['x-service-log-id'] as string;
      const upstreamSide = up.requests.at(-1)!;
      const it = r.body[Symbol.asyncIterator]();
      assert.match(String((await it.next()).value), /data: hang 0/);
      r.body.destroy();
      await upstreamSide.ended;
      assert.equal(upstreamSide.closedEarly, true, 'the upstream saw its connection closed');
      const { row, payload } = await waitFor(async () => {
        const got = await record(logId);
        return got.row.status === 'pending' ? undefined : got;
      });
      assert.equal(row.status, 'interrupted');
      assert.equal(payload.outcome, 'client_disconnected');
      assert.deepEqual(payload.response.events, [{ data: 'hang 0' }]);
    });

    test('when the store cannot take the write-ahead record the call is refused with 503 and nothing is forwarded', async () => {
      const logs = t.app.ctx.store.logs;
      const original = logs.insertReturningSeq.bind(logs);
      logs.insertReturningSeq = async () => {
        throw new Error('disk full');
      };
      try {
        const beforeUp = up.requests.length;
        const r = await call({ target: up.url + '/echo', payload: { a: 1 } });
        assert.equal(r.status, 503);
        assert.equal(r.json.error.code, 'log_store_unavailable');
        assert.equal(up.requests.length, beforeUp);
      } finally {
        logs.insertReturningSeq = original;
      }
      assert.equal((await call({ target: up.url + '/echo', payload: {} })).status, 200);
    });

    test('the write-ahead record is committed before the upstream sees the request', async () => {
      const logs = t.app.ctx.store.logs;
      const original = logs.insertReturningSeq.bind(logs);
      const order: string[] = [];
      logs.insertReturningSeq = async (l) => {
        const inserted = await original(l);
        order.push('committed');
        return inserted;
      };
      const seenBefore = up.requests.length;
      try {
        const r = await call({ target: up.url + '/status/200', payload: {} });
        assert.equal(r.status, 200);
        order.push(`upstream had ${up.requests.length - seenBefore}`);
      } finally {
        logs.insertReturningSeq = original;
      }
      assert.deepEqual(order, ['committed', 'upstream had 1']);
    });

    test('the connector dials the addresses the guard resolved, never a second lookup (named upstream via a fake resolver)', async () => {
      const guard = t.app.proxy.guard;
      const saved = guard.resolver;
      let lookups = 0;
      guard.resolver = async (name) => {
        lookups++;
        if (name === 'upstream.test') return ['127.0.0.1'];
        throw new Error('ENOTFOUND');
      };
      guard.clearCache();
      try {
        // upstream.test exists only in the fake resolver: success means the socket went to its checked answer.
        const r = await call({ target: `http://upstream.test:${up.port}/echo`, payload: {} });
        assert.equal(r.status, 200);
        assert.equal(r.json.headers.host, `upstream.test:${up.port}`);
        assert.equal(lookups, 1);
        // A name that resolves to loopback but is not on the allow list is refused.
        guard.resolver = async () => ['127.0.0.1'];
        guard.clearCache();
        const blocked = await call({ target: `http://sneaky.test:${up.port}/echo`, payload: {} });
        assert.equal(blocked.status, 403);
      } finally {
        guard.resolver = saved;
        guard.clearCache();
      }
    });
  });
}
