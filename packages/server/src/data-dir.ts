/**
 * The data directory holds the master key, the SQLite database (every sealed payload, every
 * key hash) and the embedded TSA's and ledger's private keys, so it is private to the user the
 * server runs as: created 0700, every file written 0600, whatever the umask (modes are set
 * explicitly after creation, since a umask can only take bits away from what `open` asks for).
 *
 * At start a data dir that group or others can read, write or enter is refused unless the
 * operator says sharing it is intended (`--allow-shared-data-dir`,
 * `COUNTERSIGN_ALLOW_SHARED_DATA_DIR=1`), with one exception: a dir in the mode an earlier
 * Countersign created it (0755 or 0775: mkdir under the usual umask) holding only what
 * Countersign puts there is tightened to 0700 once, and the caller is told so it can say it.
 * Countersign's own files in it (database, WAL, lock, master key, witness material) are made
 * 0600 at every start; allowing a shared dir never loosens them.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from './config.js';

/** Mode of the data dir and of every directory Countersign makes in it. */
export const PRIVATE_DIR_MODE = 0o700;
/** Mode of every file Countersign writes into the data dir. */
export const PRIVATE_FILE_MODE = 0o600;

/** Modes an earlier Countersign gave the data dir (`mkdir` under umask 022 or 002). */
const EARLIER_DEFAULT_MODES = new Set([0o755, 0o775]);
/** Files and folders Countersign keeps in the data dir. */
const OWN_FILE = /^(countersign\.(db|lock)(-wal|-shm|-journal)?|master\.key(\.previous)?)$/;
const OWN_FOLDER = /^(tsa|ledger)$/;
/** Anything Countersign may also leave behind: a temporary file of an interrupted atomic write. */
const OWN_LEFTOVER = /\.\d+\.tmp$/;

// Modes mean nothing on Windows (and Node reports made-up ones): the checks are POSIX only.
const POSIX = process.platform !== 'win32';

/** What {@link prepareDataDir} did. */
export interface PreparedDataDir {
  /** True when the dir did not exist and was made. */
  created: boolean;
  /** The mode the dir had when it was tightened to 0700 (an earlier version's default), if it was. */
  tightenedFrom?: number;
}

const octal = (mode: number): string => '0' + (mode & 0o777).toString(8);

function who(mode: number): string {
  const g = mode & 0o070 ? 'its group' : '';
  const o = mode & 0o007 ? 'every user' : '';
  return [g, o].filter(Boolean).join(' and ');
}

/**
 * Makes `dir` (and missing parents) owner-only, 0700. An existing directory is left as it is
 * (its mode is {@link prepareDataDir}'s business). Returns true when it made `dir`.
 */
export function makePrivateDir(dir: string): boolean {
  if (fs.existsSync(dir)) return false;
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  if (POSIX) fs.chmodSync(dir, PRIVATE_DIR_MODE);
  return true;
}

/** Makes `file` exist with mode 0600 before another library (SQLite) opens it, or restricts it if it exists. */
export function ensurePrivateFile(file: string): void {
  const fd = fs.openSync(file, 'a', PRIVATE_FILE_MODE);
  try {
    if (POSIX) fs.fchmodSync(fd, PRIVATE_FILE_MODE);
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes `text` to `file` with mode 0600 whatever the umask (`flag` as for `fs.writeFileSync`). */
export function writePrivateFile(file: string, text: string, flag = 'w'): void {
  fs.writeFileSync(file, text, { mode: PRIVATE_FILE_MODE, flag });
  if (POSIX) fs.chmodSync(file, PRIVATE_FILE_MODE);
}

/** Takes group/other bits off `file` when it exists and is ours; anything else is left alone. */
export function restrictIfPresent(file: string, mode: number = PRIVATE_FILE_MODE): void {
  if (!POSIX) return;
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch {
    return;
  }
  if (st.isSymbolicLink() || st.uid !== process.getuid!() || (st.mode & 0o077) === 0) return;
  fs.chmodSync(file, mode);
}

/** Countersign's own files in `dir` (and its witness folders), made 0600 / 0700. */
function restrictOwnFiles(dir: string): void {
  for (const name of fs.readdirSync(dir)) {
    const p = path.join(dir, name);
    if (OWN_FILE.test(name)) restrictIfPresent(p);
    else if (OWN_FOLDER.test(name) && fs.statSync(p).isDirectory()) {
      restrictIfPresent(p, PRIVATE_DIR_MODE);
      for (const inner of fs.readdirSync(p)) if (/\.(pem|json)$/.test(inner)) restrictIfPresent(path.join(p, inner));
    }
  }
}

/** True when `dir` holds what an earlier Countersign made there and nothing else. */
function onlyCountersignInside(dir: string): boolean {
  const names = fs.readdirSync(dir);
  const own = (n: string) => OWN_FILE.test(n) || OWN_FOLDER.test(n) || OWN_LEFTOVER.test(n);
  return names.some((n) => n === 'master.key' || n === 'countersign.db') && names.every(own);
}

/**
 * Makes the data dir ready: creates it 0700, or checks an existing one is private.
 * @param allowShared start even when group or others can reach the dir (the operator said so).
 * @throws ConfigError when `dir` is not a directory, or is open to group or others without `allowShared`.
 */
export function prepareDataDir(dir: string, allowShared: boolean): PreparedDataDir {
  if (makePrivateDir(dir)) return { created: true };
  const st = fs.statSync(dir);
  if (!st.isDirectory()) throw new ConfigError(`the data directory ${dir} exists but is not a directory`);
  if (!POSIX) return { created: false };
  const mode = st.mode & 0o777;
  const ours = st.uid === process.getuid!();
  let tightenedFrom: number | undefined;
  if (mode & 0o077 && !allowShared) {
    if (!(ours && EARLIER_DEFAULT_MODES.has(mode) && onlyCountersignInside(dir))) {
      throw new ConfigError(
        `the data directory ${dir} is open to ${who(mode)} (mode ${octal(mode)}), and it holds the master key, the database ` +
          `and the signing keys: make it private with \`chmod 700 ${dir}\`, or, if sharing it is intended, start with ` +
          '--allow-shared-data-dir (COUNTERSIGN_ALLOW_SHARED_DATA_DIR=1)',
      );
    }
    fs.chmodSync(dir, PRIVATE_DIR_MODE);
    tightenedFrom = mode;
  }
  if (ours) restrictOwnFiles(dir);
  return tightenedFrom === undefined ? { created: false } : { created: false, tightenedFrom };
}

/** A log line for what {@link prepareDataDir} did, when it did something worth saying. */
export function describePreparedDataDir(dir: string, prepared: PreparedDataDir): string | undefined {
  if (prepared.tightenedFrom === undefined) return undefined;
  return `the data directory ${dir} was mode ${octal(prepared.tightenedFrom)}, as an earlier Countersign made it; it is now 0700 (owner only)`;
}
