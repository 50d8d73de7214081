/**
 * Client test harness: a REAL Countersign server (buildApp, listening on an ephemeral loopback
 * port, SQLite in a temporary data dir, or PostgreSQL when DATABASE_URL is set), and a project
 * made through the real API with one key per class.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApp, type StartAppOptions, type TestApp } from '../../../server/test/helpers/server.js';

export { STORES, tempDir, type StoreKind } from '../../../server/test/helpers/server.js';

/** A project with a key of every class and its client secret. */
export interface TestProject {
  id: string;
  clientSecret: string;
  keys: { human: string; agent: string; service: string; live: string };
}

/** A running server with one project. */
export interface ClientTestServer extends TestApp {
  project: TestProject;
  /** Creates another project (for cross-project checks). */
  newProject: () => Promise<TestProject>;
}

async function api<T>(url: string, path: string, key: string, body: unknown): Promise<T> {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as T;
  if (res.status !== 201) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/** Makes a project through the real API (master key), with one key of each class. */
export async function createProject(url: string, masterKey: string): Promise<TestProject> {
  const made = await api<{ project: { id: string; apiKey: string; clientSecret: string } }>(url, '/v1/projects', masterKey, {
    name: 'client tests',
    credentialClass: 'service',
  });
  const id = made.project.id;
  const key = async (credentialClass: string) =>
    (await api<{ key: { apiKey: string } }>(url, `/v1/projects/${id}/keys`, masterKey, { credentialClass })).key.apiKey;
  return {
    id,
    clientSecret: made.project.clientSecret,
    keys: { service: made.project.apiKey, human: await key('human'), agent: await key('agent'), live: await key('live') },
  };
}

/** Starts a real listening server with a project. */
export async function startServer(options: StartAppOptions = {}): Promise<ClientTestServer> {
  const app = await startApp({ ...options, listen: true });
  const project = await createProject(app.url, app.masterKey);
  return { ...app, project, newProject: () => createProject(app.url, app.masterKey) };
}

/** A loopback URL where nothing listens (a port that was just free). */
export async function deadEndpoint(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/**
 * A real HTTP gateway in front of the server that misbehaves on purpose, the way load balancers
 * do: `plan(n)` says what to do with request n (0-based): `forward`, `503` (with Retry-After: 0),
 * or `lose` (forward, let the server store it, then answer 502 so the client must retry).
 */
export async function startGateway(
  upstream: string,
  plan: (n: number) => 'forward' | '503' | 'lose',
): Promise<{ url: string; requests: number; close: () => Promise<void> }> {
  const state = { url: '', requests: 0, close: async () => {} };
  const server = http.createServer((req, res) => {
    const n = state.requests++;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const what = plan(n);
      if (what === '503') {
        res.writeHead(503, { 'retry-after': '0', 'content-type': 'text/html' }).end('<h1>busy</h1>');
        return;
      }
      const headers = { ...req.headers };
      delete headers.host;
      delete headers['content-length'];
      void fetch(upstream + req.url, {
        method: req.method,
        headers: headers as Record<string, string>,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks),
      }).then(async (up) => {
        const text = await up.text();
        if (what === 'lose') res.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway');
        else res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' }).end(text);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}
