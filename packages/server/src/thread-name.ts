/**
 * Operating-system thread names, so that `top -H`, `ps -L` and `perf` tell Countersign's threads
 * apart (Node names every thread `node`). The store's SQLite threads name themselves from their
 * source text (store/sqlite-checkpointer.ts, `THREAD_NAMES`), which cannot import this module.
 */
import fs from 'node:fs';

/**
 * Names the calling thread (Linux, through `/proc/thread-self/comm`; at most 15 bytes, the
 * kernel's limit, longer names are cut). Elsewhere, or when /proc is not there, nothing happens.
 */
export function nameThisThread(name: string): void {
  try {
    fs.writeFileSync('/proc/thread-self/comm', name.slice(0, 15));
  } catch {
    /* not Linux, or no /proc: the thread keeps its name */
  }
}
