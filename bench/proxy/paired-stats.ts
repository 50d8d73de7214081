/**
 * Statistics for interleaved pairs of benchmark runs (bench/paired.bench.ts): on these shared
 * VMs two runs of the same tree differ by a third in p99, so a change of a few per cent shows
 * only as a direction that holds over many pairs. The Wilcoxon signed-rank test asks how likely
 * such a run of differences is when the change did nothing; it uses the size of each pair's
 * difference, not only its sign, and assumes nothing about their distribution.
 */

/** The median of `xs` (the mean of the two middle values for an even count); NaN when empty. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** A signed-rank test's result. */
export interface SignedRank {
  /** Pairs with a non-zero difference (the others carry no sign and are left out). */
  n: number;
  /** Sums of the ranks of the positive and of the negative differences (`b - a`). */
  wPlus: number;
  wMinus: number;
  /** Exact two-sided p-value: the chance, were the change to do nothing, of a sum this lopsided. */
  p: number;
}

/**
 * The Wilcoxon signed-rank test on pairs `(a[i], b[i])`, exact for any number of pairs a
 * benchmark session can run: the differences `b - a` are ranked by size (ties share the mean of
 * their ranks), and the p-value counts, over all 2ⁿ equally likely sign patterns, those whose
 * smaller rank sum is at most the one observed.
 */
export function signedRank(a: readonly number[], b: readonly number[]): SignedRank {
  if (a.length !== b.length) throw new Error('signedRank needs pairs: two lists of one length');
  const d = a.map((x, i) => b[i]! - x).filter((x) => x !== 0 && Number.isFinite(x));
  const n = d.length;
  if (n === 0) return { n: 0, wPlus: 0, wMinus: 0, p: 1 };
  const order = d.map((x, i) => [Math.abs(x), i] as const).sort((p, q) => p[0] - q[0]);
  // Ranks doubled, so that shared (mean) ranks stay integers: 2·rank for a rank r, r₁ + r₂ for a tie's mean of two.
  const rank2 = new Array<number>(n);
  for (let i = 0; i < n;) {
    let j = i;
    while (j + 1 < n && order[j + 1]![0] === order[i]![0]) j++;
    for (let k = i; k <= j; k++) rank2[order[k]![1]] = i + j + 2; // mean of ranks i+1 … j+1, doubled
    i = j + 1;
  }
  let plus2 = 0;
  let total2 = 0;
  d.forEach((x, i) => {
    total2 += rank2[i]!;
    if (x > 0) plus2 += rank2[i]!;
  });
  // ways[s]: sign patterns whose positive ranks sum (doubled) to s.
  const ways = new Float64Array(total2 + 1);
  ways[0] = 1;
  for (const r of rank2) for (let s = total2; s >= r; s--) ways[s]! += ways[s - r]!;
  const smaller2 = Math.min(plus2, total2 - plus2);
  let tail = 0;
  for (let s = 0; s <= smaller2; s++) tail += ways[s]!;
  return { n, wPlus: plus2 / 2, wMinus: (total2 - plus2) / 2, p: Math.min(1, (2 * tail) / 2 ** n) };
}
