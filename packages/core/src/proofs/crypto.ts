/**
 * Signature primitives for proof verification: PEM/SPKI parsing, digests by OID, and signature
 * checks by X.509/CMS algorithm identifier.
 *
 * ECDSA and Ed25519 go through `@noble/curves` (synchronous, the same in every runtime, and we
 * control the hash: a P-256 key may sign a SHA-384 digest). RSA goes through WebCrypto
 * (`globalThis.crypto.subtle`), which both Node.js 20 and browsers provide. No `Buffer`, no I/O.
 *
 * @packageDocumentation
 */
import { p256, p384, p521 } from '@noble/curves/nist.js';
import { ed25519 } from '@noble/curves/ed25519.js';
import { sha1 } from '@noble/hashes/legacy.js';
import { sha256 as nobleSha256, sha384, sha512 } from '@noble/hashes/sha2.js';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { fromBase64 } from '../encoding.js';
import { CoreError } from '../errors.js';

/** Digest algorithms understood by the verifiers. */
export type HashName = 'sha1' | 'sha256' | 'sha384' | 'sha512';

const HASH_BY_OID: Record<string, HashName> = {
  '1.3.14.3.2.26': 'sha1',
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};

/** Digest name of an AlgorithmIdentifier OID, or undefined when not supported. */
export function hashNameFromOid(oid: string): HashName | undefined {
  return HASH_BY_OID[oid];
}

/** Digest of `data` with the named algorithm. */
export function digest(name: HashName, data: Uint8Array): Uint8Array {
  switch (name) {
    case 'sha1':
      return sha1(data);
    case 'sha256':
      return nobleSha256(data);
    case 'sha384':
      return sha384(data);
    case 'sha512':
      return sha512(data);
  }
}

/** A certificate or public key as PEM text (one or more blocks) or DER bytes. */
export type PemOrDer = string | Uint8Array;

/** The DER bodies of every `-----BEGIN <label>-----` block in `text`, in order. */
export function pemBlocks(text: string): Array<{ label: string; der: Uint8Array }> {
  const out: Array<{ label: string; der: Uint8Array }> = [];
  const re = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    out.push({ label: m[1]!, der: fromBase64(m[2]!.replace(/\s+/g, '')) });
  }
  return out;
}

/** A parsed SubjectPublicKeyInfo, ready for signature checks. */
export interface ParsedPublicKey {
  /** The DER SubjectPublicKeyInfo (what Rekor hashes into its log ID). */
  spki: Uint8Array;
  /** Key family. */
  type: 'ecdsa' | 'ed25519' | 'rsa';
  /** Curve of an ECDSA key. */
  curve?: 'P-256' | 'P-384' | 'P-521';
  /** Raw public key: SEC1 point for ECDSA, 32 bytes for Ed25519, PKCS#1 for RSA. */
  raw: Uint8Array;
}

const CURVES: Record<string, ParsedPublicKey['curve']> = {
  '1.2.840.10045.3.1.7': 'P-256',
  '1.3.132.0.34': 'P-384',
  '1.3.132.0.35': 'P-521',
};

/**
 * Parses a DER SubjectPublicKeyInfo.
 * @throws CoreError `invalid_key` for malformed or unsupported keys.
 */
export function parseSpki(der: Uint8Array): ParsedPublicKey {
  const asn = asn1js.fromBER(der);
  if (asn.offset === -1 || asn.offset !== der.length) throw new CoreError('invalid_key', 'public key is not a single DER structure');
  let info: pkijs.PublicKeyInfo;
  try {
    info = new pkijs.PublicKeyInfo({ schema: asn.result });
  } catch (err) {
    throw new CoreError('invalid_key', 'public key is not a SubjectPublicKeyInfo', { cause: err });
  }
  return fromPublicKeyInfo(info, der);
}

