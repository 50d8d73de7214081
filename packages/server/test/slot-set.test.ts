/**
 * SlotSet: the Set replacement for objects that churn by the thousand per second (slot-set.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SlotSet } from '../src/slot-set.js';

test('SlotSet: add, delete, has, size and iteration keep set semantics', () => {
  const s = new SlotSet<{ n: number }>();
  const items = Array.from({ length: 10 }, (_, n) => ({ n }));
  for (const x of items) s.add(x);
  s.add(items[3]!); // again: no duplicate
  assert.equal(s.size, 10);
  assert.equal(s.delete(items[0]!), true);
  assert.equal(s.delete(items[0]!), false, 'already gone');
  assert.equal(s.delete({ n: 99 }), false, 'never added');
  assert.equal(s.delete(items[9]!), true, 'the last one');
  assert.equal(s.delete(items[4]!), true, 'one from the middle');
  assert.equal(s.size, 7);
  assert.deepEqual(
    [...s].map((x) => x.n).sort((a, b) => a - b),
    [1, 2, 3, 5, 6, 7, 8],
  );
  for (const x of items) assert.equal(s.has(x), ![0, 4, 9].includes(x.n), `has(${x.n})`);
  // Deleting while iterating is safe (iteration walks a copy).
  for (const x of s) s.delete(x);
  assert.equal(s.size, 0);
  s.add(items[0]!);
  assert.deepEqual([...s], [items[0]]);
});

test('SlotSet: an item may be in several sets at once', () => {
  const a = new SlotSet<object>();
  const b = new SlotSet<object>();
  const x = {};
  const y = {};
  a.add(y).add(x);
  b.add(x);
  assert.equal(a.delete(y), true);
  assert.equal(b.has(x), true);
  assert.equal(a.has(x), true);
  assert.equal(b.delete(x), true);
  assert.equal(a.has(x), true);
  assert.equal(b.has(x), false);
});
