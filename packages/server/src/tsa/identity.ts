/**
 * The embedded TSA's identity: a self-signed root CA and a TSA certificate it issues, with a
 * CRITICAL extended key usage of exactly id-kp-timeStamping (RFC 3161 §2.3), both ECDSA P-256.
 * Made on first start and then loaded, from files (SQLite) or the database (PostgreSQL); see
 * ./material.ts for where.
 */
import { webcrypto } from 'node:crypto';
import * as pkijs from 'pkijs';
import * as x509 from '@peculiar/x509';
import type { AppContext } from '../app-context.js';
import { loadOrCreateMaterial, type WitnessMaterial } from './material.js';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

/** The signing algorithm of both certificates and of the tokens. */
const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** Fields of the stored TSA material. */
export const TSA_MATERIAL_FIELDS = ['rootCert', 'rootKey', 'tsaCert', 'tsaKey'] as const;

/** A loaded TSA identity, ready to sign. */
export interface TsaIdentity {
  /** The TSA (signer) certificate. */
  readonly tsaCert: pkijs.Certificate;
  /** DER of the TSA certificate (hashed into ESSCertIDv2). */
  readonly tsaCertDer: Uint8Array;
  /** The TSA's private key (WebCrypto, ECDSA P-256). */
  readonly tsaKey: CryptoKey;
  /** PEM of the root CA alone: what a verifier trusts. */
  readonly rootPem: string;
  /** PEM of the TSA certificate alone. */
  readonly tsaPem: string;
  /** PEM of the chain, signer first, root last (`GET /tsa/certs.pem`). */
  readonly chainPem: string;
}

function randomSerialHex(): string {
  const b = webcrypto.getRandomValues(new Uint8Array(16));
  b[0] = (b[0]! & 0x7f) | 0x01; // positive and without a leading zero octet
  return Buffer.from(b).toString('hex');
}

async function exportKeyPem(key: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}

/** Makes a fresh root CA and TSA certificate (valid from `now`; 30 and 10 years). */
export async function createTsaMaterial(now: number, subjectSuffix = 'O=Countersign'): Promise<WitnessMaterial> {
  const notBefore = new Date(now - 60 * 60 * 1000); // an hour of slack for verifiers with slow clocks
  const year = 365.25 * 24 * 60 * 60 * 1000;
  const rootKeys = (await webcrypto.subtle.generateKey(EC_P256, true, ['sign', 'verify'])) as CryptoKeyPair;
  const tsaKeys = (await webcrypto.subtle.generateKey(EC_P256, true, ['sign', 'verify'])) as CryptoKeyPair;
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialHex(),
    name: `CN=Countersign Embedded TSA Root, ${subjectSuffix}`,
    notBefore,
    notAfter: new Date(now + 30 * year),
    signingAlgorithm: EC_P256,
    keys: rootKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(rootKeys.publicKey),
    ],
  });
  const tsa = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerialHex(),
    subject: `CN=Countersign Embedded TSA, ${subjectSuffix}`,
    issuer: root.subject,
    notBefore,
    notAfter: new Date(now + 10 * year),
    signingAlgorithm: EC_P256,
    publicKey: tsaKeys.publicKey,
    signingKey: rootKeys.privateKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.nonRepudiation, true),
      // RFC 3161 §2.3: the TSA certificate MUST carry exactly this EKU, marked critical.
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.timeStamping], true),
      await x509.SubjectKeyIdentifierExtension.create(tsaKeys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(root),
    ],
  });
  return {
    rootCert: root.toString('pem') + '\n',
    rootKey: await exportKeyPem(rootKeys.privateKey),
    tsaCert: tsa.toString('pem') + '\n',
    tsaKey: await exportKeyPem(tsaKeys.privateKey),
  };
}

/** Parses stored material into a signing identity. */
export async function identityFromMaterial(material: WitnessMaterial): Promise<TsaIdentity> {
  const tsaX509 = new x509.X509Certificate(material.tsaCert!);
  const tsaCertDer = new Uint8Array(tsaX509.rawData);
  const tsaCert = pkijs.Certificate.fromBER(tsaCertDer);
  const keyDer = x509.PemConverter.decodeFirst(material.tsaKey!);
  const tsaKey = await webcrypto.subtle.importKey('pkcs8', keyDer, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
  const rootPem = material.rootCert!.trim() + '\n';
  const tsaPem = material.tsaCert!.trim() + '\n';
  return { tsaCert, tsaCertDer, tsaKey: tsaKey as CryptoKey, rootPem, tsaPem, chainPem: tsaPem + rootPem };
}

/** Loads the embedded TSA identity, making it on first start. */
export async function loadTsaIdentity(ctx: AppContext): Promise<TsaIdentity> {
  const material = await loadOrCreateMaterial(ctx, 'tsa', TSA_MATERIAL_FIELDS, () => createTsaMaterial(ctx.now()));
  return identityFromMaterial(material);
}
