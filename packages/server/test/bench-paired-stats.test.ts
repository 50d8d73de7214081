/**
 * The signed-rank test that `npm run bench -- paired` (bench/paired.bench.ts) reports, held to
 * values worked out by hand from its definition: a benchmark's verdict of "kept" or "not kept"
 * rests on this p-value, so it is tested like the product's code.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { median, signedRank } from '../../../bench/proxy/paired-stats.js';

describe('paired benchmark statistics', () => {
  it('finds the median of odd and even counts without reordering its input', () => {
    const xs = [3, 1, 2];
    assert.equal(median(xs), 2);
    assert.deepEqual(xs, [3, 1, 2]);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.ok(Number.isNaN(median([])));
  });

  it('gives the exact two-sided p of n differences all one way: 2 / 2ⁿ', () => {
    const a = [1, 2, 3, 4, 5, 6];
    const down = a.map((x) => x - 1 - x / 10);
    const r = signedRank(a, down);
    assert.equal(r.n, 6);
    assert.equal(r.wPlus, 0);
    assert.equal(r.wMinus, 21);
    assert.equal(r.p, 2 / 64);
    assert.equal(signedRank(a.slice(0, 5), down.slice(0, 5)).p, 2 / 32);
  });

  it('counts sign patterns exactly for a mixed case (n = 4, smaller rank sum 4: 7 patterns of 16 each way)', () => {
    // Differences −1, +2, −3, +4 rank 1, 2, 3, 4: W+ = 2 + 4 = 6, W− = 1 + 3 = 4.
    const r = signedRank([0, 0, 0, 0], [-1, 2, -3, 4]);
    assert.equal(r.wPlus, 6);
    assert.equal(r.wMinus, 4);
    // Sums of 4 ranks {1..4} at most 4: {} {1} {2} {3} {4} {1,2} {1,3} = 7 patterns of 16; two-sided 14/16.
    assert.equal(r.p, 14 / 16);
  });

  it('leaves out zero differences and gives ties the mean of their ranks', () => {
    // Differences 0 (dropped), +1, +1, −2: ranks 1.5, 1.5, 3; W+ = 3, W− = 3: no direction at all.
    const r = signedRank([5, 5, 5, 5], [5, 6, 6, 3]);
    assert.equal(r.n, 3);
    assert.equal(r.wPlus, 3);
    assert.equal(r.wMinus, 3);
    assert.equal(r.p, 1);
    assert.deepEqual(signedRank([1, 2], [1, 2]), { n: 0, wPlus: 0, wMinus: 0, p: 1 });
  });

  it("reproduces the twelfth session's thirteen pairs (checkpointer at nice 19): W− = 20, p between 0.05 and 0.1", () => {
    const base = [17.791, 11.119, 15.559, 9.855, 9.207, 12.303, 9.815, 7.111, 11.167, 9.687, 5.395, 7.923, 7.963];
    const nice = [10.583, 12.223, 8.367, 7.667, 11.975, 10.031, 6.999, 6.991, 9.247, 10.367, 5.491, 7.655, 5.427];
    const r = signedRank(base, nice);
    assert.equal(r.n, 13);
    assert.equal(r.wPlus, 20);
    assert.equal(r.wMinus, 71);
    assert.ok(r.p > 0.05 && r.p < 0.1, `p = ${r.p}`);
  });

  it('refuses lists of different lengths', () => {
    assert.throws(() => signedRank([1, 2], [1]), /pairs/);
  });
});
