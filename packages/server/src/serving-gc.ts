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
 * 5.5-6.4 ms, p99.9 10-17 ms in the same runs (docs/performance-log.md). The cost, objects that do
 * live long being copied once more by a scavenge, did not show in CPU per call.
 *
 * Set at run time with `v8.setFlagsFromString`: V8 reads this flag at each scavenge, so it takes
 * effect from the next one (a test checks that no decision is made after it).
 */
import v8 from 'node:v8';

/** The V8 flags a serving process sets on itself at run time ({@link tuneGarbageCollectionForServing}). */
export const SERVING_V8_FLAGS: readonly string[] = ['--no-allocation-site-pretenuring'];

/**
 * The flags a serving process must be started with (`node <flags> …/countersign.js serve`):
 * V8 reads them once, when it sets up the heap, so setting them later does nothing. `npm start`,
 * deploy/systemd/countersign.service and the benchmarks pass them (a test checks the first two).
 *
 * **Memory reducer off.** After a few seconds without traffic V8's memory reducer runs full GCs
 * to shrink the heap, and leaves the old generation's limit just above what is live; the next
 * burst's ordinary growth (the code it compiles again, what outlives its scavenges) then
 * reaches that limit within seconds and starts a full GC in the middle of the burst: 40-60 ms of
 * stalls, once per burst (1,000 req/s for 7 s after 25 s idle, four times: p99.9 44-60 ms in
 * the last burst with it; without it 16 ms in one run, but 48 in another, where a full GC still
 * came from real growth and cost ~40 ms because of the helper threads below; docs/performance-log.md).
 * The cost is memory that an idle server keeps (its heap stays at the size its load needed, tens
 * of MB).
 *
 * **GC on the event loop's thread only** (`--single-threaded-gc`). An instance is meant to have
 * one core (docs/operations.md: one per core). V8's helper threads for concurrent marking and
 * parallel scavenges then take that core from the event loop in whole time slices: one marking
 * step of a full GC measured 16 ms of wall time for 64 KB of its own work, the rest being the
 * helper thread marking 12 MB meanwhile (`--trace-incremental-marking`). On the loop's thread
 * the same work is done in steps of a fraction of a millisecond between callbacks (the same
 * four bursts: p99.9 10-14 ms and max 13-18 ms in every burst, against 41-55 ms in some).
 */
export const SERVING_NODE_FLAGS: readonly string[] = ['--no-memory-reducer', '--single-threaded-gc'];

/** Applies {@link SERVING_V8_FLAGS} to this process (idempotent). */
export function tuneGarbageCollectionForServing(): void {
  for (const flag of SERVING_V8_FLAGS) v8.setFlagsFromString(flag);
}
