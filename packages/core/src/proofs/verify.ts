/**
 * Proof receipt verification (spec 4.5), the one function that the client library, the CLI and
 * the dashboard all call. Pure: payload, receipt, trust roots and (optionally) the ledger entry
 * in; a step-by-step report out. No network, no file system, no clock: `now` is an input.
 *
 * Each step checks one link of the chain payload → payloadHash → merkleRoot → (TSA token,
 * ledger entry), so a tampered field fails exactly the steps that depend on it.
 *
 * @packageDocumentation
 */
import { canonicalize } from '../canonical.js';
import { fromHex, fromUtf8, toHex } from '../encoding.js';
import { sha256 } from '../hash.js';
import type { PemOrDer } from './crypto.js';
import { verifyLedgerEntry, type LedgerEntryFacts } from './ledger.js';
import { checkInclusion, receiptLeafHash } from './merkle.js';
import { StepLog, errorMessage, type VerificationReport, type VerificationStep, type VerificationStepId } from './report.js';
import { verifyTimestampToken, type TimestampInfo } from './timestamp.js';

/** A proof receipt (spec 2.3 names kept), as served by `GET …/logs/{logId}/proof`. */
export interface ProofReceipt {
  /** Log entry ID this receipt is for (a locator; not cryptographically bound). */
  logId: string;
  /** Hex SHA-256 of the RFC 8785 bytes of the decrypted payload. */
  payloadHash: string;
  /** RFC 9162 audit path, bottom-up, as hex strings (a JSON-encoded array is accepted too). */
  merklePathJson: string[];
  /** Hex root of the batch tree. */
  merkleRoot: string;
  /** 0-based index of this log's leaf in the batch. */
  leafIndex: number;
  /** Number of leaves in the batch. */
  treeSize: number;
  /** Batch identifier (a locator). */
  batchId: string;
  /** Batch window start, ISO 8601. */
  windowStart: string;
  /** Batch window end, ISO 8601. */
  windowEnd: string;
  /** Base64 DER RFC 3161 TimeStampResp over SHA-256 with hashedMessage = merkleRoot bytes. */
  tsaResponse: string;
  /** Global index of the batch's entry in the ledger. */
  rekorLogIndex: number;
  /** Base URL of the ledger (e.g. `https://rekor.sigstore.dev`). */
  ledgerUrl: string;
  /** UUID of the ledger entry (64 or 80 hex digits). */
  ledgerEntryUuid: string;
}

/** Trust configuration: never "whatever certificate is inside". */
export interface ReceiptTrust {
  /** TSA trust anchors: PEM text (one or more certificates) or DER, or a list of them. */
  tsaRoots: PemOrDer | readonly PemOrDer[];
  /** Untrusted helper certificates for the TSA chain (e.g. its leaf when tokens carry none). */
  tsaIntermediates?: PemOrDer | readonly PemOrDer[];
  /** Pin the TSA signer certificate's CN. */
  tsaCommonName?: string;
  /** The ledger's (log's) public key, PEM or DER SPKI. Required unless verifying offline. */
  ledgerPublicKey?: PemOrDer;
  /** Pin the key that signs the ledger's hashedrekord entries (the service's ledger key). */
  ledgerEntrySignerKey?: PemOrDer;
}

/** Input of {@link verifyReceipt}. */
export interface VerifyReceiptInput {
  /** The decrypted payload: a JSON value, JSON text, or UTF-8 JSON bytes. */
  payload: unknown;
  /** The receipt; validated at run time (a malformed one gives failing steps, not an exception). */
  receipt: ProofReceipt;
  /** Trust roots. */
  trust: ReceiptTrust;
  /** The ledger's answer to `GET {ledgerUrl}/api/v1/log/entries?logIndex={rekorLogIndex}`. */
  ledgerEntry?: unknown;
  /** Verification time: the token's genTime must not be after it (with 5 minutes of skew). */
  now?: Date;
  /** Skip the ledger steps (reported as `skip`); the report can still be ok. */
  offline?: boolean;
  /** Instant of the TSA certificate validity check: the token's genTime (default) or `now`. */
  timestampCheckAt?: 'genTime' | 'now';
}

