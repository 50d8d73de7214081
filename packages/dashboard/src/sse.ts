/**
 * A Server-Sent Events frame parser for streams read with `fetch` (EventSource cannot send an
 * Authorization header). Pure: text chunks in, complete events out, so it is tested in Node.
 */

/** One dispatched SSE event. */
export interface SseEvent {
  /** The `id:` field (for Last-Event-ID), when the frame had one. */
  id?: string;
  /** The `event:` field, default `message`. */
  event: string;
  /** The `data:` lines joined with newlines. */
  data: string;
}

/**
 * Incremental parser (WHATWG "event stream interpretation", minus `retry:`): feed decoded text
 * chunks in any split; each blank line dispatches the frame collected so far. Comment lines
 * (`: heartbeat`) are reported through `onComment` so a caller can tell the stream is alive.
 */
export class SseParser {
  #buffer = '';
  #data: string[] = [];
  #event = '';
  #id: string | undefined;

  /** @param onEvent called for every complete event; @param onComment for every comment line. */
  constructor(
    private readonly onEvent: (e: SseEvent) => void,
    private readonly onComment: (text: string) => void = () => undefined,
  ) {}

  /**
   * The last event id seen, from any frame, one without data included (what EventSource would
   * send as Last-Event-ID on a reconnect).
   */
  get lastEventId(): string | undefined {
    return this.#id;
  }

  /** Feeds a chunk of text. */
  push(chunk: string): void {
    this.#buffer += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.#buffer);
      // A lone trailing \r may be the first half of \r\n: wait for the next chunk.
      if (!m || (m[0] === '\r' && m.index === this.#buffer.length - 1)) return;
      const line = this.#buffer.slice(0, m.index);
      this.#buffer = this.#buffer.slice(m.index + m[0].length);
      this.#line(line);
    }
  }

  #line(line: string): void {
    if (line === '') {
      if (this.#data.length > 0) {
        const e: SseEvent = { event: this.#event || 'message', data: this.#data.join('\n') };
        if (this.#id !== undefined) e.id = this.#id;
        this.onEvent(e);
      }
      this.#data = [];
      this.#event = '';
      return;
    }
    if (line.startsWith(':')) {
      this.onComment(line.slice(1).trim());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.#data.push(value);
    else if (field === 'event') this.#event = value;
    else if (field === 'id' && !value.includes('\u0000')) this.#id = value;
  }
}
