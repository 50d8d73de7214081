/**
 * The `sse-phases` benchmark's probe (bench/proxy/sse-phases-probe.ts): it reads a call's steps
 * off diagnostics channels that Node, Fastify, undici and the store publish, so what it reports
 * rests on each of those channels still firing, once per call, in the order the pipeline passes
 * them. A real app on SQLite and a real destination, both in this process: the probe counts only
 * the app's server.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import {
  installPhaseProbe,
  medianPhases,
  medianToFirstChunk,
  phaseDurations,
  STEPS,
  type PhaseStamps,
} from '../../../bench/proxy/sse-phases-probe.js';
import { FIRST_EVENT_STREAM } from '../../../bench/proxy/load.js';
import { startApp, type TestApp } from './helpers/server.js';
import { makeProjectKey, startUpstream, waitFor, type Upstream } from './helpers/upstreams.js';

const ENC = 'phase-probe-key';

describe("the sse-phases benchmark's probe", () => {
  let t: TestApp;
  let up: Upstream;
  let apiKey: string;
  const calls: PhaseStamps[] = [];

  before(async () => {
    up = await startUpstream({ record: false });
    t = await startApp({ listen: true, config: { allowTargets: [up.hostPort] } });
    ({ apiKey } = await makeProjectKey(t.app, 'agent'));
    installPhaseProbe((s) => calls.push(s), t.app.server);
  });
  after(async () => {
    await t.close();
    await up.close();
  });
  /** A call of `target` through `POST /v1/proxy`, sealed with {@link ENC}. */
  const viaProxy = (target: string) =>
    request(t.url + '/v1/proxy', {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': ENC },
      body: JSON.stringify({ target, payload: {} }),
    });

  it("stamps every step of a streamed call through /v1/proxy, in the pipeline's order", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await viaProxy(up.url + '/sse?n=5');
      assert.equal(r.statusCode, 200);
      await r.body.text();
    }
    // The response's finish comes after the caller's last byte: wait for the third record.
    await waitFor(() => (calls.length >= 3 ? true : undefined), 100).catch(() => undefined);
    assert.equal(calls.length, 3, 'one record per call');
    for (const c of calls) {
      const at = STEPS.map((s) => c[s]);
      assert.ok(
        at.every((v) => typeof v === 'number'),
        `every step stamped: ${JSON.stringify(c)}`,
      );
      for (let i = 1; i < at.length; i++) assert.ok(at[i]! >= at[i - 1]!, `${STEPS[i]} after ${STEPS[i - 1]}: ${JSON.stringify(c)}`);
    }
    const phases = medianPhases(calls);
    assert.deepEqual(
      phases.map((p) => p.phase),
      STEPS.slice(1),
    );
    for (const p of phases) assert.ok(p.median_ms >= 0 && p.calls === 3);
    assert.ok(medianToFirstChunk(calls) > 0);
  });

  it("relays the benchmarks' stream whole: 50 events, the 49 after the first written together", async () => {
    const direct = await request(up.url + FIRST_EVENT_STREAM);
    const expected = await direct.body.text();
    assert.equal(expected.match(/^data: /gm)?.length, 50);
    const r = await viaProxy(up.url + FIRST_EVENT_STREAM);
    assert.equal(r.statusCode, 200);
    assert.equal(await r.body.text(), expected);
  });

  it('measures each phase from the latest step a call has (the floor has no handler, no commit)', () => {
    const floorCall: PhaseStamps = { request: 100, created: 100.07, sent: 100.15, status: 100.5, firstChunk: 100.6 };
    const d = phaseDurations(floorCall);
    assert.deepEqual(Object.keys(d), ['created', 'sent', 'status', 'firstChunk']);
    assert.ok(Math.abs(d.created! - 0.07) < 1e-9 && Math.abs(d.status! - 0.35) < 1e-9);
    assert.ok(Math.abs(medianToFirstChunk([floorCall, { ...floorCall, firstChunk: 101 }, { request: 5 }]) - 0.6) < 1e-9);
  });
});