/** @internal Converts a pkijs PublicKeyInfo (e.g. from a certificate) to {@link ParsedPublicKey}. */
export function fromPublicKeyInfo(info: pkijs.PublicKeyInfo, spki?: Uint8Array): ParsedPublicKey {
  const der = spki ?? new Uint8Array(info.toSchema().toBER());
  const raw = new Uint8Array(info.subjectPublicKey.valueBlock.valueHexView);
  const oid = info.algorithm.algorithmId;
  if (oid === '1.2.840.10045.2.1') {
    const params = info.algorithm.algorithmParams as unknown;
    const curveOid = params instanceof asn1js.ObjectIdentifier ? params.valueBlock.toString() : '';
    const curve = CURVES[curveOid];
    if (!curve) throw new CoreError('invalid_key', `unsupported elliptic curve ${curveOid || '(none)'}`);
    return { spki: der, type: 'ecdsa', curve, raw };
  }
  if (oid === '1.3.101.112') {
    if (raw.length !== 32) throw new CoreError('invalid_key', 'Ed25519 key must be 32 bytes');
    return { spki: der, type: 'ed25519', raw };
  }
  if (oid === '1.2.840.113549.1.1.1' || oid === '1.2.840.113549.1.1.10') return { spki: der, type: 'rsa', raw };
  throw new CoreError('invalid_key', `unsupported public key algorithm ${oid}`);
}

/**
 * Parses a public key given as PEM (`PUBLIC KEY` block) or DER SubjectPublicKeyInfo bytes.
 * @throws CoreError `invalid_key`.
 */
export function parsePublicKey(input: PemOrDer): ParsedPublicKey {
  if (input instanceof Uint8Array) return parseSpki(input);
  if (typeof input !== 'string') throw new CoreError('invalid_key', 'public key must be PEM text or DER bytes');
  let blocks: Array<{ label: string; der: Uint8Array }>;
  try {
    blocks = pemBlocks(input);
  } catch (err) {
    throw new CoreError('invalid_key', 'public key PEM is not valid base64', { cause: err });
  }
  const block = blocks.find((b) => b.label === 'PUBLIC KEY');
  if (!block) throw new CoreError('invalid_key', 'no "PUBLIC KEY" PEM block found');
  return parseSpki(block.der);
}

function curveImpl(curve: ParsedPublicKey['curve']): typeof p256 {
  return curve === 'P-384' ? p384 : curve === 'P-521' ? p521 : p256;
}

/** ECDSA check of a DER `Ecdsa-Sig-Value` over an already computed digest. Never throws. */
export function verifyEcdsaDigest(key: ParsedPublicKey, messageDigest: Uint8Array, derSignature: Uint8Array): boolean {
  if (key.type !== 'ecdsa') return false;
  try {
    // lowS: false because X.509/CMS/Rekor signers do not normalise s (noble defaults to BTC rules).
    return curveImpl(key.curve).verify(derSignature, messageDigest, key.raw, { prehash: false, lowS: false, format: 'der' });
  } catch {
    return false;
  }
}

/** Ed25519 check of `signature` over `message`. Never throws. */
export function verifyEd25519(key: ParsedPublicKey, message: Uint8Array, signature: Uint8Array): boolean {
  if (key.type !== 'ed25519') return false;
  try {
    return ed25519.verify(signature, message, key.raw);
  } catch {
    return false;
  }
}

/**
 * Verifies a "plain" signature with the key's natural scheme: ECDSA with SHA-256 (P-256),
 * SHA-384 (P-384) or SHA-512 (P-521) and a DER signature, or Ed25519. This is what Rekor uses
 * for signed entry timestamps and checkpoints. Never throws.
 */
export function verifyPlainSignature(key: ParsedPublicKey, message: Uint8Array, signature: Uint8Array): boolean {
  if (key.type === 'ed25519') return verifyEd25519(key, message, signature);
  if (key.type !== 'ecdsa') return false;
  const hash: HashName = key.curve === 'P-384' ? 'sha384' : key.curve === 'P-521' ? 'sha512' : 'sha256';
  return verifyEcdsaDigest(key, digest(hash, message), signature);
}

/** Outcome of an algorithm-identified signature check. */
export type SignatureCheck = { ok: true } | { ok: false; reason: string };

const SIG_ALGS: Record<string, { family: 'ecdsa' | 'rsa' | 'ed25519' | 'rsa-pss'; hash?: HashName }> = {
  '1.2.840.10045.4.1': { family: 'ecdsa', hash: 'sha1' },
  '1.2.840.10045.4.3.2': { family: 'ecdsa', hash: 'sha256' },
  '1.2.840.10045.4.3.3': { family: 'ecdsa', hash: 'sha384' },
  '1.2.840.10045.4.3.4': { family: 'ecdsa', hash: 'sha512' },
  // Key-type OIDs used as a CMS signatureAlgorithm: the hash comes from digestAlgorithm.
  '1.2.840.10045.2.1': { family: 'ecdsa' },
  '1.2.840.113549.1.1.1': { family: 'rsa' },
  '1.2.840.113549.1.1.5': { family: 'rsa', hash: 'sha1' },
  '1.2.840.113549.1.1.11': { family: 'rsa', hash: 'sha256' },
  '1.2.840.113549.1.1.12': { family: 'rsa', hash: 'sha384' },
  '1.2.840.113549.1.1.13': { family: 'rsa', hash: 'sha512' },
  '1.2.840.113549.1.1.10': { family: 'rsa-pss' },
  '1.3.101.112': { family: 'ed25519' },
};

