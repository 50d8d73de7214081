/**
 * The file fallback transport (spec 2.5 "File fallback transport rules"): logs that could not
 * be delivered are appended to a local file, one JSON line per log, so nothing is lost while
 * the endpoint is down, and can be re-sent later with {@link replayFallbackFile}.
 *
 * 1. One writer: every write joins one promise chain, so rows are written one at a time in the
 *    order the failures arrived, never interleaved, however many failures come at once.
 * 2. Daily files named `<filenamePrefix>-YYYY-MM-DD.log`, the date in UTC at the time of writing.
 * 3. File size is left to external log rotation (logrotate `copytruncate` works: lines are appended).
 *
 * A line holds only what was going to be sent: the encrypted envelope, the payload hash and
 * the plain (already redacted) fields and context headers. Never a plaintext payload, the API
 * key or an encryption key.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ClientError } from './errors.js';
import { postLogBatch, backoffMs, type DeliveryFailure, type DeliveryFailureSink, type FailedLog } from './delivery.js';

/** Options of {@link FileFallbackTransport}. */
export interface FileFallbackOptions {
  /** Directory of the fallback files (created if missing, mode 0700). */
  directory: string;
  /** File name prefix: files are `<filenamePrefix>-YYYY-MM-DD.log` (UTC). */
  filenamePrefix: string;
  /** Clock, for tests of the daily roll-over (default `Date.now`). */
  now?: () => number;
}

/** One line of a fallback file. */
export interface FallbackLine {
  /** Line format version. */
  v: 1;
  /** When it was written (ISO, UTC). */
  failedAt: string;
  /** Why delivery failed. */
  reason: DeliveryFailure['reason'];
  /** HTTP status of the last answer, if any. */
  status?: number;
  /** The log as it would have been sent. */
  entry: FailedLog['entry'];
  /** Its context headers. */
  headers: Record<string, string>;
}

/** The UTC date `YYYY-MM-DD` of an epoch-ms time. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/**
 * Appends undeliverable logs to daily files. Pass an instance as `onDeliveryFailure`, or call
 * {@link FileFallbackTransport.handleDeliveryFailure} from your own callback.
 */
export class FileFallbackTransport implements DeliveryFailureSink {
  /** Directory of the files. */
  readonly directory: string;
  /** File name prefix. */
  readonly filenamePrefix: string;
  readonly #now: () => number;
  #tail: Promise<void> = Promise.resolve();
  #dirReady = false;
  #written = 0;

  /**
   * @throws ClientError `invalid_config` when `directory` or `filenamePrefix` is missing, or the
   * prefix holds a path separator.
   */
  constructor(options: FileFallbackOptions) {
    if (!options || typeof options.directory !== 'string' || options.directory === '')
      throw new ClientError('invalid_config', 'FileFallbackTransport: directory must be a non-empty path');
    if (typeof options.filenamePrefix !== 'string' || !/^[A-Za-z0-9._-]{1,100}$/.test(options.filenamePrefix))
      throw new ClientError('invalid_config', 'FileFallbackTransport: filenamePrefix must be 1-100 characters of A-Z a-z 0-9 . _ -');
    this.directory = path.resolve(options.directory);
    this.filenamePrefix = options.filenamePrefix;
    this.#now = options.now ?? Date.now;
  }

  /** The file a row written at `ms` goes to. */
  fileFor(ms: number = this.#now()): string {
    return path.join(this.directory, `${this.filenamePrefix}-${utcDay(ms)}.log`);
  }

  /** Rows written so far by this instance. */
  get rowsWritten(): number {
    return this.#written;
  }

