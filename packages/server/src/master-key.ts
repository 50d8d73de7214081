/**
 * The master key: from configuration, or generated once into the data dir (mode 0600) and
 * printed by `countersign serve` when it is made (before the server listens, so a failed first
 * start still shows it) so the operator can create projects. During a master key
 * rotation the previous key is accepted too, until its grace period ends (auth/master-keys.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { generateApiKey, parseApiKey } from '@countersign/core';
import { ConfigError } from './config.js';
import { makePrivateDir, writePrivateFile } from './data-dir.js';
import { MASTER_KEY_FILE, MasterKeys, type PreviousMasterKey } from './auth/master-keys.js';

/** The key and whether it was made just now (so the CLI prints it once). */
export interface MasterKey {
  key: string;
  generated: boolean;
  /** Every master key accepted now (the current one, and a previous one in its grace period). */
  keys: MasterKeys;
}

/**
 * Reads, checks or creates the master key. `previous` (from `COUNTERSIGN_MASTER_KEY_PREVIOUS`)
 * applies to a configured key; with the data-dir file, `master.key.previous` plays that part.
 */
export function loadMasterKey(dataDir: string, configured: string | undefined, previous?: PreviousMasterKey): MasterKey {
  const made = loadCurrentMasterKey(dataDir, configured);
  if (configured) return { ...made, keys: MasterKeys.fromConfig(made.key, previous) };
  try {
    return { ...made, keys: MasterKeys.fromFiles(dataDir, made.key) };
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
}

/**
 * The master key of `<dataDir>/master.key`, made (0600) if there is none. `countersign serve`
 * calls it before building the app so that a key made now is printed even if the start then
 * fails (a port in use, a bad setting): the operator is never left with a key nobody saw.
 */
export function ensureMasterKeyFile(dataDir: string): Omit<MasterKey, 'keys'> {
  return loadCurrentMasterKey(dataDir, undefined);
}

function loadCurrentMasterKey(dataDir: string, configured: string | undefined): Omit<MasterKey, 'keys'> {
  if (configured) {
    try {
      if (parseApiKey(configured).credentialClass !== 'master') throw new Error('class');
    } catch {
      throw new ConfigError('COUNTERSIGN_MASTER_KEY must be a key_master_… key (run `countersign keygen master` to make one)');
    }
    return { key: configured, generated: false };
  }
  const file = path.join(dataDir, MASTER_KEY_FILE);
  if (fs.existsSync(file)) return { key: fs.readFileSync(file, 'utf8').trim(), generated: false };
  makePrivateDir(dataDir);
  const key = generateApiKey('master');
  writePrivateFile(file, key + '\n', 'wx');
  return { key, generated: true };
}
