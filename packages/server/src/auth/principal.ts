/**
 * Who is calling. Resolved from `Authorization: Bearer …` once per request, lazily, by the
 * guard a route calls; never by a route reading headers itself.
 */
import type { CredentialClass, IngestClass } from '@countersign/core';

/** The master key: administers projects and keys. */
export interface MasterPrincipal {
  kind: 'master';
}

/** A project key. */
export interface KeyPrincipal {
  kind: 'key';
  projectId: string;
  keyId: string;
  credentialClass: Exclude<CredentialClass, 'master'>;
  apiKeyPrefix: string;
}

/** A project key of an ingest class. */
export interface IngestPrincipal extends KeyPrincipal {
  credentialClass: IngestClass;
}

/** A signed, expiring, read-only embed token (HS256 with the project's client secret). */
export interface EmbedPrincipal {
  kind: 'embed';
  projectId: string;
  /** When set, only this trace / actor may be read. */
  scope: { traceId?: string; actor?: string };
  expiresAt: number;
}

/** Any authenticated caller. */
export type Principal = MasterPrincipal | KeyPrincipal | EmbedPrincipal;
