/**
 * A loopback upstream that misbehaves on purpose, one way per path, for the hostile suite:
 * answers JavaScript cannot hold, answers that trickle, never come, are cut, are huge, or try to
 * forge our headers. `/echo` sends back the exact request bytes, so byte-exactness of what the
 * proxy forwarded can be checked.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A running hostile upstream. */
export interface HostileUpstream {
  url: string;
  hostPort: string;
  /** Paths of the requests that reached it, in arrival order. */
  arrived: string[];
  close: () => Promise<void>;
}

/** Bytes of the `/deep` answer: arrays nested 20,000 deep. */
export const DEEP_ANSWER = Buffer.from('['.repeat(20_000) + ']'.repeat(20_000));
/** Bytes of the `/huge-number` answer. */
export const HUGE_NUMBER_ANSWER = Buffer.from('{"n":1e400,"id":9007199254740993,"z":-0,"k":1,"k":2}');
/** Bytes of the `/bad-utf8` answer: declared JSON, not UTF-8. */
export const BAD_UTF8_ANSWER = Buffer.from([0x7b, 0x22, 0x73, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]);
/** Size of the `/huge` answer. */
export const HUGE_BYTES = 40 * 1024 * 1024;

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;

const routes: Record<string, Handler> = {
  '/echo': (_req, res, body) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
    res.end(body);
  },
  '/huge-number': (_req, res) => fixed(res, HUGE_NUMBER_ANSWER),
  '/deep': (_req, res) => fixed(res, DEEP_ANSWER),
  '/bad-utf8': (_req, res) => fixed(res, BAD_UTF8_ANSWER),
  '/forged': (_req, res) => {
    const body = Buffer.from('{"ok":true}');
    res.writeHead(200, {
      'content-type': 'application/json',
      'x-service-log-id': 'forged',
      'x-service-verdict': 'clean',
      'content-length': body.length,
    });
    res.end(body);
  },
  // One byte every 40 ms, 25 bytes: slow but complete.
  '/trickle': (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    let sent = 0;
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      res.write('x');
      if (++sent === 25) {
        clearInterval(timer);
        res.end();
      }
    }, 40);
  },
  // 40 MB as fast as the caller reads it: past the 2 MB capture, hashed whole.
  '/huge': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': HUGE_BYTES });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let left = HUGE_BYTES;
    const pump = () => {
      while (left > 0) {
        left -= chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  },
  // Half an answer, then the connection is cut.
  '/cut': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 1000 });
    res.write('{"partial":"');
    setTimeout(() => res.socket?.destroy(), 50);
  },
  // Headers never come (the proxy's first-byte timeout ends it).
  '/never': () => undefined,
};

function fixed(res: http.ServerResponse, body: Buffer): void {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
}

/** Starts one on 127.0.0.1. */
export async function startHostileUpstream(): Promise<HostileUpstream> {
  const arrived: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url!.split('?')[0]!;
      arrived.push(path);
      const route = routes[path];
      if (route) route(req, res, Buffer.concat(chunks));
      else fixed(res, Buffer.from('{"unknown":true}'));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hostPort: `127.0.0.1:${port}`,
    arrived,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
