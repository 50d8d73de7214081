/**
 * Spans in the clear (issue 11 "Spans end to end", DESIGN §4): entries carry `spanId`,
 * `parentSpanId`, `startedAt`, `endedAt` when known, on every read path (one entry, list,
 * trace, export). `/v1/log` takes them in the body (the parent defaulting to the `traceparent`
 * parent-id); `/v1/proxy` and forward mode give the call's entry a span of its own (or the
 * caller's `X-Service-Span-ID`) under `X-Service-Parent-Span-ID` or the `traceparent` parent,
 * answer `X-Service-Span-ID`, and send upstream a `traceparent` whose parent-id is that span.
 * On SQLite and PostgreSQL.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';
import { proxyCall, startUpstream, waitFor, type Upstream } from './helpers/upstreams.js';

const KEY = 'span key';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const RUN_SPAN = '00f067aa0ba902b7';
const SPAN_A = 'a1a1a1a1a1a1a1a1';
const SPAN_B = 'b2b2b2b2b2b2b2b2';

interface ReadEntry {
  id: string;
  spanId?: string;
  parentSpanId?: string;
  startedAt?: string;
  endedAt?: string;
  status: string;
  traceId: string | null;
}

for (const store of STORES) {
  describe(`spans in the clear (${store})`, () => {
    let t: TestApp;
    let up: Upstream;
    let p: Awaited<ReturnType<typeof fullProject>>;
    before(async () => {
      up = await startUpstream();
      t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort] } });
      p = await fullProject(t);
    });
    after(async () => {
      await t?.close();
      await up?.close();
    });

    const one = async (id: string): Promise<ReadEntry> => {
      const r = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/${id}`);
      assert.equal(r.statusCode, 200, r.body);
      return r.json().log as ReadEntry;
    };
    const settled = (id: string) =>
      waitFor(async () => {
        const e = await one(id);
        return e.status === 'pending' ? undefined : e;
      });

    test('/v1/log: span fields stored and read back on every path; traceparent gives the default parent', async () => {
      const started = '2026-11-24T10:00:00.000Z';
      const ended = '2026-11-24T10:00:01.250Z';
      const r = await postLog(
        t.app,
        p.agent,
        {
          logs: [
            { action: 'plan', traceId: 'run-spans', spanId: SPAN_A, startedAt: started, endedAt: ended, payload: { n: 1 } },
            { action: 'tool', traceId: 'run-spans', spanId: SPAN_B, parentSpanId: SPAN_A, payload: { n: 2 } },
            { action: 'note', traceId: 'run-spans', payload: { n: 3 } },
          ],
        },
        { 'x-service-encryption-key': KEY, traceparent: `00-${TRACE_ID}-${RUN_SPAN}-01` },
      );
      assert.equal(r.statusCode, 201, r.body);
      const ids = (r.json() as { ids: string[] }).ids;
      const [a, b, c] = await Promise.all(ids.map(one));
      assert.deepEqual([a!.spanId, a!.parentSpanId, a!.startedAt, a!.endedAt], [SPAN_A, RUN_SPAN, started, ended]);
      assert.deepEqual([b!.spanId, b!.parentSpanId], [SPAN_B, SPAN_A], 'an explicit parent wins over traceparent');
      assert.match(c!.spanId!, /^[0-9a-f]{16}$/, 'an entry under a known parent gets a span of its own');
      assert.equal(c!.parentSpanId, RUN_SPAN);

      const trace = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/traces/run-spans`);
      assert.equal(trace.statusCode, 200, trace.body);
      const inTrace = (trace.json().logs as ReadEntry[]).find((e) => e.id === a!.id)!;
      assert.deepEqual([inTrace.spanId, inTrace.parentSpanId, inTrace.startedAt], [SPAN_A, RUN_SPAN, started]);
      const list = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?traceId=run-spans`);
      assert.ok((list.json().logs as ReadEntry[]).some((e) => e.spanId === SPAN_B && e.parentSpanId === SPAN_A));
      const csv = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/export?format=csv&traceId=run-spans`);
      const [header, ...rows] = csv.body.trim().split('\r\n');
      assert.match(header!, /spanId,parentSpanId,startedAt,endedAt/);
      assert.ok(rows.some((row) => row.includes(`${SPAN_A},${RUN_SPAN},${started},${ended}`)));

      // Without any span facts, none are invented.
      const plain = await postLog(t.app, p.agent, { action: 'bare', payload: {} }, { 'x-service-encryption-key': KEY });
      const bare = await one((plain.json() as { id: string }).id);
      assert.equal(bare.spanId, undefined);
      assert.equal(bare.parentSpanId, undefined);
    });

    test('/v1/log: malformed span fields are 400 invalid_request; a malformed traceparent is ignored', async () => {
      const send = (entry: Record<string, unknown>, headers: Record<string, string> = {}) =>
        postLog(t.app, p.agent, { action: 'x', payload: {}, ...entry }, { 'x-service-encryption-key': KEY, ...headers });
      assertError(await send({ spanId: 'A1A1A1A1A1A1A1A1' }), 400, 'invalid_request');
      assertError(await send({ spanId: '0000000000000000' }), 400, 'invalid_request');
      assertError(await send({ parentSpanId: 'abc' }), 400, 'invalid_request');
      assertError(await send({ spanId: SPAN_A, parentSpanId: SPAN_A }), 400, 'invalid_request');
      assertError(await send({ startedAt: '2026-11-24T10:00:01Z', endedAt: '2026-11-24T10:00:00Z' }), 400, 'invalid_request');
      const ok = await send({}, { traceparent: 'garbage' });
      assert.equal(ok.statusCode, 201, ok.body);
      assert.equal((await one((ok.json() as { id: string }).id)).parentSpanId, undefined);
    });

    test('/v1/proxy: a span of its own under the traceparent parent, answered in X-Service-Span-ID, with start and end', async () => {
      const a = await proxyCall(
        t.url,
        p.agent,
        { target: `${up.url}/json`, payload: { q: 1 } },
        { traceparent: `00-${TRACE_ID}-${RUN_SPAN}-01` },
        KEY,
      );
      assert.equal(a.status, 200, a.text);
      const spanId = a.headers['x-service-span-id'] as string;
      assert.match(spanId, /^[0-9a-f]{16}$/);
      const e = await settled(a.logId!);
      assert.equal(e.spanId, spanId);
      assert.equal(e.parentSpanId, RUN_SPAN);
      assert.ok(e.startedAt && e.endedAt && Date.parse(e.startedAt) <= Date.parse(e.endedAt), `${e.startedAt} .. ${e.endedAt}`);

      // The caller may name the span and the parent outright.
      const b = await proxyCall(
        t.url,
        p.agent,
        { target: `${up.url}/json`, payload: {} },
        { 'x-service-span-id': SPAN_B, 'x-service-parent-span-id': SPAN_A },
        KEY,
      );
      assert.equal(b.headers['x-service-span-id'], SPAN_B);
      const eb = await settled(b.logId!);
      assert.deepEqual([eb.spanId, eb.parentSpanId], [SPAN_B, SPAN_A]);

      // A malformed one is refused before anything is recorded or forwarded.
      const before = up.requests.length;
      const bad = await proxyCall(t.url, p.agent, { target: `${up.url}/json`, payload: {} }, { 'x-service-span-id': 'nope' }, KEY);
      assert.equal(bad.status, 400);
      assert.equal(bad.json.error.code, 'invalid_request');
      assert.equal(bad.logId, undefined);
      assert.equal(up.requests.length, before);
    });

    test('forward mode: the upstream receives a traceparent whose parent-id is the entry span', async () => {
      const r = await request(`${t.url}/v1/forward/json?x=1`, {
        method: 'POST',
        headers: {
          'x-service-key': p.agent,
          'x-service-encryption-key': KEY,
          'x-service-target-base': up.url,
          'content-type': 'application/json',
          traceparent: `00-${TRACE_ID}-${RUN_SPAN}-01`,
        },
        body: '{"a":1}',
      });
      await r.body.arrayBuffer();
      assert.equal(r.statusCode, 200);
      const spanId = r.headers['x-service-span-id'] as string;
      const got = up.requests.at(-1)!;
      assert.equal(got.headers.traceparent, `00-${TRACE_ID}-${spanId}-01`);
      const e = await settled(r.headers['x-service-log-id'] as string);
      assert.deepEqual([e.spanId, e.parentSpanId], [spanId, RUN_SPAN]);
    });
  });
}
