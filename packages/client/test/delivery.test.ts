/**
 * Delivery edge paths against real sockets: a server that takes fewer logs per request than the
 * client batches (413 → halved batches, all delivered); an endpoint that accepts connections and
 * never answers (shutdown deadline → failure path with reason "shutdown"); a full queue (logs
 * go straight to the failure path, still in order and never lost).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { ServiceClient, retryAfterMs, backoffMs, type DeliveryFailure, type DeliveryOptions } from '../src/index.js';
import { deadEndpoint, startServer, type ClientTestServer } from './helpers/server.js';

describe('delivery edge paths', () => {
  let srv: ClientTestServer;
  before(async () => {
    srv = await startServer({ config: { maxBatchLogs: 10 } });
  });
  after(async () => srv.close());

  /** A client whose endpoint refuses connections, and the failures it reports. */
  async function refusedClient(delivery: DeliveryOptions): Promise<{ c: ServiceClient; failures: DeliveryFailure[] }> {
    const failures: DeliveryFailure[] = [];
    const c = new ServiceClient({
      apiKey: srv.project.keys.service,
      encryptionKey: 'k',
      endpoint: await deadEndpoint(),
      flushOnExit: false,
      onDeliveryFailure: (f) => void failures.push(f),
      delivery,
    });
    return { c, failures };
  }

  it('halves batches the server finds too large (413) and delivers everything once', async () => {
    const c = new ServiceClient({
      apiKey: srv.project.keys.service,
      encryptionKey: 'k',
      endpoint: srv.url,
      flushOnExit: false,
      delivery: { batchSize: 40 },
    });
    const ids = await Promise.all(Array.from({ length: 40 }, (_, i) => c.log({ action: 'split', traceId: 'trace-413', metadata: { i } })));
    await c.flush();
    assert.equal(c.stats.delivered, 40);
    assert.equal(c.stats.failed, 0);
    const trace = await c.reader({ projectId: srv.project.id, readKey: srv.project.keys.live }).getTrace('trace-413');
    assert.deepEqual(
      trace.map((l) => l.id),
      ids,
    );
    await c.shutdown();
  });

  it('a hanging endpoint: shutdown({timeoutMs}) hands the in-flight batch to the failure path with reason "shutdown"', async () => {
    const sockets: net.Socket[] = [];
    const hang = net.createServer((s) => void sockets.push(s)); // accepts, never answers
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    const failures: DeliveryFailure[] = [];
    const c = new ServiceClient({
      apiKey: srv.project.keys.service,
      encryptionKey: 'k',
      endpoint: `http://127.0.0.1:${(hang.address() as net.AddressInfo).port}`,
      flushOnExit: false,
      onDeliveryFailure: (f) => void failures.push(f),
      delivery: { flushIntervalMs: 0, requestTimeoutMs: 600_000 },
    });
    const id = await c.log({ action: 'hang' });
    await c.shutdown({ timeoutMs: 100 });
    assert.equal(failures.length, 1);
    assert.equal(failures[0]!.reason, 'shutdown');
    assert.equal(failures[0]!.logs[0]!.entry.id, id);
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => hang.close(resolve));
  });

  it('a wall clock stepped an hour back while a batch fills does not hold it: it goes out at the flush interval', async () => {
    // The step is made by replacing Date.now in this process (setting the machine's clock would
    // move every other process on it). The endpoint refuses connections and retries are off, so
    // the attempt shows as a failure; no server here reads the stepped clock.
    const { c, failures } = await refusedClient({ flushIntervalMs: 100, batchSize: 100, maxRetries: 0 });
    const real = Date.now;
    try {
      const id = await c.log({ action: 'clock-step' });
      Date.now = () => real() - 3_600_000;
      const started = performance.now();
      // The flush interval with fiftyfold slack (not a speed figure): an hour would be the defect.
      while (failures.length === 0 && performance.now() - started < 5000) await new Promise((r) => setTimeout(r, 20));
      assert.equal(failures.length, 1, 'the batch was sent (and refused) within 5 s');
      assert.equal(failures[0]!.logs[0]!.entry.id, id);
    } finally {
      Date.now = real;
      await c.shutdown({ timeoutMs: 1000 });
    }
  });

  it('a full queue sends new logs to the failure path instead of growing without bound', async () => {
    const { c, failures } = await refusedClient({ maxQueueSize: 5, maxRetries: 0, flushIntervalMs: 60_000, batchSize: 100 });
    const ids = await Promise.all(Array.from({ length: 8 }, (_, i) => c.log({ action: 'q', metadata: { i } })));
    await c.shutdown();
    const got = failures.flatMap((f) => f.logs.map((l) => l.entry.id));
    assert.deepEqual([...got].sort(), [...ids].sort(), 'every log reached the failure path once');
    assert.deepEqual(
      failures.filter((f) => f.reason === 'queue_full').flatMap((f) => f.logs.map((l) => l.entry.id)),
      ids.slice(5),
    );
  });

  it('Retry-After and backoff arithmetic', () => {
    assert.equal(retryAfterMs('3'), 3000);
    assert.equal(retryAfterMs(new Date(10_000).toUTCString(), 4_000), 6000);
    assert.equal(retryAfterMs('soon'), undefined);
    assert.equal(retryAfterMs(null), undefined);
    for (let a = 0; a < 12; a++) {
      const d = backoffMs(a, 200, 5000);
      assert.ok(d >= 0 && d <= Math.min(5000, 200 * 2 ** a));
    }
  });
});
