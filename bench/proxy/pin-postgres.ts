/**
 * Keeps a local PostgreSQL server off the proxy's core for the length of a benchmark.
 *
 * The proxies under test are pinned to one core, but PostgreSQL is not ours to start: left
 * alone, the scheduler ran Countersign's writer backend on the proxy's own core 80 % of the time
 * (sampled with `ps -o psr` at 1,000 req/s on a two-core machine), so the proxy's figures
 * included the database's work and its wake-ups preempting the event loop. In production the
 * database has cores (or a machine) of its own; here it gets the load core, beside the upstream
 * and the load generator, and its CPU per call is reported on its own.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import pg from 'pg';
import { freshDatabase } from '../fresh-database.js';
import { CAN_PIN } from './children.js';

/** The mask `taskset -p` reports for `pid`, or undefined when it cannot be read. */
function maskOf(pid: number): string | undefined {
  const out = spawnSync('taskset', ['-p', String(pid)], { encoding: 'utf8' }).stdout ?? '';
  return /mask:\s*([0-9a-f]+)/i.exec(out)?.[1];
}

/** The postmaster's pid and its children's. */
function serverPids(postmaster: number): number[] {
  const children = (spawnSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' }).stdout ?? '')
    .split('\n')
    .filter(Boolean)
    .map(Number);
  return [postmaster, ...children];
}

/**
 * Pins the server of `url` (every process, and so every backend it forks from now on) to `core`
 * when it runs on this machine and `taskset` may move it; resolves with what undoes it (the
 * masks they had), or a no-op when it could not.
 */
export async function pinPostgres(url: string, core: string): Promise<{ pinned: boolean; restore: () => void }> {
  const none = { pinned: false, restore: () => undefined };
  if (!CAN_PIN) return none;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  let postmaster: number;
  try {
    const { rows } = await c.query<{ pid: number }>('select pg_backend_pid() as pid');
    const backend = rows[0]!.pid;
    // A backend of a local server is a process here (while connected), its parent the postmaster.
    if (fs.readFileSync(`/proc/${backend}/comm`, 'utf8').trim() !== 'postgres') return none;
    postmaster = Number(fs.readFileSync(`/proc/${backend}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
  } catch {
    return none;
  } finally {
    await c.end();
  }
  const original = maskOf(postmaster);
  if (!original) return none;
  const setMask = (args: string[]) => {
    for (const pid of serverPids(postmaster)) spawnSync('taskset', ['-p', ...args, String(pid)], { stdio: 'ignore' });
  };
  setMask(['-c', core]);
  if (maskOf(postmaster) !== (1 << Number(core)).toString(16)) return none;
  return { pinned: true, restore: () => setMask([original]) };
}

/**
 * A throwaway database ({@link freshDatabase}) on the server of `base`, with that server on
 * `core` when it is local ({@link pinPostgres}); `drop` removes the database and restores the
 * server's masks.
 */
export async function freshDatabaseOffCore(
  base: string,
  core: string,
): Promise<{ url: string; pinned: boolean; drop: () => Promise<void> }> {
  const db = await freshDatabase(base);
  const pin = await pinPostgres(db.url, core);
  return {
    url: db.url,
    pinned: pin.pinned,
    drop: async () => {
      await db.drop().catch(() => undefined);
      pin.restore();
    },
  };
}
