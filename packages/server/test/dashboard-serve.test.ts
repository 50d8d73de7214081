/**
 * How the server serves the dashboard: the Vite build at `/` with its CSP and cache headers,
 * `/embed` framable by the project's embedding origins only, and a page that says how to build
 * it when there is no build.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import Fastify from 'fastify';
import dashboardPlugin, { NOT_BUILT_PAGE, dashboardBuilt, dashboardCsp, embedFrameAncestors } from '../src/dashboard/plugin.js';
import { PROJECT_SETTINGS } from '../src/projects/settings.js';
import { startApp, tempDir } from './helpers/server.js';
import { ensureDashboardBuilt } from './dashboard-helpers.js';

test('/ serves the built dashboard with its policy; hashed assets are immutable', async () => {
  const root = await ensureDashboardBuilt();
  const app = await startApp();
  try {
    const page = await app.app.inject({ method: 'GET', url: '/' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(page.body, /id="signin-form"/, 'the built page, not the how-to-build page');
    assert.ok(fs.existsSync(path.join(root, 'index.html')));
    const csp = String(page.headers['content-security-policy']);
    assert.match(csp, /script-src 'self';/);
    assert.match(csp, /connect-src 'self';/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(page.body, /<script>(?!<\/script>)/, 'no inline script (the policy would block it)');
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(page.body)?.[1];
    assert.ok(asset, 'index.html loads a bundled script');
    const js = await app.app.inject({ method: 'GET', url: asset });
    assert.equal(js.statusCode, 200);
    assert.match(String(js.headers['content-type']), /javascript/);
    assert.match(String(js.headers['cache-control']), /immutable/);
    assert.equal((await app.app.inject({ method: 'GET', url: '/assets/nope.js' })).statusCode, 404);
    // The API is unaffected by the static files.
    assert.equal((await app.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  } finally {
    await app.close();
  }
});

test('without a build, / answers a page that says how to build the dashboard', async () => {
  const empty = tempDir('countersign-dash-');
  assert.equal(dashboardBuilt(empty), false);
  const app = Fastify();
  app.decorate('ctx', { config: { ledgerUrl: undefined, publicUrl: undefined } } as never);
  await app.register(dashboardPlugin, { root: empty });
  try {
    const r = await app.inject({ method: 'GET', url: '/' });
    assert.equal(r.statusCode, 200);
    assert.equal(r.body, NOT_BUILT_PAGE);
    assert.match(r.body, /npm run build/);
    assert.match(String(r.headers['content-security-policy']), /default-src 'self'/);
  } finally {
    await app.close();
  }
});

test('the policy lets the page reach the configured ledger and public origins, nothing else', () => {
  assert.match(dashboardCsp({ ledgerUrl: undefined, publicUrl: undefined }), /connect-src 'self';/);
  const csp = dashboardCsp({ ledgerUrl: 'https://rekor.example.org/base', publicUrl: 'https://audit.example.com' });
  assert.match(csp, /connect-src 'self' https:\/\/rekor\.example\.org https:\/\/audit\.example\.com;/);
});

test('/embed: frame-ancestors from the project embedOrigins (plain origins only), else none; / stays unframable', async () => {
  await ensureDashboardBuilt();
  const real = PROJECT_SETTINGS.embedOrigins;
  const stored = ['https://app.example', 'http://127.0.0.1:3000', 'https://evil.example; script-src *', 'javascript:alert(1)', 42];
  const app = await startApp();
  try {
    // A stand-in for the stored setting, so this test does not depend on how it is stored.
    PROJECT_SETTINGS.embedOrigins = {
      schema: {},
      apply: async () => undefined,
      read: async (_ctx, projectId) => (projectId === 'prj_live_framed' ? stored : null),
    };
    assert.deepEqual(await embedFrameAncestors(app.app, 'prj_live_framed'), ['https://app.example', 'http://127.0.0.1:3000']);
    assert.deepEqual(await embedFrameAncestors(app.app, 'prj_live_other'), []);
    assert.deepEqual(await embedFrameAncestors(app.app, undefined), []);
    const framed = await app.app.inject({ method: 'GET', url: '/embed?project=prj_live_framed' });
    assert.equal(framed.statusCode, 200);
    assert.match(framed.body, /id="canvas-wrap"/, 'the same page as /');
    assert.match(String(framed.headers['content-security-policy']), /frame-ancestors https:\/\/app\.example http:\/\/127\.0\.0\.1:3000$/);
    assert.doesNotMatch(String(framed.headers['content-security-policy']), /evil|javascript/);
    const none = await app.app.inject({ method: 'GET', url: '/embed?project=prj_live_other' });
    assert.match(String(none.headers['content-security-policy']), /frame-ancestors 'none'$/);
    assert.match(String((await app.app.inject({ method: 'GET', url: '/' })).headers['content-security-policy']), /frame-ancestors 'none'$/);
  } finally {
    if (real) PROJECT_SETTINGS.embedOrigins = real;
    else delete PROJECT_SETTINGS.embedOrigins;
    await app.close();
  }
});
