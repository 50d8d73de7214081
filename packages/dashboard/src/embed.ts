/**
 * The embedded viewer's launch parameters: `/embed?project=<projectId>#token=<embed token>`.
 * The token sits in the hash so it never reaches a server log or a Referer; the project id is in
 * the query because the server needs it before any script runs, to send the project's
 * `frame-ancestors`. Opened without `?project=` (DESIGN's bare `/embed#token=`), the project id
 * is read from the token's own `projectId` claim: that works on its own tab, but the server then
 * cannot know whose origins may frame it, so inside an iframe the query is required. The token
 * is read (not verified: the server does that on every call) only for the project and the scope.
 */

/** What `/embed` was opened with, or why it cannot start; undefined on the normal dashboard. */
export type EmbedLaunch = { projectId: string; token: string } | { error: string };

/** Reads the launch parameters when the page is the embedded viewer. */
export function embedLaunch(loc: Pick<Location, 'pathname' | 'search' | 'hash'>): EmbedLaunch | undefined {
  if (!/^\/embed\/?$/.test(loc.pathname)) return undefined;
  const token = new URLSearchParams(loc.hash.replace(/^#/, '')).get('token')?.trim();
  if (!token) return { error: 'this embed link has no #token=<embed token>' };
  const projectId = new URLSearchParams(loc.search).get('project')?.trim() || claimsOf(token).projectId;
  if (typeof projectId !== 'string' || !projectId)
    return { error: 'this embed link has no ?project=<project id> and its token names no project' };
  return { projectId, token };
}

/** The claims of a JWT, decoded without verification, or {} when they cannot be read. */
function claimsOf(token: string): Record<string, unknown> {
  try {
    const part = token.split('.')[1] ?? '';
    const json = atob(
      part
        .replace(/-/g, '+')
        .replace(/_/g, '/')
        .padEnd(Math.ceil(part.length / 4) * 4, '='),
    );
    const claims = JSON.parse(json) as unknown;
    return typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** The `scope` claim of an embed token (trace and/or actor), or {} when it cannot be read. */
export function embedScope(token: string): { traceId?: string; actor?: string } {
  const scope = claimsOf(token).scope;
  if (typeof scope !== 'object' || scope === null) return {};
  const s = scope as Record<string, unknown>;
  return {
    ...(typeof s.traceId === 'string' ? { traceId: s.traceId } : {}),
    ...(typeof s.actor === 'string' ? { actor: s.actor } : {}),
  };
}
