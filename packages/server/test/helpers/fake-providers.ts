/**
 * Fake OpenAI and Anthropic servers on loopback for the forward-mode suites that drive clients
 * nobody here wrote (the real SDKs, curl, undici). Each records exactly what it received (method,
 * path and query, headers, raw body bytes) and exactly what it sent (status, headers, every body
 * chunk with the moment it was written), so a test can hold both directions byte for byte and
 * compare when events left the fake with when they reached the client. Streams are written event
 * by event `gapMs` apart. Answers are shaped as the public API references show them
 * (fake-provider-bodies.ts); a model named `fail-<status>` answers that status with the
 * provider's error body, and a wrong provider key gets the provider's 401.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { gzipSync } from 'node:zlib';
import { Response } from 'undici';
import * as bodies from './fake-provider-bodies.js';

/** A request as the fake received it. */
export interface FakeRequest {
  method: string;
  /** Path and query, as sent. */
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Header names as they arrived (case kept). */
  rawHeaderNames: string[];
  body: Buffer;
}

/** One request and the answer the fake gave it. */
export interface FakeExchange {
  request: FakeRequest;
  status: number;
  responseHeaders: Record<string, string>;
  /** Body chunks in the order written, each with `performance.now()` at the write. */
  chunks: Array<{ at: number; bytes: Buffer }>;
  /** Every byte of the answer body (valid once `done` resolved). */
  body: () => Buffer;
  /** Resolves when the answer has ended (or the connection closed). */
  done: Promise<void>;
}

/** A running fake provider. */
export interface FakeProvider {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** `127.0.0.1:<port>`, for allowTargets. */
  hostPort: string;
  /** The provider key it accepts. */
  apiKey: string;
  /** The live options (a test may change `gzipJson` between calls). */
  options: FakeOptions;
  exchanges: FakeExchange[];
  /** The latest exchange (throws when there is none). */
  last: () => FakeExchange;
  close: () => Promise<void>;
}

/** Options of the fakes. */
export interface FakeOptions {
  /** The provider key to accept (`Authorization: Bearer`; Anthropic also `x-api-key`). */
  apiKey: string;
  /** Pause between SSE events, ms (default 80). */
  gapMs?: number;
  /**
   * Gzip JSON answers for clients that accept it, as the real APIs (behind their CDNs) do; a test
   * may switch it on and off through {@link FakeProvider.options}.
   */
  gzipJson?: boolean;
}

/** What a route answers. */
type Answer =
  | { status?: number; headers?: Record<string, string>; json: unknown }
  | { status?: number; headers?: Record<string, string>; events: string[] };

type Route = (req: FakeRequest, json: Record<string, unknown> | undefined) => Promise<Answer> | Answer;

/** The multipart fields of a recorded request, parsed the way a server would (for assertions too). */
export async function formFields(req: FakeRequest): Promise<Map<string, string | { name: string; type: string; bytes: Buffer }>> {
  const parsed = await new Response(req.body, { headers: { 'content-type': String(req.headers['content-type']) } }).formData();
  const out = new Map<string, string | { name: string; type: string; bytes: Buffer }>();
  for (const [key, value] of parsed.entries()) {
    out.set(key, typeof value === 'string' ? value : { name: value.name, type: value.type, bytes: Buffer.from(await value.arrayBuffer()) });
  }
  return out;
}

