/**
 * The proofs capability: the batcher loop (role `proofs`) and the read routes (roles `proofs`
 * and `management`):
 *
 * - `GET /v1/projects/{projectId}/logs/{logId}/proof` (spec 4.2; live key or embed token):
 *   200 sealed receipt, 202 pending (with Retry-After), 200 unavailable; 404 for a log that
 *   did not ask for a proof or is not in this project.
 * - `GET /v1/proofs/trust` (public): the TSA trust roots, the ledger public key and URL a
 *   verifier needs, so `countersign verify` can be pointed at a server instead of files.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import { errorResponses, logIdSchema, projectIdParam } from '../management/schemas.js';
import { inScope, readGuard } from '../logs/plugin.js';
import { createTimestampWitness, type TimestampWitness } from '../tsa/witness.js';
import { createLedgerWitness, embeddedLedgerUrl, type LedgerWitness } from '../ledger/witness.js';
import type { AppContext } from '../app-context.js';
import { ProofBatcher } from './batcher.js';
import { proofAnswer, receiptSchema } from './answer.js';

/** Memoises an async factory, forgetting a failure so the next call tries again. */
function lazy<T>(make: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => {
    if (!p) {
      p = make();
      p.catch(() => (p = undefined));
    }
    return p;
  };
}

/** The grace after a window's end before it is claimed (see {@link ProofBatcher}). */
export function proofGraceMs(windowMs: number): number {
  return Math.min(500, Math.floor(windowMs / 5));
}

const pendingSchema = {
  type: 'object',
  description: 'Not sealed yet (not an error): ask again after Retry-After seconds.',
  properties: {
    success: { type: 'boolean', const: true },
    status: { type: 'string', const: 'pending' },
    logId: { type: 'string' },
    stage: { type: 'string', enum: ['awaiting_exchange', 'awaiting_window', 'timestamping', 'ledger'] },
    batchId: { type: ['string', 'null'] },
    windowStart: { type: ['string', 'null'], format: 'date-time' },
    windowEnd: { type: ['string', 'null'], format: 'date-time' },
    retryAfterMs: { type: 'integer' },
  },
} as const;

const sealedOrUnavailableSchema = {
  type: 'object',
  description:
    '`status: "sealed"` with the receipt, or `status: "unavailable"` with a reason when the log ended without a payload hash (no receipt will ever exist).',
  properties: {
    success: { type: 'boolean', const: true },
    status: { type: 'string', enum: ['sealed', 'unavailable'] },
    receipt: receiptSchema,
    logId: { type: 'string' },
    reason: { type: 'string' },
  },
} as const;

/** Proofs plugin. */
export default async function proofsPlugin(app: FastifyInstance): Promise<void> {
  const ctx: AppContext = app.ctx;
  const windowMs = ctx.config.proofWindowMs;
  const graceMs = proofGraceMs(windowMs);
  const timestampWitness = lazy<TimestampWitness>(() => createTimestampWitness(ctx));
  const ledgerWitness = lazy<LedgerWitness>(() => createLedgerWitness(ctx));

  if (ctx.config.roles.has('proofs')) {
    const batcher = new ProofBatcher({ store: ctx.store, timestampWitness, ledgerWitness, windowMs, graceMs, now: ctx.now, log: ctx.log });
    batcher.start();
    ctx.onClose.push(() => batcher.stop());
  }

  app.get<{ Params: { projectId: string; logId: string } }>(
    '/v1/projects/:projectId/logs/:logId/proof',
    {
      onRequest: readGuard,
      schema: {
        tags: ['proofs'],
        summary: "A log's proof receipt (spec 4.2; live key)",
        description:
          'Sealed: 200 `{success, status: "sealed", receipt}`. Not sealed yet: 202 `{success, status: "pending", stage, …}` with Retry-After. ' +
          'A log that asked for a proof but ended without a payload hash: 200 `{success, status: "unavailable", reason}`. ' +
          '404 `not_found` for a log that did not ask for a proof or is not in this project.',
        params: { type: 'object', properties: { projectId: projectIdParam, logId: logIdSchema }, required: ['projectId', 'logId'] },
        response: { 200: sealedOrUnavailableSchema, 202: pendingSchema, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      const { projectId, logId } = request.params;
      const log = await ctx.store.logs.get(projectId, logId);
      if (!log || !inScope(request, log)) throw new ApiError('not_found', `no log ${logId} in this project`);
      if (!log.requestProof) throw new ApiError('not_found', `log ${logId} did not ask for a proof (requestProof was false)`);
      const answer = proofAnswer(log, await ctx.store.proofs.receipt(projectId, logId), ctx.now(), windowMs, graceMs);
      if (answer.status === 'pending') {
        reply.code(202).header('retry-after', String(Math.max(1, Math.ceil(answer.retryAfterMs / 1000))));
      }
      return answer;
    },
  );

  app.get(
    '/v1/proofs/trust',
    {
      schema: {
        tags: ['proofs'],
        summary: 'Trust material for verifying receipts: TSA roots, ledger public key and URL (public)',
        description:
          'What `countersign verify` needs besides the receipt. Fetching it from the service you are checking is a convenience: ' +
          'an independent verifier should pin these values from a trusted copy.',
        security: [],
        response: {
          200: {
            type: 'object',
            properties: {
              success: { type: 'boolean' },
              tsaRootsPem: { type: 'string', description: 'PEM trust roots of the timestamp authority' },
              ledgerPublicKeyPem: { type: 'string', description: 'PEM public key of the transparency ledger' },
              ledgerUrl: { type: 'string', description: 'Base URL of the Rekor v1 ledger receipts point to' },
            },
          },
          ...errorResponses(502),
        },
      },
    },
    async () => {
      const [tsa, ledger] = await Promise.all([timestampWitness(), ledgerWitness()]);
      const [tsaRootsPem, ledgerPublicKeyPem] = await Promise.all([tsa.trustRootsPem(), ledger.publicKeyPem()]);
      return { success: true, tsaRootsPem, ledgerPublicKeyPem, ledgerUrl: ctx.config.ledgerUrl ?? embeddedLedgerUrl(ctx) };
    },
  );
}
