/**
 * Redaction and reference keys (spec 2.5 `redactKeys`, `referenceKeys`), applied to `actor`,
 * `target` and `metadata.<field>` before anything is encrypted or sent, so the same replaced
 * value is in the ciphertext and in the plain metadata beside it.
 *
 * - A redacted field becomes `[REDACTED:<key>]` (the key as configured, e.g.
 *   `[REDACTED:metadata.email]`); the value is gone for good.
 * - A referenced field becomes `[REF:<id>]`. The id is `ref_` + 32 hex digits of
 *   HMAC-SHA256(referenceSecret, canonical JSON of the value): the same value always gets the
 *   same id, and nobody without the secret can test a guess. The original value goes to your
 *   {@link ReferenceStore}, so your own system can put it back just in time
 *   ({@link hydrateReferences}): "JIT hydration".
 */
import { createHmac } from 'node:crypto';
import { canonicalize } from '@countersign/core';

/** One original value handed to the reference store. */
export interface ReferenceRecord {
  /** The reference id, as in `[REF:<id>]`. */
  id: string;
  /** Which configured key it came from (`actor`, `target`, `metadata.<field>`). */
  key: string;
  /** The original value. */
  value: unknown;
  /** The log it was first seen in. */
  logId: string;
}

/** Where original values of referenced fields are kept (your database, vault, KV store…). */
export interface ReferenceStore {
  /**
   * Stores one reference. Awaited before the log is queued: if it throws, `log()` rejects and
   * nothing is sent, so a placeholder never exists without its value.
   */
  put(reference: ReferenceRecord): void | Promise<void>;
}

/** Looks a reference id up; returns undefined when it is unknown (or access is denied). */
export type ReferenceResolver = ((id: string) => unknown) | { resolve(id: string): unknown };

/**
 * A reference store and resolver in memory: for tests, examples and single-process tools.
 * Production systems keep references in their own store with their own access rules.
 */
export class InMemoryReferenceStore implements ReferenceStore {
  readonly #values = new Map<string, unknown>();

  /** Stores a reference (same id, same value: idempotent). */
  put(reference: ReferenceRecord): void {
    this.#values.set(reference.id, reference.value);
  }

  /** The original value of a reference id, or undefined. */
  resolve(id: string): unknown {
    return this.#values.get(id);
  }

  /** Number of distinct references held. */
  get size(): number {
    return this.#values.size;
  }
}

/** The fields that redaction and references apply to. */
export interface PolicyFields {
  actor?: string;
  target?: unknown;
  metadata?: Record<string, unknown>;
}

/** Placeholder of a redacted field. */
export function redactedPlaceholder(key: string): string {
  return `[REDACTED:${key}]`;
}

/** Placeholder of a referenced value. */
export function referencePlaceholder(id: string): string {
  return `[REF:${id}]`;
}

const REF_RE = /^\[REF:(ref_[0-9a-f]{32})\]$/;

/** The stable reference id of a value under a secret (keyed HMAC over its canonical JSON). */
export function referenceId(value: unknown, secret: string): string {
  return 'ref_' + createHmac('sha256', secret).update(canonicalize(value)).digest('hex').slice(0, 32);
}

/**
 * Applies `redactKeys` and `referenceKeys` to a copy of `fields`; returns the new fields and
 * the references made (not yet stored).
 */
export function applyFieldPolicies(
  fields: PolicyFields,
  policy: { redactKeys: readonly string[]; referenceKeys: readonly string[]; referenceSecret: string },
  logId: string,
): { fields: PolicyFields; references: ReferenceRecord[] } {
  const out: PolicyFields = { ...fields };
  if (fields.metadata) out.metadata = { ...fields.metadata };
  const references: ReferenceRecord[] = [];
  const replace = (key: string, transform: (value: unknown) => string) => {
    if (key === 'actor' || key === 'target') {
      if (out[key] !== undefined) out[key] = transform(out[key]);
      return;
    }
    const field = key.slice('metadata.'.length);
    if (out.metadata && Object.hasOwn(out.metadata, field) && out.metadata[field] !== undefined)
      out.metadata[field] = transform(out.metadata[field]);
  };
  for (const key of policy.redactKeys) replace(key, () => redactedPlaceholder(key));
  for (const key of policy.referenceKeys) {
    replace(key, (value) => {
      const id = referenceId(value, policy.referenceSecret);
      references.push({ id, key, value, logId });
      return referencePlaceholder(id);
    });
  }
  return { fields: out, references };
}

/** The reference id in a `[REF:<id>]` placeholder, or undefined. */
export function parseReference(value: unknown): string | undefined {
  return typeof value === 'string' ? REF_RE.exec(value)?.[1] : undefined;
}

/**
 * Puts original values back: walks `value` (a decrypted payload, a log entry read back, any
 * JSON) and replaces every string that is exactly `[REF:<id>]` with what the resolver returns
 * for that id. Ids the resolver does not know (undefined) keep their placeholder, so a user
 * without access sees `[REF:…]`, never an error. Returns a new value; the input is not changed.
 */
export async function hydrateReferences<T>(value: T, resolver: ReferenceResolver): Promise<T> {
  const resolve = typeof resolver === 'function' ? resolver : (id: string) => resolver.resolve(id);
  const cache = new Map<string, Promise<unknown>>();
  const walk = async (v: unknown): Promise<unknown> => {
    const id = parseReference(v);
    if (id !== undefined) {
      let hit = cache.get(id);
      if (!hit) {
        hit = Promise.resolve(resolve(id));
        cache.set(id, hit);
      }
      const resolved = await hit;
      return resolved === undefined ? v : resolved;
    }
    if (Array.isArray(v)) return Promise.all(v.map(walk));
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, child] of Object.entries(v)) out[k] = await walk(child);
      return out;
    }
    return v;
  };
  return (await walk(value)) as T;
}
