/**
 * Time and connection bounds of the HTTP server (issue 8): with Node's request timeout at 0, 300
 * unauthenticated connections trickling one byte every 15 s stayed open for ever. Here:
 *
 * - `requestTimeout`: the whole request, headers and body, must arrive within
 *   `COUNTERSIGN_REQUEST_TIMEOUT_MS` (60 s), else 408 `request_timeout` and the connection
 *   closes. It covers only receiving the request: an answer that streams for an hour (SSE
 *   through the proxy) is not cut by it.
 * - `headersTimeout`: the headers within `COUNTERSIGN_HEADERS_TIMEOUT_MS` (20 s).
 * - `keepAliveTimeout`: an idle kept-alive connection closes after
 *   `COUNTERSIGN_KEEP_ALIVE_TIMEOUT_MS` (30 s); Node announces it in `Keep-Alive: timeout=`.
 * - At most `COUNTERSIGN_MAX_CONNECTIONS_PER_CLIENT` (1024) open connections per client address;
 *   more are closed at once, before a byte is read. `COUNTERSIGN_MAX_CONNECTIONS` (off by
 *   default) caps the whole process (Node's `server.maxConnections`).
 *
 * No socket inactivity timeout is set: a proxied answer may legitimately pause for as long as the
 * upstream's idle timeout, and the proxy bounds that itself.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { ServerConfig } from '../config.js';

/** Open connections per client address, and the refusals so far. */
export interface ConnectionCounter {
  /** Open connections of `address`. */
  openFrom(address: string): number;
  /** Connections closed at once because their client was over its cap. */
  readonly refused: number;
}

/** `::ffff:127.0.0.1` and `127.0.0.1` are one client. */
function clientOf(socket: Socket): string | undefined {
  const a = socket.remoteAddress;
  return a?.startsWith('::ffff:') ? a.slice(7) : a;
}

/**
 * Applies the timeouts and caps of `limits` to `server` (before it listens: Node starts the
 * timeout checks when it does).
 */
export function installConnectionLimits(server: Server, limits: ServerConfig['connections'], log: FastifyBaseLogger): ConnectionCounter {
  server.requestTimeout = limits.requestTimeoutMs;
  server.headersTimeout = limits.headersTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  // Node checks the request and headers deadlines on this interval (default 30 s), read when the
  // server starts listening (a documented createServer option, absent from @types/node's Server):
  // often enough that a deadline is kept to within a quarter of itself, at most once a second.
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.max(
    25,
    Math.min(1000, Math.floor(limits.headersTimeoutMs / 4)),
  );
  if (limits.max > 0) server.maxConnections = limits.max;

  const open = new Map<string, number>();
  let refused = 0;
  if (limits.maxPerClient > 0) {
    server.on('connection', (socket: Socket) => {
      const client = clientOf(socket);
      if (client === undefined) return;
      const n = open.get(client) ?? 0;
      if (n >= limits.maxPerClient) {
        refused++;
        log.debug({ client, open: n }, 'connection refused: client over its connection cap');
        socket.destroy();
        return;
      }
      open.set(client, n + 1);
      socket.once('close', () => {
        const left = (open.get(client) ?? 1) - 1;
        if (left <= 0) open.delete(client);
        else open.set(client, left);
      });
    });
  }
  return {
    openFrom: (address) => open.get(address) ?? 0,
    get refused() {
      return refused;
    },
  };
}
