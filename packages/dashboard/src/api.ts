/**
 * The dashboard's view of the Countersign API: typed calls over `fetch` with the credential in
 * the Authorization header, errors turned into {@link ApiCallError} with the server's code,
 * message and request id, and the live event stream read with fetch streaming.
 */
import type {
  LogEntry as CoreLogEntry,
  LogListEntry,
  LogListFilter,
  ProofReceipt,
  SecurityEvent as CoreSecurityEvent,
} from '@countersign/core';
import { SseParser } from './sse.js';

/** A log entry as read back whole (core's wire type). */
export type LogEntry = CoreLogEntry;

/** An entry of the log list: no payload (the list never asks for one; opening a log reads it whole). */
export type LogRowEntry = LogListEntry;

/** What every live stream reports besides its entries. */
export interface StreamHandlers {
  /** The server accepted the stream. */
  onOpen: () => void;
  /**
   * The id to resume after (`Last-Event-ID`) changed: an entry's, or the one a stream opens with
   * to name where it starts.
   */
  onPosition?: (id: string) => void;
}

/** A security event as listed and streamed (core's type plus the store sequence number). */
export type SecurityEvent = CoreSecurityEvent & { seq: number };

/**
 * Filters of the log listing, export and stream, as the API's query parameters (DESIGN §4:
 * `actor`, `actorPrefix`, `actorContains`, … `from`, `to`, `status`, `source`, `handover`,
 * repeated `meta=key=value`). Kept as parameters so the page's URL and the API use one form.
 */
export type LogFilters = URLSearchParams;

/** Core's filter type, for the parameters the two share. */
export type CoreLogFilter = LogListFilter;

/** What the proof endpoint answers. */
export type ProofAnswer =
  | { status: 'sealed'; receipt: ProofReceipt }
  | { status: 'pending'; stage: string; retryAfterMs: number; windowEnd: string | null; batchId: string | null }
  | { status: 'unavailable'; reason: string };

/** Trust material a server publishes at `GET /v1/proofs/trust`. */
export interface PublishedTrust {
  tsaRootsPem: string;
  ledgerPublicKeyPem: string;
  ledgerUrl: string;
}

/** An error answer of the API (or a failure to reach it), with the server's code. */
export class ApiCallError extends Error {
  /** @param code the server's error code, or `network_error` / `bad_response` for failures before an answer. */
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    readonly requestId?: string,
  ) {
    super(message);
    this.name = 'ApiCallError';
  }
}

/** The credential a dashboard user signs in with. */
export interface Credential {
  projectId: string;
  /** A `key_live_…` key or an embed token (JWT). */
  token: string;
}

/** True when `token` is an embed token (a JWT) rather than an API key. */
export function isEmbedToken(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token) && !token.startsWith('key_');
}

async function errorOf(res: Response): Promise<ApiCallError> {
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    return new ApiCallError('bad_response', `HTTP ${res.status} with a body that is not JSON`, res.status);
  }
  const e = (body as { error?: { code?: unknown; message?: unknown; requestId?: unknown } })?.error;
  if (e && typeof e.code === 'string' && typeof e.message === 'string') {
    return new ApiCallError(e.code, e.message, res.status, typeof e.requestId === 'string' ? e.requestId : undefined);
  }
  return new ApiCallError('bad_response', `HTTP ${res.status} without an error body`, res.status);
}

/** Client of one project's read API. */
export class DashboardApi {
  /** @param base the server origin (default: the page's own). */
  constructor(
    readonly credential: Credential,
    readonly base = '',
  ) {}

