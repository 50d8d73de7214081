/**
 * The end of a proxied exchange's record (pipeline.ts, step 4): the final payload is sealed and
 * its outcome committed on the row the write-ahead insert made, before the caller's last byte.
 * A store that refuses keeps the sealed outcome to write again (owed-outcomes.ts).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { EnvelopeKey } from '@countersign/core';
import type { LogCompletion, RowRef } from '../store/index.js';
import type { CapturedBody } from './capture.js';
import { errorSummary } from './error-summary.js';
import type { ProxyRuntime } from './plugin.js';
import { round, sealProxyPayload, statusOf, type ProxyPayload, type SealedPayload } from './record.js';
import type { ExchangeResult } from './upstream.js';

/**
 * Seals and commits the outcome. If sealing fails for any reason (it should not: bodies that
 * canonical JSON cannot hold are recorded as text), the record falls back to the bytes' digest
 * and size with the body as base64, so an answer is never left out of the audit.
 */
export async function commitOutcome(
  app: FastifyInstance,
  runtime: ProxyRuntime,
  request: FastifyRequest,
  row: RowRef,
  final: ProxyPayload,
  result: ExchangeResult,
  key: EnvelopeKey,
  requestJcs: string | undefined,
): Promise<void> {
  const { ctx } = app;
  const logId = row.id;
  let completion: LogCompletion | undefined;
  try {
    let sealed: SealedPayload;
    try {
      sealed = await sealProxyPayload(final, key, logId, requestJcs);
    } catch (err) {
      request.log.error({ err: errorSummary(err), logId }, 'proxy outcome could not be sealed as is; recording it reduced');
      sealed = await sealProxyPayload(reduced(final), key, logId);
    }
    const completedAt = ctx.now();
    completion = {
      status: statusOf(result.outcome),
      payload: sealed.envelope,
      payloadHash: sealed.payloadHash,
      completedAt,
      endedAt: completedAt,
      upstreamStatus: result.status ?? null,
      firstByteMs: result.firstByteMs !== undefined ? round(result.firstByteMs) : null,
      durationMs: final.timings?.totalMs ?? null,
    };
    const written = await ctx.store.proxyOutcomes.complete(row, completion);
    if (!written) request.log.error({ logId }, 'proxy outcome not written: the record was already sealed into a proof batch');
  } catch (err) {
    // The caller still gets its answer. The sealed outcome is kept and written once the store
    // is back (owed-outcomes.ts); if it cannot be kept, the record stays pending and becomes
    // interrupted once this instance is gone.
    const kept = completion !== undefined && runtime.owed.add(row, completion);
    request.log.error(
      { err: errorSummary(err), logId, kept },
      kept ? 'could not commit a proxy outcome; kept to write again' : 'could not commit a proxy outcome',
    );
  }
  if (result.outcome !== 'complete' && result.error) {
    request.log.debug({ logId, outcome: result.outcome, error: result.error }, 'proxied call failed');
  }
}

/** A payload with every body reduced to digest, size and nothing a serializer can trip on. */
function reduced(p: ProxyPayload): ProxyPayload {
  const strip = <T extends Partial<CapturedBody>>(b: T): T => {
    const { body, events, ...rest } = b;
    void body;
    void events;
    return { ...rest, bodyText: undefined, bodyBase64: undefined } as T;
  };
  const out: ProxyPayload = { ...p, request: strip(p.request) };
  delete out.llm;
  if (p.response) out.response = strip(p.response);
  return out;
}
