/**
 * Embed tokens, server side: HS256 JWTs signed by `ServiceClient.generateEmbedToken()` with a
 * project's client secret. They give read-only, expiring, optionally scoped access to that
 * project's logs, traces and proofs, and nothing else.
 *
 * Verification pins HS256 (alg `none`, RS256 and every other algorithm are refused before any
 * key is touched), requires `exp` and `iat`, the audience `countersign:embed`, a lifetime of at
 * most 24 hours, and a `projectId` whose client secret verifies the signature: the current one,
 * or the one replaced by `POST …/client-secret/rotate` while its grace period runs.
 */
import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify } from 'jose';
import { MAX_ID_LENGTH } from '@countersign/core';
import { ApiError } from '../errors.js';
import type { Store } from '../store/index.js';
import type { TokenVerifier } from './key-resolver.js';
import type { EmbedPrincipal, Principal } from './principal.js';

/** The audience claim every embed token carries. */
export const EMBED_TOKEN_AUDIENCE = 'countersign:embed';
/** The longest lifetime (`exp - iat`) accepted, in seconds. */
export const MAX_EMBED_TOKEN_SECONDS = 24 * 60 * 60;
/** Clock tolerance for `exp`/`iat`, in seconds. */
const CLOCK_TOLERANCE_S = 30;
const PROJECT_ID_RE = /^prj_live_[0-9A-Za-z]{1,64}$/;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

function refuse(why: string): never {
  throw new ApiError('invalid_api_key', `embed token refused: ${why}`);
}

function scopeOf(claim: unknown): EmbedPrincipal['scope'] {
  if (claim === undefined) return {};
  if (claim === null || typeof claim !== 'object' || Array.isArray(claim)) refuse('scope must be an object');
  const scope: EmbedPrincipal['scope'] = {};
  for (const [k, v] of Object.entries(claim)) {
    if (k !== 'traceId' && k !== 'actor') refuse(`unknown scope field "${k}"`);
    if (typeof v !== 'string' || v.length === 0 || v.length > MAX_ID_LENGTH) refuse(`scope.${k} must be 1-${MAX_ID_LENGTH} characters`);
    scope[k] = v;
  }
  return scope;
}

/**
 * Verifies one embed token against the store's client secrets.
 * @returns undefined when the token is not a JWT at all (the resolver then says so).
 * @throws ApiError `invalid_api_key` with the reason when it is a JWT but not an acceptable one.
 */
export async function verifyEmbedToken(token: string, store: Store, now: number): Promise<Principal | undefined> {
  if (!JWT_SHAPE.test(token)) return undefined;
  let alg: unknown;
  let claims: Record<string, unknown>;
  try {
    alg = decodeProtectedHeader(token).alg;
    claims = decodeJwt(token);
  } catch {
    return refuse('not a readable JWT');
  }
  if (alg !== 'HS256') refuse(`algorithm ${JSON.stringify(alg)} is not accepted; embed tokens are HS256`);
  const projectId = claims.projectId;
  if (typeof projectId !== 'string' || !PROJECT_ID_RE.test(projectId)) refuse('projectId claim missing or malformed');
  const project = await store.projects.get(projectId);
  // The same answer for an unknown project and a bad signature: a token does not probe ids.
  if (!project) refuse('signature does not verify');
  // During a rotation grace period the replaced secret verifies too, until the grace ends; it is
  // read from the store on every request (no cache), so a rotation made on any instance holds on
  // every instance from the next request on.
  const previous = project.previousClientSecret;
  const secrets = [project.clientSecret, ...(previous && previous.until > now ? [previous.secret] : [])];
  let payload: Record<string, unknown>;
  try {
    payload = await verifyWithAny(token, secrets, now);
  } catch (e) {
    if (e instanceof joseErrors.JWTExpired) refuse('expired; ask your server for a new one');
    if (e instanceof joseErrors.JWSSignatureVerificationFailed) refuse('signature does not verify');
    if (e instanceof joseErrors.JWTClaimValidationFailed) refuse(`claim "${e.claim}" is not acceptable (${e.reason})`);
    return refuse('not a valid HS256 JWT');
  }
  const exp = payload.exp as number;
  const iat = payload.iat as number;
  if (exp - iat > MAX_EMBED_TOKEN_SECONDS) refuse(`lifetime is over ${MAX_EMBED_TOKEN_SECONDS} seconds`);
  if (iat * 1000 > now + CLOCK_TOLERANCE_S * 1000) refuse('issued in the future');
  return { kind: 'embed', projectId, scope: scopeOf(payload.scope), expiresAt: exp * 1000 } satisfies EmbedPrincipal;
}

/** Verifies `token` with the first of `secrets` whose signature matches; throws jose's error otherwise. */
async function verifyWithAny(token: string, secrets: string[], now: number): Promise<Record<string, unknown>> {
  for (let i = 0; ; i++) {
    try {
      const { payload } = await jwtVerify(token, new TextEncoder().encode(secrets[i]!), {
        algorithms: ['HS256'],
        audience: EMBED_TOKEN_AUDIENCE,
        requiredClaims: ['exp', 'iat'],
        currentDate: new Date(now),
        clockTolerance: CLOCK_TOLERANCE_S,
      });
      return payload;
    } catch (e) {
      // Only a signature mismatch moves on to the next secret: a token that verifies but is
      // expired or has the wrong audience is refused for that reason.
      if (!(e instanceof joseErrors.JWSSignatureVerificationFailed) || i === secrets.length - 1) throw e;
    }
  }
}

/** The verifier the app gives its `KeyResolver` for embed tokens. */
export function embedTokenVerifier(store: Store, now: () => number): TokenVerifier {
  return (token) => verifyEmbedToken(token, store, now());
}

/** Read routes an embed token may use (route patterns as Fastify reports them). */
const EMBED_ROUTES = new Set([
  '/v1/projects/:projectId/logs',
  // The stream and the export force the token's scope as filters (logs/filters.ts), like the list.
  '/v1/projects/:projectId/logs/stream',
  '/v1/projects/:projectId/logs/export',
  '/v1/projects/:projectId/logs/:logId',
  '/v1/projects/:projectId/logs/:logId/proof',
  '/v1/projects/:projectId/traces/:traceId',
]);

/**
 * Holds an embed token to its purpose: only the log, trace and proof reads, the live log stream
 * and the export (not events), and only rows inside its scope. Live keys and other principals pass untouched.
 * @param target the route pattern, and the row (or trace) about to be returned, when known.
 * @throws ApiError `wrong_credential_class` for a route embed tokens may not use; `not_found`
 * for a row outside the scope (the same answer as a missing row, so scope hides existence).
 */
export function assertEmbedScope(
  principal: Principal | undefined,
  target: { route?: string; traceId?: string | null; actor?: string },
): void {
  if (!principal || principal.kind !== 'embed') return;
  if (target.route !== undefined && !EMBED_ROUTES.has(target.route))
    throw new ApiError('wrong_credential_class', 'embed tokens read logs, traces and proofs only; use a key_live_ key for this');
  const { traceId, actor } = principal.scope;
  if (traceId !== undefined && 'traceId' in target && target.traceId !== traceId)
    throw new ApiError('not_found', 'no such log or trace within this embed token scope');
  if (actor !== undefined && 'actor' in target && target.actor !== actor)
    throw new ApiError('not_found', 'no such log or trace within this embed token scope');
}
