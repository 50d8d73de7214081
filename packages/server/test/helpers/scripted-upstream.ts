/**
 * A loopback upstream whose answers a test scripts per path, and which records every request's
 * body as raw bytes (no UTF-8 decoding), so byte-exactness can be asserted both ways. Used by the
 * hardening and forward-mode suites for hostile answers (numbers JavaScript cannot hold, deep
 * JSON, forged `X-Service-*` headers) and for multipart and binary bodies.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as received. */
export interface RawRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A scripted answer. */
export interface ScriptedAnswer {
  status?: number;
  headers?: Record<string, string>;
  /** Whole body, or a list of chunks sent `gapMs` apart. */
  body?: Buffer | string | Array<Buffer | string>;
  gapMs?: number;
}

/** A running scripted upstream. */
export interface ScriptedUpstream {
  url: string;
  hostPort: string;
  requests: RawRequest[];
  /** Sets the answer for a path (without query); unknown paths echo the request as JSON. */
  answer: (path: string, a: ScriptedAnswer) => void;
  close: () => Promise<void>;
}

/** Starts one on 127.0.0.1. */
export async function startScriptedUpstream(): Promise<ScriptedUpstream> {
  const answers = new Map<string, ScriptedAnswer>();
  const requests: RawRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const a = answers.get(req.url!.split('?')[0]!);
      if (!a) {
        const echo = JSON.stringify({ method: req.method, url: req.url, bodyBase64: body.toString('base64') });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(echo) });
        res.end(echo);
        return;
      }
      const parts = Array.isArray(a.body) ? a.body : a.body === undefined ? [] : [a.body];
      const headers = { ...a.headers };
      if (!Array.isArray(a.body)) headers['content-length'] = String(parts.reduce((n, p) => n + Buffer.byteLength(p), 0));
      res.writeHead(a.status ?? 200, headers);
      let i = 0;
      const next = () => {
        if (i >= parts.length) return void res.end();
        res.write(parts[i++]);
        setTimeout(next, a.gapMs ?? 0);
      };
      next();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    hostPort: `127.0.0.1:${port}`,
    requests,
    answer: (path, a) => answers.set(path, a),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
