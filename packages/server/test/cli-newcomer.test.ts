/**
 * Issue 9, "A newcomer's first ten minutes", and the CLI side of issue 8's data-dir rules, on
 * the real `countersign` command (`packages/server/bin/countersign.js`, run on the sources under
 * the development condition): `keygen master` exists and is the command the error message names;
 * a port in use is one line naming the port and how to change it; a master key made on a start
 * that then fails was printed; `projects` against no server names the URL it tried and the
 * setting; a new data dir is private whatever the umask, and a shared one is refused with exit 2
 * unless `--allow-shared-data-dir` / `COUNTERSIGN_ALLOW_SHARED_DATA_DIR=1`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseApiKey } from '@countersign/core';
import { tempDir } from './helpers/server.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const bin = path.join(repoRoot, 'packages/server/bin/countersign.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `countersign <args>` with `umask` (default 022). With `until`, the process is stopped once
 * stdout matches it (a server that started), so the result is what it printed up to then.
 */
function countersign(args: string[], o: { env?: NodeJS.ProcessEnv; umask?: string; until?: RegExp } = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, COUNTERSIGN_LOG_LEVEL: 'silent', ...o.env };
  for (const k of ['DATABASE_URL', 'COUNTERSIGN_DATABASE_URL', 'COUNTERSIGN_MASTER_KEY', 'COUNTERSIGN_URL', 'COUNTERSIGN_PORT']) {
    if (!o.env || !(k in o.env)) delete env[k];
  }
  // Through a shell only to set the umask the way a user's login shell would.
  const node = [process.execPath, '--conditions=development', '--import', 'tsx', bin, ...args];
  const proc = spawn('/bin/sh', ['-c', `umask ${o.umask ?? '022'} && exec "$@"`, 'sh', ...node], {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  proc.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
    if (o.until?.test(stdout)) proc.kill('SIGTERM');
  });
  return new Promise((resolve) => proc.on('exit', (code) => resolve({ code, stdout, stderr })));
}

const serveArgs = (dataDir: string, port = '0') => ['serve', '--port', port, '--data-dir', dataDir, '--log-level', 'silent'];
const LISTENING = /listening on http:\/\/127\.0\.0\.1:\d+/;

/** A port held by another program for the duration of `body`. */
async function withPortTaken<T>(body: (port: number) => Promise<T>): Promise<T> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await body((server.address() as net.AddressInfo).port);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('countersign keygen', () => {
  it('keygen master prints one new master key; --help lists keygen', async () => {
    const a = await countersign(['keygen', 'master']);
    const b = await countersign(['keygen', 'master']);
    assert.equal(a.code, 0, a.stderr);
    assert.match(a.stdout, /^key_master_\S+\n$/);
    assert.equal(parseApiKey(a.stdout.trim()).credentialClass, 'master');
    assert.notEqual(a.stdout, b.stdout);
    const help = await countersign(['--help']);
    assert.match(help.stdout, /^ {2}keygen <kind> +print a new key/m);
    const unknown = await countersign(['keygen', 'tsa']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown kind "tsa"; kinds: master/);
  });

  it('the command a bad COUNTERSIGN_MASTER_KEY points at exists and makes a key serve accepts', async () => {
    const refused = await countersign(serveArgs(tempDir()), { env: { COUNTERSIGN_MASTER_KEY: 'not-a-key' } });
    assert.equal(refused.code, 2);
    const named = /run `countersign (keygen master)`/.exec(refused.stderr);
    assert.ok(named, refused.stderr);
    const made = await countersign(named[1]!.split(' '));
    const key = made.stdout.trim();
    const started = await countersign(serveArgs(tempDir()), { env: { COUNTERSIGN_MASTER_KEY: key }, until: LISTENING });
    assert.match(started.stdout, LISTENING, started.stderr);
    assert.match(started.stdout, /master key from COUNTERSIGN_MASTER_KEY/);
    assert.doesNotMatch(started.stdout, /key_master_/, 'a configured key is never printed');
  });
});

