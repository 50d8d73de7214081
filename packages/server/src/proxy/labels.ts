/**
 * The plain labels of a proxied call, read the same way by both doors (`/v1/proxy` and forward
 * mode): `actor` from `X-Service-Agent-ID`, `action` from `X-Service-Action`, `traceId` from
 * `X-Service-Run-ID` (spec 2.2), and the client's sealed `X-Agent-Rationale`, which is kept in
 * the record (sealed) although it never goes upstream.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { HEADERS } from '@countersign/core';
import { ApiError } from '../errors.js';
import { serviceHeaderText } from '../http/service-headers.js';

/** The longest label (actor, action, trace id) a call may set. */
export const MAX_LABEL = 512;

/** Labels of one call. */
export interface CallLabels {
  actor: string;
  action: string;
  traceId: string | null;
  agentRationale?: string;
}

/** Reads the labels, with the door's defaults for actor and action. */
export function callLabels(headers: IncomingHttpHeaders, defaults: { actor: string; action: string }): CallLabels {
  const out: CallLabels = {
    actor: label(headers, HEADERS.agentId) ?? defaults.actor,
    action: label(headers, HEADERS.action) ?? defaults.action,
    traceId: label(headers, HEADERS.runId) ?? null,
  };
  const rationale = headers[HEADERS.agentRationale];
  if (typeof rationale === 'string' && rationale !== '') out.agentRationale = rationale;
  return out;
}

function label(headers: IncomingHttpHeaders, name: string): string | undefined {
  const text = serviceHeaderText(headers, name);
  if (text === undefined || text === '') return undefined;
  if (text.length > MAX_LABEL) throw new ApiError('invalid_request', `${name} is longer than ${MAX_LABEL} characters`);
  return text;
}
