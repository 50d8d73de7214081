/**
 * Credential handover detection (spec 5.4): a human-class key used with agent context means a
 * person's credential was handed to an agent. The request is not refused; it is marked and an
 * event is raised. Pure, so the server and the client library decide it the same way.
 */
import type { CredentialClass } from './keys.js';

/** `x-agent-` in any case, with dashes or underscores (what the normalised name starts with). */
const AGENT_PREFIX = /^x[-_]agent[-_]/i;

/**
 * Names (lower-case) of the headers that show agent context: the `X-Agent-*` headers
 * (including `X-Agent-Rationale`). Underscore spellings count too, because some proxies
 * rewrite dashes.
 *
 * `X-Service-Agent-ID` is NOT agent context: it is the actor label, which a human's CLI or
 * script may set as well ("deploy-bot", "alice"). Handover is a human key with agent context,
 * the same rule on every path (`/v1/log`, `/v1/proxy`, forward mode) and in the client library.
 */
export function agentContextHeaders(headerNames: Iterable<string>): string[] {
  const found: string[] = [];
  for (const raw of headerNames) {
    // Most names are not agent context: one test, and no new strings, before normalising.
    if (!AGENT_PREFIX.test(raw)) continue;
    found.push(raw.toLowerCase().replace(/_/g, '-'));
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
