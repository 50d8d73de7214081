/**
 * Heavy per-request work off the event loop. Inspecting and parsing a 9 MB JSON body, then
 * canonicalizing, encrypting, hashing and base64-encoding its record, costs ~150 ms of CPU; on
 * the main thread, three such calls at once held `/healthz` for 200-450 ms (issue "Hardening":
 * no request may hold the event loop for more than a few ms per MB). Bodies and records from
 * {@link OFFLOAD_FROM_BYTES} up go to a small worker pool (piscina) that runs the very same
 * functions (worker.ts); the main thread only copies bytes in and the result out. Small bodies,
 * the hot path, stay on the main thread: a round trip to a worker costs more than the work.
 *
 * One pool per process, shared by every app in it (tests start several), opened on first use
 * and destroyed when the last app that {@link acquireOffloadPool acquired} it releases it.
 */
import fs from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import type { OffloadResult, OffloadTask } from './worker.js';

/** Bodies and records of at least this many bytes are handled in the pool. */
export const OFFLOAD_FROM_BYTES = 256 * 1024;

let pool: Piscina<OffloadTask, OffloadResult> | undefined;
let holders = 0;
const ran: Record<OffloadTask['kind'], number> = { parse: 0, seal: 0, sealLog: 0 };

/** The worker module next to this one: `.ts` when running from source (tsx), `.js` from dist. */
function workerFile(): string {
  const js = fileURLToPath(import.meta.url).replace(/pool\.[cm]?[jt]s$/, 'worker.js');
  return fs.existsSync(js) ? js : js.replace(/\.js$/, '.ts');
}

function open(): Piscina<OffloadTask, OffloadResult> {
  // Leave a core to the event loop; on 2 cores that is one worker thread.
  pool ??= new Piscina<OffloadTask, OffloadResult>({
    filename: workerFile(),
    minThreads: 0,
    maxThreads: Math.max(1, Math.min(4, os.availableParallelism() - 1)),
    idleTimeout: 30_000,
    // No queue limit of its own: the in-flight budgets (http/admission.ts) bound what can wait.
  });
  return pool;
}

/** Takes a share of the pool for an app; give it back with {@link releaseOffloadPool} on close. */
export function acquireOffloadPool(): void {
  holders++;
}

/** Gives back a share; the last one out destroys the threads. */
export async function releaseOffloadPool(): Promise<void> {
  holders = Math.max(0, holders - 1);
  if (holders > 0 || !pool) return;
  const p = pool;
  pool = undefined;
  await p.destroy();
}

/** Runs `task` in the pool. */
export async function offload<T extends OffloadTask>(task: T): Promise<Extract<OffloadResult, { kind: T['kind'] }>> {
  const result = (await open().run(task)) as Extract<OffloadResult, { kind: T['kind'] }>;
  ran[task.kind]++;
  return result;
}

/** Tasks run in the pool by this process, by kind (tests and operations). */
export function offloadStats(): Readonly<Record<OffloadTask['kind'], number>> {
  return { ...ran };
}
