/**
 * Per-caller token buckets: `rate` requests per second with bursts of `burst`. Pure (the clock
 * is passed in), bounded in memory (idle buckets are dropped oldest first).
 */

/** The verdict for one request. */
export interface RateVerdict {
  allowed: boolean;
  /** Seconds until one token is back, when refused. */
  retryAfterSeconds: number;
}

const MAX_BUCKETS = 100_000;

/**
 * A set of token buckets, one per caller id. A bucket is updated in place (no delete and
 * re-insert per request: a Map churned per request keeps dead entries reachable to the
 * scavenger, see slot-set.ts). Past {@link MAX_BUCKETS}, buckets that have refilled are
 * dropped (a full bucket is the same as none), else the oldest.
 */
export class TokenBuckets {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  #sweptAt = -Infinity;

  constructor(
    private readonly rate: number,
    private readonly burst: number,
  ) {}

  /** Takes one token for `id` at time `nowMs`. */
  take(id: string, nowMs: number): RateVerdict {
    let b = this.#buckets.get(id);
    if (b) {
      b.tokens = this.#refilled(b, nowMs);
      b.at = nowMs;
    } else {
      if (this.#buckets.size >= MAX_BUCKETS) this.#prune(nowMs);
      b = { tokens: this.burst, at: nowMs };
      this.#buckets.set(id, b);
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { allowed: true, retryAfterSeconds: 0 };
    }
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - b.tokens) / this.rate)) };
  }

  #refilled(b: { tokens: number; at: number }, nowMs: number): number {
    return Math.min(this.burst, b.tokens + ((nowMs - b.at) / 1000) * this.rate);
  }

  /**
   * Drops every bucket that has refilled (at most one sweep a second: under a flood of new ids a
   * sweep per request would cost 100,000 steps each); if none has, the oldest one.
   */
  #prune(nowMs: number): void {
    if (nowMs - this.#sweptAt >= 1000) {
      this.#sweptAt = nowMs;
      for (const [id, b] of this.#buckets) if (this.#refilled(b, nowMs) >= this.burst) this.#buckets.delete(id);
    }
    if (this.#buckets.size >= MAX_BUCKETS) this.#buckets.delete(this.#buckets.keys().next().value as string);
  }
}
