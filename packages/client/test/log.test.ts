/**
 * ServiceClient against a REAL server: logs written with log() are read back with a live key
 * and decrypted; payloadHash matches; key rotation keeps old logs readable; redaction and
 * references reach both the ciphertext and the plain fields; retries through a misbehaving
 * gateway never duplicate; a normal process exit flushes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { payloadHashHex } from '@countersign/core';
import { ServiceClient, InMemoryReferenceStore, hydrateReferences, referenceId, type DeliveryFailure } from '../src/index.js';
import { STORES, startServer, startGateway, type ClientTestServer } from './helpers/server.js';

const here = path.dirname(fileURLToPath(import.meta.url));

for (const storeKind of STORES) {
  describe(`ServiceClient log() against a real server (${storeKind})`, () => {
    let srv: ClientTestServer;
    before(async () => {
      srv = await startServer({ store: storeKind });
    });
    after(async () => srv.close());

    const client = (extra: Partial<ConstructorParameters<typeof ServiceClient>[0]> = {}) =>
      new ServiceClient({
        apiKey: srv.project.keys.service,
        encryptionKey: 'first secret',
        endpoint: srv.url,
        flushOnExit: false,
        ...extra,
      });
    const reader = (c: ServiceClient) => c.reader({ projectId: srv.project.id, readKey: srv.project.keys.live });

    it('delivers, reads back with a live key and decrypts; payloadHash is the hash of the decrypted payload', async () => {
      const c = client();
      const ids: string[] = [];
      for (let i = 0; i < 25; i++)
        ids.push(
          await c.log({
            action: 'invoice.approve',
            actor: 'billing-svc',
            traceId: 'trace-read',
            metadata: { n: i },
            payload: { amount: i * 10 },
          }),
        );
      await c.flush();
      assert.equal(c.stats.delivered, 25);
      const trace = await reader(c).getTrace('trace-read');
      assert.deepEqual(
        trace.map((l) => l.id),
        ids,
        'every log, in order',
      );
      const one = trace[7]!;
      assert.equal(one.actor, 'billing-svc');
      assert.equal(one.actorType, 'service');
      assert.equal(one.source, 'log');
      assert.deepEqual(one.metadata, { n: 7 });
      assert.equal(one.payload.kid, 'default');
      const p = one.decryptedPayload!;
      assert.equal(p.action, 'invoice.approve');
      assert.deepEqual(p.payload, { amount: 70 });
      assert.match(String(p.nonce), /^[0-9a-f]{32}$/);
      assert.equal(one.payloadHash, payloadHashHex(p));
      // The AAD is the log id: the envelope does not open as another log.
      await assert.rejects(c.decrypt(one.payload, ids[8]!), { code: 'decryption_failed' });
      await c.shutdown();
    });

    it('key rotation: new logs use the new key id, old logs stay readable, a reader without the old key cannot open them', async () => {
      const v1 = client({ encryptionKey: undefined, keyring: { v1: 'key one' }, activeEncryptionKeyId: 'v1' });
      const oldId = await v1.log({ action: 'rotate.before', traceId: 'trace-rotate', payload: { secret: 'old' } });
      await v1.shutdown();
      const v2 = client({ encryptionKey: undefined, keyring: { v1: 'key one', v2: 'key two' }, activeEncryptionKeyId: 'v2' });
      const newId = await v2.log({ action: 'rotate.after', traceId: 'trace-rotate', payload: { secret: 'new' } });
      await v2.flush();
      const logs = await reader(v2).getTrace('trace-rotate');
      assert.deepEqual(
        logs.map((l) => [l.id, l.payload.kid, (l.decryptedPayload?.payload as { secret: string }).secret]),
        [
          [oldId, 'v1', 'old'],
          [newId, 'v2', 'new'],
        ],
      );
      const onlyV2 = client({ encryptionKey: undefined, keyring: { v2: 'key two' }, activeEncryptionKeyId: 'v2' });
      const partial = await reader(onlyV2).getTrace('trace-rotate');
      assert.match(partial[0]!.decryptError!, /no key in the keyring has id "v1"/);
      assert.equal((partial[1]!.decryptedPayload?.payload as { secret: string }).secret, 'new');
      await v2.shutdown();
      await onlyV2.shutdown();
    });

    it('redaction and references apply to actor, target and metadata, in the ciphertext and the plain fields; hydration restores them', async () => {
      const refs = new InMemoryReferenceStore();
      const c = client({
        redactKeys: ['metadata.password', 'target'],
        referenceKeys: ['actor', 'metadata.email'],
        referenceStore: refs,
        referenceSecret: 'ref secret',
      });
      const id = await c.log({
        action: 'user.login',
        actor: 'alice@example.com',
        target: { account: 42 },
        traceId: 'trace-redact',
        metadata: { email: 'alice@example.com', password: 'hunter2', plan: 'pro' },
        payload: { note: 'kept' },
      });
      await c.flush();
      const ref = `[REF:${referenceId('alice@example.com', 'ref secret')}]`;
      const log = await reader(c).getLog(id);
      assert.equal(log.actor, ref, 'plain actor is the reference');
      assert.deepEqual(log.metadata, { email: ref, password: '[REDACTED:metadata.password]', plan: 'pro' });
      const p = log.decryptedPayload!;
      assert.equal(p.actor, ref);
      assert.equal(p.target, '[REDACTED:target]');
      assert.deepEqual(p.metadata, { email: ref, password: '[REDACTED:metadata.password]', plan: 'pro' });
      assert.equal(JSON.stringify(log).includes('hunter2'), false);
      assert.equal(JSON.stringify(log).includes('alice@example.com'), false);
      assert.equal(refs.size, 1, 'one value, one reference (the same email twice has one id)');
      const hydrated = await hydrateReferences(p, refs);
      assert.equal(hydrated.actor, 'alice@example.com');
      assert.deepEqual(hydrated.metadata, { email: 'alice@example.com', password: '[REDACTED:metadata.password]', plan: 'pro' });
      await c.shutdown();
    });

    it('a reference store that fails stops the log before anything is queued', async () => {
      const c = client({
        referenceKeys: ['actor'],
        referenceStore: {
          put() {
            throw new Error('vault down');
          },
        },
      });
      await assert.rejects(c.log({ action: 'x', actor: 'bob' }), { code: 'reference_store_failed' });
      assert.equal(c.pendingLogs, 0);
      await c.shutdown();
    });

    it('retries through 503 + Retry-After and lost answers without duplicates (client ids are idempotent)', async () => {
      // Requests 0 and 1 get 503; request 2 is stored but its answer is lost (502); later ones pass.
      const gw = await startGateway(srv.url, (n) => (n < 2 ? '503' : n === 2 ? 'lose' : 'forward'));
      const c = client({ endpoint: gw.url, delivery: { retryBaseDelayMs: 5, maxConcurrentRequests: 1, batchSize: 10 } });
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) ids.push(await c.log({ action: 'retry.test', traceId: 'trace-retry', payload: { i } }));
      await c.flush();
      assert.equal(gw.requests, 4);
      assert.deepEqual(c.stats, { delivered: 0, duplicates: 10, failed: 0, requests: 4 }, 'the 4th attempt finds all 10 stored');
      const logs = await reader(c).getTrace('trace-retry');
      assert.deepEqual(
        logs.map((l) => l.id),
        ids,
        'stored exactly once each',
      );
      await c.shutdown();
      await gw.close();
    });

    it('a refused batch goes to onDeliveryFailure at once, with the server code, without retries', async () => {
      const failures: DeliveryFailure[] = [];
      const c = client({ apiKey: 'key_service_' + 'x'.repeat(38), onDeliveryFailure: (f) => void failures.push(f) });
      const id = await c.log({ action: 'bad.key' });
      await c.flush();
      assert.equal(failures.length, 1);
      assert.equal(failures[0]!.reason, 'rejected');
      assert.equal(failures[0]!.status, 401);
      assert.equal(failures[0]!.serverCode, 'invalid_api_key');
      assert.equal(failures[0]!.attempts, 1);
      assert.equal(failures[0]!.logs[0]!.entry.id, id);
      await c.shutdown();
    });

    it('flushes on a normal process exit (beforeExit), without flush() being called', async () => {
      // Asynchronous on purpose: the server runs in this process and must keep answering.
      const r = await promisify(execFile)(
        process.execPath,
        ['--conditions=development', '--import', 'tsx', path.join(here, 'helpers', 'exit-child.ts')],
        {
          env: { ...process.env, CS_ENDPOINT: srv.url, CS_KEY: srv.project.keys.service },
          encoding: 'utf8',
        },
      );
      const ids = r.stdout.trim().split('\n');
      assert.equal(ids.length, 3);
      const c = client();
      const logs = await reader(c).getTrace('trace-exit');
      assert.deepEqual(
        logs.map((l) => l.id),
        ids,
      );
      await c.shutdown();
    });
  });
}
