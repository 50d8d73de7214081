/**
 * Real upstream HTTP servers on 127.0.0.1 for the proxy suites and the proxy benchmark: JSON
 * echo, SSE (free-running or stepped by the test), multi-megabyte and binary bodies, slow,
 * stalling, resetting and redirecting answers. Every request is recorded as it arrives (with
 * whether the connection closed before the answer ended), so a test can say exactly what the
 * destination saw. Plus the small helpers the proxy suites share (projects, keys, decryption).
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { request } from 'undici';
import { deriveEnvelopeKey, openPayload, type Envelope } from '@countersign/core';
import { issueKey, newProject, type ProjectKeyClass } from '../../src/projects/issue.js';

/** One request as the upstream received it. */
export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** The proxy side's port of the connection (same port = same pooled connection). */
  remotePort: number;
  /** Raw header names as sent (case kept). */
  rawHeaderNames: string[];
  body: string;
  /** True when the connection closed before the upstream finished its answer. */
  closedEarly: boolean;
  /** Resolves when the connection or the answer ends. */
  ended: Promise<void>;
}

/** A running upstream. */
export interface Upstream {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** `127.0.0.1:<port>`, for allowTargets. */
  hostPort: string;
  port: number;
  requests: ReceivedRequest[];
  /** Releases the next event of every `/sse-step` stream waiting for it (`late=1`: the first one too). */
  step: () => void;
  close: () => Promise<void>;
}

/** The `/json` answer: a 1 KB JSON document shaped like a small completion (the proxy benchmark's answer). */
export const JSON_1K = Buffer.from(
  JSON.stringify({
    id: 'cmpl-1',
    object: 'chat.completion',
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(880) } }],
  }),
);

const BIG_CHUNK = Buffer.alloc(64 * 1024, 'abcdefghijklmnopqrstuvwxyz0123456789');

/** Bytes of `/big?bytes=N`: the pattern above repeated, so a test can recompute its hash. */
export function bigBody(bytes: number): Buffer {
  const out = Buffer.alloc(bytes);
  for (let o = 0; o < bytes; o += BIG_CHUNK.length) BIG_CHUNK.copy(out, o, 0, Math.min(BIG_CHUNK.length, bytes - o));
  return out;
}

/**
 * Writes `eventAt(0)`, `eventAt(1)`, … one per turn of the event loop (or one every `delayMs`), as a
 * destination that produces its events one by one does, and ends the answer at the first undefined.
 * With `restTogether` the events after the first go out in one write on the next turn: a benchmark
 * timing the first event asks for that, so that a burst of writes by a destination sharing the
 * caller's core does not hold the caller back while the first event is on its way
 * (docs/performance.md, "Where the SSE first-event overhead goes").
 */
function writePaced(
  res: http.ServerResponse,
  eventAt: (i: number) => string | undefined,
  { delayMs = 0, restTogether = false }: { delayMs?: number; restTogether?: boolean } = {},
): void {
  let i = 0;
  const next = () => {
    if (res.destroyed) return;
    let text = eventAt(i++);
    if (text === undefined) return void res.end();
    if (restTogether && i > 1) for (let more = eventAt(i); more !== undefined; more = eventAt(++i)) text += more;
    res.write(text);
    if (delayMs > 0) setTimeout(next, delayMs);
    else setImmediate(next);
  };
  next();
}

/**
 * Starts the upstream. Routes (any method):
 * `/echo` JSON of what arrived · `/json` a fixed 1 KB JSON answer · `/status/<n>` that status with a JSON body · `/redirect` 302 to
 * the metadata address · `/sse?n=&delay=&rest=together` n events · `/llm-stream/chat/completions?n=` an OpenAI
 * chat stream of n content chunks · `/sse-step?n=` one event per `step()` ·
 * `/sse-hang?n=` n events then silence · `/big?bytes=` a streamed body · `/binary` 256 bytes ·
 * `/text` plain text · `/hop` hop-by-hop and secret response headers · `/no-answer` never answers ·
 * `/stall` headers and one chunk, then silence · `/reset` destroys the socket · `/reset-mid`
 * headers, one chunk, then destroys.
 */
