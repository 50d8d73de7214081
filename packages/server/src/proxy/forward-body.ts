/**
 * The body of a forward-mode call. A body whose declared length fits the record whole (at most
 * {@link READ_AHEAD_LIMIT_BYTES}: the capture limit) is read before anything is written, like the
 * `payload` of `POST /v1/proxy`: its write-ahead record then holds the request as it will be
 * sent, so a record left `pending` by a crash says what went upstream, and the call costs one
 * Buffer instead of a stream watched chunk by chunk across the upstream's round trip. A longer
 * body, or one of unknown length (chunked), streams upstream as it arrives and is captured on the
 * way (2 MB kept, all of it counted and hashed), and its record gets the body with the outcome.
 *
 * Either way the record describes the body identically ({@link BodyCapture}), and the upstream
 * receives the same bytes with the caller's own framing.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { BodyCapture, CAPTURE_LIMIT_BYTES } from './capture.js';
import { firstValue } from './headers.js';
import type { OutgoingBody } from './pipeline.js';

/** Bodies declared at most this long are read whole before the write-ahead record. */
export const READ_AHEAD_LIMIT_BYTES = CAPTURE_LIMIT_BYTES;

/**
 * The declared length of a body this door reads ahead, or undefined when the body streams (no
 * body, chunked, a malformed length, or longer than {@link READ_AHEAD_LIMIT_BYTES}).
 */
export function readAheadLength(headers: IncomingHttpHeaders): number | undefined {
  if (headers['transfer-encoding'] !== undefined) return undefined;
  const length = headers['content-length'];
  if (length === undefined || !/^\d{1,8}$/.test(length)) return undefined;
  const n = Number(length);
  return n > 0 && n <= READ_AHEAD_LIMIT_BYTES ? n : undefined;
}

/**
 * Reads a body of a declared length whole. Node's HTTP parser delivers exactly the declared
 * bytes before 'end'; a caller that goes away first ends the read with an error, one that
 * trickles meets the server's request timeout (http/connection-limits.ts), as any body does.
 */
function readWhole(source: Readable, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let held = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      held += chunk.length;
    };
    const onEnd = () => {
      cleanup();
      if (held !== length) reject(new Error(`the body ended after ${held} of its ${length} declared bytes`));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, held));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onClose = () => onError(new Error('the caller closed the connection before its body was complete'));
    const cleanup = () => {
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onError);
      source.off('close', onClose);
    };
    source.on('data', onData);
    source.on('end', onEnd);
    source.on('error', onError);
    source.on('close', onClose);
  });
}

/**
 * The Fastify body parser of the forward routes: the body read whole when it is read ahead
 * ({@link readAheadLength}), else left unread for the pipeline to stream.
 */
export function readAheadParser(request: FastifyRequest, payload: Readable, done: (err: Error | null, body?: unknown) => void): void {
  const length = readAheadLength(request.headers);
  if (length === undefined) return done(null, undefined);
  readWhole(payload, length).then(
    (bytes) => done(null, bytes),
    (err: Error) => done(err, undefined),
  );
}

/** The call's body for the pipeline: the bytes read ahead, the caller's stream, or none. */
export function forwardBody(request: FastifyRequest): OutgoingBody {
  const h = request.headers;
  const contentType = h['content-type'];
  const contentEncoding = firstValue(h['content-encoding']);
  if (Buffer.isBuffer(request.body)) {
    const bytes = request.body;
    const capture = new BodyCapture();
    capture.add(bytes);
    return { kind: 'bytes', bytes, recorded: capture.finish(contentType, contentEncoding) };
  }
  const length = h['content-length'];
  const hasBody = h['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (!hasBody) return { kind: 'none' };
  return { kind: 'stream', source: request.raw, contentType, contentEncoding };
}
