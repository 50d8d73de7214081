/**
 * Issue "Hardening", bounded reads: 50 entries of 9.5 MB made `GET …/logs` answer 500
 * `Invalid string length` after 8 s at 2.7 GB of RSS. Now (DESIGN §4 "Reading"):
 * - list and trace pages carry no `payload` unless `include=payload`;
 * - with it, a page ends once its payloads reach the payload budget (at least one entry, so an
 *   entry larger than the budget is still readable) and `nextCursor` continues it;
 * - `GET …/logs/{logId}` stays whole, streamed around the stored envelope text.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import { fullProject, getWith, postLog } from './foundation-helpers.js';
import { decryptRecord } from './helpers/upstreams.js';

const ENC = 'hardening-listing-key';
const KB = 1024;
/** Payload text one page may carry (small, so that a few entries of a few hundred KB cross it). */
const BUDGET = 1024 * KB;
/** Plaintext sizes of the entries, in the order they are written (one is larger than the budget on its own). */
const SIZES = [300 * KB, 300 * KB, 1500 * KB, 10, 300 * KB, 300 * KB, 300 * KB];
const TRACE = 'trace-listing-bounds';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON shapes
type Json = any;

/** How the pages must split `envelopeSizes` (in page order) under the budget: the greedy rule, at least one each. */
function expectedPages(envelopeSizes: number[]): number[] {
  const pages: number[] = [];
  let i = 0;
  while (i < envelopeSizes.length) {
    let spent = envelopeSizes[i]!;
    let n = 1;
    while (i + n < envelopeSizes.length && spent + envelopeSizes[i + n]! <= BUDGET) spent += envelopeSizes[i + n++]!;
    pages.push(n);
    i += n;
  }
  return pages;
}