describe('countersign serve: a first start that fails', () => {
  it('a port in use is one line naming the port and how to change it, and the new master key was printed', async () => {
    const dataDir = path.join(tempDir(), 'data');
    const r = await withPortTaken((port) => countersign(serveArgs(dataDir, String(port))));
    assert.equal(r.code, 2, r.stderr);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(
      lines[0]!,
      /^countersign: port \d+ on 127\.0\.0\.1 is already in use .*--port <port> or COUNTERSIGN_PORT \(with npm start: npm start -- --port \d+\)$/,
    );
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    // The key made on this failed start was printed, and is the one kept in the data dir.
    const kept = fs.readFileSync(path.join(dataDir, 'master.key'), 'utf8').trim();
    assert.match(r.stdout, new RegExp(`generated into ${dataDir}/master.key.*\\n {2}${kept}\\n`));

    // The next start (a free port) names the file, and does not print the key again.
    const again = await countersign(serveArgs(dataDir), { until: LISTENING });
    assert.match(again.stdout, new RegExp(`master key in ${dataDir}/master.key`), again.stderr);
    assert.doesNotMatch(again.stdout, /key_master_/);
  });

  it('a first start that succeeds prints the key and how to put it in $MASTER_KEY', async () => {
    const dataDir = path.join(tempDir(), 'data');
    const r = await countersign(serveArgs(dataDir), { until: /curl -s/ });
    const kept = fs.readFileSync(path.join(dataDir, 'master.key'), 'utf8').trim();
    assert.match(r.stdout, new RegExp(`master key ${kept} \\(made now`));
    assert.match(r.stdout, new RegExp(`export MASTER_KEY=\\$\\(cat ${dataDir}/master.key\\)`));
    assert.match(r.stdout, /-H "Authorization: Bearer \$MASTER_KEY"/);
  });

  it('the root npm start script passes `npm start -- --port N` on to serve', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
    // npm appends the words after `--` to the script: they must land on the serve command.
    assert.match(pkg.scripts.start, /countersign\.js serve$/);
  });
});

describe('countersign projects against no server', () => {
  it('names the URL it tried, where it came from, and --url / COUNTERSIGN_URL', async () => {
    const port = await closedPort();
    const key = ['--master-key', (await countersign(['keygen', 'master'])).stdout.trim()];
    const byFlag = await countersign(['projects', 'keys', 'prj_live_x', '--url', `http://127.0.0.1:${port}`, ...key]);
    assert.equal(byFlag.code, 1);
    assert.match(
      byFlag.stderr,
      new RegExp(`^countersign: cannot reach the Countersign server at http://127\\.0\\.0\\.1:${port} \\(from --url\\): ECONNREFUSED\\.`),
    );
    assert.match(byFlag.stderr, /--url <url> or COUNTERSIGN_URL/);
    assert.doesNotMatch(byFlag.stderr, /fetch failed/);
    const byEnv = await countersign(['projects', 'create', '--name', 'x', ...key], {
      env: { COUNTERSIGN_URL: `http://127.0.0.1:${port}` },
    });
    assert.match(byEnv.stderr, new RegExp(`at http://127\\.0\\.0\\.1:${port} \\(from COUNTERSIGN_URL\\)`));
  });
});

describe('countersign serve: data dir privacy', () => {
  it('a new data dir is 0700 with 0600 files even under umask 000', async () => {
    const dataDir = path.join(tempDir(), 'data');
    const r = await countersign(serveArgs(dataDir), { umask: '000', until: LISTENING });
    assert.match(r.stdout, LISTENING, r.stderr);
    assert.equal(fs.statSync(dataDir).mode & 0o777, 0o700);
    for (const name of fs.readdirSync(dataDir)) {
      const st = fs.statSync(path.join(dataDir, name));
      assert.equal(st.mode & 0o777, st.isDirectory() ? 0o700 : 0o600, name);
    }
  });

  it('a data dir others can read is refused with exit 2 and one line; the flag or the variable allows it', async () => {
    const dataDir = tempDir();
    fs.chmodSync(dataDir, 0o755);
    fs.writeFileSync(path.join(dataDir, 'README.txt'), 'shared on purpose');
    const refused = await countersign(serveArgs(dataDir));
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /^countersign: the data directory .* is open to its group and every user \(mode 0755\).*chmod 700/);
    assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
    assert.equal(refused.stdout, '', 'no master key made in a refused dir');

    const byFlag = await countersign([...serveArgs(dataDir), '--allow-shared-data-dir'], { until: LISTENING });
    assert.match(byFlag.stdout, LISTENING, byFlag.stderr);
    const byEnv = await countersign(serveArgs(dataDir), { env: { COUNTERSIGN_ALLOW_SHARED_DATA_DIR: '1' }, until: LISTENING });
    assert.match(byEnv.stdout, LISTENING, byEnv.stderr);
    assert.equal(fs.statSync(dataDir).mode & 0o777, 0o755);
    assert.equal(fs.statSync(path.join(dataDir, 'master.key')).mode & 0o777, 0o600);
  });
});