/** Report of {@link verifyReceipt}: the steps, plus what was learned along the way. */
export interface ReceiptVerificationReport extends VerificationReport {
  /** TSTInfo facts, when the token could be read. */
  timestamp?: TimestampInfo;
  /** Ledger entry facts, when the entry could be read. */
  ledger?: LedgerEntryFacts;
}

const HEX64 = /^[0-9a-fA-F]{64}$/;
const LEDGER_STEPS: VerificationStepId[] = [
  'ledger_entry',
  'ledger_set',
  'ledger_inclusion',
  'ledger_checkpoint',
  'ledger_body_signature',
  'ledger_root_match',
];
const CLOCK_SKEW_MS = 5 * 60 * 1000;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const isIndex = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isHex64 = (v: unknown): v is string => typeof v === 'string' && HEX64.test(v);
const isIsoDate = (v: unknown): v is string => typeof v === 'string' && !Number.isNaN(Date.parse(v));

/** The audit path as hex strings, or undefined when it is not a list of 64-hex strings. */
function pathOf(value: unknown): string[] | undefined {
  let v = value;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      return undefined;
    }
  }
  return Array.isArray(v) && v.every(isHex64) ? (v as string[]) : undefined;
}

function formatProblems(r: Record<string, unknown>, offline: boolean): string[] {
  const p: string[] = [];
  for (const f of ['payloadHash', 'merkleRoot'] as const) if (!isHex64(r[f])) p.push(`${f} is not 64 hex digits`);
  if (pathOf(r.merklePathJson) === undefined) p.push('merklePathJson is not a list of 64-hex hashes');
  if (!isIndex(r.leafIndex)) p.push('leafIndex is not a non-negative integer');
  if (!isIndex(r.treeSize) || r.treeSize === 0) p.push('treeSize is not a positive integer');
  if (isIndex(r.leafIndex) && isIndex(r.treeSize) && r.leafIndex >= r.treeSize) p.push('leafIndex is not below treeSize');
  if (typeof r.tsaResponse !== 'string' || r.tsaResponse.length === 0) p.push('tsaResponse is missing');
  for (const f of ['windowStart', 'windowEnd'] as const) if (!isIsoDate(r[f])) p.push(`${f} is not an ISO 8601 time`);
  if (isIsoDate(r.windowStart) && isIsoDate(r.windowEnd) && Date.parse(r.windowStart) > Date.parse(r.windowEnd))
    p.push('windowStart is after windowEnd');
  for (const f of ['logId', 'batchId'] as const) if (typeof r[f] !== 'string') p.push(`${f} is missing`);
  if (!offline) {
    if (!isIndex(r.rekorLogIndex)) p.push('rekorLogIndex is not a non-negative integer');
    if (typeof r.ledgerUrl !== 'string') p.push('ledgerUrl is missing');
    if (typeof r.ledgerEntryUuid !== 'string' || !/^([0-9a-fA-F]{16})?[0-9a-fA-F]{64}$/.test(r.ledgerEntryUuid))
      p.push('ledgerEntryUuid is not 64 or 80 hex digits');
  }
  return p;
}

function payloadHashStep(log: StepLog, payload: unknown, expected: unknown): void {
  let value = payload;
  try {
    if (payload instanceof Uint8Array) value = JSON.parse(fromUtf8(payload));
    else if (typeof payload === 'string') value = JSON.parse(payload);
  } catch {
    log.fail('payload_hash', 'payload text is not valid JSON');
    return;
  }
  let actual: string;
  try {
    if (value === undefined) throw new Error('no payload given');
    actual = toHex(sha256(canonicalize(value)));
  } catch (err) {
    log.fail('payload_hash', `payload cannot be canonicalized: ${errorMessage(err)}`);
    return;
  }
  if (!isHex64(expected)) log.fail('payload_hash', 'receipt payloadHash is not 64 hex digits');
  else if (actual === expected.toLowerCase()) log.pass('payload_hash', `SHA-256 of the RFC 8785 payload is ${actual}, as in the receipt`);
  else log.fail('payload_hash', `SHA-256 of the RFC 8785 payload is ${actual}, but the receipt says ${expected}`);
}