for (const store of STORES) {
  describe(`bounded reads on ${store}`, () => {
    let t: TestApp;
    let projectId: string;
    let live: string;
    /** Log ids in the order written. */
    const ids: string[] = [];
    /** Stored envelope text by log id. */
    const stored = new Map<string, string>();

    before(async () => {
      t = await startApp({ store, listen: true, config: { listPayloadBudget: BUDGET } });
      const p = await fullProject(t);
      projectId = p.projectId;
      live = p.live;
      for (const [i, size] of SIZES.entries()) {
        const r = await postLog(
          t.app,
          p.agent,
          { traceId: TRACE, action: `step-${i}`, payload: { i, blob: 'b'.repeat(size) } },
          {
            'x-service-encryption-key': ENC,
          },
        );
        assert.equal(r.statusCode, 201, r.body);
        const id = r.json().id as string;
        ids.push(id);
        stored.set(id, (await t.app.ctx.store.logs.get(projectId, id))!.payload);
      }
    });
    after(() => t.close());

    const get = async (url: string) => {
      const r = await getWith(t.app, live, `/v1/projects/${projectId}${url}`);
      assert.equal(r.statusCode, 200, r.body);
      return r.json() as Json;
    };
    /** Every page of `url` (which has a query already), following nextCursor. */
    const pages = async (url: string) => {
      const out: Json[] = [];
      let cursor: string | null = null;
      do {
        const page: Json = await get(url + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''));
        out.push(page);
        cursor = page.nextCursor;
      } while (cursor);
      return out;
    };

    test('a list page carries no payload unless include=payload', async () => {
      const page = await get('/logs?limit=50');
      assert.equal(page.nextCursor, null);
      assert.deepEqual(
        page.logs.map((l: Json) => l.id),
        [...ids].reverse(),
      );
      for (const l of page.logs) {
        assert.equal('payload' in l, false, 'no envelope in a list page by default');
        assert.match(l.payloadHash, /^[0-9a-f]{64}$/);
        assert.equal(l.traceId, TRACE);
        assert.equal(l.status, 'complete');
      }
    });

    test('include=payload: each page ends at the payload budget with a cursor, and the pages hold every entry with its envelope', async () => {
      const all = await pages('/logs?limit=50&include=payload');
      const newestFirst = [...ids].reverse();
      assert.deepEqual(
        all.map((p) => p.logs.length),
        expectedPages(newestFirst.map((id) => stored.get(id)!.length)),
      );
      for (const p of all) {
        const spent = p.logs.reduce((n: number, l: Json) => n + JSON.stringify(l.payload).length, 0);
        assert.ok(p.logs.length === 1 || spent <= BUDGET, `a page of ${p.logs.length} entries carries ${spent} bytes of payload`);
      }
      const entries = all.flatMap((p) => p.logs);
      assert.deepEqual(
        entries.map((l: Json) => l.id),
        newestFirst,
      );
      for (const l of entries) assert.deepEqual(l.payload, JSON.parse(stored.get(l.id)!));
      // The entry larger than the budget is a page of its own, and opens.
      const big = entries.find((l: Json) => l.id === ids[2]);
      const opened = await decryptRecord(JSON.stringify(big.payload), ENC, big.id);
      assert.equal((opened as { blob: string }).blob.length, SIZES[2]);
    });

    test('a page limit still applies with payloads, and the cursor continues after it', async () => {
      const first = await get('/logs?limit=1&include=payload');
      assert.equal(first.logs.length, 1);
      assert.equal(first.logs[0].id, ids[ids.length - 1]);
      const second = await get(`/logs?limit=1&include=payload&cursor=${encodeURIComponent(first.nextCursor)}`);
      assert.equal(second.logs[0].id, ids[ids.length - 2]);
    });

    test('one log is read whole, its envelope streamed as stored', async () => {
      const id = ids[2]!;
      const r = await request(`${t.url}/v1/projects/${projectId}/logs/${id}`, { headers: { authorization: `Bearer ${live}` } });
      assert.equal(r.statusCode, 200);
      assert.match(String(r.headers['content-type']), /^application\/json/);
      assert.equal(r.headers['transfer-encoding'], 'chunked', 'written in pieces, not as one serialized string');
      const text = await r.body.text();
      assert.ok(text.includes(`"payload":${stored.get(id)}`), 'the stored envelope text, as is');
      const body = JSON.parse(text) as Json;
      assert.equal(body.success, true);
      const listed = (await get('/logs?limit=50')).logs.find((l: Json) => l.id === id);
      assert.deepEqual(body.log, { ...listed, payload: JSON.parse(stored.get(id)!) });
      const opened = await decryptRecord(JSON.stringify(body.log.payload), ENC, id);
      assert.equal((opened as { i: number }).i, 2);
    });

    test('a trace follows the same rule: no payloads unless asked, pages at the budget or the limit, a cursor to the end', async () => {
      const plain = await get(`/traces/${TRACE}`);
      assert.equal(plain.traceId, TRACE);
      assert.equal(plain.nextCursor, null);
      assert.deepEqual(
        plain.logs.map((l: Json) => l.id),
        ids,
      );
      for (const l of plain.logs) assert.equal('payload' in l, false);

      const limited = await pages(`/traces/${TRACE}?limit=3`);
      assert.deepEqual(
        limited.map((p) => p.logs.length),
        [3, 3, 1],
      );
      assert.deepEqual(
        limited.flatMap((p) => p.logs.map((l: Json) => l.id)),
        ids,
      );

      const withPayloads = await pages(`/traces/${TRACE}?include=payload`);
      assert.deepEqual(
        withPayloads.map((p) => p.logs.length),
        expectedPages(ids.map((id) => stored.get(id)!.length)),
      );
      const entries = withPayloads.flatMap((p) => p.logs);
      assert.deepEqual(
        entries.map((l: Json) => l.id),
        ids,
      );
      for (const l of entries) assert.deepEqual(l.payload, JSON.parse(stored.get(l.id)!));
    });

    test('an unknown trace is 404, a bad cursor 400, an unknown include 400', async () => {
      const missing = await getWith(t.app, live, `/v1/projects/${projectId}/traces/no-such-trace`);
      assert.equal(missing.statusCode, 404);
      assert.equal(missing.json().error.code, 'not_found');
      const badCursor = await getWith(t.app, live, `/v1/projects/${projectId}/traces/${TRACE}?cursor=nope`);
      assert.equal(badCursor.statusCode, 400);
      assert.equal(badCursor.json().error.code, 'invalid_cursor');
      const badInclude = await getWith(t.app, live, `/v1/projects/${projectId}/logs?include=everything`);
      assert.equal(badInclude.statusCode, 400);
      assert.equal(badInclude.json().error.code, 'invalid_request');
    });
  });
}
