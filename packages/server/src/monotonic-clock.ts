/**
 * The clock for deadlines and elapsed times: milliseconds on the process's monotonic clock.
 *
 * Why not `Date.now()`: the wall clock steps. NTP corrects it, an operator sets it, and a VM
 * resumed from a snapshot can have it set forward. A store deadline kept in wall-clock time
 * expired every write waiting at such a step: in a fifteen-minute soak at 1,000 calls/s on
 * PostgreSQL, a VM snapshot moved the wall clock ~7 s ahead of the monotonic clock and 62 calls
 * were refused with 503 `log_store_unavailable` while the store was answering in milliseconds
 * (docs/performance-log.md, fifty-fourth session). A step backwards lengthened every deadline
 * instead, and put off the SQLite writer's closing pass (the WAL's restart) until the wall clock
 * had caught up, the WAL growing meanwhile.
 *
 * Why not `performance.now()`: each thread has its own origin, and the SQLite writer's worker
 * compares deadlines made on the main thread. `process.hrtime()` reads `CLOCK_MONOTONIC`
 * (libuv's `uv_hrtime`), the same clock in every thread of the process.
 *
 * Timestamps that are stored or shown (`receivedAt`, `completedAt`, an event's `at`) stay on the
 * wall clock: they say when, not how long.
 */

/** Milliseconds (fractional) on the process's monotonic clock; comparable across its threads, meaningless across processes. */
export function monotonicMs(): number {
  const [s, ns] = process.hrtime();
  return s * 1e3 + ns / 1e6;
}
