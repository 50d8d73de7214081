/**
 * The `proxy` helper: `POST {endpoint}/v1/proxy` (spec 4.1) with the client's key, its active
 * encryption key string in `X-Service-Encryption-Key`, and the agent context headers.
 */
import { HEADERS } from '@countersign/core';
import { ClientError } from './errors.js';

/** What `ServiceClient.proxy` takes. */
export interface ProxyRequest {
  /** Destination URL of the upstream API. */
  target: string;
  /** Request body forwarded to the destination as is. */
  payload: unknown;
  /** HTTP method towards the target (default POST). */
  method?: string;
  /** Ask for an RFC 3161 proof receipt. */
  requestProof?: boolean;
  /** The log's `action` (`X-Service-Action`; default `proxy.request`). */
  action?: string;
  /** The upstream's own Authorization value (sent as `X-Service-Upstream-Authorization`, renamed on the way out). */
  upstreamAuthorization?: string;
  /** More headers for the upstream (X-Service-* and X-Agent-* ones are removed by the proxy). */
  headers?: Record<string, string>;
  /** Cancels the call. */
  signal?: AbortSignal;
}

/** What `ServiceClient.proxy` returns: the upstream's answer as relayed, and the log id. */
export interface ProxyResult {
  /** The upstream status (or the proxy's error status). */
  status: number;
  /** The log id from `X-Service-Log-ID` (null when the proxy refused the call before logging). */
  logId: string | null;
  /** The relayed response; read its body once (`json()`, `text()`, or stream `body`). */
  response: Response;
}

/** Sends one proxy call. */
export async function callProxy(
  endpoint: string,
  apiKey: string,
  encryptionKey: string,
  agentHeaders: Record<string, string>,
  request: ProxyRequest,
): Promise<ProxyResult> {
  if (!request || typeof request.target !== 'string') throw new ClientError('invalid_entry', 'proxy(): target must be a URL string');
  const headers: Record<string, string> = {
    ...request.headers,
    ...agentHeaders,
    authorization: `Bearer ${apiKey}`,
    'content-type': 'application/json',
    [HEADERS.encryptionKey]: encryptionKey,
  };
  if (request.action !== undefined) headers[HEADERS.action] = request.action;
  if (request.upstreamAuthorization !== undefined) headers[HEADERS.upstreamAuthorization] = request.upstreamAuthorization;
  const body: Record<string, unknown> = { target: request.target, payload: request.payload };
  if (request.method !== undefined) body.method = request.method;
  if (request.requestProof !== undefined) body.requestProof = request.requestProof;
  let response: Response;
  try {
    response = await fetch(endpoint + '/v1/proxy', {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      ...(request.signal ? { signal: request.signal } : {}),
    });
  } catch (cause) {
    throw new ClientError('request_failed', 'POST /v1/proxy could not reach the endpoint', { cause });
  }
  return { status: response.status, logId: response.headers.get(HEADERS.logId), response };
}
