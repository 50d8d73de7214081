/**
 * V8 settings of a serving process (`countersign serve`), set before the app is built.
 *
 * **Allocation-site pretenuring off.** V8 watches where objects are allocated and, when nearly
 * all of one site's objects outlive a scavenge, allocates that site's later objects straight in
 * the old generation. While the server starts (and in any burst) nearly everything survives, so
 * sites of the per-call path were tenured (53 decisions in 15 s at 1,000 req/s on PostgreSQL,
 * `--trace-pretenuring-statistics`), and from then on each call's short-lived records went to
 * the old generation: ~0.5 MB per scavenge, a full GC every 2-5 s, each stalling the event loop
 * for 40-60 ms on a busy core (the tail benchmark's p99 13-29 ms, p99.9 48-75 ms). With the
 * decisions off, a scavenge promotes ~nothing and a full GC comes only from real growth: p99
 * 5.5-6.4 ms, p99.9 10-17 ms in the same runs (docs/performance.md). The cost, objects that do
 * live long being copied once more by a scavenge, did not show in CPU per call.
 *
 * Set at run time with `v8.setFlagsFromString`: V8 reads this flag at each scavenge, so it takes
 * effect from the next one (a test checks that no decision is made after it).
 */
import v8 from 'node:v8';

/** The V8 flags a serving process runs with. */
export const SERVING_V8_FLAGS: readonly string[] = ['--no-allocation-site-pretenuring'];

/** Applies {@link SERVING_V8_FLAGS} to this process (idempotent). */
export function tuneGarbageCollectionForServing(): void {
  for (const flag of SERVING_V8_FLAGS) v8.setFlagsFromString(flag);
}
