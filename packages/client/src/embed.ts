/**
 * Embed tokens: short-lived, read-only, HS256-signed JWTs that let a browser (an embedded audit
 * view) read one project's logs, traces and proofs, optionally narrowed to one trace or one
 * actor. Signed with the project's `clientSecret`, which never leaves your server.
 *
 * Claims: `projectId`, `scope` (`{traceId?, actor?}`, only when given), `iat`, `exp`, and
 * `aud: "countersign:embed"`. The server pins HS256, requires `exp`, and refuses tokens that
 * live longer than {@link MAX_EMBED_TOKEN_SECONDS}.
 */
import { SignJWT } from 'jose';
import { ClientError } from './errors.js';

/** Audience claim of every embed token. */
export const EMBED_TOKEN_AUDIENCE = 'countersign:embed';
/** Default lifetime: 15 minutes. */
export const DEFAULT_EMBED_TOKEN_SECONDS = 15 * 60;
/** Longest lifetime the server accepts: 24 hours. */
export const MAX_EMBED_TOKEN_SECONDS = 24 * 60 * 60;

/** Optional claims of `generateEmbedToken`. */
export interface EmbedTokenClaims {
  /** Lifetime in seconds (default 900, at most 86 400). */
  expiresIn?: number;
  /** Only this trace (run id) may be read. */
  traceId?: string;
  /** Only this actor's logs may be read. */
  actor?: string;
  /** Free-text subject, e.g. your user id, for your own audit (`sub`). */
  subject?: string;
}

/**
 * Signs an embed token.
 * @throws ClientError `embed_token_unavailable` without projectId/clientSecret; `invalid_entry` on bad claims.
 */
export async function signEmbedToken(
  projectId: string | undefined,
  clientSecret: string | undefined,
  claims: EmbedTokenClaims = {},
  now: number = Date.now(),
): Promise<string> {
  if (!projectId || !clientSecret)
    throw new ClientError(
      'embed_token_unavailable',
      'generateEmbedToken() needs projectId and clientSecret in the ServiceClient config (both come from project creation)',
    );
  const seconds = claims.expiresIn ?? DEFAULT_EMBED_TOKEN_SECONDS;
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_EMBED_TOKEN_SECONDS)
    throw new ClientError('invalid_entry', `expiresIn must be an integer from 1 to ${MAX_EMBED_TOKEN_SECONDS} seconds`);
  const scope: { traceId?: string; actor?: string } = {};
  for (const k of ['traceId', 'actor'] as const) {
    const v = claims[k];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v.length === 0 || v.length > 256) throw new ClientError('invalid_entry', `${k} must be 1-256 characters`);
    scope[k] = v;
  }
  const iat = Math.floor(now / 1000);
  const jwt = new SignJWT({ projectId, ...(Object.keys(scope).length > 0 ? { scope } : {}) })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setAudience(EMBED_TOKEN_AUDIENCE)
    .setIssuedAt(iat)
    .setExpirationTime(iat + seconds);
  if (claims.subject !== undefined) jwt.setSubject(claims.subject);
  return jwt.sign(new TextEncoder().encode(clientSecret));
}
