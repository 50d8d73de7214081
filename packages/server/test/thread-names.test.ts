/**
 * The store's threads and the offload pool's carry names of their own (thread-name.ts), so that
 * `top -H` or `perf` on a busy instance says which thread burns the core: the writer, the
 * checkpointer or the offload pool. Linux only (the
 * names live in /proc); elsewhere the test has nothing to look at and says so.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { acquireOffloadPool, offload, releaseOffloadPool } from '../src/offload/pool.js';
import { THREAD_NAMES } from '../src/thread-name.js';
import { startApp } from './helpers/server.js';

const linux = fs.existsSync('/proc/self/task');

/** The names of this process's threads (each thread's `comm`). */
function threadNames(): string[] {
  const names: string[] = [];
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      names.push(fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim());
    } catch {
      /* the thread ended meanwhile */
    }
  }
  return names;
}

test('the SQLite writer and checkpointer threads are named, and go with the store', { skip: !linux && 'no /proc here' }, async () => {
  const t = await startApp({ store: 'sqlite' });
  try {
    const names = threadNames();
    assert.ok(names.includes(THREAD_NAMES.writer), `threads: ${names.join(', ')}`);
    assert.ok(names.includes(THREAD_NAMES.checkpointer), `threads: ${names.join(', ')}`);
    assert.ok(THREAD_NAMES.writer.length <= 15 && THREAD_NAMES.checkpointer.length <= 15, 'the kernel keeps 15 bytes of a name');
  } finally {
    await t.close();
  }
  // Closed store, stopped threads: nothing left under those names.
  const after = threadNames();
  assert.ok(!after.includes(THREAD_NAMES.writer) && !after.includes(THREAD_NAMES.checkpointer), `threads: ${after.join(', ')}`);
});

test('the offload pool names its threads', { skip: !linux && 'no /proc here' }, async () => {
  acquireOffloadPool();
  try {
    const parsed = await offload({ kind: 'parse', raw: new TextEncoder().encode('{"a":1}') });
    assert.equal(parsed.kind, 'parse');
    const names = threadNames();
    assert.ok(names.includes(THREAD_NAMES.offload), `threads: ${names.join(', ')}`);
  } finally {
    await releaseOffloadPool();
  }
});
