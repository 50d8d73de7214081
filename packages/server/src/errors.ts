/**
 * The one catalogue of API error codes. Every error the server sends is an {@link ApiError}
 * with one of these codes; `docs/errors.md` documents each, and a test holds the two together.
 * Add a code here AND in docs/errors.md, never a bare string in a handler.
 */

/** Status and meaning of each code. */
export const ERROR_CATALOGUE = {
  invalid_json: { status: 400, description: 'The body is not valid JSON.' },
  invalid_request: {
    status: 400,
    description: 'The body or query does not match the schema: a field is missing, has the wrong type, or is unknown.',
  },
  invalid_envelope: { status: 400, description: 'An encrypted payload is not a well-formed envelope.' },
  missing_encryption_key: { status: 400, description: 'X-Service-Encryption-Key is required to encrypt a plain payload.' },
  json_too_deep: {
    status: 400,
    description: 'The JSON body nests arrays and objects deeper than 256 levels (MAX_JSON_DEPTH); nothing was recorded or forwarded.',
  },
  json_too_complex: {
    status: 400,
    description:
      'The JSON body holds more arrays and objects than its size allows (16,384 plus one per 64 bytes); nothing was recorded or forwarded. Forward mode does not parse bodies.',
  },
  invalid_cursor: { status: 400, description: 'The pagination cursor is not one this server issued.' },
  unsupported_media_type: { status: 415, description: 'Content-Type must be application/json.' },
  missing_api_key: { status: 401, description: 'No Authorization: Bearer <key> header.' },
  invalid_api_key: { status: 401, description: 'The key is malformed, unknown, revoked or rotated away.' },
  wrong_credential_class: {
    status: 403,
    description:
      'The key class may not call this path (ingest keys cannot read, live keys cannot ingest, only the master key administers).',
  },
  project_forbidden: { status: 403, description: 'The key belongs to another project.' },
  metrics_forbidden: {
    status: 403,
    description: 'GET /metrics from a non-loopback client while COUNTERSIGN_METRICS_TOKEN is unset; set the token and scrape with it.',
  },
  too_many_webhooks: { status: 409, description: 'The project already has the most webhooks allowed (20); delete one first.' },
  target_blocked: {
    status: 403,
    description: 'The proxy target is a loopback, private, link-local, metadata or otherwise blocked address.',
  },
  not_found: { status: 404, description: 'No such route or resource in this project.' },
  unknown_upstream: {
    status: 404,
    description: 'Forward mode: no upstream has this name; the message lists the names (presets and COUNTERSIGN_UPSTREAMS).',
  },
  request_timeout: { status: 408, description: 'The request (its headers or its body) did not arrive in time.' },
  idempotency_conflict: { status: 409, description: 'A log with this id already exists in this project with different content.' },
  payload_too_large: { status: 413, description: 'The body is larger than the configured limit, or the batch has too many logs.' },
  uri_too_long: { status: 414, description: 'A path segment is longer than the server accepts (ids and labels: at most 512 characters).' },
  rate_limited: { status: 429, description: 'Too many requests; retry after the Retry-After seconds.' },
  key_busy: {
    status: 429,
    description:
      'This key already has as many calls or request bytes in flight as it may (COUNTERSIGN_MAX_INFLIGHT_*_PER_KEY); nothing was read or recorded; retry after the Retry-After seconds.',
  },
  headers_too_large: { status: 431, description: 'The request headers are larger than the server accepts.' },
  internal_error: { status: 500, description: 'An unexpected fault; the requestId finds it in the server log.' },
  upstream_unreachable: { status: 502, description: 'The proxy could not connect to the target, or it reset the connection.' },
  upstream_timeout: { status: 504, description: 'The target did not connect, answer or continue in time.' },
  log_store_unavailable: { status: 503, description: 'The store cannot take the record right now; nothing was forwarded or accepted.' },
  not_ready: { status: 503, description: 'The server is starting or shutting down.' },
  server_busy: {
    status: 503,
    description:
      'The server already has as many calls or request bytes in flight as it may (COUNTERSIGN_MAX_INFLIGHT_BYTES / _CALLS); nothing was read or recorded; retry after the Retry-After seconds.',
  },
  invalid_ledger_entry: {
    status: 400,
    description: 'A proposed ledger entry is not a hashedrekord this ledger accepts, or its signature does not verify with its public key.',
  },
  ledger_entry_exists: { status: 409, description: 'The ledger already holds this exact entry; the Location header names it.' },
  tsa_unavailable: { status: 502, description: 'The timestamp authority could not be reached or did not answer with a timestamp reply.' },
  tsa_response_invalid: {
    status: 502,
    description: 'The timestamp authority refused, or its token failed a check (status, imprint, nonce, signature, signer).',
  },
  ledger_unavailable: { status: 502, description: 'The transparency ledger could not be reached or answered with an error.' },
  ledger_response_invalid: {
    status: 502,
    description: 'The transparency ledger answered with something that is not a valid Rekor v1 entry.',
  },
} as const satisfies Record<string, { status: number; description: string }>;

/** Every code the API can answer with. */
export type ApiErrorCode = keyof typeof ERROR_CATALOGUE;

/** An error that becomes a JSON error answer with its catalogue status. */
export class ApiError extends Error {
  /** Stable machine-readable code. */
  readonly code: ApiErrorCode;
  /** HTTP status, from the catalogue. */
  readonly statusCode: number;
  /** Extra response headers (e.g. Retry-After). */
  readonly headers: Record<string, string> | undefined;

  constructor(code: ApiErrorCode, message: string, options?: { cause?: unknown; headers?: Record<string, string> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ApiError';
    this.code = code;
    this.statusCode = ERROR_CATALOGUE[code].status;
    this.headers = options?.headers;
  }
}

/** True when `value` is an {@link ApiError}. */
export function isApiError(value: unknown): value is ApiError {
  return value instanceof ApiError;
}
