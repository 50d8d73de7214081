/**
 * What the ingest paths (`POST /v1/log` and `POST /v1/proxy`) stamp on every entry from the
 * caller's key and headers: `actorType` from the key class (spec 5.3, no lookup) and the
 * credential handover verdict (spec 5.4). One function so both paths decide it the same way.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { detectCredentialHandover, type ActorType } from '@countersign/core';
import type { IngestPrincipal } from '../auth/principal.js';

/** The stamp of one ingested request. */
export interface IngestStamp {
  /** The key's class, as the entry's `actorType`. */
  actorType: ActorType;
  /** True when a human-class key came with agent context headers. */
  credentialHandoverDetected: boolean;
  /** Lower-case names (never values) of the agent context headers seen; may be non-empty for any class. */
  agentHeaders: string[];
}

/**
 * Stamps a request: `actorType` = the key's credential class; handover per core's
 * {@link detectCredentialHandover} over the request's header names.
 */
export function stampFromRequest(principal: IngestPrincipal, headers: IncomingHttpHeaders): IngestStamp {
  const verdict = detectCredentialHandover(principal.credentialClass, Object.keys(headers));
  return { actorType: principal.credentialClass, credentialHandoverDetected: verdict.detected, agentHeaders: verdict.agentHeaders };
}
