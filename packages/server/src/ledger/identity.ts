/**
 * The embedded ledger's identity: its ECDSA P-256 signing key and its tree (a random 63-bit
 * tree ID, as Rekor shards have). Made on first start and then loaded, like the TSA's (see
 * ../tsa/material.ts for where it is kept).
 *
 * The checkpoint origin `<name> - <treeID>` is NOT part of the stored identity: `<name>` is the
 * host of the deployment's base URL as it is now ({@link checkpointName}), because sigstore-js
 * accepts a checkpoint signature only when its name is a substring of the log's base URL. A
 * name frozen at first start broke every verifier once `--public-url` was set later.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { p256 } from '@noble/curves/nist.js';
import { checkpointKeyHint, ledgerLogId, parsePublicKey } from '@countersign/core';
import type { AppContext } from '../app-context.js';
import { loadOrCreateMaterial, type WitnessMaterial } from '../tsa/material.js';

/** Fields of the stored ledger material. */
export const LEDGER_MATERIAL_FIELDS = ['signingKey', 'publicKey', 'treeJson'] as const;

/** A loaded ledger identity. */
export interface LedgerIdentity {
  /** PEM SubjectPublicKeyInfo of the signing key. */
  readonly publicKeyPem: string;
  /** Log ID: lower-case hex SHA-256 of the DER SPKI. */
  readonly logId: string;
  /** First 4 bytes of the log ID (checkpoint signature key hint). */
  readonly keyHint: Uint8Array;
  /** Tree ID (decimal, as Rekor's `treeID`). */
  readonly treeId: string;
  /** Tree ID as 16 hex digits (the prefix of 80-hex entry UUIDs). */
  readonly treeIdHex: string;
  /** ECDSA-SHA256 (DER) over `message`: SETs and checkpoints. */
  signMessage(message: Uint8Array): Uint8Array;
  /** ECDSA (DER) over an already computed 32-byte digest: the hashedrekord signature. */
  signDigest(digest: Uint8Array): Uint8Array;
}

interface TreeInfo {
  treeId: string;
  /** The checkpoint name when the tree was made; kept for the record, no longer used. */
  name: string;
}

/** Fresh key and tree for a new ledger; `name` records the checkpoint name at creation. */
export function createLedgerMaterial(name: string): WitnessMaterial {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const idBytes = randomBytes(8);
  idBytes[0] = idBytes[0]! & 0x7f; // a positive int64, like Trillian tree IDs
  const tree: TreeInfo = { treeId: BigInt('0x' + idBytes.toString('hex')).toString(10), name };
  return {
    signingKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKey: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    treeJson: JSON.stringify(tree) + '\n',
  };
}

/** Parses stored material into a signing identity. */
export function identityFromMaterial(material: WitnessMaterial): LedgerIdentity {
  const privateKey: KeyObject = createPrivateKey(material.signingKey!);
  const publicKeyPem = createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }).toString();
  if (publicKeyPem.trim() !== material.publicKey!.trim()) throw new Error('the ledger public key file does not match its signing key');
  const jwk = privateKey.export({ format: 'jwk' });
  const scalar = new Uint8Array(Buffer.from(jwk.d!, 'base64url'));
  const tree = JSON.parse(material.treeJson!) as TreeInfo;
  const logId = ledgerLogId(parsePublicKey(publicKeyPem));
  return {
    publicKeyPem,
    logId,
    keyHint: checkpointKeyHint(logId),
    treeId: tree.treeId,
    treeIdHex: BigInt(tree.treeId).toString(16).padStart(16, '0'),
    signMessage: (message) => new Uint8Array(sign('sha256', message, { key: privateKey, dsaEncoding: 'der' })),
    signDigest: (digest) => p256.sign(digest, scalar, { prehash: false, format: 'der' }),
  };
}

/**
 * The checkpoint name of this deployment: the host (with its port, when not the default) of the
 * base URL, i.e. `--public-url`, else the address the server listens on. sigstore-js checks
 * `baseURL.includes(name)` (`match` before 4.x), so a verifier configured with the ledger's
 * natural base URL accepts the checkpoint.
 */
export function checkpointName(ctx: AppContext): string {
  return new URL(ctx.baseUrl()).host;
}

/** The checkpoint origin line (Rekor's form): `<name> - <treeID>`. */
export function checkpointOrigin(name: string, treeId: string): string {
  return `${name} - ${treeId}`;
}

/** Loads the embedded ledger identity, making it on first start. */
export async function loadLedgerIdentity(ctx: AppContext): Promise<LedgerIdentity> {
  const material = await loadOrCreateMaterial(ctx, 'ledger', LEDGER_MATERIAL_FIELDS, async () => createLedgerMaterial(checkpointName(ctx)));
  return identityFromMaterial(material);
}
