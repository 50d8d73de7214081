/**
 * Credential handover detection (spec 5.4): a human-class key used with agent context means a
 * person's credential was handed to an agent. The request is not refused; it is marked and an
 * event is raised. Pure, so the server and the client library decide it the same way.
 */
import type { CredentialClass } from './keys.js';

/**
 * Names (lower-case) of the headers that show agent context: any `X-Agent-*` header
 * (including `X-Agent-Rationale`), or `X-Service-Agent-ID`. Underscore spellings count too,
 * because some proxies rewrite dashes.
 */
export function agentContextHeaders(headerNames: Iterable<string>): string[] {
  const found: string[] = [];
  for (const raw of headerNames) {
    const name = raw.toLowerCase().replace(/_/g, '-');
    if (name.startsWith('x-agent-') || name === 'x-service-agent-id') found.push(name);
  }
  return found.sort();
}

/** The verdict for one request. */
export interface HandoverVerdict {
  /** True when a human-class key came with agent context. */
  detected: boolean;
  /** The agent context header names seen (empty when none). */
  agentHeaders: string[];
}

/** Decides handover for a key class and the request's header names. */
export function detectCredentialHandover(credentialClass: CredentialClass, headerNames: Iterable<string>): HandoverVerdict {
  const agentHeaders = agentContextHeaders(headerNames);
  return { detected: credentialClass === 'human' && agentHeaders.length > 0, agentHeaders };
}