function merklePathStep(log: StepLog, r: Record<string, unknown>): void {
  const path = pathOf(r.merklePathJson);
  if (!isHex64(r.payloadHash) || !isHex64(r.merkleRoot) || !path || !isIndex(r.leafIndex) || !isIndex(r.treeSize)) {
    log.fail('merkle_path', 'receipt lacks a valid payloadHash, merklePathJson, merkleRoot, leafIndex or treeSize');
    return;
  }
  const res = checkInclusion(receiptLeafHash(r.payloadHash), r.leafIndex, r.treeSize, path.map(fromHex), fromHex(r.merkleRoot));
  log.record(
    'merkle_path',
    res.ok,
    res.ok
      ? `leaf SHA-256(0x00 ‖ payloadHash) at index ${r.leafIndex} of ${r.treeSize} leads to merkleRoot ${r.merkleRoot.toLowerCase()}`
      : `Merkle path does not lead to merkleRoot: ${res.reason}`,
  );
}

async function timestampSteps(log: StepLog, r: Record<string, unknown>, input: VerifyReceiptInput): Promise<TimestampInfo | undefined> {
  const useNow = input.timestampCheckAt === 'now';
  const ts = await verifyTimestampToken(typeof r.tsaResponse === 'string' ? r.tsaResponse : new Uint8Array(0), {
    trustAnchors: input.trust?.tsaRoots ?? [],
    ...(input.trust?.tsaIntermediates !== undefined ? { intermediates: input.trust.tsaIntermediates } : {}),
    ...(input.trust?.tsaCommonName !== undefined ? { tsaCommonName: input.trust.tsaCommonName } : {}),
    ...(isHex64(r.merkleRoot) ? { expectedDigest: r.merkleRoot } : {}),
    expectedHashAlgorithm: 'sha256',
    ...(useNow && input.now ? { at: input.now } : {}),
  });
  for (const step of ts.steps) {
    if (useNow && !input.now && step.id === 'timestamp_chain' && step.status === 'pass') {
      log.fail('timestamp_chain', 'timestampCheckAt is "now" but no `now` was given');
    } else if (step.id === 'timestamp_imprint' && !isHex64(r.merkleRoot) && step.status === 'skip' && ts.info) {
      log.fail('timestamp_imprint', 'receipt merkleRoot is not 64 hex digits, so the imprint cannot be compared');
    } else {
      log.steps.push(step);
    }
  }
  const info = ts.info;
  if (!info) {
    log.skip('timestamp_time', 'not checked: the timestamp token could not be read');
    return undefined;
  }
  const gen = info.genTime.getTime();
  const problems: string[] = [];
  // genTime is often encoded in whole seconds (ours is; RFC 3161 lets a TSA choose), so a
  // token made in the same second as the window opened may read as up to 1 s earlier.
  if (isIsoDate(r.windowStart) && gen + GENTIME_PRECISION_MS <= Date.parse(r.windowStart))
    problems.push(`genTime ${info.genTime.toISOString()} is before the batch window opened (${r.windowStart})`);
  if (!isIsoDate(r.windowStart)) problems.push('receipt windowStart is not an ISO 8601 time');
  if (input.now && gen > input.now.getTime() + CLOCK_SKEW_MS)
    problems.push(`genTime ${info.genTime.toISOString()} is after the verification time ${input.now.toISOString()}`);
  log.record(
    'timestamp_time',
    problems.length === 0,
    problems.length === 0
      ? `genTime ${info.genTime.toISOString()} is not before the batch window start${input.now ? ' and not after the verification time' : ''}`
      : problems.join('; '),
  );
  return info;
}

