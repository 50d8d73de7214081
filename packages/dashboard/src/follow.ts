/**
 * Keeps an SSE stream open: reconnects with backoff (1 s doubling to 30 s) when it drops, stops
 * on abort or when the server refuses (4xx), and reports its state for the page's pill.
 */
import { ApiCallError } from './api.js';

const MAX_BACKOFF_MS = 30_000;

/** States shown beside a stream. */
export type StreamState = 'live' | 'reconnecting' | 'unavailable';

/**
 * Runs `connect` until `signal` aborts. `connect` calls its `onOpen` once the server accepted
 * the stream and resolves when the stream ends.
 */
export async function follow(
  connect: (onOpen: () => void) => Promise<void>,
  signal: AbortSignal,
  report: (state: StreamState, text: string, err?: unknown) => void,
): Promise<void> {
  let backoff = 1000;
  while (!signal.aborted) {
    try {
      await connect(() => {
        backoff = 1000;
        report('live', 'live');
      });
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiCallError && err.status >= 400 && err.status < 500) {
        report('unavailable', err.status === 404 ? 'stream not available' : 'stream refused', err);
        return;
      }
    }
    if (signal.aborted) return;
    report('reconnecting', `reconnecting in ${Math.round(backoff / 1000)} s`);
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
  }
}
