/**
 * `POST /v1/log` (spec 4.4): direct ingestion with a human, agent or service key. The body is
 * one entry or `{"logs":[…]}` (up to `maxBatchLogs`). Each entry carries either a
 * client-encrypted envelope (with its own `id`, optional `payloadHash`) or a plain JSON payload
 * that the server seals with `X-Service-Encryption-Key` and forgets. Entries are stored through
 * group commit before the answer; credential handover raises a security event.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HEADERS, MAX_ID_LENGTH, MAX_METADATA_BYTES, parseTraceparent } from '@countersign/core';
import { requireIngestKey } from '../auth/guards.js';
import { admitIngest } from '../http/admission.js';
import type { IngestPrincipal } from '../auth/principal.js';
import { ApiError } from '../errors.js';
import { recordHandoverEvent } from '../events/security.js';
import { acceptJsonOnly, errorResponses, logIdSchema } from '../management/schemas.js';
import { isSameEntry, prepareLog, type IngestRequest, type LogInput, type PreparedLog } from './entries.js';
import { stampFromRequest } from './stamp.js';
import { serviceHeaderText } from '../http/service-headers.js';

/** actor, action, traceId: the one limit of ids and labels (core MAX_ID_LENGTH), as on every read path. */
const label = { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH } as const;

/** One entry of the body. */
const entrySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['payload'],
  properties: {
    id: { ...logIdSchema, description: `${logIdSchema.description}. Optional; makes a retry idempotent` },
    actor: { ...label, description: 'Who acted; default X-Service-Agent-ID, else "unknown"' },
    action: { ...label, description: 'What was done; default X-Service-Action, else "log.entry"' },
    traceId: { ...label, description: 'Run id that stitches entries into a trace; default X-Service-Run-ID' },
    requestProof: { type: 'boolean', description: 'Ask for an RFC 3161 proof receipt (5 s batches)' },
    occurredAt: { type: 'string', format: 'date-time', description: 'When it happened, by the caller clock' },
    metadata: {
      type: 'object',
      additionalProperties: true,
      description: `Small plain JSON stored in the clear for filtering (max ${MAX_METADATA_BYTES} bytes); secrets go in the payload`,
    },
    payload: {
      type: 'object',
      additionalProperties: true,
      description:
        'Either an envelope {v,alg,kid,iv,ct,tag} sealed by the caller with the log id as AAD, or (with X-Service-Encryption-Key) a plain JSON object that the server seals',
    },
    payloadHash: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'Hex SHA-256 of the canonical plain payload (envelopes only)' },
    spanId: { type: 'string', description: "This entry's W3C span id (16 lowercase hex digits), stored in the clear" },
    parentSpanId: { type: 'string', description: "Its parent's span id; default: the parent-id of the traceparent header" },
    startedAt: { type: 'string', format: 'date-time', description: 'When the recorded work started' },
    endedAt: { type: 'string', format: 'date-time', description: 'When it ended (not before startedAt)' },
  },
} as const;

/** Whether a same-id retry may count as the original (see isSameEntry). */
interface Outcome {
  id: string;
  duplicate: boolean;
}

/** The answer of `POST /v1/log`: one entry's id, or a batch's ids in body order. */
const ingestAnswer = {
  type: 'object',
  properties: {
    success: { type: 'boolean' },
    id: { type: 'string' },
    duplicate: { type: 'boolean' },
    ids: { type: 'array', items: { type: 'string' } },
    duplicates: { type: 'integer' },
  },
} as const;

