/**
 * Every view has a URL: the page's state lives in its hash as query parameters, so a link
 * reopens the same view and the browser's back button walks the views. The hash (not the path
 * or query) keeps it on the client: it is never sent to the server, which matters for the
 * embed token (`/embed?project=…#token=…`).
 *
 * `#view=stream&actorPrefix=plan&from=…` the audit stream with filters (API parameter names);
 * `#view=trace&trace=<traceId>&entry=<logId>` a trace, with a node selected;
 * `#view=entry&entry=<logId>` one log. `token` (embed) is kept across changes.
 */

/** The parameters of the views, in the hash. */
export interface Route {
  view: 'stream' | 'trace' | 'entry';
  trace?: string;
  entry?: string;
  /** Stream filters, as API query parameters. */
  filters: URLSearchParams;
}

const RESERVED = new Set(['view', 'trace', 'entry', 'token']);

/** Reads the route from a hash (default: the page's). */
export function readRoute(hash = location.hash): Route {
  const q = new URLSearchParams(hash.replace(/^#/, ''));
  const v = q.get('view');
  const view: Route['view'] = v === 'trace' || v === 'entry' ? v : 'stream';
  const filters = new URLSearchParams();
  for (const [k, val] of q) if (!RESERVED.has(k)) filters.append(k, val);
  const r: Route = { view, filters };
  const trace = q.get('trace');
  const entry = q.get('entry');
  if (trace) r.trace = trace;
  if (entry) r.entry = entry;
  return r;
}

/** The hash of a route (the embed token, when the page has one, is carried along). */
export function routeHash(r: Route, token = new URLSearchParams(location.hash.replace(/^#/, '')).get('token')): string {
  const q = new URLSearchParams();
  if (token) q.set('token', token);
  q.set('view', r.view);
  if (r.trace) q.set('trace', r.trace);
  if (r.entry) q.set('entry', r.entry);
  if (r.view === 'stream') for (const [k, v] of r.filters) q.append(k, v);
  return `#${q}`;
}

/** Puts `r` in the address bar: a new history entry, or (`replace`) the current one. */
export function writeRoute(r: Route, replace = false): void {
  const hash = routeHash(r);
  if (hash === location.hash) return;
  if (replace) history.replaceState(null, '', hash);
  else history.pushState(null, '', hash);
}
