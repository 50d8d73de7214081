/**
 * Rekor v1 log entry verification, pure: the JSON that `GET /api/v1/log/entries?logIndex=N`
 * returns, plus the log's public key, in; a step report out.
 *
 * Steps: `ledger_entry` (shape, log ID = SHA-256 of the key's SPKI, UUID and index match),
 * `ledger_set` (signed entry timestamp over RFC 8785 `{body, integratedTime, logID, logIndex}`),
 * `ledger_inclusion` (RFC 9162 proof of SHA-256(0x00 ‖ body bytes) to `rootHash`),
 * `ledger_checkpoint` (signed note by the log key whose size and root equal the proof's),
 * `ledger_body_signature` (the hashedrekord signature over its digest) and `ledger_root_match`
 * (`spec.data.hash.value` equals the expected digest).
 *
 * @packageDocumentation
 */
import { bytesEqual, fromBase64, fromHex, fromUtf8, toHex, utf8 } from '../encoding.js';
import { hashLeaf, checkInclusion } from './merkle.js';
import { ledgerLogId, ledgerSetPayload, verifyCheckpoint } from './checkpoint.js';
import {
  fromPublicKeyInfo,
  parsePublicKey,
  pemBlocks,
  verifyEcdsaDigest,
  verifyPlainSignature,
  type ParsedPublicKey,
  type PemOrDer,
} from './crypto.js';
import { StepLog, errorMessage, type VerificationReport, type VerificationStepId } from './report.js';
import { certificateFromDer } from './x509.js';

/** `verification.inclusionProof` of a Rekor v1 entry (hashes and root in hex). */
export interface RekorInclusionProof {
  /** Index of the entry inside the tree the proof is for (a shard-local index on public Rekor). */
  logIndex: number;
  /** Root hash, hex. */
  rootHash: string;
  /** Tree size of that root. */
  treeSize: number;
  /** Audit path, bottom-up, hex. */
  hashes: string[];
  /** Signed checkpoint for (treeSize, rootHash). */
  checkpoint?: string;
}

/** One Rekor v1 log entry, as in the API response. */
export interface RekorLogEntry {
  /** Base64 of the canonicalized entry body (JSON). */
  body: string;
  /** Unix seconds when the log integrated the entry. */
  integratedTime: number;
  /** Log ID, hex. */
  logID: string;
  /** Global log index. */
  logIndex: number;
  /** Proof material. */
  verification?: { inclusionProof?: RekorInclusionProof; signedEntryTimestamp?: string };
}

/** The API response: a single-key object `{ "<uuid>": entry }`. */
export type RekorLogEntryResponse = Record<string, RekorLogEntry>;

/** Options of {@link verifyLedgerEntry}. */
export interface LedgerVerifyOptions {
  /** The log's public key (PEM or DER SubjectPublicKeyInfo; ECDSA P-256/384/521 or Ed25519). */
  publicKey: PemOrDer;
  /** hashedrekord `spec.data.hash.value` must equal this hex digest (else `ledger_root_match` is skipped). */
  expectedDataHash?: string;
  /** The entry's global logIndex must equal this. */
  expectedLogIndex?: number;
  /** The entry UUID must match this (64-hex leaf hash or 80-hex tree ID + leaf hash). */
  expectedUuid?: string;
  /** When set, a hashedrekord entry must be signed by this key (PEM/DER SPKI). */
  entrySignerKey?: PemOrDer;
  /** Require a signed entry timestamp (default true). */
  requireSet?: boolean;
  /** Require an inclusion proof (default true). */
  requireInclusionProof?: boolean;
  /** Require a checkpoint with the inclusion proof (default true). */
  requireCheckpoint?: boolean;
}

/** Facts read from a verified (or partly verified) entry. */
export interface LedgerEntryFacts {
  /** Entry UUID, when the response carried one. */
  uuid?: string;
  /** Global log index. */
  logIndex: number;
  /** Unix seconds. */
  integratedTime: number;
  /** Log ID, hex. */
  logId: string;
  /** Body `kind` (e.g. `hashedrekord`). */
  kind: string;
  /** Body `apiVersion`. */
  apiVersion: string;
  /** RFC 9162 leaf hash of the body, hex. */
  leafHash: string;
  /** hashedrekord `spec.data.hash.value`, when present. */
  dataHash?: string;
}

