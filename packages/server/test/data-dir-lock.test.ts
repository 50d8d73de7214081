/**
 * One process per SQLite data directory: a second store on the same directory is refused with a
 * clear error (in this process or from `countersign serve`), the lock goes with a closed store,
 * and a killed process leaves no stale lock (proxy-crash.test.ts restarts after SIGKILL too).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store } from '../src/store/index.js';
import { DataDirInUseError } from '../src/store/data-dir-lock.js';
import { tempDir } from './helpers/server.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, '..', 'src', 'cli', 'index.ts');

function serve(dataDir: string): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, COUNTERSIGN_LOG_LEVEL: 'silent' };
  delete env.DATABASE_URL;
  const proc = spawn(
    process.execPath,
    ['--conditions=development', '--import', 'tsx', cli, 'serve', '--port', '0', '--data-dir', dataDir, '--log-level', 'silent'],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  let stdout = '';
  proc.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  proc.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
    if (stdout.includes('listening on')) proc.kill('SIGKILL');
  });
  return new Promise((resolve) => proc.on('exit', (code) => resolve({ code, stderr, stdout })));
}

test('a second store on the same SQLite data directory is refused until the first closes', async () => {
  const dataDir = tempDir();
  const first = await Store.open({ dataDir });
  try {
    await assert.rejects(Store.open({ dataDir }), (e: unknown) => {
      assert.ok(e instanceof DataDirInUseError);
      assert.equal(e.code, 'data_dir_in_use');
      assert.match(e.message, /in use by another Countersign process/);
      return true;
    });
    // The refused attempt left nothing behind: the first store still writes.
    assert.equal(await first.ping(), true);
  } finally {
    await first.close();
  }
  const again = await Store.open({ dataDir });
  await again.close();
});

test('countersign serve on a data directory in use exits 2 with the reason; once it is free it starts', async () => {
  const dataDir = tempDir();
  const held = await Store.open({ dataDir });
  let refused;
  try {
    refused = await serve(dataDir);
  } finally {
    await held.close();
  }
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(refused.stderr, /^countersign: the data directory .* is in use by another Countersign process/m);
  // Free now: the same command starts (and is then killed hard, which frees the lock again).
  const started = await serve(dataDir);
  assert.match(started.stdout, /listening on/, started.stderr);
  const after = await Store.open({ dataDir });
  await after.close();
});