  #projectPath(rest: string): string {
    return `${this.base}/v1/projects/${encodeURIComponent(this.credential.projectId)}${rest}`;
  }

  async #fetch(url: string, init: RequestInit = {}, auth = true): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set('accept', headers.get('accept') ?? 'application/json');
    if (auth) headers.set('authorization', `Bearer ${this.credential.token}`);
    try {
      return await fetch(url, { ...init, headers, cache: 'no-store' });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      throw new ApiCallError('network_error', `could not reach ${url}: ${(err as Error).message}`, 0);
    }
  }

  async #json<T>(url: string, auth = true, okStatuses: number[] = [200]): Promise<T> {
    const res = await this.#fetch(url, {}, auth);
    if (!okStatuses.includes(res.status)) throw await errorOf(res);
    return (await res.json()) as T;
  }

  /** One page of logs, newest first, without payloads (GET …/logs carries none unless asked). */
  listLogs(filters: LogFilters, limit = 50, cursor?: string): Promise<{ logs: LogRowEntry[]; nextCursor: string | null }> {
    const q = new URLSearchParams(filters);
    q.set('limit', String(limit));
    if (cursor) q.set('cursor', cursor);
    return this.#json(this.#projectPath(`/logs?${q}`));
  }

  /** One log. */
  async getLog(logId: string): Promise<LogEntry> {
    return (await this.#json<{ log: LogEntry }>(this.#projectPath(`/logs/${encodeURIComponent(logId)}`))).log;
  }

  /**
   * Every entry of a trace, oldest first, with payloads (the canvas opens them for span ids):
   * the server ends a page at its payload budget, so this follows `nextCursor` to the end.
   */
  async getTrace(traceId: string): Promise<LogEntry[]> {
    const out: LogEntry[] = [];
    let cursor: string | null = null;
    do {
      const q = new URLSearchParams({ include: 'payload' });
      if (cursor) q.set('cursor', cursor);
      const page: { logs: LogEntry[]; nextCursor?: string | null } = await this.#json(
        this.#projectPath(`/traces/${encodeURIComponent(traceId)}?${q}`),
      );
      out.push(...page.logs);
      cursor = page.nextCursor ?? null;
    } while (cursor);
    return out;
  }

  /** Stored security events, newest first. */
  async listEvents(limit = 50): Promise<SecurityEvent[]> {
    return (await this.#json<{ events: SecurityEvent[] }>(this.#projectPath(`/events?limit=${limit}`))).events;
  }

  /** A log's proof answer (sealed, pending or unavailable). */
  getProof(logId: string): Promise<ProofAnswer> {
    return this.#json<ProofAnswer>(this.#projectPath(`/logs/${encodeURIComponent(logId)}/proof`), true, [200, 202]);
  }

  /** The server's published trust material (public, no key sent). */
  getTrust(): Promise<PublishedTrust> {
    return this.#json<PublishedTrust>(`${this.base}/v1/proofs/trust`, false);
  }

  /**
   * Reads the live security events until `signal` aborts or the server ends the stream.
   * Resolves when the stream ends; rejects with {@link ApiCallError} when the server refuses it.
   * @param lastEventId replay stored events after this sequence number first.
   */
  streamEvents(
    handlers: StreamHandlers & { onEvent: (e: SecurityEvent) => void },
    signal: AbortSignal,
    lastEventId?: string,
  ): Promise<void> {
    return this.#sse(
      '/events/stream',
      'security.policy_violation',
      { onOpen: handlers.onOpen, onData: (d) => handlers.onEvent(d as SecurityEvent), onPosition: handlers.onPosition },
      signal,
      lastEventId,
    );
  }

  /**
   * Follows new log entries (`GET …/logs/stream`, no payloads) with the given filters until
   * `signal` aborts or the server ends the stream; `onLog` gets each entry and its event id
   * (the position to resume after with `Last-Event-ID`).
   */
  streamLogs(
    filters: LogFilters,
    handlers: StreamHandlers & { onLog: (l: LogRowEntry, id: string | undefined) => void },
    signal: AbortSignal,
    lastEventId?: string,
  ): Promise<void> {
    const q = filters.toString();
    return this.#sse(
      `/logs/stream${q ? `?${q}` : ''}`,
      'log',
      { onOpen: handlers.onOpen, onData: (d, id) => handlers.onLog(d as LogRowEntry, id), onPosition: handlers.onPosition },
      signal,
      lastEventId,
    );
  }

  /** Starts an export of the filtered range (`GET …/logs/export`); the answer streams. */
  async exportLogs(format: 'csv' | 'jsonl', filters: LogFilters, signal?: AbortSignal): Promise<Response> {
    const res = await this.#fetch(this.exportUrl(format, filters), {
      headers: { accept: format === 'csv' ? 'text/csv' : 'application/x-ndjson' },
      ...(signal ? { signal } : {}),
    });
    if (res.status !== 200 || !res.body) throw await errorOf(res);
    return res;
  }

  /** The export URL for these filters (the credential goes in the Authorization header, never in it). */
  exportUrl(format: 'csv' | 'jsonl', filters: LogFilters): string {
    const q = new URLSearchParams(filters);
    q.set('format', format);
    return this.#projectPath(`/logs/export?${q}`);
  }

  /** Reads an SSE stream with fetch (EventSource cannot send the Authorization header). */
  async #sse(
    rest: string,
    eventName: string,
    handlers: StreamHandlers & { onData: (data: unknown, id: string | undefined) => void },
    signal: AbortSignal,
    lastEventId?: string,
  ): Promise<void> {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (lastEventId) headers['last-event-id'] = lastEventId;
    const res = await this.#fetch(this.#projectPath(rest), { headers, signal });
    if (res.status !== 200 || !res.body) throw await errorOf(res);
    handlers.onOpen();
    const parser = new SseParser((frame) => {
      if (frame.event !== eventName) return;
      let data: unknown;
      try {
        data = JSON.parse(frame.data);
      } catch {
        return; // a frame that is not JSON is not an entry we can show
      }
      handlers.onData(data, frame.id);
    });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let position = lastEventId;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        parser.push(value);
        // Where to resume from, also when the server named it without an event (its opening frame).
        const at = parser.lastEventId;
        if (at !== undefined && at !== position) handlers.onPosition?.((position = at));
      }
    } finally {
      reader.releaseLock();
    }
  }
}
