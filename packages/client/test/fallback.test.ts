/**
 * The file fallback: with the endpoint down, every log reaches the fallback file, one line per
 * log, in log() order, never interleaved (1,000 concurrent failures), in the right daily file,
 * holding no plaintext or key; a replay against the REAL server delivers each exactly once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ServiceClient, FileFallbackTransport, replayFallbackFile, utcDay, type FallbackLine, type DeliveryFailure } from '../src/index.js';
import { STORES, deadEndpoint, startServer, tempDir, type ClientTestServer } from './helpers/server.js';

const SECRET_TEXT = 'plaintext-that-must-never-reach-disk';

function readLines(file: string): FallbackLine[] {
  const text = fs.readFileSync(file, 'utf8');
  assert.ok(text.endsWith('\n'));
  return text
    .slice(0, -1)
    .split('\n')
    .map((l) => JSON.parse(l) as FallbackLine);
}

const fakeFailure = (i: number): DeliveryFailure => ({
  reason: 'retries_exhausted',
  error: new Error('down'),
  attempts: 1,
  logs: [
    {
      entry: {
        id: `log_${String(i).padStart(20, '0')}`,
        action: 'a'.repeat(2000),
        payload: { v: 1, alg: 'A256GCM', kid: 'k', iv: 'x', ct: 'y', tag: 'z' },
        payloadHash: '0'.repeat(64),
      },
      headers: {},
    },
  ],
});

describe('FileFallbackTransport', () => {
  it('writes 1,000 concurrent failures one at a time, in call order, never interleaved', async () => {
    const dir = tempDir();
    const t = new FileFallbackTransport({
      directory: path.join(dir, 'nested'),
      filenamePrefix: 'audit',
      now: () => Date.UTC(2026, 2, 14, 23, 59),
    });
    // Large rows (2 KB each) make interleaving visible if writes ever overlapped.
    await Promise.all(Array.from({ length: 1000 }, (_, i) => t.handleDeliveryFailure(fakeFailure(i))));
    assert.deepEqual(fs.readdirSync(path.join(dir, 'nested')), ['audit-2026-03-14.log']);
    const lines = readLines(t.fileFor());
    assert.equal(lines.length, 1000);
    lines.forEach((l, i) => assert.equal(l.entry.id, `log_${String(i).padStart(20, '0')}`));
    assert.equal(t.rowsWritten, 1000);
  });

  it('rolls over daily by UTC date', async () => {
    const dir = tempDir();
    let now = Date.UTC(2026, 0, 31, 23, 59, 59);
    const t = new FileFallbackTransport({ directory: dir, filenamePrefix: 'cs', now: () => now });
    await t.handleDeliveryFailure(fakeFailure(1));
    now += 2000;
    await t.handleDeliveryFailure(fakeFailure(2));
    assert.deepEqual(fs.readdirSync(dir).sort(), ['cs-2026-01-31.log', 'cs-2026-02-01.log']);
  });

  it('refuses bad options clearly', () => {
    assert.throws(() => new FileFallbackTransport({ directory: '', filenamePrefix: 'x' }), /directory must be a non-empty path/);
    assert.throws(() => new FileFallbackTransport({ directory: '/tmp', filenamePrefix: '../x' }), /filenamePrefix must be/);
  });

  it('keeps writing after a failed write', async () => {
    const dir = tempDir();
    const blocker = path.join(dir, 'file-not-dir');
    fs.writeFileSync(blocker, '');
    const t = new FileFallbackTransport({ directory: blocker, filenamePrefix: 'x' });
    await assert.rejects(t.handleDeliveryFailure(fakeFailure(1)));
    fs.rmSync(blocker);
    await t.handleDeliveryFailure(fakeFailure(2));
    assert.equal(readLines(t.fileFor()).length, 1);
  });
});

for (const storeKind of STORES) {
  describe(`endpoint down → fallback file → replay (${storeKind})`, () => {
    let srv: ClientTestServer;
    before(async () => {
      srv = await startServer({ store: storeKind });
    });
    after(async () => srv.close());

    it('1,000 concurrent logs with the endpoint down all land in the fallback file in order; a replay delivers each exactly once', async () => {
      const dir = tempDir();
      const fallback = new FileFallbackTransport({ directory: dir, filenamePrefix: 'countersign' });
      const client = new ServiceClient({
        apiKey: srv.project.keys.service,
        encryptionKey: 'fallback key',
        endpoint: await deadEndpoint(),
        onDeliveryFailure: fallback,
        flushOnExit: false,
        delivery: { maxRetries: 1, retryBaseDelayMs: 1, batchSize: 50, maxConcurrentRequests: 8 },
      });
      const ids = await Promise.all(
        Array.from({ length: 1000 }, (_, i) =>
          client.log({
            action: 'offline.write',
            actor: 'batch-job',
            traceId: 'trace-fallback',
            metadata: { i },
            payload: { secret: SECRET_TEXT, i },
          }),
        ),
      );
      await client.shutdown();
      assert.equal(client.stats.failed, 1000);

      const file = path.join(dir, `countersign-${utcDay(Date.now())}.log`);
      assert.deepEqual(fs.readdirSync(dir), [path.basename(file)], 'one file, named <prefix>-YYYY-MM-DD.log (UTC)');
      const raw = fs.readFileSync(file, 'utf8');
      assert.equal(raw.includes(SECRET_TEXT), false, 'no plaintext on disk');
      assert.equal(raw.includes('fallback key'), false, 'no encryption key on disk');
      assert.equal(raw.includes(srv.project.keys.service), false, 'no API key on disk');
      const lines = readLines(file);
      assert.deepEqual(
        lines.map((l) => l.entry.id),
        ids,
        'every log once, in log() order',
      );
      assert.equal(lines[0]!.reason, 'retries_exhausted');
      assert.deepEqual(Object.keys(lines[0]!.entry).sort(), [
        'action',
        'actor',
        'id',
        'metadata',
        'occurredAt',
        'payload',
        'payloadHash',
        'spanId',
        'traceId',
      ]);
      assert.deepEqual(lines[5]!.entry.metadata, { i: 5 });

      const first = await replayFallbackFile(file, { endpoint: srv.url, apiKey: srv.project.keys.service });
      assert.deepEqual(first, { lines: 1000, delivered: 1000, duplicates: 0, malformed: 0, failed: [] });
      const again = await replayFallbackFile(file, { endpoint: srv.url, apiKey: srv.project.keys.service });
      assert.deepEqual(again, { lines: 1000, delivered: 0, duplicates: 1000, malformed: 0, failed: [] }, 'a second replay stores nothing');

      const reader = new ServiceClient({
        apiKey: srv.project.keys.service,
        encryptionKey: 'fallback key',
        endpoint: srv.url,
        flushOnExit: false,
      });
      const stored = [];
      for await (const log of reader
        .reader({ projectId: srv.project.id, readKey: srv.project.keys.live })
        .allLogs({ traceId: 'trace-fallback', limit: 500 }))
        stored.push(log);
      assert.equal(stored.length, 1000);
      assert.equal(new Set(stored.map((l) => l.id)).size, 1000);
      const sample = stored.find((l) => l.id === ids[123])!;
      assert.deepEqual(sample.decryptedPayload?.payload, { secret: SECRET_TEXT, i: 123 });
      await reader.shutdown();
    });

    it('a replay reports malformed lines and refused batches without stopping', async () => {
      const dir = tempDir();
      const file = path.join(dir, 'mixed.log');
      const client = new ServiceClient({
        apiKey: srv.project.keys.service,
        encryptionKey: 'k',
        endpoint: await deadEndpoint(),
        flushOnExit: false,
        onDeliveryFailure: new FileFallbackTransport({ directory: dir, filenamePrefix: 'mixed' }),
        delivery: { maxRetries: 0 },
      });
      await client.log({ action: 'one' });
      await client.shutdown();
      const good = fs.readFileSync(path.join(dir, `mixed-${utcDay(Date.now())}.log`), 'utf8');
      fs.writeFileSync(file, 'not json\n' + good);
      const r = await replayFallbackFile(file, { endpoint: srv.url, apiKey: srv.project.keys.live });
      assert.equal(r.malformed, 1);
      assert.equal(r.failed.length, 1);
      assert.match(r.failed[0]!.error, /403/);
    });
  });
}
