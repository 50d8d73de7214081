/**
 * The names of the store's `node:diagnostics_channel` channels, in a module of their own with no
 * imports, so that a profiler preloaded into the process (the tail benchmark's stall log) can
 * subscribe without loading the store. What each carries: {@link CHECKPOINT_CHANNEL} in
 * sqlite-checkpointer.ts (`CheckpointEvent`), {@link STORE_BATCH_CHANNEL} in log-writer.ts
 * (`BatchEvent`). Nothing is published while nobody subscribes.
 */

/** Every SQLite checkpoint that copied frames (the tail benchmark lays them beside slow requests). */
export const CHECKPOINT_CHANNEL = 'countersign:sqlite-checkpoint';

/** Every batch the hot-path writer settled: its queue, the backend's time, its rows. */
export const STORE_BATCH_CHANNEL = 'countersign:store-batch';
