/**
 * The master key: from configuration, or generated once into the data dir (mode 0600) and
 * printed once at first start so the operator can create projects.
 */
import fs from 'node:fs';
import path from 'node:path';
import { generateApiKey, parseApiKey } from '@countersign/core';
import { ConfigError } from './config.js';

/** The key and whether it was made just now (so the CLI prints it once). */
export interface MasterKey {
  key: string;
  generated: boolean;
}

/** Reads, checks or creates the master key. */
export function loadMasterKey(dataDir: string, configured: string | undefined): MasterKey {
  if (configured) {
    try {
      if (parseApiKey(configured).credentialClass !== 'master') throw new Error('class');
    } catch {
      throw new ConfigError('COUNTERSIGN_MASTER_KEY must be a key_master_… key (run `countersign keygen master` to make one)');
    }
    return { key: configured, generated: false };
  }
  const file = path.join(dataDir, 'master.key');
  if (fs.existsSync(file)) return { key: fs.readFileSync(file, 'utf8').trim(), generated: false };
  fs.mkdirSync(dataDir, { recursive: true });
  const key = generateApiKey('master');
  fs.writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' });
  return { key, generated: true };
}
