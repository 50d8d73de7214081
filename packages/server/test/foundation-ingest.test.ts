import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deriveEnvelopeKey, openPayload, payloadHashHex, randomNonce, sealPayload, type Envelope } from '@countersign/core';
import { STORES, startApp } from './helpers/server.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';

const KEY = 'correct horse battery staple';

for (const store of STORES) {
  test(`POST /v1/log on ${store}`, async (s) => {
    const t = await startApp({ store });
    const p = await fullProject(t);
    const read = async (id: string) => {
      const r = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/${id}`);
      assert.equal(r.statusCode, 200, r.body);
      return r.json().log;
    };
    try {
      await s.test('plain payload + X-Service-Encryption-Key: sealed by the server, opened with the key', async () => {
        const r = await postLog(
          t.app,
          p.agent,
          {
            actor: 'bot-1',
            action: 'db.write',
            traceId: 'run-1',
            requestProof: true,
            occurredAt: '2026-01-02T03:04:05.000Z',
            metadata: { env: 'ci' },
            payload: { sql: 'insert', rows: 3 },
          },
          { 'x-service-encryption-key': KEY },
        );
        assert.equal(r.statusCode, 201, r.body);
        const { id, duplicate } = r.json();
        assert.match(id, /^log_/);
        assert.equal(duplicate, false);
        const log = await read(id);
        assert.deepEqual(Object.keys(log).sort(), [
          'action',
          'actor',
          'actorType',
          'credentialHandoverDetected',
          'id',
          'metadata',
          'occurredAt',
          'payload',
          'payloadHash',
          'projectId',
          'receivedAt',
          'requestProof',
          'source',
          'status',
          'traceId',
        ]);
        assert.equal(log.projectId, p.projectId);
        assert.equal(log.actor, 'bot-1');
        assert.equal(log.action, 'db.write');
        assert.equal(log.traceId, 'run-1');
        assert.equal(log.actorType, 'agent');
        assert.equal(log.credentialHandoverDetected, false);
        assert.equal(log.source, 'log');
        assert.equal(log.status, 'complete');
        assert.equal(log.requestProof, true);
        assert.deepEqual(log.metadata, { env: 'ci' });
        assert.equal(log.occurredAt, '2026-01-02T03:04:05.000Z');
        assert.ok(!Number.isNaN(Date.parse(log.receivedAt)));
        assert.deepEqual(Object.keys(log.payload).sort(), ['alg', 'ct', 'iv', 'kid', 'tag', 'v']);
        const opened = await openPayload(log.payload as Envelope, await deriveEnvelopeKey(KEY), id);
        assert.equal(opened.sql, 'insert');
        assert.equal(opened.rows, 3);
        assert.match(String(opened.nonce), /^[0-9a-f]{32}$/, 'the server adds a 128-bit nonce');
        assert.equal(log.payloadHash, payloadHashHex(opened));
      });

      await s.test('client envelope with its id and payloadHash is stored as sent', async () => {
        const id = 'client-' + randomNonce();
        const plain = { prompt: 'hi', nonce: randomNonce() };
        const envelope = await sealPayload(plain, await deriveEnvelopeKey(KEY), id);
        const r = await postLog(t.app, p.service, {
          id,
          actor: 'etl',
          action: 'job.run',
          payload: envelope,
          payloadHash: payloadHashHex(plain),
        });
        assert.equal(r.statusCode, 201, r.body);
        assert.equal(r.json().id, id);
        const log = await read(id);
        assert.deepEqual(log.payload, envelope);
        assert.equal(log.payloadHash, payloadHashHex(plain));
        assert.equal(log.actorType, 'service');
        assert.deepEqual(await openPayload(log.payload, await deriveEnvelopeKey(KEY), id), plain);
      });

      await s.test('headers give actor, action and traceId defaults', async () => {
        const r = await postLog(
          t.app,
          p.agent,
          { payload: { a: 1 } },
          {
            'x-service-encryption-key': KEY,
            'x-service-agent-id': 'hdr-agent',
            'x-service-action': 'hdr.action',
            'x-service-run-id': 'hdr-run',
          },
        );
        assert.equal(r.statusCode, 201, r.body);
        const log = await read(r.json().id);
        assert.deepEqual([log.actor, log.action, log.traceId], ['hdr-agent', 'hdr.action', 'hdr-run']);
        const bare = await read((await postLog(t.app, p.agent, { payload: { a: 1 } }, { 'x-service-encryption-key': KEY })).json().id);
        assert.deepEqual([bare.actor, bare.action, bare.traceId], ['unknown', 'log.entry', null]);
      });

      await s.test('batches: ids in order; over the limit is 413', async () => {
        const logs = Array.from({ length: 5 }, (_, i) => ({ action: `b${i}`, traceId: 'batch-run', payload: { i } }));
        const r = await postLog(t.app, p.agent, { logs }, { 'x-service-encryption-key': KEY });
        assert.equal(r.statusCode, 201, r.body);
        assert.equal(r.json().ids.length, 5);
        assert.equal(r.json().duplicates, 0);
        const trace = (await getWith(t.app, p.live, `/v1/projects/${p.projectId}/traces/batch-run`)).json();
        assert.deepEqual(
          trace.logs.map((l: { action: string }) => l.action),
          ['b0', 'b1', 'b2', 'b3', 'b4'],
        );
        const tooMany = Array.from({ length: t.config.maxBatchLogs + 1 }, () => ({ payload: {} }));
        assertError(await postLog(t.app, p.agent, { logs: tooMany }, { 'x-service-encryption-key': KEY }), 413, 'payload_too_large');
        assertError(await postLog(t.app, p.agent, { logs: [] }, { 'x-service-encryption-key': KEY }), 400, 'invalid_request');
      });

      await s.test('idempotent ids: same entry is a duplicate, different content is 409 (both paths)', async () => {
        const id = 'retry-' + randomNonce();
        const body = { id, actor: 'a', action: 'x', payload: { n: 1 } };
        const first = await postLog(t.app, p.agent, body, { 'x-service-encryption-key': KEY });
        assert.equal(first.statusCode, 201);
        const again = await postLog(t.app, p.agent, body, { 'x-service-encryption-key': KEY });
        assert.equal(again.statusCode, 200, again.body);
        assert.deepEqual(again.json(), { success: true, id, duplicate: true });
        assertError(
          await postLog(t.app, p.agent, { ...body, payload: { n: 2 } }, { 'x-service-encryption-key': KEY }),
          409,
          'idempotency_conflict',
        );
        assertError(await postLog(t.app, p.agent, body, { 'x-service-encryption-key': 'another key' }), 409, 'idempotency_conflict');
        assertError(
          await postLog(t.app, p.agent, { ...body, action: 'y' }, { 'x-service-encryption-key': KEY }),
          409,
          'idempotency_conflict',
        );
        assertError(await postLog(t.app, p.service, body, { 'x-service-encryption-key': KEY }), 409, 'idempotency_conflict');
        // A batch with one conflicting entry writes nothing.
        const newId = 'retry-' + randomNonce();
        assertError(
          await postLog(
            t.app,
            p.agent,
            {
              logs: [
                { id: newId, payload: {} },
                { ...body, payload: { n: 3 } },
              ],
            },
            { 'x-service-encryption-key': KEY },
          ),
          409,
          'idempotency_conflict',
        );
        assertError(await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/${newId}`), 404, 'not_found');
        // Duplicate ids inside one batch are refused.
        assertError(
          await postLog(
            t.app,
            p.agent,
            {
              logs: [
                { id: newId, payload: {} },
                { id: newId, payload: {} },
              ],
            },
            { 'x-service-encryption-key': KEY },
          ),
          400,
          'invalid_request',
        );
        // Envelope path.
        const eid = 'env-' + randomNonce();
        const env = await sealPayload({ z: 1, nonce: randomNonce() }, await deriveEnvelopeKey(KEY), eid);
        assert.equal((await postLog(t.app, p.agent, { id: eid, payload: env })).statusCode, 201);
        assert.equal((await postLog(t.app, p.agent, { id: eid, payload: env })).statusCode, 200);
        const env2 = await sealPayload({ z: 1, nonce: randomNonce() }, await deriveEnvelopeKey(KEY), eid);
        assertError(await postLog(t.app, p.agent, { id: eid, payload: env2 }), 409, 'idempotency_conflict');
        // Ids are scoped to the project (issue 8): another project's same id is its own log, so
        // the answer does not tell whether some other project used it.
        const q = await fullProject(t, 'q');
        const elsewhere = await postLog(t.app, q.agent, body, { 'x-service-encryption-key': KEY });
        assert.equal(elsewhere.statusCode, 201, elsewhere.body);
        assert.equal(elsewhere.json().duplicate, false);
      });

      await s.test('credential handover: human key + agent headers is accepted, flagged, and raises an event', async () => {
        const r = await postLog(
          t.app,
          p.human,
          { actor: 'alice', payload: { a: 1 } },
          { 'x-service-encryption-key': KEY, 'x-agent-rationale': 'secret reasoning', 'x-agent-framework': 'lc' },
        );
        assert.equal(r.statusCode, 201, r.body);
        const log = await read(r.json().id);
        assert.equal(log.actorType, 'human');
        assert.equal(log.credentialHandoverDetected, true);
        const ev = (await getWith(t.app, p.live, `/v1/projects/${p.projectId}/events`)).json();
        assert.equal(ev.success, true);
        const e = ev.events.find((x: { logId: string }) => x.logId === log.id);
        assert.ok(e, 'event stored');
        assert.equal(e.type, 'security.policy_violation');
        assert.equal(e.reason, 'credential_handover');
        assert.equal(e.actor, 'alice');
        assert.equal(e.credentialClass, 'human');
        assert.deepEqual(e.agentHeaders, ['x-agent-framework', 'x-agent-rationale']);
        assert.ok(!JSON.stringify(ev).includes('secret reasoning'), 'header values are never stored');
        // X-Service-Agent-ID alone is the actor label a human CLI may set, not agent context;
        // an agent key with agent headers is no handover.
        const viaId = await read(
          (await postLog(t.app, p.human, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-service-agent-id': 'bot' })).json().id,
        );
        assert.equal(viaId.credentialHandoverDetected, false);
        assert.equal(viaId.actor, 'bot');
        const agent = await read(
          (await postLog(t.app, p.agent, { payload: {} }, { 'x-service-encryption-key': KEY, 'x-agent-rationale': 'r' })).json().id,
        );
        assert.equal(agent.credentialHandoverDetected, false);
        const human = await read((await postLog(t.app, p.human, { payload: {} }, { 'x-service-encryption-key': KEY })).json().id);
        assert.equal(human.credentialHandoverDetected, false);
        const flagged = (await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?handover=true`)).json().logs;
        assert.deepEqual(
          flagged.map((l: { id: string }) => l.id),
          [log.id],
        );
      });

      await s.test('live keys cannot ingest; ingest keys cannot read', async () => {
        assertError(await postLog(t.app, p.live, { payload: {} }, { 'x-service-encryption-key': KEY }), 403, 'wrong_credential_class');
        assertError(await postLog(t.app, t.masterKey, { payload: {} }, { 'x-service-encryption-key': KEY }), 403, 'wrong_credential_class');
        for (const key of [p.agent, p.human, p.service]) {
          assertError(await getWith(t.app, key, `/v1/projects/${p.projectId}/logs`), 403, 'wrong_credential_class');
        }
      });
    } finally {
      await t.close();
    }
  });
}
