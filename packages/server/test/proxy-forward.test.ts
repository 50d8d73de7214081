/**
 * `POST /v1/proxy` happy paths against real loopback upstreams: what the destination sees, what
 * the caller gets back (status, headers, streamed body), and what the record holds.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { payloadHashHex } from '@countersign/core';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import {
  bigBody,
  decryptRecord,
  makeProjectKey,
  proxyCall,
  rawProxyCall,
  startUpstream,
  waitFor,
  type Upstream,
} from './helpers/upstreams.js';

const ENC = 'forward-suite-key';

for (const store of STORES) {
  describe(`proxy forwarding on ${store}`, () => {
    let t: TestApp;
    let up: Upstream;
    let projectId: string;
    let apiKey: string;
    const call = (body: unknown, headers: Record<string, string> = {}) => proxyCall(t.url, apiKey, body, headers, ENC);
    const record = async (logId: string) => {
      const row = await t.app.ctx.store.logs.get(projectId, logId);
      assert.ok(row, `record ${logId} exists`);
      return { row, payload: (await decryptRecord(row.payload, ENC, logId)) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
    };

    before(async () => {
      up = await startUpstream();
      t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort] } });
      ({ projectId, apiKey } = await makeProjectKey(t.app, 'agent'));
    });
    after(async () => {
      await t.close();
      await up.close();
    });

    test('a JSON call goes upstream as a JSON POST and comes back whole, with its log id', async () => {
      const before = up.requests.length;
      const r = await call({ target: up.url + '/echo?x=1', payload: { question: 'ping', n: [1, 2] } });
      assert.equal(r.status, 200);
      assert.match(r.logId!, /^log_[0-9A-Za-z]{24}$/);
      assert.equal(r.headers['x-upstream'], 'echo');
      assert.equal(up.requests.length, before + 1);
      const seen = up.requests.at(-1)!;
      assert.equal(seen.method, 'POST');
      assert.equal(seen.url, '/echo?x=1');
      assert.deepEqual(JSON.parse(seen.body), { question: 'ping', n: [1, 2] });
      assert.equal(seen.headers['content-type'], 'application/json');
      assert.equal(r.json.body, seen.body);

      const { row, payload } = await record(r.logId!);
      assert.equal(row.status, 'complete');
      assert.equal(row.source, 'proxy');
      assert.equal(row.actor, 'proxy');
      assert.equal(row.action, 'proxy.request');
      assert.equal(row.traceId, null);
      assert.equal(row.actorType, 'agent');
      assert.equal(row.credentialHandoverDetected, false);
      assert.equal(row.requestProof, false);
      assert.ok(row.completedAt !== null);
      assert.equal(row.payloadHash, payloadHashHex(payload));
      assert.match(payload.nonce, /^[0-9a-f]{32}$/);
      assert.equal(payload.outcome, 'complete');
      assert.deepEqual(payload.request.body, { question: 'ping', n: [1, 2] });
      assert.equal(payload.request.method, 'POST');
      assert.equal(payload.request.target, up.url + '/echo?x=1');
      assert.equal(payload.response.status, 200);
      assert.equal(payload.response.body.url, '/echo?x=1');
      assert.equal(payload.response.bytes, r.body.length);
      assert.equal(payload.response.sha256, createHash('sha256').update(r.body).digest('hex'));
      assert.equal(payload.response.truncated, false);
      assert.equal(typeof payload.timings.firstByteMs, 'number');
      assert.ok(payload.timings.totalMs >= payload.timings.firstByteMs);
    });

    test('X-Service-Agent-ID, X-Service-Action and X-Service-Run-ID become actor, action and traceId; requestProof is stored', async () => {
      const r = await call(
        { target: up.url + '/status/201', payload: {}, requestProof: true },
        { 'X-Service-Agent-ID': 'planner-7', 'X-Service-Action': 'db.write', 'X-Service-Run-ID': 'run-42' },
      );
      assert.equal(r.status, 201);
      const { row } = await record(r.logId!);
      assert.equal(row.actor, 'planner-7');
      assert.equal(row.action, 'db.write');
      assert.equal(row.traceId, 'run-42');
      assert.equal(row.requestProof, true);
    });

    test('request header rules: ours, agent context, hop-by-hop, Host, forwarding headers stay behind; the upstream credential is renamed', async () => {
      const r = await rawProxyCall(
        t.url,
        {
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/json',
          'x-service-encryption-key': ENC,
          'X-Service-Agent-ID': 'a1',
          'X-Service-Custom': 'ours',
          x_service_underscored: 'ours too',
          'X-Agent-Rationale': 'because',
          'X-AGENT-TRACE': 'ctx',
          x_agent_thing: 'ctx',
          'X-Service-Upstream-Authorization': 'Bearer upstream-token',
          Connection: 'keep-alive, X-Named-Hop',
          'X-Named-Hop': 'drop',
          'Keep-Alive': 'timeout=5',
          TE: 'trailers',
          Upgrade: 'websocket',
          'Proxy-Authorization': 'Basic cHJveHk6c2VjcmV0',
          'X-Forwarded-For': '10.1.2.3',
          'X-Forwarded-Host': 'spoof',
          Forwarded: 'for=10.1.2.3',
          Via: '1.1 someone',
          'X-Real-IP': '10.1.2.3',
          'X-Custom-Pass': 'kept',
          Accept: 'application/json',
        },
        JSON.stringify({ target: up.url + '/echo', payload: { a: 1 } }),
      );
      const logId = r.headers['x-service-log-id'] as string;
      assert.equal(r.status, 200);
      const seen = up.requests.at(-1)!;
      const names = seen.rawHeaderNames.map((n) => n.toLowerCase());
      for (const n of names) {
        assert.ok(!/^x[-_](service|agent)[-_]/.test(n), `${n} must not reach the upstream`);
      }
      for (const gone of [
        'x-named-hop',
        'keep-alive',
        'te',
        'upgrade',
        'proxy-authorization',
        'x-forwarded-for',
        'x-forwarded-host',
        'forwarded',
        'via',
        'x-real-ip',
      ]) {
        assert.equal(seen.headers[gone], undefined, gone);
      }
      assert.equal(seen.headers.authorization, 'Bearer upstream-token');
      assert.equal(seen.headers['x-custom-pass'], 'kept');
      assert.equal(seen.headers.accept, 'application/json');
      assert.equal(seen.headers.host, up.hostPort);
      const { payload } = await record(logId);
      assert.equal(payload.request.headers.authorization, '[REDACTED]');
      assert.equal(payload.request.headers['x-custom-pass'], 'kept');
      assert.equal(payload.request.headers['x-agent-rationale'], undefined);
    });

    test('response header rules: hop-by-hop and Connection-named removed, the rest passed; cookies redacted in the record', async () => {
      const r = await call({ target: up.url + '/hop', payload: {} });
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-hop-named'], undefined);
      assert.equal(r.headers['x-kept'], 'keep me');
      assert.deepEqual(r.headers['set-cookie'], ['session=upstream-cookie-secret; HttpOnly', 'b=2']);
      const { payload } = await record(r.logId!);
      assert.equal(payload.response.headers['set-cookie'], '[REDACTED]');
      assert.equal(payload.response.headers['x-hop-named'], undefined);
      assert.equal(payload.response.headers.connection, undefined);
      assert.equal(payload.response.headers['keep-alive'], undefined);
      assert.deepEqual(payload.response.body, { ok: true });
    });

    test('the optional method: GET and HEAD send no body, PUT sends the payload, GET with a payload is refused', async () => {
      const before = up.requests.length;
      const get = await call({ target: up.url + '/echo', payload: {}, method: 'GET' });
      assert.equal(get.status, 200);
      assert.equal(get.json.method, 'GET');
      assert.equal(get.json.body, '');
      assert.equal(up.requests.at(-1)!.headers['content-length'], undefined);
      const head = await call({ target: up.url + '/echo', payload: {}, method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.body.length, 0);
      assert.equal(up.requests.at(-1)!.method, 'HEAD');
      const put = await call({ target: up.url + '/echo', payload: { v: 2 }, method: 'PUT' });
      assert.equal(put.json.method, 'PUT');
      assert.equal(put.json.body, '{"v":2}');
      assert.equal(up.requests.length, before + 3);
      const bad = await call({ target: up.url + '/echo', payload: { v: 2 }, method: 'GET' });
      assert.equal(bad.status, 400);
      assert.equal(bad.json.error.code, 'invalid_request');
      const unknown = await call({ target: up.url + '/echo', payload: {}, method: 'TRACE' });
      assert.equal(unknown.status, 400);
      assert.equal(up.requests.length, before + 3);
    });

    test('a 3xx answer is passed back and never followed (even to the metadata address)', async () => {
      const before = up.requests.length;
      const r = await call({ target: up.url + '/redirect', payload: {} });
      assert.equal(r.status, 302);
      assert.equal(r.headers.location, 'http://169.254.169.254/latest/meta-data/');
      assert.equal(r.text, 'moved');
      assert.equal(up.requests.length, before + 1);
      const { row, payload } = await record(r.logId!);
      assert.equal(row.status, 'complete');
      assert.equal(payload.response.status, 302);
      assert.equal(payload.response.bodyText, 'moved');
    });

    test('upstream errors are answers: 404 and 500 pass back as they are and are recorded complete', async () => {
      for (const code of [404, 500, 503]) {
        const r = await call({ target: `${up.url}/status/${code}`, payload: {} });
        assert.equal(r.status, code);
        assert.deepEqual(r.json, { status: code });
        const { row, payload } = await record(r.logId!);
        assert.equal(row.status, 'complete');
        assert.equal(payload.response.status, code);
      }
    });

    test('SSE events pass through one by one: the caller has event 1 before the upstream writes event 2', async () => {
      const r = await request(t.url + '/v1/proxy', {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': ENC },
        body: JSON.stringify({ target: up.url + '/sse-step?n=3', payload: {} }),
      });
      assert.equal(r.statusCode, 200);
      assert.equal(r.headers['content-type'], 'text/event-stream');
      const logId = r.headers['x-service-log-id'] as string;
      const chunks: string[] = [];
      const it = r.body[Symbol.asyncIterator]();
      // Event 0 was written at once; events 1 and 2 only after a step() that we give after reading.
      for (let i = 0; i < 3; i++) {
        let got = '';
        while (!got.includes(`data: step ${i}\n\n`)) got += String((await it.next()).value);
        chunks.push(got);
        // Write-ahead: while the stream is open the record exists, pending, with the request half.
        if (i === 0) {
          const { row, payload } = await record(logId);
          assert.equal(row.status, 'pending');
          assert.equal(payload.outcome, 'pending');
          assert.equal(payload.response, undefined);
        }
        up.step();
      }
      while (!(await it.next()).done);
      assert.deepEqual(chunks, ['data: step 0\n\n', 'data: step 1\n\n', 'data: step 2\n\n']);
      const { row, payload } = await waitFor(async () => {
        const got = await record(logId);
        return got.row.status === 'complete' ? got : undefined;
      });
      assert.equal(row.status, 'complete');
      assert.deepEqual(payload.response.events, [{ data: 'step 0' }, { data: 'step 1' }, { data: 'step 2' }]);
      assert.equal(payload.response.bodyText, undefined);
    });

    test('a stream whose first event is late: the caller has the status line while the upstream holds the event', async () => {
      const answered = request(t.url + '/v1/proxy', {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': ENC },
        body: JSON.stringify({ target: up.url + '/sse-step?n=1&late=1', payload: {} }),
      });
      // undici answers at the status line; the upstream writes no event until step() below.
      const giveUp = new AbortController();
      const late = sleep(5000, undefined, { signal: giveUp.signal }).then(
        () => assert.fail('no status line while the upstream holds the first event'),
        () => undefined, // cancelled: the status line came
      );
      const r = await Promise.race([answered, late]);
      giveUp.abort();
      assert.ok(r);
      assert.equal(r.statusCode, 200);
      assert.equal(r.headers['content-type'], 'text/event-stream');
      up.step(); // the first event
      const it = r.body[Symbol.asyncIterator]();
      let got = '';
      while (!got.includes('\n\n')) got += String((await it.next()).value);
      assert.equal(got, 'data: step 0\n\n');
      up.step(); // the end
      while (!(await it.next()).done);
      const logId = r.headers['x-service-log-id'] as string;
      const { payload } = await waitFor(async () => {
        const stored = await record(logId);
        return stored.row.status === 'complete' ? stored : undefined;
      });
      assert.deepEqual(payload.response.events, [{ data: 'step 0' }]);
    });

    test('a free-running stream of 200 SSE events arrives complete and is recorded event by event', async () => {
      const r = await call({ target: up.url + '/sse?n=200', payload: {} });
      assert.equal(r.status, 200);
      assert.equal(r.text.split('\n\n').filter(Boolean).length, 200);
      const { payload } = await record(r.logId!);
      assert.equal(payload.response.events.length, 200);
      assert.deepEqual(payload.response.events[199], { id: '199', event: 'tick', data: '{"i":199}' });
    });

    test("an OpenAI chat stream (the benchmark's) is recorded event by event with its model, finish reason and usage", async () => {
      const r = await call({ target: up.url + '/llm-stream/chat/completions?n=40', payload: { model: 'gpt-4o-mini', stream: true } });
      assert.equal(r.status, 200);
      const events = r.text.split('\n\n').filter(Boolean);
      assert.equal(events.length, 42, '40 content chunks, the finishing one, [DONE]');
      const { payload } = await record(r.logId!);
      assert.equal(payload.response.events.length, 42);
      assert.equal(JSON.parse(payload.response.events[39].data).choices[0].delta.content, ' token39');
      assert.equal(payload.response.events[41].data, '[DONE]');
      assert.equal(payload.response.sha256, createHash('sha256').update(r.text).digest('hex'));
      assert.deepEqual(
        {
          provider: payload.llm.provider,
          api: payload.llm.api,
          model: payload.llm.model,
          finish: payload.llm.finishReason,
          usage: payload.llm.usage,
        },
        {
          provider: `openai-compatible:${up.hostPort}`,
          api: 'chat.completions',
          model: 'gpt-4o-mini-2024-07-18',
          finish: 'stop',
          usage: { inputTokens: 12, outputTokens: 40, totalTokens: 52 },
        },
      );
      assert.equal(payload.llm.streamed, true);
    });

    test('a 5 MB body streams to the caller whole; the record keeps 2 MB, truncated, with the full byte count and hash', async () => {
      const size = 5 * 1024 * 1024 + 7;
      const r = await call({ target: `${up.url}/big?bytes=${size}`, payload: {} });
      assert.equal(r.status, 200);
      assert.equal(r.body.length, size);
      const expected = createHash('sha256').update(bigBody(size)).digest('hex');
      assert.equal(createHash('sha256').update(r.body).digest('hex'), expected);
      assert.equal(r.headers['content-length'], String(size));
      const { row, payload } = await record(r.logId!);
      assert.equal(row.status, 'complete');
      assert.equal(payload.response.truncated, true);
      assert.equal(payload.response.bytes, size);
      assert.equal(payload.response.sha256, expected);
      assert.equal(payload.response.bodyText.length, 2 * 1024 * 1024);
      assert.equal(row.payloadHash, payloadHashHex(payload));
    });

    test('binary and text bodies are recorded as base64 and text', async () => {
      const bin = await call({ target: up.url + '/binary', payload: {} });
      assert.equal(bin.body.length, 256);
      const { payload: p1 } = await record(bin.logId!);
      assert.deepEqual([...Buffer.from(p1.response.bodyBase64, 'base64')], [...bin.body]);
      const text = await call({ target: up.url + '/text', payload: {} });
      assert.equal(text.text, 'plain text answer ✓');
      const { payload: p2 } = await record(text.logId!);
      assert.equal(p2.response.bodyText, 'plain text answer ✓');
    });

    test('the upstream connection is pooled: many calls reuse few keep-alive connections', async () => {
      const before = up.requests.length;
      for (let i = 0; i < 20; i++) assert.equal((await call({ target: up.url + '/status/200', payload: { i } })).status, 200);
      const connections = new Set(up.requests.slice(before).map((r) => r.remotePort));
      assert.equal(connections.size, 1, 'sequential calls share one keep-alive connection');
      assert.equal(up.requests.length, before + 20);
    });
  });
}
