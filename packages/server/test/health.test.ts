import { test } from 'node:test';
import assert from 'node:assert/strict';
import { STORES, startApp } from './helpers/server.js';

for (const store of STORES) {
  test(`healthz answers 200 on ${store}`, async () => {
    const t = await startApp({ store });
    try {
      const r = await t.app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(r.statusCode, 200);
      assert.equal(r.json().dialect, store);
      const nf = await t.app.inject({ method: 'GET', url: '/nope' });
      assert.equal(nf.statusCode, 404);
      assert.equal(nf.json().error.code, 'not_found');
      assert.match(nf.json().error.requestId, /^req_/);
    } finally {
      await t.close();
    }
  });
}
