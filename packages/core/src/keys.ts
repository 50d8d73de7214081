/**
 * API keys: `key_<class>_<secret>`. The class is read from the prefix so the hot path can
 * stamp `actorType` without a database lookup (spec 5.3); the secret carries a short checksum
 * so a mistyped or truncated key is refused before any lookup.
 */
import { CoreError } from './errors.js';
import { sha256, sha256Hex } from './hash.js';
import { randomBytes } from './random.js';

/** Credential classes. `human|agent|service` ingest; `live` reads; `master` administers. */
export type CredentialClass = 'human' | 'agent' | 'service' | 'live' | 'master';

/** Classes that may ingest (proxy, log) and stamp an `actorType`. */
export type IngestClass = 'human' | 'agent' | 'service';

/** The `actorType` stamped on log entries. */
export type ActorType = IngestClass;

/** Every class, in the order they are documented. */
export const CREDENTIAL_CLASSES: readonly CredentialClass[] = ['human', 'agent', 'service', 'live', 'master'];

/** Classes a project key may be created with (the master key is not a project key). */
export const PROJECT_KEY_CLASSES: readonly Exclude<CredentialClass, 'master'>[] = ['human', 'agent', 'service', 'live'];

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_CHARS = 32;
const CHECKSUM_CHARS = 6;
const KEY_RE = /^key_(human|agent|service|live|master)_([0-9A-Za-z]{38})$/;

/** A key as read from its text, before any lookup. */
export interface ParsedKey {
  credentialClass: CredentialClass;
  /** The whole key text. */
  key: string;
  /** Class prefix plus the first 8 secret characters: safe to show and log. */
  apiKeyPrefix: string;
}

/** True for the classes that ingest. */
export function isIngestClass(c: CredentialClass): c is IngestClass {
  return c === 'human' || c === 'agent' || c === 'service';
}

/** True when `value` names a credential class. */
export function isCredentialClass(value: unknown): value is CredentialClass {
  return typeof value === 'string' && (CREDENTIAL_CLASSES as readonly string[]).includes(value);
}

function randomBase62(n: number): string {
  // Rejection sampling keeps the characters uniform (256 is not a multiple of 62).
  let out = '';
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      if (b < 248 && out.length < n) out += BASE62[b % 62];
    }
  }
  return out;
}

function checksum(prefixAndRandom: string): string {
  const digest = sha256(prefixAndRandom);
  let out = '';
  for (let i = 0; i < CHECKSUM_CHARS; i++) out += BASE62[digest[i]! % 62];
  return out;
}

/** Random base62 text of `n` characters (ids, secrets). */
export function randomId(n: number): string {
  return randomBase62(n);
}

/** Makes a new key of a class: 32 random base62 characters then a 6-character checksum. */
export function generateApiKey(credentialClass: CredentialClass): string {
  const head = `key_${credentialClass}_${randomBase62(RANDOM_CHARS)}`;
  return head + checksum(head);
}

/**
 * Reads a key's class from its text and checks its checksum. Does not say the key exists.
 * @throws CoreError `invalid_key` when the text is not a well-formed key.
 */
export function parseApiKey(key: string): ParsedKey {
  const m = typeof key === 'string' ? KEY_RE.exec(key) : null;
  if (!m) throw new CoreError('invalid_key', 'API key must look like key_<human|agent|service|live>_<38 characters>');
  const secret = m[2]!;
  const head = key.slice(0, key.length - CHECKSUM_CHARS);
  if (checksum(head) !== secret.slice(RANDOM_CHARS))
    throw new CoreError('invalid_key', 'API key checksum does not match: the key is mistyped or truncated');
  const credentialClass = m[1] as CredentialClass;
  return { credentialClass, key, apiKeyPrefix: `key_${credentialClass}_${secret.slice(0, 8)}` };
}

/** What is stored for a key: hex SHA-256 of the whole key text (never the key). */
export function hashApiKey(key: string): string {
  return sha256Hex(key);
}