/** Starts the OpenAI-shaped fake (routes under `/v1`). */
export function startOpenAiFake(options: FakeOptions): Promise<FakeProvider> {
  const err = (status: number, message?: string): Answer => ({ status, json: bodies.openAiError(status, message) });
  const failing = (json: Record<string, unknown> | undefined) => /^fail-(\d{3})$/.exec(String(json?.model ?? ''));
  const routes: Record<string, Route> = {
    'POST /v1/chat/completions': (_req, json) => {
      const model = String(json?.model);
      if (json?.stream !== true) return { json: bodies.chatCompletion(model) };
      const includeUsage = (json.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
      return { events: bodies.chatCompletionChunks(model, includeUsage) };
    },
    'POST /v1/responses': (_req, json) => {
      const model = String(json?.model);
      return json?.stream === true ? { events: bodies.responsesEvents(model) } : { json: bodies.responsesAnswer(model) };
    },
    'POST /v1/embeddings': (_req, json) => {
      const input = json?.input;
      const inputs = Array.isArray(input) ? input.map(String) : [String(input)];
      return { json: bodies.embeddingsAnswer(String(json?.model), inputs, json?.encoding_format === 'base64') };
    },
    'GET /v1/models': () => ({ json: bodies.OPENAI_MODELS }),
    'POST /v1/files': async (req) => {
      const fields = await formFields(req);
      const file = fields.get('file');
      if (typeof file !== 'object') return err(400, "'file' is a required property");
      return { json: bodies.fileObject(file.name, file.bytes.length, String(fields.get('purpose'))) };
    },
    'POST /v1/audio/transcriptions': async (req) => {
      const file = (await formFields(req)).get('file');
      if (typeof file !== 'object') return err(400, "'file' is a required property");
      return { json: bodies.transcriptionAnswer(file.bytes.length) };
    },
  };
  const sideHeaders = (n: number) => ({
    'x-request-id': `req_fake_openai_${n}`,
    'openai-processing-ms': '321',
    'openai-version': '2020-10-01',
  });
  return startFake(options, sideHeaders, (req, json) => {
    if (req.headers.authorization !== `Bearer ${options.apiKey}`) {
      const shown = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
      return err(
        401,
        `Incorrect API key provided: ${shown.slice(0, 8)}. You can find your API key at https://platform.openai.com/account/api-keys.`,
      );
    }
    const fail = failing(json);
    if (fail) return err(Number(fail[1]));
    const route = routes[`${req.method} ${req.url.split('?')[0]}`];
    return route ? route(req, json) : err(404, `Invalid URL (${req.method} ${req.url.split('?')[0]})`);
  });
}

/** Starts the Anthropic-shaped fake (routes under `/v1`; its base URL has no `/v1`). */
export function startAnthropicFake(options: FakeOptions): Promise<FakeProvider> {
  const err = (status: number, message?: string): Answer => ({ status, json: bodies.anthropicError(status, message) });
  const sideHeaders = (n: number) => ({ 'request-id': `req_fake_anthropic_${n}`, 'anthropic-organization-id': 'org-fake-0001' });
  return startFake(options, sideHeaders, (req, json) => {
    // The API takes the key as x-api-key or as a bearer token (the SDK sends the latter).
    if (req.headers['x-api-key'] !== options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) return err(401);
    if (req.headers['anthropic-version'] === undefined) return err(400, 'anthropic-version: header is required');
    const fail = /^fail-(\d{3})$/.exec(String(json?.model ?? ''));
    if (fail) return err(Number(fail[1]));
    const path = req.url.split('?')[0];
    if (req.method === 'POST' && path === '/v1/messages') {
      const model = String(json?.model);
      return json?.stream === true ? { events: bodies.anthropicEvents(model) } : { json: bodies.anthropicMessage(model) };
    }
    if (req.method === 'GET' && path === '/v1/models') return { json: bodies.ANTHROPIC_MODELS };
    return err(404, 'Not found');
  });
}

/** The server both fakes share: record, route, answer (JSON whole, SSE event by event). */
async function startFake(options: FakeOptions, sideHeaders: (n: number) => Record<string, string>, route: Route): Promise<FakeProvider> {
  const gapMs = options.gapMs ?? 80;
  const exchanges: FakeExchange[] = [];
  const server = http.createServer((req, res) => {
    const received: Buffer[] = [];
    req.on('data', (c: Buffer) => received.push(c));
    req.on('end', () => {
      const request: FakeRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaderNames: req.rawHeaders.filter((_, i) => i % 2 === 0),
        body: Buffer.concat(received),
      };
      let finished!: () => void;
      const exchange: FakeExchange = {
        request,
        status: 0,
        responseHeaders: {},
        chunks: [],
        body: () => Buffer.concat(exchange.chunks.map((c) => c.bytes)),
        done: new Promise((r) => (finished = r)),
      };
      exchanges.push(exchange);
      res.on('close', () => finished());
      void answer(request, exchange, res);
    });
  });

  const answer = async (request: FakeRequest, exchange: FakeExchange, res: http.ServerResponse) => {
    let json: Record<string, unknown> | undefined;
    if (String(request.headers['content-type'] ?? '').startsWith('application/json')) {
      try {
        json = JSON.parse(request.body.toString('utf8')) as Record<string, unknown>;
      } catch {
        json = undefined;
      }
    }
    const a = await route(request, json);
    const write = (bytes: Buffer) => {
      exchange.chunks.push({ at: performance.now(), bytes });
      res.write(bytes);
    };
    exchange.status = a.status ?? 200;
    // Headers a provider sends beside the body, which must reach the client as they left.
    const common = { ...sideHeaders(exchanges.length), ...a.headers };
    if ('json' in a) {
      const plain = Buffer.from(JSON.stringify(a.json));
      const gzip = options.gzipJson === true && /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
      const body = gzip ? gzipSync(plain) : plain;
      const encoding: Record<string, string> = gzip ? { 'content-encoding': 'gzip', vary: 'Accept-Encoding' } : {};
      exchange.responseHeaders = { 'content-type': 'application/json', 'content-length': String(body.length), ...encoding, ...common };
      res.writeHead(exchange.status, exchange.responseHeaders);
      write(body);
      res.end();
      return;
    }
    exchange.responseHeaders = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...common };
    res.writeHead(exchange.status, exchange.responseHeaders);
    res.flushHeaders();
    for (const [i, event] of a.events.entries()) {
      if (res.destroyed) return;
      if (i > 0) await new Promise((r) => setTimeout(r, gapMs));
      write(Buffer.from(event));
    }
    res.end();
  };

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    hostPort: `127.0.0.1:${port}`,
    apiKey: options.apiKey,
    options,
    exchanges,
    last: () => {
      const e = exchanges.at(-1);
      if (!e) throw new Error('the fake provider has received no request');
      return e;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
