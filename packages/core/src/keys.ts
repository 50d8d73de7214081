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

/** Characters of a {@link timeOrderedId}'s time prefix: base36 milliseconds, enough until the year 5138. */
const TIME_CHARS = 9;
/** At least this many random characters follow the time (71 bits of base62). */
const MIN_RANDOM_CHARS = 12;

/**
 * An id of `n` base62 characters that sorts by creation time: the first 9 are the epoch
 * milliseconds `nowMs` in base36 (digits and lowercase letters, which sort alike in byte order
 * and in every database collation), the rest are random base62 (15 characters, 89 bits, for
 * `n` = 24), so the id is as hard to guess as it is to forge.
 *
 * Why: an id that is a key of an index on the write path (the logs' `(project_id, id)`) lands,
 * when random, on a random page of an index that grows with the store, so every insert dirties
 * a page no other insert shares, which the WAL, the checkpoints and the page cache all pay for;
 * a time-ordered one lands on the index's right edge, the page the previous insert dirtied.
 * @param n total length, at least 21
 * @param nowMs creation time, epoch ms (default now)
 */
export function timeOrderedId(n: number, nowMs: number = Date.now()): string {
  if (!Number.isInteger(n) || n < TIME_CHARS + MIN_RANDOM_CHARS)
    throw new RangeError(`timeOrderedId needs at least ${TIME_CHARS + MIN_RANDOM_CHARS} characters`);
  return Math.max(0, Math.floor(nowMs)).toString(36).padStart(TIME_CHARS, '0').slice(-TIME_CHARS) + randomBase62(n - TIME_CHARS);
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
