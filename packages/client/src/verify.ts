/**
 * Proof verification for the client library: fetches the ledger entry (unless offline) and
 * hands everything to `@countersign/core`'s `verifyReceipt`, the one verifier that the CLI and
 * the dashboard use too. Nothing is re-implemented here.
 *
 * Trust (the TSA roots and the ledger key) is configuration, never "whatever the receipt
 * carries". It comes, first match wins per field, from the call's options, from
 * {@link configureTrust} (process-wide), or from `COUNTERSIGN_TSA_ROOTS`, `COUNTERSIGN_LEDGER_KEY`
 * and `COUNTERSIGN_LEDGER_URL`. With none of them a verification throws `trust_not_configured`:
 * answering `false` would say "altered" about a receipt nobody checked.
 */
import fs from 'node:fs';
import { verifyReceipt, type PemOrDer, type ProofReceipt, type ReceiptTrust, type ReceiptVerificationReport } from '@countersign/core';
import { ClientError } from './errors.js';

/** Options of `ServiceClient.verifyProof`. */
export interface VerifyProofOptions {
  /** TSA trust anchors (PEM or DER; one or many). Default: the configured trust. */
  tsaRoots?: PemOrDer | readonly PemOrDer[];
  /** The ledger's public key (PEM or DER SPKI). Default: the configured trust; needed unless `offline`. */
  ledgerPublicKey?: PemOrDer;
  /** The complete trust configuration of core (wins over everything else). */
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

/** Process-wide trust for proof verification (see `ServiceClient.configureTrust`). */
export interface ProofTrustConfig {
  /** TSA trust anchors you pinned: PEM text (one or more certificates), DER, or a list of them. */
  tsaRoots: PemOrDer | readonly PemOrDer[];
  /** The ledger's public key you pinned (PEM or DER SPKI); needed unless every call is `offline`. */
  ledgerKey?: PemOrDer;
  /** Ledger base URL to ask instead of each receipt's `ledgerUrl` (e.g. your own mirror). */
  ledgerUrl?: string;
  /** Untrusted helper certificates for the TSA chain (e.g. its leaf when tokens carry none). */
  tsaIntermediates?: PemOrDer | readonly PemOrDer[];
  /** Pin the TSA signer certificate's CN. */
  tsaCommonName?: string;
  /** Pin the key that signs the ledger's hashedrekord entries (the service's ledger key). */
  ledgerEntrySignerKey?: PemOrDer;
}

let configured: ProofTrustConfig | undefined;

/** Sets (or with `null` clears) the process-wide trust; see {@link ProofTrustConfig}. */
export function configureTrust(trust: ProofTrustConfig | null): void {
  if (trust === null) {
    configured = undefined;
    return;
  }
  if (!trust || typeof trust !== 'object' || trust.tsaRoots === undefined || trust.tsaRoots === null) {
    throw new ClientError('invalid_config', 'configureTrust: tsaRoots is required (the TSA trust anchors you pinned)');
  }
  configured = { ...trust };
}

const envFileCache = new Map<string, string>();

/** An environment value that is either PEM text itself or the path of a PEM file. */
function pemFromEnv(name: string): string | undefined {
  const value = process.env[name];
  if (!value) return undefined;
  if (value.includes('-----BEGIN')) return value;
  const cached = envFileCache.get(value);
  if (cached !== undefined) return cached;
  let text: string;
  try {
    text = fs.readFileSync(value, 'utf8');
  } catch (cause) {
    throw new ClientError('invalid_config', `${name} is neither PEM text nor a readable PEM file: ${value}`, { cause });
  }
  envFileCache.set(value, text);
  return text;
}

/** The trust from `COUNTERSIGN_TSA_ROOTS` / `COUNTERSIGN_LEDGER_KEY` / `COUNTERSIGN_LEDGER_URL`, if set. */
function trustFromEnv(): ProofTrustConfig | undefined {
  const tsaRoots = pemFromEnv('COUNTERSIGN_TSA_ROOTS');
  if (tsaRoots === undefined) return undefined;
  const ledgerKey = pemFromEnv('COUNTERSIGN_LEDGER_KEY');
  const ledgerUrl = process.env.COUNTERSIGN_LEDGER_URL || undefined;
  return { tsaRoots, ...(ledgerKey !== undefined ? { ledgerKey } : {}), ...(ledgerUrl !== undefined ? { ledgerUrl } : {}) };
}

/** The trust and ledger URL of one verification; throws when nothing says what to trust. */
function resolveTrust(options: VerifyProofOptions): { trust: ReceiptTrust; ledgerUrl?: string } {
  const base = configured ?? trustFromEnv();
  const ledgerUrl = options.ledgerUrl ?? base?.ledgerUrl;
  const withUrl = (trust: ReceiptTrust) => (ledgerUrl !== undefined ? { trust, ledgerUrl } : { trust });
  if (options.trust) return withUrl(options.trust);
  const tsaRoots = options.tsaRoots ?? base?.tsaRoots;
  const ledgerPublicKey = options.ledgerPublicKey ?? base?.ledgerKey;
  const missing: string[] = [];
  if (tsaRoots === undefined) missing.push('the TSA roots');
  if (ledgerPublicKey === undefined && options.offline !== true) missing.push('the ledger key');
  if (missing.length > 0) {
    throw new ClientError(
      'trust_not_configured',
      `cannot verify a proof without ${missing.join(' and ')}: call ServiceClient.configureTrust({ tsaRoots, ledgerKey }), ` +
        'set COUNTERSIGN_TSA_ROOTS and COUNTERSIGN_LEDGER_KEY (PEM text or file paths), or pass them in the options ' +
        '(offline: true needs only the TSA roots)',
    );
  }
  const trust: ReceiptTrust = {
    tsaRoots: tsaRoots!,
    ...(ledgerPublicKey !== undefined ? { ledgerPublicKey } : {}),
    ...(base?.tsaIntermediates !== undefined ? { tsaIntermediates: base.tsaIntermediates } : {}),
    ...(base?.tsaCommonName !== undefined ? { tsaCommonName: base.tsaCommonName } : {}),
    ...(base?.ledgerEntrySignerKey !== undefined ? { ledgerEntrySignerKey: base.ledgerEntrySignerKey } : {}),
  };
  return withUrl(trust);
}

/** Accepts a receipt or the proof endpoint's answer around it (`{ receipt }` / `{ proof }`). */
function unwrapReceipt(value: unknown): ProofReceipt {
  if (value && typeof value === 'object') {
    const v = value as Record<string, unknown>;
    for (const k of ['receipt', 'proof']) if (v[k] && typeof v[k] === 'object' && !('payloadHash' in v)) return v[k] as ProofReceipt;
  }
  return value as ProofReceipt;
}

async function fetchLedgerEntry(receipt: ProofReceipt, ledgerUrl: string | undefined, timeoutMs: number | undefined): Promise<unknown> {
  const base = (ledgerUrl ?? receipt.ledgerUrl ?? '').replace(/\/+$/, '');
  if (!base || !Number.isSafeInteger(receipt.rekorLogIndex)) return undefined;
  try {
    const res = await fetch(`${base}/api/v1/log/entries?logIndex=${receipt.rekorLogIndex}`, {
      signal: AbortSignal.timeout(timeoutMs ?? 10_000),
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
 * @throws ClientError `trust_not_configured` when no trust was given or configured.
 */
export async function verifyProofReport(
  decryptedLogPayload: unknown,
  proofReceipt: unknown,
  options: VerifyProofOptions = {},
): Promise<ReceiptVerificationReport> {
  const { trust, ledgerUrl } = resolveTrust(options);
  const receipt = unwrapReceipt(proofReceipt);
  const offline = options.offline === true;
  const ledgerEntry = offline ? undefined : (options.ledgerEntry ?? (await fetchLedgerEntry(receipt, ledgerUrl, options.requestTimeoutMs)));
  return verifyReceipt({
    payload: decryptedLogPayload,
    receipt,
    trust,
    offline,
    ...(ledgerEntry !== undefined ? { ledgerEntry } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
}
