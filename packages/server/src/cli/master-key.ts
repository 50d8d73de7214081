/**
 * `countersign master-key rotate [--data-dir D] [--grace SECONDS]`: rotates the master key
 * kept in the data dir without stopping the server. The current key moves to
 * `master.key.previous` with the end of its grace period, a new key is written to `master.key`
 * (each through a rename, so a reader never sees half a file) and printed once. A running
 * server reads both files again when it meets the new key, and accepts the old one until the
 * grace period ends (auth/master-keys.ts). A master key from `COUNTERSIGN_MASTER_KEY` is
 * rotated through configuration instead (docs/operations.md, "Key lifecycle").
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { generateApiKey } from '@countersign/core';
import { writePrivateFile } from '../data-dir.js';
import { formatPreviousMasterKeyFile, isMasterKey, MASTER_KEY_FILE, PREVIOUS_MASTER_KEY_FILE } from '../auth/master-keys.js';

/** Default grace period of the old master key: one day. */
export const DEFAULT_MASTER_GRACE_SECONDS = 24 * 3600;

/** What {@link rotateMasterKeyFiles} did. */
export interface MasterKeyRotation {
  /** The new master key (printed once). */
  key: string;
  /** Until when the old key is accepted (epoch ms). */
  previousUntil: number;
}

function writeAtomically(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writePrivateFile(tmp, text);
  fs.renameSync(tmp, file);
}

/**
 * Rotates the master key files of `dataDir`: the old key stays accepted for `graceSeconds`.
 * @throws Error when there is no valid `master.key` to rotate.
 */
export function rotateMasterKeyFiles(dataDir: string, graceSeconds: number, now = Date.now()): MasterKeyRotation {
  const file = path.join(dataDir, MASTER_KEY_FILE);
  let old: string;
  try {
    old = fs.readFileSync(file, 'utf8').trim();
  } catch {
    throw new Error(`no ${file} to rotate: start the server once (it makes one), or point --data-dir at its data dir`);
  }
  if (!isMasterKey(old)) throw new Error(`${file} does not hold a key_master_… key`);
  const previousUntil = now + graceSeconds * 1000;
  // The previous file first: a crash between the two writes leaves the old key current.
  writeAtomically(path.join(dataDir, PREVIOUS_MASTER_KEY_FILE), formatPreviousMasterKeyFile({ key: old, until: previousUntil }));
  const key = generateApiKey('master');
  writeAtomically(file, key + '\n');
  return { key, previousUntil };
}

/** Registers the `master-key` command group. */
export function registerMasterKey(program: Command): void {
  const group = program.command('master-key').description('manage the master key kept in the data dir');
  group
    .command('rotate')
    .description('make a new master key; the old one keeps working for --grace seconds (no restart needed)')
    .option('--data-dir <dir>', 'data dir holding master.key (COUNTERSIGN_DATA_DIR, default ./.countersign)')
    .option('--grace <seconds>', `how long the old key keeps working (default ${DEFAULT_MASTER_GRACE_SECONDS})`)
    .option('--json', 'print {masterKey, previousUntil} as JSON')
    .action((o: { dataDir?: string; grace?: string; json?: boolean }) => {
      try {
        if (process.env.COUNTERSIGN_MASTER_KEY)
          throw new Error(
            'COUNTERSIGN_MASTER_KEY is set, so the server takes its master key from configuration: make a new key with ' +
              '`countersign keygen master`, then set COUNTERSIGN_MASTER_KEY to it, COUNTERSIGN_MASTER_KEY_PREVIOUS to the old one ' +
              'and COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL to the end of the grace period, and restart the instances one by one',
          );
        const grace = o.grace === undefined ? DEFAULT_MASTER_GRACE_SECONDS : Number(o.grace);
        if (!Number.isInteger(grace) || grace < 0) throw new Error('--grace must be a whole number of seconds');
        const dataDir = path.resolve(o.dataDir ?? process.env.COUNTERSIGN_DATA_DIR ?? '.countersign');
        const r = rotateMasterKeyFiles(dataDir, grace);
        const until = new Date(r.previousUntil).toISOString();
        process.stdout.write(
          o.json
            ? JSON.stringify({ masterKey: r.key, previousUntil: until }) + '\n'
            : `new master key (shown once): ${r.key}\nthe old master key keeps working until ${until}\n`,
        );
      } catch (e) {
        process.stderr.write(`countersign: ${(e as Error).message}\n`);
        process.exit(1);
      }
    });
}
