/**
 * The dashboard: the files Vite built from `@countersign/dashboard` (its `dist/` folder) served
 * at `/`. The page reads through the same `/v1` API with a key the user types in; the server
 * gives it nothing that the API would not. Decryption and proof verification run in the
 * browser, so the page's policy lets it talk to this origin (and the configured ledger) only.
 *
 * When the dashboard has not been built, `/` answers a short page that says how to build it,
 * so a source checkout started without `npm run build` still explains itself.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import fastifyStatic from '@fastify/static';
import type { ServerConfig } from '../config.js';
import { PROJECT_SETTINGS } from '../projects/settings.js';

/** Where the dashboard's built files are (`packages/dashboard/dist`). */
export function dashboardRoot(): string {
  const require = createRequire(import.meta.url);
  return path.join(path.dirname(require.resolve('@countersign/dashboard/package.json')), 'dist');
}

/** True when the built dashboard is there (its `index.html` exists). */
export function dashboardBuilt(root = dashboardRoot()): boolean {
  return fs.existsSync(path.join(root, 'index.html'));
}

/**
 * The Content-Security-Policy of the dashboard's pages: scripts and styles from this origin only
 * (Vite emits no inline code), no frames, and network reads from this origin plus the origins
 * receipts may name for the ledger (`--ledger-url`, `--public-url`), so the browser can fetch
 * the ledger entry it verifies.
 */
export function dashboardCsp(config: Pick<ServerConfig, 'ledgerUrl' | 'publicUrl'>, frameAncestors: readonly string[] = []): string {
  const connect = new Set(["'self'"]);
  for (const u of [config.ledgerUrl, config.publicUrl]) {
    if (!u) continue;
    try {
      connect.add(new URL(u).origin);
    } catch {
      /* config validated URLs already; an odd one is simply not added */
    }
  }
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src ${[...connect].join(' ')}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    `frame-ancestors ${frameAncestors.length > 0 ? frameAncestors.join(' ') : "'none'"}`,
  ].join('; ');
}

/** An origin that may go into a CSP source list as it is (scheme://host[:port], nothing else). */
const ORIGIN_RE = /^https?:\/\/[a-z0-9.-]+(?::\d{1,5})?$|^https?:\/\/\[[0-9a-f:.]+\](?::\d{1,5})?$/i;

/**
 * The origins allowed to frame `/embed?project=<id>`: the project's `embedOrigins` setting
 * (`PATCH /v1/projects/{id}`), read through the settings table so this plugin follows however
 * it is stored. An unknown project, a malformed id or no setting gives none (`'none'`): the
 * viewer still opens on its own, it just cannot be framed. Values that are not plain origins
 * are dropped, so nothing stored can add a directive to the policy.
 */
export async function embedFrameAncestors(app: FastifyInstance, projectId: string | undefined): Promise<string[]> {
  const setting = PROJECT_SETTINGS.embedOrigins;
  if (!setting || !projectId || projectId.length > 256) return [];
  try {
    const value = await setting.read(app.ctx, projectId);
    return Array.isArray(value) ? value.filter((o): o is string => typeof o === 'string' && ORIGIN_RE.test(o)) : [];
  } catch {
    return [];
  }
}

/** The page served at `/` when the dashboard has not been built. */
export const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Countersign: dashboard not built</title></head>
<body style="font:15px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem">
<h1>Countersign</h1>
<p>The API is running, but the web dashboard has not been built, so there is nothing to show here yet.</p>
<p>Build it with <code>npm run build</code> at the repository root (or <code>npm run build -w @countersign/dashboard</code>),
then restart the server.</p>
<p>API reference: <a href="/docs">/docs</a> · <a href="/openapi.json">/openapi.json</a></p>
</body></html>
`;

/** Options of {@link dashboardPlugin}. */
export interface DashboardPluginOptions {
  /** Folder of the built files (default {@link dashboardRoot}). */
  root?: string;
}

/** Dashboard plugin. */
export default async function dashboardPlugin(app: FastifyInstance, options: DashboardPluginOptions = {}): Promise<void> {
  const csp = dashboardCsp(app.ctx.config);
  const root = options.root ?? dashboardRoot();
  app.addHook('onSend', async (_request, reply, payload) => {
    if (reply.getHeader('content-type')?.toString().startsWith('text/html')) {
      // /embed sets its own policy (its frame-ancestors); every other page is never framed.
      if (!reply.getHeader('content-security-policy')) void reply.header('content-security-policy', csp);
      void reply.header('x-content-type-options', 'nosniff');
      void reply.header('referrer-policy', 'no-referrer');
      void reply.header('cache-control', 'no-cache');
    }
    return payload;
  });

  if (!dashboardBuilt(root)) {
    app.log.warn({ root }, 'the dashboard is not built; / explains how to build it');
    app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.type('text/html; charset=utf-8').send(NOT_BUILT_PAGE));
    return;
  }
  // The embedded viewer: the same page, framable by the project's embedding origins only.
  app.get<{ Querystring: { project?: string } }>('/embed', { schema: { hide: true } }, async (request, reply) => {
    const project = typeof request.query.project === 'string' ? request.query.project : undefined;
    const ancestors = await embedFrameAncestors(app, project);
    const html = await fs.promises.readFile(path.join(root, 'index.html'));
    return reply.header('content-security-policy', dashboardCsp(app.ctx.config, ancestors)).type('text/html; charset=utf-8').send(html);
  });
  await app.register(fastifyStatic, {
    root,
    prefix: '/',
    index: ['index.html'],
    wildcard: false,
    // HTML gets no-cache from the hook above; only hashed assets are cached.
    cacheControl: false,
    // Vite names assets by content hash, so they never change under one name.
    setHeaders: (res, file) => {
      if (file.includes(`${path.sep}assets${path.sep}`)) res.setHeader('cache-control', 'public, max-age=31536000, immutable');
    },
  });
}