/** Report of {@link verifyLedgerEntry}. */
export interface LedgerVerification extends VerificationReport {
  /** Entry facts, when the entry could be read. */
  entry?: LedgerEntryFacts;
}

const LATER_STEPS: VerificationStepId[] = [
  'ledger_set',
  'ledger_inclusion',
  'ledger_checkpoint',
  'ledger_body_signature',
  'ledger_root_match',
];
const HEX64 = /^[0-9a-f]{64}$/i;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isIndex(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** Splits `{uuid: entry}` (or a bare entry) into its parts; returns a problem string on bad shape. */
function unwrap(input: unknown): { uuid?: string; entry: RekorLogEntry } | string {
  if (!isRecord(input)) return 'ledger entry is not a JSON object';
  let uuid: string | undefined;
  let entry: unknown = input;
  if (!('body' in input)) {
    const keys = Object.keys(input);
    if (keys.length !== 1) return `expected exactly one entry in the response, found ${keys.length}`;
    uuid = keys[0]!;
    entry = input[uuid];
  }
  if (!isRecord(entry)) return 'ledger entry is not a JSON object';
  if (typeof entry.body !== 'string' || entry.body.length === 0) return 'entry body is missing';
  if (!isIndex(entry.integratedTime)) return 'entry integratedTime is not a non-negative integer';
  if (typeof entry.logID !== 'string' || !HEX64.test(entry.logID)) return 'entry logID is not 64 hex digits';
  if (!isIndex(entry.logIndex)) return 'entry logIndex is not a non-negative integer';
  return uuid === undefined ? { entry: entry as unknown as RekorLogEntry } : { uuid, entry: entry as unknown as RekorLogEntry };
}

/** Public key of a hashedrekord body (`publicKey.content` is base64 of a PEM key or certificate). */
function bodyKey(contentB64: string): ParsedPublicKey {
  const pem = fromUtf8(fromBase64(contentB64));
  const block = pemBlocks(pem)[0];
  if (block?.label === 'CERTIFICATE') return fromPublicKeyInfo(certificateFromDer(block.der).cert.subjectPublicKeyInfo);
  return parsePublicKey(pem);
}

function checkBodySignature(
  body: Record<string, unknown>,
  options: LedgerVerifyOptions,
): { status: 'pass' | 'fail' | 'skip'; detail: string } {
  if (body.kind !== 'hashedrekord') return { status: 'skip', detail: `not checked: entry kind is ${String(body.kind ?? 'unknown')}` };
  try {
    const spec = body.spec as {
      data: { hash: { algorithm: string; value: string } };
      signature: { content: string; publicKey: { content: string } };
    };
    const key = bodyKey(spec.signature.publicKey.content);
    if (options.entrySignerKey !== undefined && !bytesEqual(key.spki, parsePublicKey(options.entrySignerKey).spki)) {
      return { status: 'fail', detail: 'entry is signed by a key other than the configured entry signer' };
    }
    if (key.type !== 'ecdsa')
      return { status: 'skip', detail: `not checked: a ${key.type} hashedrekord signature covers the artifact, not its digest` };
    const ok = verifyEcdsaDigest(key, fromHex(spec.data.hash.value), fromBase64(spec.signature.content));
    return ok
      ? {
          status: 'pass',
          detail: `hashedrekord signature over ${spec.data.hash.algorithm}:${spec.data.hash.value} verifies with the key in the entry`,
        }
      : { status: 'fail', detail: 'hashedrekord signature does not verify over the recorded digest' };
  } catch (err) {
    return { status: 'fail', detail: `hashedrekord signature could not be checked: ${errorMessage(err)}` };
  }
}

/**
 * Verifies a Rekor v1 entry (the API response object, or a bare entry) against the log key.
 * Never throws: every problem is a failing step.
 */
export async function verifyLedgerEntry(input: unknown, options: LedgerVerifyOptions): Promise<LedgerVerification> {
  const log = new StepLog();
  const abort = (detail: string): LedgerVerification => {
    log.fail('ledger_entry', detail);
    for (const id of LATER_STEPS) log.skip(id, 'not checked: the ledger entry could not be read');
    return log.report();
  };
  let key: ParsedPublicKey;
  try {
    key = parsePublicKey(options.publicKey);
  } catch (err) {
    return abort(`ledger public key is unusable: ${errorMessage(err)}`);
  }
  const unwrapped = unwrap(input);
  if (typeof unwrapped === 'string') return abort(unwrapped);
  const { uuid, entry } = unwrapped;
  let bodyBytes: Uint8Array;
  try {
    bodyBytes = fromBase64(entry.body);
  } catch (err) {
    return abort(`entry body is not base64: ${errorMessage(err)}`);
  }
  // A body that is not a proper Rekor type fails ledger_entry, but the SET and the inclusion
  // proof cover the raw bytes and are still checked, so the report says everything it can.
  let body: Record<string, unknown> = {};
  let bodyProblem: string | undefined;
  try {
    const parsed: unknown = JSON.parse(fromUtf8(bodyBytes));
    if (!isRecord(parsed) || typeof parsed.kind !== 'string' || typeof parsed.apiVersion !== 'string')
      throw new Error('kind or apiVersion missing');
    body = parsed;
  } catch (err) {
    bodyProblem = `entry body is not JSON with kind and apiVersion: ${errorMessage(err)}`;
  }
  const leaf = hashLeaf(bodyBytes);
  const leafHex = toHex(leaf);
  const spec = body.spec as { data?: { hash?: { algorithm?: unknown; value?: unknown } } } | undefined;
  const dataHash = typeof spec?.data?.hash?.value === 'string' ? spec.data.hash.value.toLowerCase() : undefined;
  const facts: LedgerEntryFacts = {
    logIndex: entry.logIndex,
    integratedTime: entry.integratedTime,
    logId: entry.logID.toLowerCase(),
    kind: typeof body.kind === 'string' ? body.kind : 'unknown',
    apiVersion: typeof body.apiVersion === 'string' ? body.apiVersion : 'unknown',
    leafHash: leafHex,
  };
  if (uuid !== undefined) facts.uuid = uuid;
  if (dataHash !== undefined) facts.dataHash = dataHash;

  // ledger_entry: identity of the log and of the entry.
  const problems: string[] = bodyProblem ? [bodyProblem] : [];
  const logId = ledgerLogId(key);
  if (entry.logID.toLowerCase() !== logId) problems.push(`logID ${entry.logID} is not this log's key ID ${logId}`);
  const uuidLeaf = (u: string): string => u.toLowerCase().slice(-64);
  if (uuid !== undefined && uuidLeaf(uuid) !== leafHex) problems.push(`UUID ${uuid} does not end in the body's leaf hash ${leafHex}`);
  if (options.expectedUuid !== undefined) {
    const mine = uuid ?? leafHex;
    const same =
      uuidLeaf(options.expectedUuid) === uuidLeaf(mine) &&
      (options.expectedUuid.length !== 80 || mine.length !== 80 || options.expectedUuid.toLowerCase() === mine.toLowerCase());
    if (!same) problems.push(`entry UUID ${mine} is not the expected ${options.expectedUuid}`);
  }
  if (options.expectedLogIndex !== undefined && entry.logIndex !== options.expectedLogIndex) {
    problems.push(`logIndex ${entry.logIndex} is not the expected ${options.expectedLogIndex}`);
  }
  log.record(
    'ledger_entry',
    problems.length === 0,
    problems.length === 0 ? `${facts.kind}/${facts.apiVersion} entry at logIndex ${entry.logIndex} of log ${logId}` : problems.join('; '),
  );

  // ledger_set: the log's promise that it integrated this body at this index and time.
  const set = entry.verification?.signedEntryTimestamp;
  if (typeof set !== 'string' || set.length === 0) {
    if (options.requireSet === false) log.skip('ledger_set', 'not checked: entry has no signed entry timestamp');
    else log.fail('ledger_set', 'entry has no signed entry timestamp');
  } else {
    let ok = false;
    try {
      ok = verifyPlainSignature(key, utf8(ledgerSetPayload(entry)), fromBase64(set));
    } catch {
      ok = false;
    }
    log.record(
      'ledger_set',
      ok,
      ok
        ? `signed entry timestamp verifies (integratedTime ${entry.integratedTime})`
        : 'signed entry timestamp does not verify with the log key',
    );
  }

  // ledger_inclusion + ledger_checkpoint
  const proof = entry.verification?.inclusionProof as Partial<RekorInclusionProof> | undefined;
  if (!isRecord(proof)) {
    if (options.requireInclusionProof === false) log.skip('ledger_inclusion', 'not checked: entry has no inclusion proof');
    else log.fail('ledger_inclusion', 'entry has no inclusion proof');
    log.skip('ledger_checkpoint', 'not checked: no inclusion proof');
  } else {
    const hashes =
      Array.isArray(proof.hashes) && proof.hashes.every((h) => typeof h === 'string' && HEX64.test(h))
        ? proof.hashes.map(fromHex)
        : undefined;
    const root = typeof proof.rootHash === 'string' && HEX64.test(proof.rootHash) ? fromHex(proof.rootHash) : undefined;
    if (!hashes || !root || !isIndex(proof.logIndex) || !isIndex(proof.treeSize)) {
      log.fail('ledger_inclusion', 'inclusion proof is malformed (need logIndex, treeSize, 64-hex rootHash and hashes)');
      log.skip('ledger_checkpoint', 'not checked: malformed inclusion proof');
    } else {
      const inc = checkInclusion(leaf, proof.logIndex, proof.treeSize, hashes, root);
      log.record(
        'ledger_inclusion',
        inc.ok,
        inc.ok
          ? `leaf ${leafHex} is at index ${proof.logIndex} of the tree of size ${proof.treeSize} with root ${toHex(root)}`
          : `inclusion proof fails: ${inc.reason}`,
      );
      if (typeof proof.checkpoint !== 'string' || proof.checkpoint.length === 0) {
        if (options.requireCheckpoint === false) log.skip('ledger_checkpoint', 'not checked: inclusion proof has no checkpoint');
        else log.fail('ledger_checkpoint', 'inclusion proof has no checkpoint');
      } else {
        const cp = verifyCheckpoint(proof.checkpoint, key);
        const c = cp.checkpoint;
        const matches = c !== undefined && c.treeSize === proof.treeSize && bytesEqual(c.rootHash, root);
        const detail = !cp.signatureValid
          ? cp.detail
          : !matches
            ? `checkpoint is for size ${c!.treeSize} root ${toHex(c!.rootHash)}, not the proof's size ${proof.treeSize} root ${toHex(root)}`
            : `${cp.detail}; size ${proof.treeSize} and root match the inclusion proof`;
        log.record('ledger_checkpoint', cp.signatureValid && matches, detail);
      }
    }
  }

  const sig = checkBodySignature(body, options);
  log[sig.status]('ledger_body_signature', sig.detail);

  if (options.expectedDataHash === undefined) {
    log.skip('ledger_root_match', `not checked: no expected digest given (entry records ${dataHash ?? 'no data hash'})`);
  } else if (body.kind !== 'hashedrekord' || dataHash === undefined) {
    log.fail('ledger_root_match', `entry kind ${facts.kind} records no hashedrekord data hash`);
  } else {
    const alg = spec?.data?.hash?.algorithm;
    const ok = alg === 'sha256' && dataHash === options.expectedDataHash.toLowerCase();
    log.record(
      'ledger_root_match',
      ok,
      ok
        ? `entry records sha256:${dataHash}, the expected digest`
        : `entry records ${String(alg)}:${dataHash}, expected sha256:${options.expectedDataHash}`,
    );
  }
  return { ...log.report(), entry: facts };
}
