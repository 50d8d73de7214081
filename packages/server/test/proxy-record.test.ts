/**
 * What a proxied call leaves behind: the entry as a project's live key reads it, the handover
 * stamp and security event, zero knowledge on the proxy path (no plaintext canary in the SQLite
 * files or PostgreSQL rows), and no secret in the server's own log.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import pg from 'pg';
import { deriveEnvelopeKey, openPayload, payloadHashHex, type Envelope } from '@countersign/core';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { STORES, freshPostgresDatabase, startApp, tempDir } from './helpers/server.js';
import { request } from 'undici';
import { closedPort, decryptRecord, makeProjectKey, proxyCall, startUpstream, waitFor } from './helpers/upstreams.js';

for (const store of STORES) {
  test(`a proxied call reads back through the live-key API as a proxy entry that opens with the caller's key (${store})`, async () => {
    const up = await startUpstream();
    const t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort] } });
    try {
      const created = await t.app.inject({
        method: 'POST',
        url: '/v1/projects',
        headers: { authorization: `Bearer ${t.masterKey}` },
        payload: { name: 'proxy read-back', credentialClass: 'agent' },
      });
      assert.equal(created.statusCode, 201);
      const { id: projectId, apiKey } = created.json().project;
      const live = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${projectId}/keys`,
        headers: { authorization: `Bearer ${t.masterKey}` },
        payload: { credentialClass: 'live' },
      });
      const liveKey = live.json().key.apiKey as string;
      const r = await proxyCall(
        t.url,
        apiKey,
        { target: up.url + '/status/200', payload: { q: 1 }, requestProof: true },
        { 'X-Service-Run-ID': 'trace-1' },
        'read-back-key',
      );
      assert.equal(r.status, 200);
      const read = await t.app.inject({
        method: 'GET',
        url: `/v1/projects/${projectId}/logs/${r.logId}`,
        headers: { authorization: `Bearer ${liveKey}` },
      });
      assert.equal(read.statusCode, 200);
      const entry = read.json().log;
      assert.equal(entry.id, r.logId);
      assert.equal(entry.source, 'proxy');
      assert.equal(entry.status, 'complete');
      assert.equal(entry.actorType, 'agent');
      assert.equal(entry.traceId, 'trace-1');
      assert.equal(entry.requestProof, true);
      const payload = await openPayload(entry.payload as Envelope, await deriveEnvelopeKey('read-back-key'), r.logId!);
      assert.equal(entry.payloadHash, payloadHashHex(payload));
      assert.deepEqual((payload.request as { body: unknown }).body, { q: 1 });
      // The ingest key itself cannot read what it wrote.
      const denied = await t.app.inject({
        method: 'GET',
        url: `/v1/projects/${projectId}/logs/${r.logId}`,
        headers: { authorization: `Bearer ${apiKey}` },
      });
      assert.equal(denied.statusCode, 403);
    } finally {
      await t.close();
      await up.close();
    }
  });

  test(`credential handover on the proxy path: a human key with agent context is stamped and raises an event (${store})`, async () => {
    const up = await startUpstream();
    const t = await startApp({ store, listen: true, config: { allowTargets: [up.hostPort] } });
    try {
      const human = await makeProjectKey(t.app, 'human');
      const agent = await makeProjectKey(t.app, 'agent');
      const target = up.url + '/echo';
      const handed = await proxyCall(
        t.url,
        human.apiKey,
        { target, payload: {} },
        { 'X-Agent-Rationale': 'enc:abc', 'X-Service-Agent-ID': 'bot-1' },
      );
      assert.equal(handed.status, 200, 'the request is not rejected');
      assert.equal(handed.json.headers['x-agent-rationale'], undefined);
      const row = await t.app.ctx.store.logs.get(human.projectId, handed.logId!);
      assert.equal(row!.actorType, 'human');
      assert.equal(row!.credentialHandoverDetected, true);
      assert.equal(row!.actor, 'bot-1');
      const events = await waitFor(async () => {
        const list = await t.app.ctx.store.events.list(human.projectId, 10);
        return list.length > 0 ? list : undefined;
      });
      assert.equal(events.length, 1);
      assert.equal(events[0]!.type, 'security.policy_violation');
      assert.equal(events[0]!.reason, 'credential_handover');
      assert.equal(events[0]!.logId, handed.logId);
      // X-Service-Agent-ID is the actor label, not agent context (core handover.ts).
      assert.deepEqual(events[0]!.body.agentHeaders, ['x-agent-rationale']);

      const plainHuman = await proxyCall(t.url, human.apiKey, { target, payload: {} });
      assert.equal((await t.app.ctx.store.logs.get(human.projectId, plainHuman.logId!))!.credentialHandoverDetected, false);
      const underscored = await proxyCall(t.url, human.apiKey, { target, payload: {} }, { x_agent_trace: 't' });
      assert.equal((await t.app.ctx.store.logs.get(human.projectId, underscored.logId!))!.credentialHandoverDetected, true);
      const agentCall = await proxyCall(t.url, agent.apiKey, { target, payload: {} }, { 'X-Agent-Rationale': 'enc:abc' });
      const agentRow = await t.app.ctx.store.logs.get(agent.projectId, agentCall.logId!);
      assert.equal(agentRow!.actorType, 'agent');
      assert.equal(agentRow!.credentialHandoverDetected, false);
      assert.equal((await t.app.ctx.store.events.list(agent.projectId, 10)).length, 0);
    } finally {
      await t.close();
      await up.close();
    }
  });

  test(`zero knowledge on the proxy path and no secret in the server log (${store})`, async () => {
    const canary = 'CANARY-' + Math.random().toString(36).slice(2) + '-PLAINTEXT';
    const encryptionKey = 'zk-encryption-key-' + Math.random().toString(36).slice(2);
    const upstreamSecret = 'Bearer upstream-secret-' + Math.random().toString(36).slice(2);
    const up = await startUpstream();
    const dead = await closedPort();
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    let logText = '';
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logText += chunk.toString('utf8');
        done();
      },
    });
    const config = {
      ...loadConfig({ dataDir, port: '0', logLevel: 'trace' }, {}),
      databaseUrl,
      allowTargets: [up.hostPort, `127.0.0.1:${dead}`],
      proxyTimeouts: { connect: 300, firstByte: 300, idle: 300 },
    };
    const app = await buildApp(config, { logger: pino({ level: 'trace' }, sink) });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const { projectId, apiKey } = await makeProjectKey(app, 'human');
      const headers = { 'X-Service-Upstream-Authorization': upstreamSecret, 'X-Agent-Rationale': canary, Cookie: `sid=${canary}` };
      const call = (target: string, payload: unknown) => proxyCall(url, apiKey, { target, payload }, headers, encryptionKey);
      // The echo upstream returns the canary in its answer (and the renamed credential, which is its business).
      assert.equal((await call(up.url + '/status/200', { note: canary })).status, 200);
      assert.equal((await call(up.url + '/text', { note: canary })).status, 200);
      assert.equal((await call(up.url + '/no-answer', { note: canary })).status, 504);
      assert.equal((await call(`http://127.0.0.1:${dead}/`, { note: canary })).status, 502);
      assert.equal((await call(`http://169.254.169.254/`, { note: canary })).status, 403);
      const logs = app.ctx.store.logs;
      const original = logs.insertReturningSeq.bind(logs);
      logs.insertReturningSeq = async () => {
        throw new Error('store down');
      };
      assert.equal((await call(up.url + '/status/200', { note: canary })).status, 503);
      logs.insertReturningSeq = original;
      assert.ok(
        up.requests.some((r) => r.headers.authorization === upstreamSecret),
        'the upstream got its credential',
      );
      assert.ok((await logs.list(projectId, {}, 100)).length >= 5);
      await app.close();

      const secrets = { canary, encryptionKey, apiKey, upstreamSecret: upstreamSecret.slice('Bearer '.length) };
      let stored = '';
      if (store === 'sqlite') {
        for (const f of fs.readdirSync(dataDir)) {
          const p = path.join(dataDir, f);
          if (fs.statSync(p).isFile()) stored += fs.readFileSync(p).toString('latin1');
        }
        assert.ok(stored.length > 0);
      } else {
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        try {
          for (const table of ['logs', 'events', 'api_keys', 'projects']) {
            stored += JSON.stringify((await client.query(`select * from ${table}`)).rows);
          }
        } finally {
          await client.end();
        }
      }
      for (const [name, secret] of Object.entries(secrets)) {
        assert.ok(!stored.includes(secret), `${name} must not be in the ${store} store`);
        assert.ok(!logText.includes(secret), `${name} must not be in the server log`);
      }
      assert.ok(logText.length > 0, 'the server did log (at trace level)');
    } finally {
      if (app.server.listening) await app.close();
      await up.close();
    }
  });
}

test('a closing server lets exchanges finish for a grace period, then interrupts them and records that', async () => {
  const up = await startUpstream();
  const t = await startApp({ listen: true, config: { allowTargets: [up.hostPort] } });
  const { projectId, apiKey } = await makeProjectKey(t.app, 'agent');
  try {
    const r = await request(t.url + '/v1/proxy', {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': 'shutdown-key' },
      body: JSON.stringify({ target: up.url + '/sse-hang?n=1', payload: {} }),
    });
    const logId = r.headers['x-service-log-id'] as string;
    const it = r.body[Symbol.asyncIterator]();
    assert.match(String((await it.next()).value), /hang 0/);
    const upstreamSide = up.requests.at(-1)!;
    const closing = t.app.close();
    await upstreamSide.ended;
    assert.equal(upstreamSide.closedEarly, true);
    await assert.rejects(r.body.text());
    await closing;
    const reopened = await startApp({ dataDir: t.config.dataDir });
    try {
      const row = await reopened.app.ctx.store.logs.get(projectId, logId);
      assert.equal(row!.status, 'interrupted');
      const payload = (await decryptRecord(row!.payload, 'shutdown-key', logId)) as { outcome: string };
      assert.equal(payload.outcome, 'server_shutdown', 'recorded by the closing server itself, not by the restart');
    } finally {
      await reopened.close();
    }
  } finally {
    await up.close();
  }
});
