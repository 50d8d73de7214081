import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../src/config.js';

test('defaults are the embedded single-process setup', () => {
  const c = loadConfig({}, {});
  assert.equal(c.port, 8080);
  assert.equal(c.host, '127.0.0.1');
  assert.equal(c.databaseUrl, undefined);
  assert.equal(c.roles.size, 6);
  assert.deepEqual(c.allowTargets, []);
  assert.equal(c.proofWindowMs, 5000);
  assert.equal(c.sqliteSync, 'normal');
  assert.equal(c.rateLimit, 0, 'rate limiting is off unless asked for');
});

test('flags win over the environment', () => {
  const c = loadConfig({ port: '9000' }, { COUNTERSIGN_PORT: '7000', DATABASE_URL: 'postgres://u@h/db' });
  assert.equal(c.port, 9000);
  assert.equal(c.databaseUrl, 'postgres://u@h/db');
});

test('bad settings fail at start with a message naming the setting', () => {
  const cases: Array<[Parameters<typeof loadConfig>[0], NodeJS.ProcessEnv, RegExp]> = [
    [{ port: 'eighty' }, {}, /--port/],
    [{ port: '70000' }, {}, /--port/],
    [{ roles: 'ingest,coffee' }, {}, /unknown role "coffee"/],
    [{ databaseUrl: 'mysql://x' }, {}, /postgres/],
    [{ tsaUrl: 'ftp://tsa' }, {}, /--tsa-url/],
    [{ tsaUrl: 'https://tsa.example/tsa' }, {}, /--tsa-roots/],
    [{ tsaUrl: 'https://tsa.example/tsa', tsaRoots: '/nonexistent/roots.pem' }, {}, /not found/],
    [{ allowTargets: 'localhost' }, {}, /host:port/],
    [{}, { COUNTERSIGN_SQLITE_SYNC: 'sometimes' }, /COUNTERSIGN_SQLITE_SYNC/],
    [{}, { COUNTERSIGN_PROOF_WINDOW_MS: '5' }, /COUNTERSIGN_PROOF_WINDOW_MS/],
  ];
  for (const [flags, env, message] of cases) {
    assert.throws(
      () => loadConfig(flags, env),
      (e: unknown) => e instanceof ConfigError && message.test(e.message),
      JSON.stringify(flags),
    );
  }
});

test('roles and allow-targets parse', () => {
  const c = loadConfig({ roles: 'ingest, ledger', allowTargets: '127.0.0.1:9,[::1]:80,Upstream.internal:443' }, {});
  assert.deepEqual([...c.roles], ['ingest', 'ledger']);
  assert.deepEqual(c.allowTargets, ['127.0.0.1:9', '[::1]:80', 'upstream.internal:443']);
});
