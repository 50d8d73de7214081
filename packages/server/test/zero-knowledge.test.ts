/**
 * Zero knowledge: after ingesting a known canary through every path (POST /v1/log with a plain
 * payload and X-Service-Encryption-Key, POST /v1/log with a client-sealed envelope, and
 * POST /v1/proxy to a loopback upstream that echoes it back), with a known encryption key,
 * no file of the SQLite data dir (the database, -wal and -shm included) and no row of any
 * PostgreSQL table contains the canary or the key string. The entries still open with the key.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { deriveEnvelopeKey, openPayload, randomNonce, sealPayload, type Envelope } from '@countersign/core';
import { STORES, freshPostgresDatabase, startApp, tempDir, type TestApp } from './helpers/server.js';
import { startUpstream } from './helpers/upstreams.js';
import { fullProject, getWith, postLog } from './foundation-helpers.js';

const CANARY = 'CANARY-7f3a9c1e-zero-knowledge-' + randomNonce();
const ENC_KEY = 'zk-known-key-' + randomNonce();

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((d) => (d.isDirectory() ? filesUnder(path.join(dir, d.name)) : [path.join(dir, d.name)]));
}

/** Names of files under `dataDir` whose bytes contain any needle (UTF-8 and UTF-16LE). */
function filesContaining(dataDir: string, needles: string[]): string[] {
  const hits: string[] = [];
  for (const f of filesUnder(dataDir)) {
    const bytes = fs.readFileSync(f);
    for (const n of needles) {
      if (bytes.includes(Buffer.from(n, 'utf8')) || bytes.includes(Buffer.from(n, 'utf16le')))
        hits.push(`${path.basename(f)} contains ${n === CANARY ? 'the canary' : 'the key'}`);
    }
  }
  return hits;
}

/** Rows (as text) of every table of the public schema that contain any needle. */
async function rowsContaining(databaseUrl: string, needles: string[]): Promise<string[]> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const tables = (await c.query<{ tablename: string }>(`select tablename from pg_tables where schemaname = 'public'`)).rows.map(
      (r) => r.tablename,
    );
    assert.ok(tables.includes('logs') && tables.includes('events'));
    const hits: string[] = [];
    for (const table of tables) {
      const rows = (await c.query<{ row: string }>(`select t::text as row from "${table}" t`)).rows;
      for (const r of rows)
        for (const n of needles) if (r.row.includes(n)) hits.push(`${table} has a row with ${n === CANARY ? 'the canary' : 'the key'}`);
    }
    return hits;
  } finally {
    await c.end();
  }
}

/** Sends the canary through every ingest path; returns the ids of what was stored. */
async function ingestEverywhere(t: TestApp, upstreamUrl: string | undefined): Promise<{ ids: string[]; live: string; projectId: string }> {
  const p = await fullProject(t);
  const ids: string[] = [];
  // 1. Plain payload sealed by the server (single and batch), with the canary in the payload only.
  const plain = await postLog(
    t.app,
    p.agent,
    { actor: 'zk', action: 'zk.plain', payload: { secret: CANARY, nested: { again: CANARY } } },
    { 'x-service-encryption-key': ENC_KEY },
  );
  assert.equal(plain.statusCode, 201, plain.body);
  ids.push(plain.json().id);
  const batch = await postLog(
    t.app,
    p.human,
    { logs: [{ payload: { s: CANARY } }, { payload: { t: `x${CANARY}x` } }] },
    { 'x-service-encryption-key': ENC_KEY, 'x-agent-rationale': 'handover' },
  );
  assert.equal(batch.statusCode, 201, batch.body);
  ids.push(...batch.json().ids);
  // A same-id retry decrypts the stored entry to compare, and must not leave plaintext behind.
  const retryId = 'zk-retry-' + randomNonce();
  for (let i = 0; i < 2; i++) {
    const r = await postLog(t.app, p.service, { id: retryId, payload: { secret: CANARY } }, { 'x-service-encryption-key': ENC_KEY });
    assert.ok(r.statusCode === 201 || r.statusCode === 200, r.body);
  }
  ids.push(retryId);
  // 2. Client-sealed envelope.
  const envId = 'zk-env-' + randomNonce();
  const envelope = await sealPayload({ secret: CANARY, nonce: randomNonce() }, await deriveEnvelopeKey(ENC_KEY), envId);
  const env = await postLog(t.app, p.agent, { id: envId, payload: envelope });
  assert.equal(env.statusCode, 201, env.body);
  ids.push(envId);
  // 3. The proxy, to a loopback upstream that echoes the canary back in its answer.
  if (upstreamUrl) {
    const r = await t.app.inject({
      method: 'POST',
      url: '/v1/proxy',
      headers: {
        authorization: `Bearer ${p.agent}`,
        'content-type': 'application/json',
        'x-service-encryption-key': ENC_KEY,
        'x-service-upstream-authorization': `Bearer ${CANARY}`,
      },
      payload: { target: `${upstreamUrl}/echo`, payload: { prompt: CANARY } },
    });
    assert.equal(r.statusCode, 200, r.body);
    assert.ok(r.body.includes(CANARY), 'the caller gets the upstream answer');
    const logId = r.headers['x-service-log-id'];
    assert.equal(typeof logId, 'string');
    ids.push(String(logId));
  }
  return { ids, live: p.live, projectId: p.projectId };
}

/** Every stored entry opens with the key and holds the canary: the data is there, only sealed. */
async function assertOpens(t: TestApp, live: string, projectId: string, ids: string[]): Promise<void> {
  for (const id of ids) {
    const r = await getWith(t.app, live, `/v1/projects/${projectId}/logs/${id}`);
    assert.equal(r.statusCode, 200, r.body);
    const log = r.json().log;
    const opened = await openPayload(log.payload as Envelope, await deriveEnvelopeKey(ENC_KEY), id);
    assert.ok(JSON.stringify(opened).includes(CANARY), `log ${id} (${log.source}) opens and holds the canary`);
  }
}

test('the scanners find a planted canary (so a pass means something)', () => {
  const control = tempDir();
  fs.writeFileSync(path.join(control, 'x.db-wal'), Buffer.concat([Buffer.from([0, 1]), Buffer.from(CANARY, 'utf16le')]));
  assert.equal(filesContaining(control, [CANARY]).length, 1);
});

for (const store of STORES) {
  test(`zero knowledge on ${store}: no canary and no key at rest`, async () => {
    const upstream = await startUpstream();
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const t = await startApp({ store, dataDir, databaseUrl, config: { allowTargets: [upstream.hostPort], logLevel: 'silent' } });
    let closed = false;
    try {
      const { ids, live, projectId } = await ingestEverywhere(t, upstream.url);
      assert.ok(
        upstream.requests.some((r) => r.body.includes(CANARY)),
        'the upstream saw the canary',
      );
      await assertOpens(t, live, projectId, ids);
      await t.app.ctx.store.logs.drain();
      const needles = [CANARY, ENC_KEY];
      // While running (WAL and SHM present), then after close (checkpointed).
      assert.deepEqual(filesContaining(dataDir, needles), []);
      if (databaseUrl) assert.deepEqual(await rowsContaining(databaseUrl, needles), []);
      await t.close();
      closed = true;
      assert.deepEqual(filesContaining(dataDir, needles), []);
      if (databaseUrl) assert.deepEqual(await rowsContaining(databaseUrl, needles), []);
    } finally {
      if (!closed) await t.close();
      await upstream.close();
    }
  });
}
