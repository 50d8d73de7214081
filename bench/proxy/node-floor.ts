/**
 * The Node floor: the least a Node.js reverse proxy can do per call. node:http in, undici out,
 * the path and body passed through untouched, no parsing, no logging, no record. Whatever
 * Countersign costs above this is the price of certifying, not of being written in Node.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

/** Request headers that belong to one hop (RFC 9110 7.6.1), plus Host (undici sets the upstream's). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host']);

function forwardable(headers: http.IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const v = headers[name];
    if (v !== undefined && !HOP.has(name)) out[name] = v;
  }
  return out;
}

/** Starts the bare proxy in front of `upstream` on a loopback ephemeral port; resolves with its URL. */
export async function startNodeFloor(upstream: string): Promise<string> {
  const pool = new Pool(upstream, { connections: 128, keepAliveTimeout: 30_000 });
  const server = http.createServer((req, res) => {
    pool
      .stream(
        {
          path: req.url ?? '/',
          method: (req.method ?? 'GET') as 'GET',
          headers: forwardable(req.headers),
          body: req.method === 'GET' || req.method === 'HEAD' ? null : req,
        },
        ({ statusCode, headers }) => {
          res.writeHead(statusCode, forwardable(headers));
          res.flushHeaders(); // an SSE answer's status line goes out at once, as the proxies under test do
          return res;
        },
      )
      .catch(() => {
        if (!res.headersSent) res.writeHead(502).end();
        else res.destroy();
      });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
