/**
 * The one error class of `@countersign/client`. Callers branch on `code`, never on the message.
 */

/** Every code the client library throws. */
export type ClientErrorCode =
  | 'invalid_config'
  | 'invalid_entry'
  | 'client_closed'
  | 'embed_token_unavailable'
  | 'reference_store_failed'
  | 'request_failed'
  | 'decryption_failed'
  | 'trust_not_configured';

/** Error thrown by `@countersign/client`. `code` is stable; `message` says what to do. */
export class ClientError extends Error {
  /** Stable machine-readable code. */
  readonly code: ClientErrorCode;
  /** HTTP status, when the error is a server answer. */
  readonly status: number | undefined;
  /** The server's error code (`error.code` of the JSON body), when there is one. */
  readonly serverCode: string | undefined;

  constructor(code: ClientErrorCode, message: string, options: { cause?: unknown; status?: number; serverCode?: string } = {}) {
    super(message, { cause: options.cause });
    this.name = 'ClientError';
    this.code = code;
    this.status = options.status;
    this.serverCode = options.serverCode;
  }
}

/** True when `value` is a {@link ClientError}. */
export function isClientError(value: unknown): value is ClientError {
  return value instanceof Error && value.name === 'ClientError' && typeof (value as ClientError).code === 'string';
}