/** Ingest plugin. */
export default async function ingestPlugin(app: FastifyInstance): Promise<void> {
  const ctx = app.ctx;
  acceptJsonOnly(app);

  app.post<{ Body: LogInput | { logs: LogInput[] } }>(
    '/v1/log',
    {
      // The key is checked before the body is read, so a bad key costs no parsing.
      // Then the call is admitted against the in-flight budget (http/admission.ts), still unread.
      onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
        await requireIngestKey(request);
        admitIngest(request, reply);
      },
      schema: {
        tags: ['ingest'],
        summary: 'Store audit log entries (human, agent or service key)',
        description: `One entry, or {"logs":[…]} of up to ${ctx.config.maxBatchLogs} entries (more answers 413). A retry with an id that exists in this project answers duplicate:true when it is the same entry, 409 idempotency_conflict otherwise; ids are scoped to the project. Header values are read as UTF-8 bytes (not valid UTF-8: 400; a percent-encoded value is stored as sent); a repeated X-Service-* header is 400. X-Agent-Rationale is kept sealed: inside a plain payload as member "agentRationale"; a client envelope carries it in its own payload (the header is then not stored).`,
        headers: {
          type: 'object',
          properties: {
            'x-service-encryption-key': { type: 'string', description: 'Key string the server seals plain payloads with, then forgets' },
            'x-service-agent-id': {
              type: 'string',
              description: `Default actor (the actor label; not agent context), 1-${MAX_ID_LENGTH} characters, UTF-8`,
            },
            'x-service-action': { type: 'string', description: `Default action, 1-${MAX_ID_LENGTH} characters, UTF-8` },
            'x-service-run-id': { type: 'string', description: `Default traceId, 1-${MAX_ID_LENGTH} characters, UTF-8` },
            'x-agent-rationale': {
              type: 'string',
              description: "The client's sealed rationale; with a human key, agent context (credential handover)",
            },
          },
        },
        // if/then/else rather than oneOf, so a bad body gets the errors of the form it meant.
        body: {
          type: 'object',
          if: { type: 'object', required: ['logs'] },
          then: {
            type: 'object',
            additionalProperties: false,
            required: ['logs'],
            properties: { logs: { type: 'array', minItems: 1, items: entrySchema } },
          },
          else: entrySchema,
        },
        response: {
          200: { ...ingestAnswer, description: 'Every entry was already stored (retries)' },
          201: {
            ...ingestAnswer,
            description: 'Stored. A single entry answers {success,id,duplicate}; a batch {success,ids,duplicates}, ids in body order',
          },
          ...errorResponses(400, 401, 403, 409, 413, 415, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const principal = request.principal as IngestPrincipal;
      const body = request.body;
      const batch = 'logs' in body;
      const inputs: LogInput[] = batch ? body.logs : [body];
      if (inputs.length > ctx.config.maxBatchLogs)
        throw new ApiError('payload_too_large', `a batch holds at most ${ctx.config.maxBatchLogs} logs; split it`);
      const encryptionKey = serviceHeaderText(request.headers, HEADERS.encryptionKey);
      if (encryptionKey !== undefined && encryptionKey.length === 0)
        throw new ApiError('missing_encryption_key', 'X-Service-Encryption-Key is empty');
      const req: IngestRequest = {
        principal,
        stamp: stampFromRequest(principal, request.headers),
        headers: request.headers,
        encryptionKey,
        agentRationale: serviceHeaderText(request.headers, HEADERS.agentRationale) || undefined,
        receivedAt: ctx.now(),
        bodyBytes: request.jsonBody?.raw.length ?? 0,
        traceparentParent: parseTraceparent(request.headers.traceparent)?.parentId,
      };
      // Sealing is WebCrypto work on the thread pool: a batch's entries seal in parallel.
      const prepared: PreparedLog[] = await Promise.all(inputs.map((input, i) => prepareLog(input, req, batch ? i : undefined)));
      const outcomes = await store(principal.projectId, prepared, encryptionKey);
      if (req.stamp.credentialHandoverDetected) {
        for (const o of outcomes) {
          if (o.duplicate) continue;
          const log = prepared.find((p) => p.log.id === o.id)!.log;
          await recordHandoverEvent(ctx, {
            projectId: principal.projectId,
            logId: o.id,
            actor: log.actor,
            credentialClass: principal.credentialClass,
            agentHeaders: req.stamp.agentHeaders,
          });
        }
      }
      const created = outcomes.some((o) => !o.duplicate);
      void reply.code(created ? 201 : 200);
      if (!batch) return { success: true, id: outcomes[0]!.id, duplicate: outcomes[0]!.duplicate };
      return { success: true, ids: outcomes.map((o) => o.id), duplicates: outcomes.filter((o) => o.duplicate).length };
    },
  );

  /**
   * Stores prepared entries: ids that already exist in the project are checked first (so a
   * conflicting batch writes nothing), the rest go through group commit; an id that appears
   * meanwhile (a concurrent retry) is checked after the fact. Another project's ids are never
   * looked at: the same id there is a different log (migration 005).
   */
  async function store(projectId: string, prepared: PreparedLog[], encryptionKey: string | undefined): Promise<Outcome[]> {
    const seen = new Set<string>();
    for (const [i, p] of prepared.entries()) {
      if (seen.has(p.log.id)) throw new ApiError('invalid_request', `logs[${i}]: id ${p.log.id} appears twice in this batch`);
      seen.add(p.log.id);
    }
    const clientIds = prepared.filter((p) => p.clientId).map((p) => p.log.id);
    const existing = new Map((await ctx.store.logs.getMany(projectId, clientIds)).map((r) => [r.id, r]));
    await assertSame(prepared, existing, encryptionKey);
    const fresh = prepared.filter((p) => !existing.has(p.log.id));
    let inserted: boolean[];
    try {
      inserted = await ctx.store.logs.insertMany(fresh.map((p) => p.log));
    } catch (err) {
      throw new ApiError('log_store_unavailable', 'the store did not take the logs; nothing was accepted, retry with the same ids', {
        cause: err,
      });
    }
    const raced = fresh.filter((_, i) => !inserted[i]);
    if (raced.length > 0) {
      const now = new Map(
        (
          await ctx.store.logs.getMany(
            projectId,
            raced.map((p) => p.log.id),
          )
        ).map((r) => [r.id, r]),
      );
      await assertSame(raced, now, encryptionKey);
      for (const [id, row] of now) existing.set(id, row);
    }
    return prepared.map((p) => ({ id: p.log.id, duplicate: existing.has(p.log.id) }));
  }

  async function assertSame(
    prepared: PreparedLog[],
    existing: Map<string, Awaited<ReturnType<typeof ctx.store.logs.getMany>>[number]>,
    key: string | undefined,
  ) {
    for (const [i, p] of prepared.entries()) {
      const row = existing.get(p.log.id);
      if (row && !(await isSameEntry(row, p, key)))
        throw new ApiError(
          'idempotency_conflict',
          `${prepared.length > 1 ? `logs[${i}]: ` : ''}a log with id ${p.log.id} already exists with different content; use a new id`,
        );
    }
  }
}
