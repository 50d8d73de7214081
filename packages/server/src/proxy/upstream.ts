/**
 * Talking to upstreams: one undici Agent (pooled keep-alive connections per origin) whose
 * connector asks the {@link TargetGuard} for the checked addresses of the host and dials one of
 * THOSE (never a fresh DNS answer), and a dispatch handler that streams the answer to the caller
 * as it arrives (no buffering; backpressure flows both ways) while a {@link BodyCapture}
 * keeps what the audit record needs.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { BodyCapture } from './capture.js';
import { downstreamResponseHeaders } from './headers.js';
import { TargetBlockedError, type TargetGuard } from './ssrf.js';

/** Proxy timeouts, ms (config.proxyTimeouts). */
export interface ProxyTimeouts {
  /** TCP (and TLS) connection set-up. */
  connect: number;
  /** From the request being sent to the response headers. */
  firstByte: number;
  /** Longest silence between two chunks of the response body. */
  idle: number;
}

/**
 * Makes the Agent. Its connector resolves through the guard (a cached, checked answer) and
 * connects to the checked addresses in order until one accepts; TLS keeps the original host
 * name for SNI and certificate checks because undici derives `servername` from the Host.
 */
export function createUpstreamAgent(guard: TargetGuard, timeouts: ProxyTimeouts): Agent {
  const dial = buildConnector({ timeout: timeouts.connect });
  const connect: buildConnector.connector = (options, callback) => {
    const port = Number(options.port) || (options.protocol === 'https:' ? 443 : 80);
    guard.addressesFor(options.hostname, port).then(
      (addresses) => {
        let i = 0;
        const attempt = (): void => {
          dial({ ...options, hostname: addresses[i]! }, (err, socket) => {
            if (err && ++i < addresses.length && !isTimeout(err)) return attempt();
            if (err) callback(err, null);
            else callback(null, socket!);
          });
        };
        attempt();
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), null),
    );
  };
  return new Agent({
    connect,
    keepAliveTimeout: 10_000,
    keepAliveMaxTimeout: 60_000,
    headersTimeout: timeouts.firstByte,
    bodyTimeout: timeouts.idle,
  });
}

function isTimeout(err: Error): boolean {
  return (err as { code?: string }).code === 'UND_ERR_CONNECT_TIMEOUT';
}

/** How an exchange ended. */
export type ExchangeOutcome =
  | 'complete'
  | 'target_blocked'
  | 'upstream_unreachable'
  | 'upstream_reset'
  | 'connect_timeout'
  | 'first_byte_timeout'
  | 'idle_timeout'
  | 'client_disconnected'
  | 'server_shutdown';

/** What the exchange reports when it ends. */
export interface ExchangeResult {
  outcome: ExchangeOutcome;
  /** True once the upstream's status line went to the caller (no error answer possible then). */
  headersSent: boolean;
  status?: number;
  /** The headers passed back to the caller (hop-by-hop removed, before X-Service-Log-ID), for the record. */
  upstreamHeaders?: Record<string, string | string[] | undefined>;
  capture: BodyCapture;
  /** ms from dispatch to the upstream's response headers. */
  firstByteMs?: number;
  /** ms from dispatch to the first chunk of the response body (a stream's first event or token). */
  firstChunkMs?: number;
  /** ms from dispatch to the end of the upstream's answer, or to its failure; absent when nothing was dispatched. */
  upstreamMs?: number;
  /** A description of the failure without secrets (error class and code). */
  error?: string;
}

/** Thrown into the dispatch to stop it: the caller went away, or the server is closing. */
class ExchangeAborted extends Error {
  constructor(readonly outcome: 'client_disconnected' | 'server_shutdown') {
    super(outcome);
    this.name = 'ExchangeAborted';
  }
}

/** Maps an undici / socket failure to an outcome. */
export function classifyUpstreamError(err: unknown): ExchangeOutcome {
  if (err instanceof ExchangeAborted) return err.outcome;
  if (err instanceof TargetBlockedError) return 'target_blocked';
  const code = (err as { code?: string } | undefined)?.code;
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'ETIMEDOUT':
      return 'connect_timeout';
    case 'UND_ERR_HEADERS_TIMEOUT':
      return 'first_byte_timeout';
    case 'UND_ERR_BODY_TIMEOUT':
      return 'idle_timeout';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
      return 'upstream_reset';
    default:
      return 'upstream_unreachable';
  }
}

/** Everything one exchange needs. */
export interface ExchangeRequest {
  origin: string;
  path: string;
  method: Dispatcher.HttpMethod;
  headers: Record<string, string | string[]>;
  /** The exact bytes to send, or the caller's body as it streams in (forward mode), or none. */
  body: Buffer | Readable | null;
  /** Headers added to the caller's answer (X-Service-Log-ID). */
  extraHeaders: Record<string, string>;
  /**
   * True when the caller's own request is HEAD (forward mode): its answer keeps the upstream's
   * Content-Length. When only the upstream call is HEAD (`/v1/proxy` with method HEAD), the
   * caller's POST must not be told to wait for bytes that will never come.
   */
  callerHead?: boolean;
}

