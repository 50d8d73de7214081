/**
 * What the proof endpoint answers, as pure functions of stored rows: the receipt (core's
 * `ProofReceipt` shape) once its batch is sealed, else a pending status saying what it waits for.
 *
 * Envelope (also stated in the route's OpenAPI description):
 * - 200 `{success: true, status: "sealed", receipt}`.
 * - 202 `{success: true, status: "pending", logId, stage, batchId, windowStart, windowEnd, retryAfterMs}`,
 *   with a `Retry-After` header: not an error, ask again later.
 * - 200 `{success: true, status: "unavailable", logId, reason}`: the log asked for a proof but
 *   ended without a payload hash (nothing to prove), so no receipt will ever exist.
 */
import type { ProofReceipt } from '@countersign/core';
import type { LogRow, StoredReceipt } from '../store/index.js';
import { windowOf } from './batch.js';

/** Why a receipt is not there yet. */
export type PendingStage =
  /** A proxied exchange still in flight: its payload hash is known only when it ends. */
  | 'awaiting_exchange'
  /** Final, waiting for its window to close and be claimed. */
  | 'awaiting_window'
  /** In a batch whose root is being timestamped. */
  | 'timestamping'
  /** Timestamped; being entered in the ledger. */
  | 'ledger';

/** The pending answer. */
export interface PendingAnswer {
  success: true;
  status: 'pending';
  logId: string;
  stage: PendingStage;
  /** The batch, once the log is in one. */
  batchId: string | null;
  /** The window the log is expected in (its batch's window once claimed), ISO 8601. */
  windowStart: string | null;
  windowEnd: string | null;
  /** A sensible time to ask again, ms. */
  retryAfterMs: number;
}

/** The sealed answer. */
export interface SealedAnswer {
  success: true;
  status: 'sealed';
  receipt: ProofReceipt;
}

/** The answer for a log that will never have a receipt. */
export interface UnavailableAnswer {
  success: true;
  status: 'unavailable';
  logId: string;
  reason: string;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The receipt of a sealed batch's leaf. @throws Error when the batch is not sealed. */
export function toProofReceipt(r: StoredReceipt): ProofReceipt {
  const b = r.batch;
  if (b.state !== 'sealed' || b.tsaResponse === null || b.rekorLogIndex === null || b.ledgerUrl === null || b.ledgerUuid === null) {
    throw new Error(`batch ${b.id} is not sealed`);
  }
  return {
    logId: r.logId,
    payloadHash: r.payloadHash,
    merklePathJson: r.merklePath,
    merkleRoot: b.merkleRoot,
    leafIndex: r.leafIndex,
    treeSize: b.treeSize,
    batchId: b.id,
    windowStart: iso(b.windowStart),
    windowEnd: iso(b.windowEnd),
    tsaResponse: b.tsaResponse,
    rekorLogIndex: b.rekorLogIndex,
    ledgerUrl: b.ledgerUrl,
    ledgerEntryUuid: b.ledgerUuid,
  };
}

/**
 * The answer for a log that asked for a proof, given its receipt row (if claimed) and `now`.
 * `windowMs` and `graceMs` give the expected window of a log not yet claimed.
 */
export function proofAnswer(
  log: LogRow,
  stored: StoredReceipt | undefined,
  now: number,
  windowMs: number,
  graceMs: number,
): SealedAnswer | PendingAnswer | UnavailableAnswer {
  if (stored?.batch.state === 'sealed') return { success: true, status: 'sealed', receipt: toProofReceipt(stored) };
  if (stored) {
    const b = stored.batch;
    return {
      success: true,
      status: 'pending',
      logId: log.id,
      stage: b.tsaResponse === null ? 'timestamping' : 'ledger',
      batchId: b.id,
      windowStart: iso(b.windowStart),
      windowEnd: iso(b.windowEnd),
      retryAfterMs: Math.max(250, b.nextAttemptAt - now),
    };
  }
  if (log.status === 'pending') {
    return {
      success: true,
      status: 'pending',
      logId: log.id,
      stage: 'awaiting_exchange',
      batchId: null,
      windowStart: null,
      windowEnd: null,
      retryAfterMs: windowMs,
    };
  }
  if (log.payloadHash === null) {
    return {
      success: true,
      status: 'unavailable',
      logId: log.id,
      reason: 'the log ended without a payload hash, so there is nothing to prove',
    };
  }
  const w = windowOf(log.completedAt ?? log.receivedAt, windowMs);
  // A window already past (plus grace) means the log missed it and joins the next one.
  const expected = w.end + graceMs > now ? w : windowOf(now, windowMs);
  return {
    success: true,
    status: 'pending',
    logId: log.id,
    stage: 'awaiting_window',
    batchId: null,
    windowStart: iso(expected.start),
    windowEnd: iso(expected.end),
    retryAfterMs: Math.max(250, expected.end + graceMs - now),
  };
}

/** JSON schema of a receipt, for the OpenAPI document. */
export const receiptSchema = {
  type: 'object',
  description: 'Proof receipt (spec 2.3; DESIGN "Proof receipt"). Verify with `countersign verify` or core verifyReceipt.',
  properties: {
    logId: { type: 'string' },
    payloadHash: { type: 'string', description: 'hex SHA-256 of the RFC 8785 bytes of the decrypted payload' },
    merklePathJson: { type: 'array', items: { type: 'string' }, description: 'RFC 9162 audit path, hex, bottom-up' },
    merkleRoot: { type: 'string', description: 'hex RFC 9162 root of the batch' },
    leafIndex: { type: 'integer' },
    treeSize: { type: 'integer' },
    batchId: { type: 'string' },
    windowStart: { type: 'string', format: 'date-time' },
    windowEnd: { type: 'string', format: 'date-time' },
    tsaResponse: { type: 'string', description: 'base64 DER RFC 3161 TimeStampResp; hashedMessage = merkleRoot bytes (SHA-256)' },
    rekorLogIndex: { type: 'integer' },
    ledgerUrl: { type: 'string' },
    ledgerEntryUuid: { type: 'string' },
  },
  required: [
    'logId',
    'payloadHash',
    'merklePathJson',
    'merkleRoot',
    'leafIndex',
    'treeSize',
    'batchId',
    'windowStart',
    'windowEnd',
    'tsaResponse',
    'rekorLogIndex',
    'ledgerUrl',
    'ledgerEntryUuid',
  ],
} as const;