const WEBCRYPTO_HASH: Record<HashName, string> = { sha1: 'SHA-1', sha256: 'SHA-256', sha384: 'SHA-384', sha512: 'SHA-512' };

function arrayBuffer(bytes: Uint8Array): ArrayBuffer {
  return bytes.slice().buffer as ArrayBuffer;
}

async function verifyRsa(
  key: ParsedPublicKey,
  hash: HashName,
  data: Uint8Array,
  signature: Uint8Array,
  pssSaltLength?: number,
): Promise<SignatureCheck> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return { ok: false, reason: 'RSA signatures need WebCrypto (globalThis.crypto.subtle), which is not available' };
  const name = pssSaltLength === undefined ? 'RSASSA-PKCS1-v1_5' : 'RSA-PSS';
  try {
    // WebCrypto refuses RSA-PSS-typed SPKIs under the PKCS#1 name and vice versa; keys here are rsaEncryption.
    const cryptoKey = await subtle.importKey('spki', arrayBuffer(key.spki), { name, hash: WEBCRYPTO_HASH[hash] }, false, ['verify']);
    const params = pssSaltLength === undefined ? { name } : { name, saltLength: pssSaltLength };
    const ok = await subtle.verify(params, cryptoKey, arrayBuffer(signature), arrayBuffer(data));
    return ok ? { ok: true } : { ok: false, reason: 'RSA signature does not verify' };
  } catch (err) {
    return { ok: false, reason: `RSA signature could not be checked: ${err instanceof Error ? err.message : String(err)}` };
  }
}

function pssParams(alg: pkijs.AlgorithmIdentifier): { hash: HashName; saltLength: number } | undefined {
  try {
    const params = new pkijs.RSASSAPSSParams({ schema: alg.algorithmParams });
    const hash = hashNameFromOid(params.hashAlgorithm.algorithmId);
    return hash ? { hash, saltLength: params.saltLength } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks `signature` over `data` by `key` for an X.509/CMS signature AlgorithmIdentifier.
 * `digestAlgorithmOid` supplies the hash when the algorithm OID does not name one (CMS
 * `rsaEncryption` / `id-ecPublicKey`). SHA-1 is refused unless `allowSha1`. Never throws.
 */
export async function verifyAlgorithmSignature(
  key: ParsedPublicKey,
  algorithm: pkijs.AlgorithmIdentifier,
  data: Uint8Array,
  signature: Uint8Array,
  options: { digestAlgorithmOid?: string; allowSha1?: boolean } = {},
): Promise<SignatureCheck> {
  const spec = SIG_ALGS[algorithm.algorithmId];
  if (!spec) return { ok: false, reason: `unsupported signature algorithm ${algorithm.algorithmId}` };
  if (spec.family === 'ed25519') {
    return verifyEd25519(key, data, signature) ? { ok: true } : { ok: false, reason: 'Ed25519 signature does not verify' };
  }
  let hash = spec.hash ?? (options.digestAlgorithmOid ? hashNameFromOid(options.digestAlgorithmOid) : undefined);
  let saltLength: number | undefined;
  if (spec.family === 'rsa-pss') {
    const p = pssParams(algorithm);
    if (!p) return { ok: false, reason: 'unsupported RSASSA-PSS parameters' };
    hash = p.hash;
    saltLength = p.saltLength;
  }
  if (!hash) return { ok: false, reason: `no supported digest for signature algorithm ${algorithm.algorithmId}` };
  if (hash === 'sha1' && !options.allowSha1) return { ok: false, reason: 'SHA-1 signatures are refused (allowSha1 is off)' };
  if (spec.family === 'ecdsa') {
    if (key.type !== 'ecdsa') return { ok: false, reason: `ECDSA signature but the key is ${key.type}` };
    return verifyEcdsaDigest(key, digest(hash, data), signature) ? { ok: true } : { ok: false, reason: 'ECDSA signature does not verify' };
  }
  if (key.type !== 'rsa') return { ok: false, reason: `RSA signature but the key is ${key.type}` };
  return verifyRsa(key, hash, data, signature, saltLength);
}
