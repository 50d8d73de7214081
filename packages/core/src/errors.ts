/**
 * The one error class of `@countersign/core`, with a closed union of string codes (the
 * sigstore-js pattern): callers branch on `code`, never on message text.
 */

/** Every code that `@countersign/core` can throw. */
export type CoreErrorCode =
  | 'invalid_encoding'
  | 'invalid_json'
  | 'invalid_key'
  | 'invalid_envelope'
  | 'decryption_failed'
  | 'unknown_key_id'
  | 'invalid_merkle_input'
  | 'invalid_receipt'
  | 'invalid_timestamp_token'
  | 'invalid_certificate'
  | 'invalid_ledger_entry';

/** Error thrown by `@countersign/core`. `code` is stable; `message` is for people. */
export class CoreError extends Error {
  /** Stable machine-readable code. */
  readonly code: CoreErrorCode;

  constructor(code: CoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CoreError';
    this.code = code;
  }
}

/** True when `value` is a {@link CoreError} (works across module copies). */
export function isCoreError(value: unknown): value is CoreError {
  return value instanceof Error && value.name === 'CoreError' && typeof (value as CoreError).code === 'string';
}
