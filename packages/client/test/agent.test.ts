/**
 * Agent context against a REAL server: logs and proxied calls made inside runAsAgent carry the
 * run id, agent id, traceparent and an encrypted rationale; a human key inside a run produces a
 * credential handover event (read back with a live key); other keys and calls outside a run do not.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ServiceClient, currentAgentContext } from '../src/index.js';
import { STORES, startServer, type ClientTestServer } from './helpers/server.js';

for (const storeKind of STORES) {
  describe(`agent context (${storeKind})`, () => {
    let srv: ClientTestServer;
    let upstream: http.Server;
    const seen: http.IncomingHttpHeaders[] = [];
    before(async () => {
      upstream = http.createServer((req, res) => {
        seen.push(req.headers);
        req.resume();
        req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
      });
      await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
      const port = (upstream.address() as AddressInfo).port;
      srv = await startServer({ store: storeKind, config: { allowTargets: [`127.0.0.1:${port}`] } });
    });
    after(async () => {
      await srv.close();
      await new Promise((resolve) => upstream.close(resolve));
    });

    const clientWith = (apiKey: string) => new ServiceClient({ apiKey, encryptionKey: 'agent key', endpoint: srv.url, flushOnExit: false });
    const reader = (c: ServiceClient) => c.reader({ projectId: srv.project.id, readKey: srv.project.keys.live });

    it('a human key inside an agent run: the log is marked and a security event is recorded', async () => {
      const c = clientWith(srv.project.keys.human);
      const id = await c.runAsAgent(
        { runId: 'run-handover', agentId: 'planner', rationale: 'the user asked me to pay invoice 7' },
        async () => {
          await new Promise((resolve) => setTimeout(resolve, 1)); // the context survives awaits
          assert.equal(currentAgentContext()?.agentId, 'planner');
          return c.log({ action: 'invoice.pay', payload: { invoice: 7 } });
        },
      );
      await c.flush();
      const log = await reader(c).getLog(id);
      assert.equal(log.actorType, 'human');
      assert.equal(log.credentialHandoverDetected, true);
      assert.equal(log.actor, 'planner', 'actor defaults to the agent id');
      assert.equal(log.traceId, 'run-handover', 'traceId defaults to the run id');
      const agent = log.decryptedPayload!.agent as { runId: string; agentId: string; rationale: string; traceparent: string };
      assert.equal(agent.rationale, 'the user asked me to pay invoice 7');
      assert.match(agent.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      const { events } = await reader(c).listEvents();
      const event = events.find((e) => e.logId === id);
      assert.ok(event, 'a security event for the log');
      assert.equal(event.type, 'security.policy_violation');
      assert.equal(event.reason, 'credential_handover');
      assert.equal(event.credentialClass, 'human');
      assert.ok(event.agentHeaders.includes('x-agent-rationale'));
      // X-Service-Agent-ID is the actor label, not agent context (core handover.ts).
      assert.equal(event.agentHeaders.includes('x-service-agent-id'), false);
      await c.shutdown();
    });

    it('an agent key inside a run, and a human key outside one, raise nothing', async () => {
      const agentClient = clientWith(srv.project.keys.agent);
      const a = await agentClient.runAsAgent({ runId: 'run-clean', agentId: 'worker' }, () => agentClient.log({ action: 'step' }));
      const human = clientWith(srv.project.keys.human);
      const h = await human.log({ action: 'manual.fix', actor: 'dana' });
      await agentClient.flush();
      await human.flush();
      const r = reader(agentClient);
      assert.equal((await r.getLog(a)).credentialHandoverDetected, false);
      assert.equal((await r.getLog(a)).actorType, 'agent');
      assert.equal((await r.getLog(h)).credentialHandoverDetected, false);
      const { events } = await r.listEvents();
      assert.equal(events.filter((e) => e.logId === a || e.logId === h).length, 0);
      await agentClient.shutdown();
      await human.shutdown();
    });

    it('runs nest: an inner run inherits the run id and trace id, and logs of different runs are batched apart', async () => {
      const c = clientWith(srv.project.keys.agent);
      const ids = await c.runAsAgent({ runId: 'run-nest', agentId: 'outer', rationale: 'outer reason' }, async () => {
        const outerCtx = currentAgentContext()!;
        const outer = await c.log({ action: 'outer.step' });
        const inner = await c.runAsAgent({ agentId: 'inner' }, async () => {
          assert.equal(currentAgentContext()!.traceIdHex, outerCtx.traceIdHex);
          return c.log({ action: 'inner.step' });
        });
        return [outer, inner];
      });
      await c.flush();
      const trace = await reader(c).getTrace('run-nest');
      // The two runs' logs travel in separate requests that may be in flight together, so the
      // server's arrival order between them is not fixed: compare as a set.
      const steps = trace.filter((l) => l.action !== 'agent.run');
      assert.deepEqual(
        steps.map((l) => [l.id, l.actor]).sort(),
        [
          [ids[0], 'outer'],
          [ids[1], 'inner'],
        ].sort(),
      );
      // Spans in the clear: each run is an entry of its own, the inner run a child of the outer,
      // and each step a child of its run; one tree rooted at the outer run.
      const runs = trace.filter((l) => l.action === 'agent.run');
      const outerRun = runs.find((l) => l.actor === 'outer')!;
      const innerRun = runs.find((l) => l.actor === 'inner')!;
      assert.equal(runs.length, 2);
      assert.equal(outerRun.parentSpanId, undefined, 'the outer run is the root');
      assert.equal(innerRun.parentSpanId, outerRun.spanId);
      const byId = new Map(trace.map((l) => [l.id, l]));
      assert.equal(byId.get(ids[0]!)!.parentSpanId, outerRun.spanId);
      assert.equal(byId.get(ids[1]!)!.parentSpanId, innerRun.spanId);
      assert.equal(new Set(trace.map((l) => l.spanId)).size, 4, 'every entry has a span of its own');
      for (const run of runs) assert.ok(Date.parse(run.startedAt!) <= Date.parse(run.endedAt!));
      assert.ok(
        Date.parse(outerRun.startedAt!) <= Date.parse(innerRun.startedAt!) &&
          Date.parse(innerRun.endedAt!) <= Date.parse(outerRun.endedAt!),
      );
      await c.shutdown();
    });

    it('the rationale header is encrypted with the client key and bound to its run', async () => {
      const c = clientWith(srv.project.keys.agent);
      const sealed = await c.sealAgentRationale('because', 'run-x');
      assert.equal(sealed.includes('because'), false);
      assert.equal(await c.openAgentRationale(sealed, 'run-x'), 'because');
      await assert.rejects(c.openAgentRationale(sealed, 'run-y'), { code: 'decryption_failed' });
      await c.shutdown();
    });

    it('proxy() inside a run: forwards with agent context, the upstream sees none of it, the log opens with the client keyring', async () => {
      const c = clientWith(srv.project.keys.human);
      const target = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1/chat`;
      const result = await c.runAsAgent({ runId: 'run-proxy', agentId: 'caller', rationale: 'summarize' }, () =>
        c.proxy({ target, payload: { prompt: 'hi' }, action: 'llm.call', upstreamAuthorization: 'Bearer upstream-secret' }),
      );
      assert.equal(result.status, 200);
      assert.deepEqual(await result.response.json(), { ok: true });
      assert.ok(result.logId);
      const up = seen.at(-1)!;
      assert.equal(up.authorization, 'Bearer upstream-secret');
      for (const name of Object.keys(up)) assert.doesNotMatch(name, /^x-(service|agent)-/, `${name} must not reach the upstream`);
      const log = await reader(c).getLog(result.logId);
      assert.equal(log.source, 'proxy');
      assert.equal(log.traceId, 'run-proxy');
      assert.equal(log.actor, 'caller');
      assert.equal(log.action, 'llm.call');
      assert.equal(log.credentialHandoverDetected, true);
      assert.match(log.payload.kid, /^sha256:[0-9a-f]{16}$/, 'sealed by the proxy with the bare key string');
      assert.ok(log.decryptedPayload, `the client keyring opens proxy logs: ${log.decryptError}`);
      // The proxied call is a span of its own under the run's span (the run is recorded too).
      await c.flush();
      const run = (await reader(c).getTrace('run-proxy')).find((l) => l.action === 'agent.run')!;
      assert.match(log.spanId!, /^[0-9a-f]{16}$/);
      assert.equal(log.parentSpanId, run.spanId);
      assert.ok(log.startedAt && log.endedAt);
      await c.shutdown();
    });
  });
}
