/**
 * One process per SQLite data directory. Two `countersign serve` processes on one directory
 * would each take the other's live exchanges for orphans (instances.ts treats every other id as
 * gone on SQLite) and each run a proof sealer; the second one is refused at start instead.
 *
 * The lock is an exclusive SQLite lock on `<dataDir>/countersign.lock`, held by a connection in
 * EXCLUSIVE locking mode for the life of the process. It is an OS file lock, so the kernel
 * releases it when the process exits in any way (`kill -9` included): no stale lock files, no
 * pid guessing. A second connection, in this process or another, cannot even read the file.
 */
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';

/** The data directory is held by another running process (or another open store here). */
export class DataDirInUseError extends Error {
  /** Stable code for callers that print it. */
  readonly code = 'data_dir_in_use';
  constructor(readonly dataDir: string) {
    super(
      `the data directory ${dataDir} is in use by another Countersign process; stop that one, or give this one its own --data-dir (or share a PostgreSQL database with --database-url)`,
    );
    this.name = 'DataDirInUseError';
  }
}

/** Takes the data directory's lock; returns the handle whose `close()` releases it. */
export function lockDataDir(dataDir: string): BetterSqlite3.Database {
  const lock = new BetterSqlite3(path.join(dataDir, 'countersign.lock'), { timeout: 0 });
  try {
    lock.pragma('locking_mode = EXCLUSIVE');
    // The first write takes the exclusive lock; in EXCLUSIVE mode it is never given back.
    lock.exec('create table if not exists holder (pid integer); delete from holder;');
    lock.prepare('insert into holder (pid) values (?)').run(process.pid);
    return lock;
  } catch (e) {
    lock.close();
    if ((e as { code?: string }).code?.startsWith('SQLITE_BUSY')) throw new DataDirInUseError(dataDir);
    throw e;
  }
}
