/**
 * Write-ahead under `kill -9`: a real `countersign serve` process proxies a steady mix of quick
 * answers, slow SSE streams and streams that never end, through `POST /v1/proxy` and forward mode
 * in turn, and is SIGKILLed at an arbitrary moment, twice. After a restart, every request the
 * upstream received must have its record, with the body it was sent: finished exchanges
 * `complete`, the rest `interrupted` (none left `pending`), and every answer a caller saw end must
 * belong to a `complete` record.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { generateApiKey } from '@countersign/core';
import { STORES, freshPostgresDatabase, startApp, tempDir } from './helpers/server.js';
import { decryptRecord, startUpstream, type Upstream } from './helpers/upstreams.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, '..', 'src', 'cli', 'index.ts');
const ENC = 'crash-suite-key';

interface Child {
  proc: ChildProcess;
  url: string;
}

async function startChild(dataDir: string, databaseUrl: string | undefined, masterKey: string, up: Upstream): Promise<Child> {
  const env: NodeJS.ProcessEnv = { ...process.env, COUNTERSIGN_MASTER_KEY: masterKey, COUNTERSIGN_LOG_LEVEL: 'silent' };
  delete env.DATABASE_URL;
  delete env.COUNTERSIGN_DATABASE_URL;
  const args = ['--conditions=development', '--import', 'tsx', cli, 'serve', '--port', '0', '--data-dir', dataDir];
  args.push('--roles', 'ingest,management', '--allow-targets', up.hostPort, '--log-level', 'silent');
  if (databaseUrl) args.push('--database-url', databaseUrl);
  const proc = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    proc.on('exit', (code) => reject(new Error(`countersign serve exited with ${code}: ${err || out}`)));
  });
  return { proc, url };
}

function killHard(child: Child): Promise<void> {
  return new Promise((resolve) => {
    child.proc.once('exit', () => resolve());
    child.proc.kill('SIGKILL');
  });
}

/** Sends a steady mix of calls until `stop` resolves; returns the sequence numbers whose answer ended normally. */
async function load(url: string, apiKey: string, up: Upstream, next: () => number, stop: Promise<void>): Promise<Set<number>> {
  const finished = new Set<number>();
  const dispatcher = new Agent({ connections: 32 });
  let stopped = false;
  void stop.then(() => (stopped = true));
  const targets = ['/status/200', '/echo', '/sse?n=20&delay=5', '/big?bytes=300000'];
  const send = async (n: number, target: string) => {
    try {
      // Every other call through forward mode, whose body of declared length is read ahead: its
      // write-ahead record holds that body, as /v1/proxy's holds the payload.
      const r =
        n % 2 === 0
          ? await request(url + '/v1/proxy', {
              dispatcher,
              method: 'POST',
              headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': ENC },
              body: JSON.stringify({ target: up.url + target, payload: { n } }),
            })
          : await request(url + '/v1/forward' + target, {
              dispatcher,
              method: 'POST',
              headers: {
                'x-service-key': apiKey,
                'x-service-target-base': up.url,
                'content-type': 'application/json',
                'x-service-encryption-key': ENC,
              },
              body: JSON.stringify({ n }),
            });
      await r.body.arrayBuffer();
      if (r.statusCode === 200) finished.add(n);
    } catch {
      // The server was killed under us; expected.
    }
  };
  const worker = async (w: number) => {
    // Two workers hold streams that never end (open until the kill); the rest loop over finite answers.
    if (w < 2) return send(next(), '/sse-hang?n=1');
    while (!stopped) {
      const n = next();
      await send(n, targets[(n + w) % targets.length]!);
    }
  };
  await Promise.all(Array.from({ length: 12 }, (_, w) => worker(w)));
  await dispatcher.destroy().catch(() => undefined);
  return finished;
}

for (const store of STORES) {
  test(`kill -9 mid-stream: every request the upstream received has its record, none left pending (${store})`, async () => {
    const up = await startUpstream();
    const dataDir = tempDir();
    const databaseUrl = store === 'postgres' ? await freshPostgresDatabase() : undefined;
    const masterKey = generateApiKey('master');
    let seq = 0;
    const finished = new Set<number>();
    let projectId = '';
    let apiKey = '';
    try {
      for (let round = 0; round < 2; round++) {
        const child = await startChild(dataDir, databaseUrl, masterKey, up);
        if (round === 0) {
          const created = await request(child.url + '/v1/projects', {
            method: 'POST',
            headers: { authorization: `Bearer ${masterKey}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name: 'crash', credentialClass: 'agent' }),
          });
          const body = (await created.body.json()) as { project: { id: string; apiKey: string } };
          ({ id: projectId, apiKey } = body.project);
        }
        const before = up.requests.length;
        // Kill at an arbitrary moment once the upstream is busy (some answers done, streams open).
        const killed = (async () => {
          while (up.requests.length < before + 40 + Math.floor(Math.random() * 60)) await new Promise((r) => setTimeout(r, 5));
          await killHard(child);
        })();
        for (const n of await load(child.url, apiKey, up, () => seq++, killed)) finished.add(n);
        await killed;
      }

      const restarted = await startApp({ store, dataDir, databaseUrl, config: { masterKey } });
      try {
        const rows = await restarted.app.ctx.store.logs.list(projectId, {}, 100000);
        const byN = new Map<number, (typeof rows)[number]>();
        let forwarded = 0;
        for (const row of rows) {
          const payload = (await decryptRecord(row.payload, ENC, row.id)) as { via: string; request: { body: { n: number } } };
          byN.set(payload.request.body.n, row);
          if (payload.via === 'forward') forwarded++;
        }
        // A request cut while its body was still arriving never reached the upstream's handler.
        const received = up.requests.filter((r) => r.body !== '').map((r) => (JSON.parse(r.body) as { n: number }).n);
        assert.ok(received.length >= 80, `the upstream received ${received.length} requests`);
        const statuses: Record<string, number> = {};
        for (const n of received) {
          const row = byN.get(n);
          assert.ok(row, `request ${n} reached the upstream but has no record`);
          statuses[row.status] = (statuses[row.status] ?? 0) + 1;
          assert.notEqual(row.status, 'pending', `record of request ${n} is still pending after the restart`);
        }
        for (const n of finished) {
          assert.equal(byN.get(n)?.status, 'complete', `request ${n} ended normally for its caller, so its record is complete`);
        }
        assert.ok(forwarded > 0, 'some records are of forward-mode calls');
        assert.ok((statuses.complete ?? 0) > 0, 'some exchanges finished before the kills');
        assert.ok((statuses.interrupted ?? 0) > 0, 'some exchanges were cut by the kills');
      } finally {
        await restarted.close();
      }
    } finally {
      await up.close();
    }
  });
}
