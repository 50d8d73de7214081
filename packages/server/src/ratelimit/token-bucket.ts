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

/** A set of token buckets, one per caller id. */
export class TokenBuckets {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly rate: number,
    private readonly burst: number,
  ) {}

  /** Takes one token for `id` at time `nowMs`. */
  take(id: string, nowMs: number): RateVerdict {
    let b = this.#buckets.get(id);
    if (b) {
      this.#buckets.delete(id); // re-insert below: Map order is then least recently used first
      b.tokens = Math.min(this.burst, b.tokens + ((nowMs - b.at) / 1000) * this.rate);
      b.at = nowMs;
    } else {
      b = { tokens: this.burst, at: nowMs };
      if (this.#buckets.size >= MAX_BUCKETS) this.#buckets.delete(this.#buckets.keys().next().value as string);
    }
    this.#buckets.set(id, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { allowed: true, retryAfterSeconds: 0 };
    }
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - b.tokens) / this.rate)) };
  }
}
