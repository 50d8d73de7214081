/**
 * Adapter from a Sigstore bundle's `verificationMaterial.tlogEntries[i]` (proto3 JSON: 64-bit
 * integers as strings, bytes as base64) to the Rekor v1 API entry shape that
 * {@link verifyLedgerEntry} takes. Only the encoding changes, so an entry verifies the same
 * either way. Useful for checking Countersign against public Sigstore data.
 *
 * @packageDocumentation
 */
import { fromBase64, toHex } from '../encoding.js';
import { CoreError } from '../errors.js';
import { hashLeaf } from './merkle.js';
import type { RekorInclusionProof, RekorLogEntry, RekorLogEntryResponse } from './ledger.js';

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function int(v: unknown, what: string): number {
  const n = typeof v === 'string' && /^-?[0-9]+$/.test(v) ? Number(v) : typeof v === 'number' ? v : NaN;
  if (!Number.isSafeInteger(n)) throw new CoreError('invalid_ledger_entry', `${what} is not an integer`);
  return n;
}

function b64hex(v: unknown, what: string): string {
  if (typeof v !== 'string') throw new CoreError('invalid_ledger_entry', `${what} is missing`);
  return toHex(fromBase64(v));
}

/**
 * Converts one bundle `tlogEntries[i]` object into `{ "<uuid>": RekorLogEntry }`, where the UUID
 * is the 64-hex leaf hash of the body. Negative indices are kept so the verifier rejects them.
 * @throws CoreError `invalid_ledger_entry` / `invalid_encoding` when required fields are missing.
 */
export function ledgerEntryFromBundleTlogEntry(tlogEntry: unknown): RekorLogEntryResponse {
  if (!isRecord(tlogEntry)) throw new CoreError('invalid_ledger_entry', 'tlog entry is not an object');
  const body = tlogEntry.canonicalizedBody;
  if (typeof body !== 'string') throw new CoreError('invalid_ledger_entry', 'tlog entry has no canonicalizedBody');
  const logId = isRecord(tlogEntry.logId) ? tlogEntry.logId.keyId : undefined;
  const entry: RekorLogEntry = {
    body,
    integratedTime: int(tlogEntry.integratedTime ?? '0', 'integratedTime'),
    logID: b64hex(logId, 'logId.keyId'),
    logIndex: int(tlogEntry.logIndex, 'logIndex'),
    verification: {},
  };
  const promise = tlogEntry.inclusionPromise;
  if (isRecord(promise) && typeof promise.signedEntryTimestamp === 'string') {
    entry.verification!.signedEntryTimestamp = promise.signedEntryTimestamp;
  }
  const p = tlogEntry.inclusionProof;
  if (isRecord(p)) {
    const proof: RekorInclusionProof = {
      logIndex: int(p.logIndex, 'inclusionProof.logIndex'),
      rootHash: b64hex(p.rootHash, 'inclusionProof.rootHash'),
      treeSize: int(p.treeSize, 'inclusionProof.treeSize'),
      hashes: Array.isArray(p.hashes) ? p.hashes.map((h, i) => b64hex(h, `inclusionProof.hashes[${i}]`)) : [],
    };
    if (isRecord(p.checkpoint) && typeof p.checkpoint.envelope === 'string') proof.checkpoint = p.checkpoint.envelope;
    entry.verification!.inclusionProof = proof;
  }
  return { [toHex(hashLeaf(fromBase64(body)))]: entry };
}
