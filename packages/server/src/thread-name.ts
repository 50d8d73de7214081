/**
 * Operating-system thread names, so that `top -H`, `ps -L` and `perf` tell Countersign's threads
 * apart (Node names every thread `node`; the event loop keeps that name, so `pgrep node` still
 * finds the process).
 */

/** The names of the instance's own threads: at most 15 bytes, the kernel's limit. */
export const THREAD_NAMES = { writer: 'cs-sqlite-write', checkpointer: 'cs-checkpoint', offload: 'cs-offload' } as const;

/**
 * Names the calling thread (Linux, through `/proc/thread-self/comm`; longer names are cut to 15
 * bytes). Elsewhere, or when /proc is not there, nothing happens. It imports nothing, so that the
 * store's SQLite threads, which start from source text (store/sqlite-checkpointer.ts), run this
 * same function.
 */
export function nameThisThread(name: string): void {
  try {
    process.getBuiltinModule('node:fs').writeFileSync('/proc/thread-self/comm', name.slice(0, 15));
  } catch {
    /* not Linux, or no /proc: the thread keeps its name */
  }
}
