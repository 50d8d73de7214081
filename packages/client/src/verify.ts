/**
 * Proof verification for the client library: fetches the ledger entry (unless offline) and
 * hands everything to `@countersign/core`'s `verifyReceipt`, the one verifier that the CLI and
 * the dashboard use too. Nothing is re-implemented here.
 */
import { verifyReceipt, type PemOrDer, type ProofReceipt, type ReceiptTrust, type ReceiptVerificationReport } from '@countersign/core';

/** Options of `ServiceClient.verifyProof`. */
export interface VerifyProofOptions {
  /** TSA trust anchors (PEM or DER; one or many). Required unless `trust` is given: trust is configuration, never "whatever is inside". */
  tsaRoots?: PemOrDer | readonly PemOrDer[];
  /** The ledger's public key (PEM or DER SPKI). Required unless `offline`. */
  ledgerPublicKey?: PemOrDer;
  /** The complete trust configuration of core (wins over `tsaRoots` / `ledgerPublicKey`). */
  trust?: ReceiptTrust;
  /** Ledger base URL to ask instead of the receipt's `ledgerUrl` (e.g. a mirror). */
  ledgerUrl?: string;
  /** The ledger's answer, if you fetched it yourself (then nothing is fetched). */
  ledgerEntry?: unknown;
  /** Skip the ledger steps (no network); the timestamp still proves the time. */
  offline?: boolean;
  /** Verification time (default now). */
  now?: Date;
  /** Time limit of the ledger request in ms (default 10 000). */
  requestTimeoutMs?: number;
}

/** Accepts a receipt or the proof endpoint's answer around it (`{ receipt }` / `{ proof }`). */
function unwrapReceipt(value: unknown): ProofReceipt {
  if (value && typeof value === 'object') {
    const v = value as Record<string, unknown>;
    for (const k of ['receipt', 'proof']) if (v[k] && typeof v[k] === 'object' && !('payloadHash' in v)) return v[k] as ProofReceipt;
  }
  return value as ProofReceipt;
}

async function fetchLedgerEntry(receipt: ProofReceipt, options: VerifyProofOptions): Promise<unknown> {
  const base = (options.ledgerUrl ?? receipt.ledgerUrl ?? '').replace(/\/+$/, '');
  if (!base || !Number.isSafeInteger(receipt.rekorLogIndex)) return undefined;
  try {
    const res = await fetch(`${base}/api/v1/log/entries?logIndex=${receipt.rekorLogIndex}`, {
      signal: AbortSignal.timeout(options.requestTimeoutMs ?? 10_000),
      headers: { accept: 'application/json' },
    });
    return res.ok ? await res.json() : undefined;
  } catch {
    return undefined; // core then reports the ledger step as failed, saying the entry is missing
  }
}

/**
 * Verifies a proof receipt against a decrypted log payload (spec 4.5) and returns core's
 * step-by-step report. Never throws for a bad receipt: failures are steps.
 */
export async function verifyProofReport(
  decryptedLogPayload: unknown,
  proofReceipt: unknown,
  options: VerifyProofOptions = {},
): Promise<ReceiptVerificationReport> {
  const receipt = unwrapReceipt(proofReceipt);
  const trust: ReceiptTrust = options.trust ?? {
    tsaRoots: options.tsaRoots ?? [],
    ...(options.ledgerPublicKey !== undefined ? { ledgerPublicKey: options.ledgerPublicKey } : {}),
  };
  const offline = options.offline === true;
  const ledgerEntry = offline ? undefined : (options.ledgerEntry ?? (await fetchLedgerEntry(receipt, options)));
  return verifyReceipt({
    payload: decryptedLogPayload,
    receipt,
    trust,
    offline,
    ...(ledgerEntry !== undefined ? { ledgerEntry } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
}
