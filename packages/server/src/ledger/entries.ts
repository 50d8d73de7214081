/**
 * Rekor v1 entry formats, pure: the hashedrekord body (what is logged), checking a proposed
 * entry before it is accepted, and the LogEntry response shape
 * `{ "<uuid>": { body, integratedTime, logID, logIndex, verification } }`.
 *
 * The stored body is the RFC 8785 canonical JSON of
 * `{apiVersion:"0.0.1", kind:"hashedrekord", spec:{data:{hash:{algorithm,value}}, signature:{content, publicKey:{content}}}}`
 * (the same key order Rekor's canonicalizer emits), and the Merkle leaf is SHA-256(0x00 ‖ those bytes).
 */
import {
  canonicalBytes,
  fromBase64,
  fromHex,
  fromUtf8,
  parsePublicKey,
  pemBlocks,
  toBase64,
  utf8,
  verifyEcdsaDigest,
} from '@countersign/core';
import { X509Certificate } from 'node:crypto';

/** A hashedrekord v0.0.1 entry (proposed or stored). */
export interface HashedRekord {
  apiVersion: '0.0.1';
  kind: 'hashedrekord';
  spec: {
    data: { hash: { algorithm: 'sha256' | 'sha384' | 'sha512'; value: string } };
    signature: { content: string; publicKey: { content: string } };
  };
}

const DIGEST_HEX_LENGTH = { sha256: 64, sha384: 96, sha512: 128 } as const;

/** A refusal of a proposed entry, with the reason to send back. */
export class InvalidEntryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidEntryError';
  }
}

/** The hashedrekord body for `digestHex` signed (over the digest) with `signatureDer` by the key `publicKeyPem`. */
export function hashedRekordBody(digestHex: string, signatureDer: Uint8Array, publicKeyPem: string): HashedRekord {
  return {
    apiVersion: '0.0.1',
    kind: 'hashedrekord',
    spec: {
      data: { hash: { algorithm: 'sha256', value: digestHex.toLowerCase() } },
      signature: { content: toBase64(signatureDer), publicKey: { content: toBase64(utf8(publicKeyPem)) } },
    },
  };
}

/** The bytes the ledger stores and hashes for `body`. */
export function bodyBytes(body: HashedRekord): Uint8Array {
  return canonicalBytes(body);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function publicKeyOfPem(pem: string): ReturnType<typeof parsePublicKey> {
  const first = pemBlocks(pem)[0];
  if (!first) throw new InvalidEntryError('spec.signature.publicKey.content is not base64 of a PEM block');
  if (first.label === 'CERTIFICATE') {
    const cert = new X509Certificate(Buffer.from(first.der));
    return parsePublicKey(new Uint8Array(cert.publicKey.export({ type: 'spki', format: 'der' })));
  }
  return parsePublicKey(pem);
}

/**
 * Checks a proposed entry (the JSON body of `POST /api/v1/log/entries`) and returns it in the
 * canonical shape. Its signature must verify, over the digest, with the key it names.
 * @throws InvalidEntryError saying what is wrong.
 */
export function checkProposedEntry(input: unknown): HashedRekord {
  if (!isRecord(input)) throw new InvalidEntryError('the proposed entry must be a JSON object');
  if (input.kind !== 'hashedrekord')
    throw new InvalidEntryError(`entry kind "${String(input.kind)}" is not supported; this ledger accepts hashedrekord`);
  if (input.apiVersion !== '0.0.1')
    throw new InvalidEntryError(`hashedrekord apiVersion "${String(input.apiVersion)}" is not supported; use 0.0.1`);
  const spec = input.spec;
  if (
    !isRecord(spec) ||
    !isRecord(spec.data) ||
    !isRecord(spec.data.hash) ||
    !isRecord(spec.signature) ||
    !isRecord(spec.signature.publicKey)
  ) {
    throw new InvalidEntryError('spec must hold data.hash {algorithm, value} and signature {content, publicKey {content}}');
  }
  const { algorithm, value } = spec.data.hash;
  if (algorithm !== 'sha256' && algorithm !== 'sha384' && algorithm !== 'sha512') {
    throw new InvalidEntryError('spec.data.hash.algorithm must be sha256, sha384 or sha512');
  }
  if (typeof value !== 'string' || !new RegExp(`^[0-9a-fA-F]{${DIGEST_HEX_LENGTH[algorithm]}}$`).test(value)) {
    throw new InvalidEntryError(`spec.data.hash.value must be ${DIGEST_HEX_LENGTH[algorithm]} hex digits for ${algorithm}`);
  }
  const sigB64 = spec.signature.content;
  const keyB64 = spec.signature.publicKey.content;
  if (typeof sigB64 !== 'string' || typeof keyB64 !== 'string')
    throw new InvalidEntryError('signature.content and publicKey.content must be base64 strings');
  let signature: Uint8Array;
  let pem: string;
  try {
    signature = fromBase64(sigB64);
    pem = fromUtf8(fromBase64(keyB64));
  } catch {
    throw new InvalidEntryError('signature.content and publicKey.content must be valid base64');
  }
  let key: ReturnType<typeof parsePublicKey>;
  try {
    key = publicKeyOfPem(pem);
  } catch (e) {
    if (e instanceof InvalidEntryError) throw e;
    throw new InvalidEntryError(`the public key cannot be read: ${(e as Error).message}`);
  }
  if (key.type !== 'ecdsa')
    throw new InvalidEntryError(`only ECDSA keys are accepted (the signature must cover the digest); this is ${key.type}`);
  if (!verifyEcdsaDigest(key, fromHex(value), signature)) {
    throw new InvalidEntryError('the signature does not verify over spec.data.hash.value with the given public key');
  }
  return {
    apiVersion: '0.0.1',
    kind: 'hashedrekord',
    spec: { data: { hash: { algorithm, value: value.toLowerCase() } }, signature: { content: sigB64, publicKey: { content: keyB64 } } },
  };
}

/** `verification.inclusionProof` as Rekor serves it (hex hashes and root). */
export interface InclusionProofJson {
  logIndex: number;
  rootHash: string;
  treeSize: number;
  hashes: string[];
  checkpoint: string;
}

/** One entry of the Rekor v1 LogEntry response. */
export interface LogEntryJson {
  body: string;
  integratedTime: number;
  logID: string;
  logIndex: number;
  verification: { inclusionProof: InclusionProofJson; signedEntryTimestamp: string };
}