export async function startUpstream(options: { record?: boolean } = {}): Promise<Upstream> {
  const keep = options.record ?? true;
  const requests: ReceivedRequest[] = [];
  let stepWaiters: Array<() => void> = [];
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let resolveEnded!: () => void;
    const record: ReceivedRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      remotePort: req.socket.remotePort ?? 0,
      rawHeaderNames: req.rawHeaders.filter((_, i) => i % 2 === 0),
      body: '',
      closedEarly: false,
      ended: new Promise((r) => (resolveEnded = r)),
    };
    if (keep) requests.push(record);
    res.on('close', () => {
      if (!res.writableFinished) record.closedEarly = true;
      resolveEnded();
    });
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      record.body = Buffer.concat(chunks).toString('utf8');
      route(req, res, record);
    });
  });
  const route = (req: http.IncomingMessage, res: http.ServerResponse, record: ReceivedRequest) => {
    const u = new URL(req.url ?? '/', 'http://x');
    const n = Number(u.searchParams.get('n') ?? '3');
    switch (u.pathname) {
      case '/echo': {
        const body = JSON.stringify({ method: record.method, url: record.url, headers: record.headers, body: record.body });
        res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'echo' });
        res.end(req.method === 'HEAD' ? undefined : body);
        return;
      }
      case '/json':
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(JSON_1K.length) });
        res.end(JSON_1K);
        return;
      case '/redirect':
        res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/', 'content-type': 'text/plain' });
        res.end('moved');
        return;
      case '/sse': {
        const delayMs = Number(u.searchParams.get('delay') ?? '0');
        const restTogether = u.searchParams.get('rest') === 'together';
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        writePaced(res, (i) => (i < n ? `id: ${i}\nevent: tick\ndata: {"i":${i}}\n\n` : undefined), { delayMs, restTogether });
        return;
      }
      case '/llm-stream/chat/completions': {
        // An OpenAI chat.completions stream: n content chunks, a last one with the finish reason
        // and usage, then [DONE]; each chunk ~230 bytes, as the real API sends them.
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
        const head =
          '{"id":"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012","object":"chat.completion.chunk","created":1732800000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,';
        const finish = `"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":${n},"total_tokens":${n + 12}}}`;
        writePaced(res, (i) => {
          if (i < n) return `data: ${head}"delta":{"content":" token${i}"},"logprobs":null,"finish_reason":null}]}\n\n`;
          if (i === n) return `data: ${head}${finish}\n\n`;
          return i === n + 1 ? 'data: [DONE]\n\n' : undefined;
        });
        return;
      }
      case '/sse-step': {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        let i = 0;
        const next = () => {
          if (res.destroyed) return;
          if (i >= n) return void res.end();
          res.write(`data: step ${i}\n\n`);
          i++;
          stepWaiters.push(next);
        };
        // late=1: the status line goes out alone and even the first event waits for a step().
        if (u.searchParams.get('late') === '1') {
          res.flushHeaders();
          stepWaiters.push(next);
        } else next();
        return;
      }
      case '/sse-hang': {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let i = 0; i < n; i++) res.write(`data: hang ${i}\n\n`);
        return; // never ends
      }
      case '/big': {
        const total = Number(u.searchParams.get('bytes') ?? String(1024 * 1024));
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
        let sent = 0;
        const pump = () => {
          while (sent < total) {
            const piece = BIG_CHUNK.subarray(0, Math.min(BIG_CHUNK.length, total - sent));
            sent += piece.length;
            if (!res.write(piece)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
        return;
      }
      case '/binary': {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(Buffer.from(Array.from({ length: 256 }, (_, i) => i)));
        return;
      }
      case '/text':
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('plain text answer ✓');
        return;
      case '/hop':
        res.writeHead(200, {
          'content-type': 'application/json',
          connection: 'keep-alive, x-hop-named',
          'keep-alive': 'timeout=5',
          'x-hop-named': 'drop me',
          'x-kept': 'keep me',
          'set-cookie': ['session=upstream-cookie-secret; HttpOnly', 'b=2'],
        });
        res.end('{"ok":true}');
        return;
      case '/no-answer':
        return; // headers never come
      case '/stall':
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('first chunk then silence');
        return;
      case '/reset':
        req.socket.destroy();
        return;
      case '/reset-mid':
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('half an answer');
        setTimeout(() => req.socket.destroy(), 20);
        return;
      default: {
        const m = /^\/status\/(\d{3})$/.exec(u.pathname);
        if (m) {
          res.writeHead(Number(m[1]), { 'content-type': 'application/json' });
          res.end(JSON.stringify({ status: Number(m[1]) }));
          return;
        }
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('no such upstream route');
      }
    }
  };
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    hostPort: `127.0.0.1:${port}`,
    port,
    requests,
    step: () => {
      const w = stepWaiters;
      stepWaiters = [];
      w.forEach((f) => f());
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A TCP server that accepts and never speaks: an https target on it never finishes connecting. */
export async function startSilentServer(): Promise<{ port: number; hostPort: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    hostPort: `127.0.0.1:${port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A loopback port with nothing listening (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** A project with one key of `credentialClass`, made directly in the store (the routes' own issuing rules). */
export async function makeProjectKey(
  app: FastifyInstance,
  credentialClass: ProjectKeyClass = 'agent',
): Promise<{ projectId: string; apiKey: string; keyId: string }> {
  const now = Date.now();
  const project = newProject('proxy test', now);
  const key = issueKey(project.id, credentialClass, null, now);
  await app.ctx.store.projects.createWithKey(project, key.row);
  return { projectId: project.id, apiKey: key.apiKey, keyId: key.row.id };
}

/** Adds another key of `credentialClass` to a project. */
export async function addKey(app: FastifyInstance, projectId: string, credentialClass: ProjectKeyClass): Promise<string> {
  const key = issueKey(projectId, credentialClass, null, Date.now());
  await app.ctx.store.projects.addKey(key.row);
  return key.apiKey;
}

/** Opens a stored envelope (JSON text) of `logId` with a key string. */
export async function decryptRecord(envelopeJson: string, keyString: string, logId: string): Promise<Record<string, unknown>> {
  return openPayload(JSON.parse(envelopeJson) as Envelope, await deriveEnvelopeKey(keyString), logId);
}

/** An answer of the proxy, read whole. */
export interface ProxyAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
  /** The parsed body when it is JSON (else undefined). */
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary shapes
  logId: string | undefined;
}

/** Calls `POST /v1/proxy` on a listening app and reads the whole answer. */
export async function proxyCall(
  baseUrl: string,
  apiKey: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
  /** `null` sends no X-Service-Encryption-Key. */
  encryptionKey: string | null = 'test-encryption-key',
): Promise<ProxyAnswer> {
  const h: Record<string, string> = { 'content-type': 'application/json', ...headers };
  if (apiKey !== undefined) h.authorization = `Bearer ${apiKey}`;
  if (encryptionKey !== null) h['x-service-encryption-key'] = encryptionKey;
  const r = await request(baseUrl + '/v1/proxy', {
    method: 'POST',
    headers: h,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const buf = Buffer.from(await r.body.arrayBuffer());
  const text = buf.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  const logId = r.headers['x-service-log-id'];
  return { status: r.statusCode, headers: r.headers, body: buf, text, json, logId: typeof logId === 'string' ? logId : undefined };
}

/** Polls `check` until it returns a value other than undefined (or gives up after `tries`). */
export async function waitFor<T>(check: () => Promise<T | undefined> | T | undefined, tries = 400, everyMs = 10): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await check();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error('waitFor: condition never held');
}

/**
 * Calls `POST /v1/proxy` with node:http, which sends headers exactly as given (undici refuses
 * hop-by-hop ones on the client side), and reads the whole answer.
 */
export function rawProxyCall(
  baseUrl: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(baseUrl + '/v1/proxy', { method: 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