/** The coarsest genTime precision we accept without an explicit accuracy: one second. */
const GENTIME_PRECISION_MS = 1000;

async function ledgerSteps(log: StepLog, r: Record<string, unknown>, input: VerifyReceiptInput): Promise<LedgerEntryFacts | undefined> {
  if (input.offline === true) {
    for (const id of LEDGER_STEPS) log.skip(id, 'skipped: offline verification (ledger not consulted)');
    return undefined;
  }
  if (input.ledgerEntry === undefined || input.ledgerEntry === null) {
    for (const id of LEDGER_STEPS) log.fail(id, 'ledger entry not supplied');
    return undefined;
  }
  if (input.trust?.ledgerPublicKey === undefined) {
    log.fail('ledger_entry', 'no ledger public key configured (trust.ledgerPublicKey)');
    for (const id of LEDGER_STEPS.slice(1)) log.skip(id, 'not checked: no ledger public key');
    return undefined;
  }
  const res = await verifyLedgerEntry(input.ledgerEntry, {
    publicKey: input.trust.ledgerPublicKey,
    ...(input.trust.ledgerEntrySignerKey !== undefined ? { entrySignerKey: input.trust.ledgerEntrySignerKey } : {}),
    ...(isHex64(r.merkleRoot) ? { expectedDataHash: r.merkleRoot } : {}),
    ...(isIndex(r.rekorLogIndex) ? { expectedLogIndex: r.rekorLogIndex } : {}),
    ...(typeof r.ledgerEntryUuid === 'string' && r.ledgerEntryUuid ? { expectedUuid: r.ledgerEntryUuid } : {}),
  });
  for (const step of res.steps) {
    const fix: VerificationStep | undefined =
      step.id === 'ledger_root_match' && step.status === 'skip' && !isHex64(r.merkleRoot)
        ? { id: step.id, status: 'fail', detail: 'receipt merkleRoot is not 64 hex digits, so the ledger entry cannot be matched' }
        : step.id === 'ledger_entry' && step.status === 'pass' && (!isIndex(r.rekorLogIndex) || typeof r.ledgerEntryUuid !== 'string')
          ? { id: step.id, status: 'fail', detail: 'receipt lacks rekorLogIndex or ledgerEntryUuid, so the entry cannot be tied to it' }
          : undefined;
    log.steps.push(fix ?? step);
  }
  return res.entry;
}

/**
 * Verifies a proof receipt for a decrypted payload: payload hash, Merkle path, RFC 3161
 * timestamp (signature, chain to `trust.tsaRoots`, EKU, imprint = merkleRoot) and the ledger
 * entry (SET, inclusion, checkpoint, data hash = merkleRoot). Never throws.
 */
export async function verifyReceipt(input: VerifyReceiptInput): Promise<ReceiptVerificationReport> {
  const log = new StepLog();
  try {
    const receipt: unknown = input?.receipt;
    const r = isRecord(receipt) ? receipt : {};
    const offline = input?.offline === true;
    const problems = isRecord(receipt) ? formatProblems(r, offline) : ['receipt is not a JSON object'];
    log.record(
      'receipt_format',
      problems.length === 0,
      problems.length === 0 ? 'every receipt field is present and well-formed' : problems.join('; '),
    );
    payloadHashStep(log, input?.payload, r.payloadHash);
    merklePathStep(log, r);
    const timestamp = await timestampSteps(log, r, input);
    const ledger = await ledgerSteps(log, r, input);
    const report: ReceiptVerificationReport = log.report();
    if (timestamp) report.timestamp = timestamp;
    if (ledger) report.ledger = ledger;
    return report;
  } catch (err) {
    // Defensive: a bug or a hostile input shape must still produce a failing report.
    log.fail('receipt_format', `verification aborted: ${errorMessage(err)}`);
    return log.report();
  }
}

/** `true` iff {@link verifyReceipt} reports no failing step. */
export async function verifyReceiptOk(input: VerifyReceiptInput): Promise<boolean> {
  return (await verifyReceipt(input)).ok;
}
