/**
 * Making projects and keys: ids, key text, and the rows stored for them. Pure apart from
 * randomness, so the routes stay thin and the rules live in one place.
 */
import { generateApiKey, hashApiKey, parseApiKey, randomId, type CredentialClass } from '@countersign/core';
import type { ApiKeyRow, ProjectRow } from '../store/index.js';

/** Classes a project key may have (the master key is not a project key). */
export type ProjectKeyClass = Exclude<CredentialClass, 'master'>;

/** A new key: the text (shown once) and the row that is stored (hash only). */
export interface IssuedKey {
  apiKey: string;
  row: ApiKeyRow;
}

/** A new project id, `prj_live_<20 base62>`. */
export function newProjectId(): string {
  return 'prj_live_' + randomId(20);
}

/** A new key id, `kid_<16 base62>` (safe to show and log). */
export function newKeyId(): string {
  return 'kid_' + randomId(16);
}

/** A new client secret (HS256 embed tokens): 43 base62 characters, about 256 bits. */
export function newClientSecret(): string {
  return 'cs_' + randomId(43);
}

/** Makes a key of `credentialClass` for `projectId`. */
export function issueKey(
  projectId: string,
  credentialClass: ProjectKeyClass,
  label: string | null,
  at: number,
  rotatedFrom: string | null = null,
): IssuedKey {
  const apiKey = generateApiKey(credentialClass);
  const parsed = parseApiKey(apiKey);
  return {
    apiKey,
    row: {
      id: newKeyId(),
      projectId,
      credentialClass,
      keyHash: hashApiKey(apiKey),
      apiKeyPrefix: parsed.apiKeyPrefix,
      label,
      createdAt: at,
      revokedAt: null,
      rotatedFrom,
    },
  };
}

/** A new project row. */
export function newProject(name: string, at: number): ProjectRow {
  return { id: newProjectId(), name, clientSecret: newClientSecret(), createdAt: at };
}

/** A key as listed: never the secret or its hash. */
export interface KeyView {
  id: string;
  projectId: string;
  credentialClass: string;
  apiKeyPrefix: string;
  label: string | null;
  /** `expiring`: rotated with a grace period, still accepted until `revokedAt`. */
  status: 'active' | 'expiring' | 'revoked';
  createdAt: string;
  revokedAt: string | null;
  rotatedFrom: string | null;
}

/** Maps a stored key to its listed form; `now` (epoch ms) tells an expiring key from a revoked one. */
export function toKeyView(row: ApiKeyRow, now: number = Date.now()): KeyView {
  return {
    id: row.id,
    projectId: row.projectId,
    credentialClass: row.credentialClass,
    apiKeyPrefix: row.apiKeyPrefix,
    label: row.label,
    status: row.revokedAt === null ? 'active' : row.revokedAt > now ? 'expiring' : 'revoked',
    createdAt: new Date(row.createdAt).toISOString(),
    revokedAt: row.revokedAt === null ? null : new Date(row.revokedAt).toISOString(),
    rotatedFrom: row.rotatedFrom,
  };
}
