/**
 * The placeholder dashboard is served at `/`, and the OpenAPI document lists every foundation
 * path with its schemas (generated from the routes).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp } from './helpers/server.js';

test('dashboard page at / and OpenAPI document with the foundation paths', async () => {
  const t = await startApp();
  try {
    const page = await t.app.inject({ method: 'GET', url: '/' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /text\/html/);
    assert.match(page.body, /Countersign/);
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    for (const p of [
      '/v1/projects',
      '/v1/projects/{projectId}/keys',
      '/v1/projects/{projectId}/keys/{keyId}/rotate',
      '/v1/projects/{projectId}/keys/{keyId}',
      '/v1/log',
      '/v1/projects/{projectId}/logs',
      '/v1/projects/{projectId}/logs/{logId}',
      '/v1/projects/{projectId}/traces/{traceId}',
      '/v1/projects/{projectId}/events',
      '/v1/projects/{projectId}/events/stream',
    ]) {
      assert.ok(doc.paths[p], `OpenAPI has ${p}`);
    }
    assert.ok(doc.paths['/v1/log'].post.requestBody, 'the ingest body schema is documented');
    assert.ok(doc.paths['/v1/projects'].post.responses['201'], 'responses are documented');
    const docs = await t.app.inject({ method: 'GET', url: '/docs' });
    assert.ok(docs.statusCode === 200 || docs.statusCode === 302);
  } finally {
    await t.close();
  }
});
