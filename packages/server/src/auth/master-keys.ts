/**
 * The master keys a server accepts: the current one and, during a master key rotation, the
 * previous one until its grace period ends, so operators and scripts switch over without a
 * moment in which no key works.
 *
 * Two sources (decided at start, see ../master-key.ts):
 * - configuration: `COUNTERSIGN_MASTER_KEY`, plus `COUNTERSIGN_MASTER_KEY_PREVIOUS` and
 *   `COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL`; a fleet rotates by a rolling restart;
 * - files in the data dir: `master.key` and `master.key.previous` (the old key on its first
 *   line, the ISO 8601 end of its grace period on the second), written by
 *   `countersign master-key rotate`. A running server reads them again when it meets a master
 *   key it does not know (at most once a second), so a rotation needs no restart.
 */
import fs from 'node:fs';
import path from 'node:path';
import { hashApiKey, parseApiKey } from '@countersign/core';

/** Name of the file that holds the current master key in the data dir. */
export const MASTER_KEY_FILE = 'master.key';
/** Name of the file that holds the previous master key and the end of its grace period. */
export const PREVIOUS_MASTER_KEY_FILE = 'master.key.previous';

/** A previous master key and when it stops being accepted (undefined: until removed). */
export interface PreviousMasterKey {
  key: string;
  until: number | undefined;
}

/** What {@link MasterKeys.check} found. */
export type MasterKeyMatch = 'current' | 'previous' | 'expired' | 'unknown';

/** True when `key` is a well-formed `key_master_…` key. */
export function isMasterKey(key: string): boolean {
  try {
    return parseApiKey(key).credentialClass === 'master';
  } catch {
    return false;
  }
}

/**
 * Parses the text of `master.key.previous`.
 * @throws Error naming what is wrong.
 */
export function parsePreviousMasterKeyFile(text: string): PreviousMasterKey {
  const [key = '', until = ''] = text.split('\n').map((l) => l.trim());
  if (!isMasterKey(key)) throw new Error('its first line must be a key_master_… key');
  if (until === '') return { key, until: undefined };
  const t = Date.parse(until);
  if (Number.isNaN(t)) throw new Error(`its second line must be an ISO 8601 time, got "${until}"`);
  return { key, until: t };
}

/** The text of `master.key.previous` for `previous`. */
export function formatPreviousMasterKeyFile(previous: PreviousMasterKey): string {
  return previous.key + '\n' + (previous.until === undefined ? '' : new Date(previous.until).toISOString() + '\n');
}

const RELOAD_INTERVAL_MS = 1000;

/** The accepted master keys (hashes only are kept, as for project keys). */
export class MasterKeys {
  #current: string;
  #currentHash: string;
  #previous: { hash: string; until: number | undefined } | undefined;
  readonly #dir: string | undefined;
  #nextReload = 0;

  private constructor(current: string, previous: PreviousMasterKey | undefined, dir: string | undefined) {
    this.#current = current;
    this.#currentHash = hashApiKey(current);
    this.#previous = previous && { hash: hashApiKey(previous.key), until: previous.until };
    this.#dir = dir;
  }

  /** Keys from configuration (fixed for the life of the process). */
  static fromConfig(current: string, previous?: PreviousMasterKey): MasterKeys {
    return new MasterKeys(current, previous, undefined);
  }

  /**
   * Keys from the files in `dir` (`current` was just read from `master.key`); they are read
   * again on a miss.
   * @throws Error when `master.key.previous` exists but is malformed.
   */
  static fromFiles(dir: string, current: string): MasterKeys {
    return new MasterKeys(current, readPrevious(dir), dir);
  }

  /** The current master key text. */
  get current(): string {
    return this.#current;
  }

  /** The previous key's end of grace (epoch ms), `null` when it has none, undefined when there is no previous key. */
  get previousUntil(): number | null | undefined {
    return this.#previous ? (this.#previous.until ?? null) : undefined;
  }

  /** Whether `keyHash` is an accepted master key at `now`. */
  check(keyHash: string, now: number): MasterKeyMatch {
    const first = this.#match(keyHash, now);
    if (first === 'current' || first === 'previous' || this.#dir === undefined) return first;
    // A key we do not know may be the new one of a rotation made while we run: read the files.
    const t = performance.now();
    if (t < this.#nextReload) return first;
    this.#nextReload = t + RELOAD_INTERVAL_MS;
    this.#reload();
    return this.#match(keyHash, now);
  }

  #match(keyHash: string, now: number): MasterKeyMatch {
    if (keyHash === this.#currentHash) return 'current';
    const p = this.#previous;
    if (p && keyHash === p.hash) return p.until === undefined || now < p.until ? 'previous' : 'expired';
    return 'unknown';
  }

  #reload(): void {
    try {
      const current = fs.readFileSync(path.join(this.#dir!, MASTER_KEY_FILE), 'utf8').trim();
      if (!isMasterKey(current)) return;
      const previous = readPrevious(this.#dir!);
      this.#current = current;
      this.#currentHash = hashApiKey(current);
      this.#previous = previous && { hash: hashApiKey(previous.key), until: previous.until };
    } catch {
      // A half-made rotation or a missing file: keep what was working.
    }
  }
}

function readPrevious(dir: string): PreviousMasterKey | undefined {
  const file = path.join(dir, PREVIOUS_MASTER_KEY_FILE);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    return parsePreviousMasterKeyFile(text);
  } catch (e) {
    throw new Error(`${file}: ${(e as Error).message}`);
  }
}
