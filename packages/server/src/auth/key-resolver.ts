/**
 * Turns a bearer token into a principal. The class comes from the key's prefix (spec 5.3); the
 * lookup that says the key exists and is not revoked is cached, and the cache is told at once
 * when a key is revoked or rotated, so a dead key stops working on the next request. A key
 * rotated with a grace period keeps working until its scheduled revocation, and no cache entry
 * outlives that moment.
 */
import { CoreError, hashApiKey, parseApiKey } from '@countersign/core';
import { ApiError } from '../errors.js';
import type { Store } from '../store/index.js';
import type { KeyPrincipal, MasterPrincipal, Principal } from './principal.js';
import { MasterKeys } from './master-keys.js';

/** Verifies tokens that are not `key_…` keys (embed tokens); the app passes the embed-token one. */
export type TokenVerifier = (token: string) => Promise<Principal | undefined>;

const CACHE_TTL_MS = 30_000;
const CACHE_MAX = 10_000;

/** Resolves bearer tokens with a bounded, invalidatable cache. */
export class KeyResolver {
  readonly #cache = new Map<string, { principal: KeyPrincipal; until: number }>();
  readonly #master: MasterKeys;
  /** Bumped on every invalidation, so a lookup that raced a revocation is not cached. */
  #generation = 0;

  constructor(
    private readonly store: Store,
    /** The master key, or every accepted one (current and, during a rotation, previous). */
    masterKey: string | MasterKeys,
    private readonly now: () => number = Date.now,
    /** Verifies bearer tokens that are not `key_…` keys (embed tokens); none by default. */
    private readonly tokenVerifier?: TokenVerifier,
  ) {
    this.#master = typeof masterKey === 'string' ? MasterKeys.fromConfig(masterKey) : masterKey;
    // Revocations made by any instance (NOTIFY on PostgreSQL) reach this cache.
    store.notifier.on('countersign_keys', (keyHash) => this.invalidate(keyHash));
  }

  /** Forgets a key (call on revoke and rotate; also on NOTIFY from another instance). */
  invalidate(keyHash: string): void {
    this.#generation++;
    this.#cache.delete(keyHash);
  }

  /**
   * Forgets a key here and on every other instance (call after a revoke or rotate commits).
   * The local cache is cleared first, so this instance refuses the key even if NOTIFY fails.
   */
  async invalidateEverywhere(keyHash: string): Promise<void> {
    this.invalidate(keyHash);
    await this.store.notifier.notify('countersign_keys', keyHash);
  }

  /**
   * The principal of an `Authorization` header value.
   * @throws ApiError `missing_api_key` or `invalid_api_key`.
   */
  async resolve(authorization: string | undefined): Promise<Principal> {
    if (!authorization) throw new ApiError('missing_api_key', 'send Authorization: Bearer <API key>');
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
    if (!m) throw new ApiError('missing_api_key', 'the Authorization header must be "Bearer <API key>"');
    const token = m[1]!;
    if (!token.startsWith('key_')) {
      const p = this.tokenVerifier ? await this.tokenVerifier(token) : undefined;
      if (p) return p;
      throw new ApiError('invalid_api_key', 'the bearer token is neither a Countersign key nor a valid embed token');
    }
    const keyHash = hashApiKey(token);
    // Hot path: a key seen (and checked) in the last 30 s. Equal hashes mean the same token, so
    // the prefix and checksum checks it passed then still hold; only live keys are cached.
    const hit = this.#cache.get(keyHash);
    const now = this.now();
    if (hit && hit.until > now) return hit.principal;
    let parsed;
    try {
      parsed = parseApiKey(token);
    } catch (e) {
      throw new ApiError('invalid_api_key', e instanceof CoreError ? e.message : 'malformed API key');
    }
    if (parsed.credentialClass === 'master') {
      const match = this.#master.check(keyHash, now);
      if (match === 'expired')
        throw new ApiError('invalid_api_key', 'this master key was rotated away and its grace period is over; use the new master key');
      if (match === 'unknown') throw new ApiError('invalid_api_key', 'unknown master key');
      return { kind: 'master' } satisfies MasterPrincipal;
    }
    const generation = this.#generation;
    const row = await this.store.projects.keyByHash(keyHash);
    // A rotated key with a grace period has its revocation in the future: it works until then.
    if (!row || (row.revokedAt !== null && row.revokedAt <= now)) {
      this.#cache.delete(keyHash);
      throw new ApiError('invalid_api_key', row ? 'this key was revoked or rotated away' : 'unknown API key');
    }
    // The prefix is the hot-path source of the class; it must agree with what was issued.
    if (row.credentialClass !== parsed.credentialClass)
      throw new ApiError('invalid_api_key', 'the key prefix does not match the class it was issued with');
    const principal: KeyPrincipal = {
      kind: 'key',
      projectId: row.projectId,
      keyId: row.id,
      credentialClass: parsed.credentialClass,
      apiKeyPrefix: row.apiKeyPrefix,
    };
    if (generation === this.#generation) {
      if (this.#cache.size >= CACHE_MAX) this.#cache.delete(this.#cache.keys().next().value as string);
      // Never cached past a scheduled revocation (the end of a rotation grace period).
      this.#cache.set(keyHash, { principal, until: Math.min(now + CACHE_TTL_MS, row.revokedAt ?? Infinity) });
    }
    return principal;
  }
}