/**
 * One proxied exchange: dispatches the request and pipes the answer into `res`. Resolves (never
 * rejects) with how it ended; on a failure before the status line nothing was written to `res`,
 * so the caller can still answer 502/504. The response is NOT ended here: the plugin ends it
 * after the outcome is committed.
 */
export class Exchange implements Dispatcher.DispatchHandler {
  readonly capture = new BodyCapture();
  readonly done: Promise<ExchangeResult>;
  #resolve!: (r: ExchangeResult) => void;
  #controller: Dispatcher.DispatchController | undefined;
  #abortReason: ExchangeAborted | undefined;
  #result: Omit<ExchangeResult, 'outcome' | 'capture'> = { headersSent: false };
  #started = 0;
  #settled = false;
  /** Declared body length, when the answer has one: its last chunk is held until the commit. */
  #expectedLength: number | undefined;
  #heldLast: Buffer | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly req: ExchangeRequest,
  ) {
    this.done = new Promise((resolve) => (this.#resolve = resolve));
  }

  /** Sends the request upstream through `agent`. */
  start(agent: Dispatcher): void {
    this.#started = performance.now();
    agent.dispatch(
      {
        origin: this.req.origin,
        path: this.req.path,
        method: this.req.method,
        headers: this.req.headers,
        body: this.req.body,
      },
      this,
    );
  }

  /** Stops the exchange (caller gone, server closing); the dispatch ends with that outcome. */
  abort(outcome: 'client_disconnected' | 'server_shutdown'): void {
    if (this.#settled || this.#abortReason) return;
    this.#abortReason = new ExchangeAborted(outcome);
    this.#controller?.abort(this.#abortReason);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#abortReason) controller.abort(this.#abortReason);
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (statusCode < 200) return; // 1xx informational: the final answer follows.
    this.#result.firstByteMs = performance.now() - this.#started;
    this.#result.status = statusCode;
    const bodyless = this.req.method === 'HEAD' || statusCode === 204 || statusCode === 304;
    const out = downstreamResponseHeaders(headers, { bodyless: bodyless && this.req.callerHead !== true });
    this.#result.upstreamHeaders = { ...out };
    const declared = headers['content-length'];
    if (!bodyless && typeof declared === 'string' && /^\d+$/.test(declared)) this.#expectedLength = Number(declared);
    for (const k in this.req.extraHeaders) out[k] = this.req.extraHeaders[k]!;
    this.res.writeHead(statusCode, out);
    this.#result.headersSent = true;
    // A streamed answer (SSE, chunked) shows its status line at once: the caller must not wait for
    // the first event. At once means after this read of the upstream's socket: undici hands over
    // the body bytes that came in the same read before a microtask runs, and the first write
    // carries the status line with them (one packet and one wake-up of the caller less). A sized
    // answer sends it with its first bytes.
    if (this.#expectedLength === undefined) queueMicrotask(() => this.#flushStatusLine());
  }

  /** Sends the status line of a streamed answer unless a first chunk took it along. */
  #flushStatusLine(): void {
    if (this.#result.firstChunkMs === undefined && !this.res.destroyed) this.res.flushHeaders();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#result.firstChunkMs === undefined) this.#result.firstChunkMs = performance.now() - this.#started;
    this.capture.add(chunk);
    // With Content-Length the caller knows the answer is over at its last byte, so that byte waits
    // for the outcome's commit (see endResponse); a chunked answer ends with res.end() anyway.
    if (this.#expectedLength !== undefined && this.capture.bytes >= this.#expectedLength) {
      this.#heldLast = chunk;
      return;
    }
    if (!this.res.write(chunk)) {
      controller.pause();
      this.res.once('drain', () => controller.resume());
    }
  }

  /** Ends the caller's response of a complete exchange (after the record is committed). */
  endResponse(): void {
    const last = this.#heldLast;
    this.#heldLast = undefined;
    if (last) this.res.end(last);
    else this.res.end();
  }

  onResponseEnd(): void {
    this.#settle('complete');
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.#settle(classifyUpstreamError(this.#abortReason ?? error), error);
  }

  #settle(outcome: ExchangeOutcome, error?: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    // Member by member, not spread: see newProxyLog in record.ts.
    const x = this.#result;
    const r: ExchangeResult = {
      outcome,
      headersSent: x.headersSent,
      status: x.status,
      upstreamHeaders: x.upstreamHeaders,
      capture: this.capture,
      firstByteMs: x.firstByteMs,
      firstChunkMs: x.firstChunkMs,
      upstreamMs: this.#started === 0 ? undefined : performance.now() - this.#started,
    };
    if (error && !(error instanceof ExchangeAborted)) {
      const code = (error as { code?: string }).code;
      r.error = `${error.name}${code ? ' ' + code : ''}: ${error.message}`.slice(0, 300);
    }
    this.#resolve(r);
  }
}
