/**
 * Large bodies and records are handled off the event loop (offload/pool.ts): a JSON body from
 * 256 KiB up is inspected and parsed in the worker pool, and so are the records that carry it
 * (proxy records and plain `/v1/log` payloads). Asserted here: the work really ran in the pool
 * (its task counters, not a timing), the answers and records are exactly what the main-thread
 * path gives (hashes recomputed from the decrypted payload, bytes upstream), and every refusal
 * of the parser keeps its code when the body is large. The event loop figures under attack are
 * in test/hostile/hostile-replay.test.ts and docs/performance.md.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { MAX_JSON_DEPTH, payloadHashHex } from '@countersign/core';
import { offloadStats, OFFLOAD_FROM_BYTES } from '../src/offload/pool.js';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import { assertError, fullProject, getWith, postLog } from './foundation-helpers.js';
import { decryptRecord, proxyCall, startUpstream, waitFor, type Upstream } from './helpers/upstreams.js';

const KEY = 'offload key';
const big = (n: number) => 'x'.repeat(n);

for (const store of STORES) {
  describe(`large bodies and records off the event loop (${store})`, () => {
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

    const record = async (logId: string) => {
      const r = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/${logId}`);
      assert.equal(r.statusCode, 200, r.body);
      const log = r.json().log as { status: string; payload: unknown; payloadHash: string };
      return { ...log, plain: await decryptRecord(JSON.stringify(log.payload), KEY, logId) };
    };

    test('a large plain /v1/log is parsed and sealed in the pool; its hash is the payload hash', async () => {
      const before = offloadStats();
      const payload = { prompt: big(OFFLOAD_FROM_BYTES + 1000), n: 1 };
      const r = await postLog(t.app, p.agent, { action: 'big.log', payload }, { 'x-service-encryption-key': KEY });
      assert.equal(r.statusCode, 201, r.body);
      const after = offloadStats();
      assert.equal(after.parse - before.parse, 1, 'the body was parsed in the pool');
      assert.equal(after.sealLog - before.sealLog, 1, 'the payload was sealed in the pool');
      const id = (r.json() as { id: string }).id;
      const log = await record(id);
      assert.equal((log.plain as { prompt: string }).prompt, payload.prompt);
      assert.equal(log.payloadHash, payloadHashHex(log.plain), 'the stored hash is the hash of the decrypted payload');

      // A small one stays on the main thread.
      const small = await postLog(t.app, p.agent, { action: 'small.log', payload: { n: 2 } }, { 'x-service-encryption-key': KEY });
      assert.equal(small.statusCode, 201, small.body);
      assert.deepEqual(offloadStats(), after);
    });

    test('a large /v1/proxy payload: parsed and both records sealed in the pool; exact bytes upstream; hashes hold', async () => {
      const before = offloadStats();
      const payloadText = `{"id":9007199254740993,"prompt":"${big(OFFLOAD_FROM_BYTES)}"}`;
      const a = await proxyCall(t.url, p.agent, `{"target":"${up.url}/echo","payload":${payloadText}}`, {}, KEY);
      assert.equal(a.status, 200, a.text.slice(0, 300));
      const after = offloadStats();
      assert.equal(after.parse - before.parse, 1);
      assert.equal(after.seal - before.seal, 2, 'the write-ahead record and the outcome');
      const sent = up.requests.at(-1)!;
      assert.equal(sent.body, payloadText, 'the exact bytes went upstream');
      const log = await waitFor(async () => {
        const l = await record(a.logId!);
        return l.status === 'pending' ? undefined : l;
      });
      assert.equal(log.status, 'complete');
      assert.equal(log.payloadHash, payloadHashHex(log.plain));
      const req = (log.plain as { request: { sha256: string; bodyText?: string } }).request;
      assert.equal(req.sha256, createHash('sha256').update(payloadText).digest('hex'));
      assert.equal(req.bodyText, payloadText, 'a 64-bit id is recorded as the text that was sent');
    });

    test('refusals of a large body keep their codes when the pool parses it', async () => {
      const pad = big(OFFLOAD_FROM_BYTES);
      const send = (body: string) => postLog(t.app, p.agent, body, { 'x-service-encryption-key': KEY });
      const deep = `{"pad":"${pad}","payload":${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}}`;
      assertError(await send(deep), 400, 'json_too_deep');
      assertError(await send(`{"pad":"${pad}",`), 400, 'invalid_json');
      assertError(await send(`{"pad":"${pad}","payload":{"__proto__":{"x":1}}}`), 400, 'invalid_json');
      const many = `{"payload":{"a":[${Array.from({ length: 200_000 }, () => '[]').join(',')}]}}`;
      assert.ok(many.length >= OFFLOAD_FROM_BYTES);
      assertError(await send(many), 400, 'json_too_complex');
    });
  });
}