  /**
   * Queues the failure's logs for writing (one line each, in order) and resolves once they are
   * on disk. Rejects if the write fails, after which later writes still proceed.
   */
  handleDeliveryFailure(failure: DeliveryFailure): Promise<void> {
    const failedAt = this.#now();
    const text = failure.logs
      .map((l) => {
        const line: FallbackLine = {
          v: 1,
          failedAt: new Date(failedAt).toISOString(),
          reason: failure.reason,
          entry: l.entry,
          headers: l.headers,
        };
        if (failure.status !== undefined) line.status = failure.status;
        return JSON.stringify(line) + '\n';
      })
      .join('');
    // The chain is the single writer: each append starts after the previous one has finished.
    const write = this.#tail.then(async () => {
      if (!this.#dirReady) {
        await fs.promises.mkdir(this.directory, { recursive: true, mode: 0o700 });
        this.#dirReady = true;
      }
      await fs.promises.appendFile(this.fileFor(failedAt), text, { mode: 0o600 });
      this.#written += failure.logs.length;
    });
    this.#tail = write.catch(() => undefined);
    return write;
  }

  /** The same as {@link FileFallbackTransport.handleDeliveryFailure}, as a bound function. */
  readonly handler = (failure: DeliveryFailure): Promise<void> => this.handleDeliveryFailure(failure);

  /** Resolves when every queued row is written. */
  async drain(): Promise<void> {
    await this.#tail;
  }
}

/** Options of {@link replayFallbackFile}. */
export interface ReplayOptions {
  /** Base URL of the ingestion worker. */
  endpoint: string;
  /** An ingest key of the same project and class as the original (the server checks a retry is the same entry). */
  apiKey: string;
  /** Logs per request (default 100). */
  batchSize?: number;
  /** Retries per batch for network errors, 429 and 5xx (default 5). */
  maxRetries?: number;
  /** Time limit per request in ms (default 30 000). */
  requestTimeoutMs?: number;
}

/** What a replay did. */
export interface ReplayReport {
  /** Lines read. */
  lines: number;
  /** Logs stored now. */
  delivered: number;
  /** Logs the server already had (same id, same entry): earlier replays or deliveries. */
  duplicates: number;
  /** Lines that could not be parsed. */
  malformed: number;
  /** Batches refused or still failing after retries, with the error. */
  failed: Array<{ ids: string[]; error: string }>;
}

/**
 * Re-sends every log of a fallback file to `POST /v1/log`. Idempotent: each line carries the
 * log's own id and the same envelope, so a log the server already stored answers `duplicate`
 * and is not stored again; running a replay twice (or after a partial one) is safe.
 * Logs that shared context headers are sent together, keeping the file order.
 */
export async function replayFallbackFile(file: string, options: ReplayOptions): Promise<ReplayReport> {
  const endpoint = options.endpoint.replace(/\/+$/, '');
  const batchSize = options.batchSize ?? 100;
  const maxRetries = options.maxRetries ?? 5;
  const report: ReplayReport = { lines: 0, delivered: 0, duplicates: 0, malformed: 0, failed: [] };
  const logs: FailedLog[] = [];
  for (const raw of (await fs.promises.readFile(file, 'utf8')).split('\n')) {
    if (raw.trim() === '') continue;
    report.lines++;
    try {
      const line = JSON.parse(raw) as FallbackLine;
      if (line.v !== 1 || typeof line.entry?.id !== 'string' || typeof line.entry.payload !== 'object') throw new Error('bad line');
      logs.push({ entry: line.entry, headers: line.headers ?? {} });
    } catch {
      report.malformed++;
    }
  }
  for (let i = 0; i < logs.length;) {
    const group = JSON.stringify(logs[i]!.headers);
    let n = 1;
    while (n < batchSize && i + n < logs.length && JSON.stringify(logs[i + n]!.headers) === group) n++;
    const batch = logs.slice(i, i + n);
    i += n;
    for (let attempt = 0; ; attempt++) {
      const r = await postLogBatch(endpoint, options.apiKey, batch, AbortSignal.timeout(options.requestTimeoutMs ?? 30_000));
      if (r.ok) {
        report.delivered += batch.length - r.result.duplicates;
        report.duplicates += r.result.duplicates;
        break;
      }
      if (!r.retryable || attempt >= maxRetries) {
        report.failed.push({ ids: batch.map((l) => l.entry.id), error: r.error.message });
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, r.retryAfter ?? backoffMs(attempt, 200, 30_000)));
    }
  }
  return report;
}
