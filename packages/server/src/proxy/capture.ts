/**
 * What the audit record keeps of an upstream answer while every byte streams on to the caller:
 * the first 2 MB (spec 4.1 rule 3, spec 8), and over the WHOLE stream a byte count and an
 * incremental SHA-256, so a record of a truncated answer still pins down exactly what was sent.
 */
import { createHash, type Hash } from 'node:crypto';
import { inspectJson, jsonContainerBudget, MAX_JSON_DEPTH, sha256Hex } from '@countersign/core';

/** Spec 8: at most this many response bytes are held for the log. */
export const CAPTURE_LIMIT_BYTES = 2 * 1024 * 1024;

/** One Server-Sent Event as recorded (fields per the WHATWG event-stream format). */
export interface SseEvent {
  event?: string;
  id?: string;
  data: string;
}

/** The response body as it appears in the decrypted payload. */
export interface CapturedBody {
  /** Total bytes of the upstream body (all of it, not just the capture). */
  bytes: number;
  /** Hex SHA-256 of the whole upstream body, as received (still content-encoded, if it was). */
  sha256: string;
  /** True when the body was longer than the capture limit and the record holds only its start. */
  truncated: boolean;
  /**
   * The body as JSON: only when it is complete, declared JSON, at most {@link MAX_JSON_DEPTH}
   * deep and LOSSLESS (every number exactly a double, no duplicate keys), so that the record's
   * canonical JSON says exactly what was sent. Anything else is kept as `bodyText`.
   */
  body?: unknown;
  /** The body as text (UTF-8), when it is not JSON. */
  bodyText?: string;
  /** The body as base64, when it is not valid UTF-8 (binary or still compressed). */
  bodyBase64?: string;
  /** SSE events, for `text/event-stream` answers (then no body text is kept beside them). */
  events?: SseEvent[];
}

/**
 * Accumulates one body (an upstream's answer, or a caller's streamed request body in forward
 * mode). Call {@link add} per chunk, then {@link finish} once.
 */
export class BodyCapture {
  /**
   * The incremental hash, started only once the capture is about to drop bytes: a body held
   * whole is hashed in one shot at the end (no Hash object per call: one native handle less for
   * every scavenge to process).
   */
  #hash: Hash | undefined;
  readonly #chunks: Buffer[] = [];
  #held = 0;
  #bytes = 0;
  #truncated = false;

  constructor(private readonly limit = CAPTURE_LIMIT_BYTES) {}

  /** Bytes seen so far. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Feeds one chunk (the same Buffer that goes to the caller; only a slice is retained). */
  add(chunk: Buffer): void {
    this.#bytes += chunk.length;
    if (this.#hash) this.#hash.update(chunk);
    const room = this.limit - this.#held;
    if (chunk.length <= room) {
      this.#chunks.push(chunk);
      this.#held += chunk.length;
      return;
    }
    // From here the record keeps only a prefix: hash everything so far, then every byte on.
    if (!this.#hash) {
      this.#hash = createHash('sha256');
      for (const held of this.#chunks) this.#hash.update(held);
      this.#hash.update(chunk);
    }
    this.#truncated = true;
    if (room > 0) {
      // Copy, so the retained slice does not pin a larger pooled buffer.
      this.#chunks.push(Buffer.from(chunk.subarray(0, room)));
      this.#held += room;
    }
  }

  /** Ends the capture and describes the body for the record. */
  finish(contentType: string | undefined, contentEncoding: string | undefined): CapturedBody {
    const raw = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#held);
    this.#chunks.length = 0;
    const sha256 = this.#hash ? this.#hash.digest('hex') : sha256Hex(raw);
    const out: CapturedBody = { bytes: this.#bytes, sha256, truncated: this.#truncated };
    if (this.#bytes === 0) return out;
    const encoded = contentEncoding !== undefined && contentEncoding !== '' && contentEncoding.toLowerCase() !== 'identity';
    const text = encoded ? undefined : decodeUtf8(raw, this.#truncated);
    if (text === undefined) {
      out.bodyBase64 = raw.toString('base64');
      return out;
    }
    const type = (contentType ?? '').toLowerCase();
    if (type.startsWith('text/event-stream')) {
      out.events = parseSse(text, this.#truncated);
      return out;
    }
    if (!this.#truncated && /[/+]json\b/.test(type)) {
      // A hostile or odd upstream ({"n":1e400}, 20,000-deep arrays, duplicate keys, 64-bit ids)
      // must not be able to break the record or have it certify a value it did not send: such a
      // body is recorded as the text it is, with the SHA-256 above pinning its bytes.
      const inspected = inspectJson(raw, { maxDepth: MAX_JSON_DEPTH });
      // Too many containers for its size: recorded as text, so parsing it cannot hold the loop.
      if (inspected.ok && inspected.value.lossless && inspected.value.containers <= jsonContainerBudget(raw.length)) {
        out.body = JSON.parse(text) as unknown;
        return out;
      }
    }
    out.bodyText = text;
    return out;
  }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** UTF-8 text of `raw`, or undefined when it is not UTF-8. A truncated capture may end mid-character. */
function decodeUtf8(raw: Buffer, truncated: boolean): string | undefined {
  let bytes = raw;
  if (truncated) {
    // Drop at most 3 trailing bytes of a character cut by the capture limit.
    let cut = bytes.length;
    for (let i = 1; i <= 3 && i <= bytes.length; i++) {
      const b = bytes[bytes.length - i]!;
      if ((b & 0xc0) === 0x80) continue;
      if (b >= 0xc0) cut = bytes.length - i;
      break;
    }
    bytes = bytes.subarray(0, cut);
  }
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * Parses event-stream text into events (WHATWG HTML §9.2.6): `data` lines join with `\n`,
 * comments are skipped, an event ends at a blank line. A truncated tail without its blank line
 * is dropped (it may be cut), unless the stream simply ended without one.
 */
export function parseSse(text: string, truncated = false): SseEvent[] {
  const events: SseEvent[] = [];
  let data: string[] = [];
  let event: string | undefined;
  let id: string | undefined;
  // Streams nearly always end lines with LF alone, and a split on one character is ~6× faster than
  // the regular expression over a long capture (136 KB of chat chunks: ~25 against ~150 µs).
  const lines = text.includes('\r') ? text.split(/\r\n|\r|\n/) : text.split('\n');
  const dispatch = () => {
    if (data.length > 0) {
      const e: SseEvent = { data: data.join('\n') };
      if (event !== undefined) e.event = event;
      if (id !== undefined) e.id = id;
      events.push(e);
    }
    data = [];
    event = undefined;
    id = undefined;
  };
  for (const line of lines) {
    if (line === '') {
      dispatch();
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id') id = value;
  }
  if (!truncated) dispatch();
  return events;
}
