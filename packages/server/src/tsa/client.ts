/**
 * RFC 3161 client for any timestamp authority reachable over HTTP (`--tsa-url`): sends a
 * SHA-256 imprint with a fresh 64-bit nonce and certReq, and hands back the DER answer only
 * after {@link checkTimestampResponse} accepted it.
 */
import { randomBytes } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { request } from 'undici';
import { ApiError } from '../errors.js';
import { checkTimestampResponse, TimestampCheckError } from './check.js';

const SHA256_OID = '2.16.840.1.101.3.4.2.1';
const MAX_REPLY_BYTES = 1024 * 1024;

/** Options of {@link requestTimestamp}. */
export interface TimestampRequestOptions {
  /** Trust anchors the TSA's signer must chain to (when known). */
  trustRoots?: pkijs.Certificate[];
  /** Intermediates or the signer certificate, for TSAs that send none. */
  intermediates?: pkijs.Certificate[];
  /** Whole-request timeout, ms (default 10 s). */
  timeoutMs?: number;
}

/** A DER TimeStampReq for a SHA-256 `digest` with `nonce` and certReq. */
export function buildTimestampQuery(digest: Uint8Array, nonce: Uint8Array): Uint8Array {
  if (digest.length !== 32) throw new TypeError('digest must be the 32 bytes of a SHA-256 hash');
  const req = new pkijs.TimeStampReq({
    version: 1,
    messageImprint: new pkijs.MessageImprint({
      hashAlgorithm: new pkijs.AlgorithmIdentifier({ algorithmId: SHA256_OID, algorithmParams: new asn1js.Null() }),
      hashedMessage: new asn1js.OctetString({ valueHex: digest }),
    }),
    nonce: new asn1js.Integer({ valueHex: nonce }),
    certReq: true,
  });
  return new Uint8Array(req.toSchema().toBER());
}

/** A positive 64-bit nonce (big-endian bytes, high bit clear so the INTEGER needs no pad). */
export function freshNonce(): Uint8Array {
  const n = new Uint8Array(randomBytes(8));
  n[0] = (n[0]! & 0x7f) | 0x01;
  return n;
}

/**
 * Timestamps `digest` at the TSA at `url` and returns the checked DER TimeStampResp.
 * @throws ApiError `tsa_unavailable` (network, HTTP status, content type) or
 *   `tsa_response_invalid` (refusal or a failed check; `cause` is the TimestampCheckError).
 */
export async function requestTimestamp(url: string, digest: Uint8Array, options: TimestampRequestOptions = {}): Promise<Uint8Array> {
  const nonce = freshNonce();
  const query = buildTimestampQuery(digest, nonce);
  const timeout = options.timeoutMs ?? 10_000;
  let status: number;
  let contentType: string;
  let body: Uint8Array;
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/timestamp-query', accept: 'application/timestamp-reply' },
      body: query,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    });
    status = res.statusCode;
    contentType = String(res.headers['content-type'] ?? '');
    const buf = Buffer.from(await res.body.arrayBuffer());
    if (buf.length > MAX_REPLY_BYTES) throw new Error(`reply of ${buf.length} bytes is larger than ${MAX_REPLY_BYTES}`);
    body = new Uint8Array(buf);
  } catch (cause) {
    throw new ApiError('tsa_unavailable', `the timestamp authority at ${url} did not answer: ${(cause as Error).message}`, { cause });
  }
  if (status !== 200) throw new ApiError('tsa_unavailable', `the timestamp authority at ${url} answered HTTP ${status}`);
  if (!/^application\/timestamp-(reply|response)\b/i.test(contentType)) {
    throw new ApiError(
      'tsa_unavailable',
      `the timestamp authority at ${url} answered ${contentType || 'no content type'}, not application/timestamp-reply`,
    );
  }
  try {
    await checkTimestampResponse(body, {
      digest,
      nonce,
      ...(options.trustRoots ? { trustRoots: options.trustRoots } : {}),
      ...(options.intermediates ? { intermediates: options.intermediates } : {}),
    });
  } catch (cause) {
    if (cause instanceof TimestampCheckError) {
      throw new ApiError('tsa_response_invalid', `the timestamp from ${url} was refused: ${cause.message}`, { cause });
    }
    throw cause;
  }
  return body;
}
