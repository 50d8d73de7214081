/**
 * The deferred request logger (http/request-logger.ts): no pino child for a request that logs
 * nothing, and the same lines as before for one that does (the request id bound, the route's
 * level honoured), both in isolation and in the real app's requests.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { DeferredRequestLogger } from '../src/http/request-logger.js';
import { tempDir } from './helpers/server.js';

/** A pino logger writing JSON lines into an array. */
function capturing(level: string): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: pino({ level, base: { service: 'test' } }, sink), lines };
}

/** pino writes synchronously to a Writable only after a tick. */
const settle = () => new Promise((r) => setImmediate(r));

test('no child is made until a line at an enabled level is logged; then every line carries the bindings', async () => {
  const { logger, lines } = capturing('info');
  let made = 0;
  const parent = Object.assign(Object.create(logger) as pino.Logger, {
    child: (b: pino.Bindings, o?: pino.ChildLoggerOptions) => (made++, logger.child(b, o)),
  });
  const log = new DeferredRequestLogger(parent as unknown as FastifyBaseLogger, { reqId: 'req_1' }, {});
  assert.equal(log.level, 'info');
  log.debug('below the level');
  log.trace({ a: 1 }, 'below the level');
  assert.equal(made, 0);
  assert.equal(log.materialized, false);
  log.info({ projectId: 'p1' }, 'first');
  log.error(new Error('boom'));
  log.warn('third %s', 'formatted');
  assert.equal(made, 1, 'one child for the whole request');
  await settle();
  assert.deepEqual(
    lines.map((l) => [l.reqId, l.service, l.msg, l.projectId]),
    [
      ['req_1', 'test', 'first', 'p1'],
      ['req_1', 'test', 'boom', undefined],
      ['req_1', 'test', 'third formatted', undefined],
    ],
  );
  assert.equal((lines[1]!.err as { type: string }).type, 'Error');
});

test("a route's own level (the child's options) decides, and child() and level= make the child", async () => {
  const { logger, lines } = capturing('info');
  const debugRoute = new DeferredRequestLogger(logger, { reqId: 'req_2' }, { level: 'debug' });
  assert.equal(debugRoute.level, 'debug');
  debugRoute.debug('kept at the route level');
  const quiet = new DeferredRequestLogger(logger, { reqId: 'req_3' }, {});
  quiet.level = 'warn';
  assert.equal(quiet.materialized, true);
  quiet.info('dropped');
  quiet.warn('kept');
  const nested = new DeferredRequestLogger(logger, { reqId: 'req_4' }, {}).child({ part: 'x' });
  nested.info('nested');
  await settle();
  assert.deepEqual(
    lines.map((l) => [l.reqId, l.msg, l.part]),
    [
      ['req_2', 'kept at the route level', undefined],
      ['req_3', 'kept', undefined],
      ['req_4', 'nested', 'x'],
    ],
  );
});

test("in the app, a route's log line carries its request id, and a request that logs nothing writes nothing", async () => {
  const { logger, lines } = capturing('info');
  const app = await buildApp(loadConfig({ dataDir: tempDir(), port: '0', logLevel: 'info' }, {}), { logger });
  try {
    const created = await app.inject({
      method: 'POST',
      url: '/v1/projects',
      headers: { authorization: `Bearer ${app.ctx.masterKey}` },
      payload: { name: 'logged', credentialClass: 'agent' },
    });
    assert.equal(created.statusCode, 201, created.body);
    await settle();
    const line = lines.find((l) => l.msg === 'project created');
    assert.ok(line, 'the route logged through its request logger');
    assert.match(String(line.reqId), /^req_[A-Za-z0-9_-]{16,}$/);
    assert.equal(line.projectId, created.json().project.id);
    // A request that logs nothing leaves no line (request logging is off at info).
    const before = lines.length;
    assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    await settle();
    assert.equal(lines.length, before);
  } finally {
    await app.close();
  }
});
