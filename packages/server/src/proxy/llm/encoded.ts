/**
 * Reading a content-encoded answer for the `llm` summary. The record keeps the bytes exactly as
 * the upstream sent them (base64 of the gzip, deflate or br stream, pinned by their SHA-256);
 * the summary needs the JSON or events inside. Decompression is bounded: a capture is at most
 * 2 MB, and its decoded form is read only up to {@link MAX_DECODED_BYTES} (a compression bomb
 * loses the summary, never the record).
 */
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { inspectJson, jsonContainerBudget, MAX_JSON_DEPTH } from '@countersign/core';
import { parseSse, type CapturedBody, type SseEvent } from '../capture.js';

/** Upper bound on the decoded size of one answer read for its summary. */
export const MAX_DECODED_BYTES = 8 * 1024 * 1024;

/** The decoded JSON or events of a compressed, complete capture; empty when there is none. */
export function decodeEncodedAnswer(
  response: Pick<CapturedBody, 'bodyBase64' | 'truncated'>,
  contentEncoding: string | undefined,
  contentType: string | undefined,
): { json?: unknown; events?: SseEvent[] } {
  if (response.bodyBase64 === undefined || response.truncated || contentEncoding === undefined) return {};
  const raw = Buffer.from(response.bodyBase64, 'base64');
  const options = { maxOutputLength: MAX_DECODED_BYTES };
  let plain: Buffer;
  try {
    const encoding = contentEncoding.trim().toLowerCase();
    if (encoding === 'gzip' || encoding === 'x-gzip') plain = gunzipSync(raw, options);
    else if (encoding === 'deflate') plain = inflateSync(raw, options);
    else if (encoding === 'br') plain = brotliDecompressSync(raw, options);
    else return {};
  } catch {
    return {};
  }
  const type = (contentType ?? '').toLowerCase();
  if (type.startsWith('text/event-stream')) return { events: parseSse(plain.toString('utf8')) };
  const inspected = inspectJson(plain, { maxDepth: MAX_JSON_DEPTH });
  if (!inspected.ok || inspected.value.containers > jsonContainerBudget(plain.length)) return {};
  try {
    return { json: JSON.parse(plain.toString('utf8')) as unknown };
  } catch {
    return {};
  }
}
