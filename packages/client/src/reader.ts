/**
 * `LogReader`: the read API with a `key_live_` key or an embed token, decrypting with a keyring.
 * `GET /v1/projects/{projectId}/logs` (filters, cursor), `…/logs/{logId}`, `…/logs/{logId}/proof`,
 * `…/traces/{traceId}` and `…/events`. List and trace pages carry payloads only when asked
 * (`include=payload`), and the server ends such a page early at its payload budget: the reader
 * asks for them (it exists to open them) and follows the cursors.
 */
import type { Envelope, LogEntry, LogListEntry, LogListFilter, SecurityEvent } from '@countersign/core';
import { ClientError } from './errors.js';

/** Options of {@link LogReader}. */
export interface LogReaderOptions {
  /** Base URL of the management API. */
  endpoint: string;
  /** Project id (`prj_live_…`). */
  projectId: string;
  /** A `key_live_` key of the project, or an embed token. */
  readKey: string;
  /** Opens an envelope (a `ServiceClient`'s keyring). */
  decrypt: (envelope: Envelope, logId: string) => Promise<Record<string, unknown>>;
  /** Time limit per request in ms (default 10 000). */
  requestTimeoutMs?: number;
}

/** Filters of {@link LogReader.listLogs} (the wire shape is core's; the reader always asks for payloads). */
export type LogFilter = Omit<LogListFilter, 'include'>;

/** A log with its opened payload (`decryptedPayload`), or `decryptError` when this keyring cannot open it. */
export type ReadLog = LogEntry & { decryptedPayload?: Record<string, unknown>; decryptError?: string };

/** Reads and decrypts a project's logs. */
export class LogReader {
  readonly #o: LogReaderOptions;

  constructor(options: LogReaderOptions) {
    this.#o = { ...options, endpoint: options.endpoint.replace(/\/+$/, '') };
  }

  async #get<T>(path: string): Promise<T> {
    const res = await fetch(`${this.#o.endpoint}/v1/projects/${encodeURIComponent(this.#o.projectId)}${path}`, {
      headers: { authorization: `Bearer ${this.#o.readKey}`, accept: 'application/json' },
      signal: AbortSignal.timeout(this.#o.requestTimeoutMs ?? 10_000),
    });
    const body = (await res.json().catch(() => ({}))) as T & { error?: { code?: string; message?: string } };
    if (!res.ok)
      throw new ClientError(
        'request_failed',
        `GET ${path.split('?')[0]} answered ${res.status}: ${body.error?.message ?? res.statusText}`,
        {
          status: res.status,
          serverCode: body.error?.code,
        },
      );
    return body;
  }

  async #open(listed: LogListEntry): Promise<ReadLog> {
    // A page entry without its envelope (a server that left it out): read that one log whole.
    const entry: LogEntry = listed.payload
      ? (listed as LogEntry)
      : (await this.#get<{ log: LogEntry }>(`/logs/${encodeURIComponent(listed.id)}`)).log;
    try {
      return { ...entry, decryptedPayload: await this.#o.decrypt(entry.payload, entry.id) };
    } catch (e) {
      return { ...entry, decryptError: e instanceof Error ? e.message : String(e) };
    }
  }

  /** One page of logs, newest first, opened. */
  async listLogs(filter: LogFilter = {}): Promise<{ logs: ReadLog[]; nextCursor: string | null }> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filter)) if (v !== undefined && k !== 'include') q.set(k, String(v));
    q.set('include', 'payload');
    const body = await this.#get<{ logs: LogListEntry[]; nextCursor: string | null }>(`/logs?${q.toString()}`);
    return { logs: await Promise.all(body.logs.map((l) => this.#open(l))), nextCursor: body.nextCursor };
  }

  /** Every log matching `filter`, following cursors. */
  async *allLogs(filter: Omit<LogFilter, 'cursor'> = {}): AsyncGenerator<ReadLog> {
    let cursor: string | undefined;
    do {
      const page = await this.listLogs({ ...filter, ...(cursor ? { cursor } : {}) });
      yield* page.logs;
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
  }

  /** One log, opened. */
  async getLog(logId: string): Promise<ReadLog> {
    const body = await this.#get<{ log: LogEntry }>(`/logs/${encodeURIComponent(logId)}`);
    return this.#open(body.log);
  }

  /** A trace's logs, oldest first, opened (every page of it). */
  async getTrace(traceId: string): Promise<ReadLog[]> {
    const out: ReadLog[] = [];
    let cursor: string | null = null;
    do {
      const q = new URLSearchParams({ include: 'payload' });
      if (cursor) q.set('cursor', cursor);
      const body: { logs: LogListEntry[]; nextCursor?: string | null } = await this.#get(`/traces/${encodeURIComponent(traceId)}?${q}`);
      out.push(...(await Promise.all(body.logs.map((l) => this.#open(l)))));
      cursor = body.nextCursor ?? null;
    } while (cursor);
    return out;
  }

  /** The proof endpoint's answer for a log (receipt, or a pending status). */
  getProof(logId: string): Promise<Record<string, unknown>> {
    return this.#get<Record<string, unknown>>(`/logs/${encodeURIComponent(logId)}/proof`);
  }

  /** Security events, newest first. */
  async listEvents(options: { limit?: number; cursor?: string } = {}): Promise<{ events: SecurityEvent[]; nextCursor: string | null }> {
    const q = new URLSearchParams();
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    if (options.cursor !== undefined) q.set('cursor', options.cursor);
    return this.#get(`/events${q.size ? '?' + q.toString() : ''}`);
  }
}
