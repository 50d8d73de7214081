/**
 * RFC 3161 timestamp verification, pure: DER in, trust anchors in, a step report out.
 *
 * Checks, each reported as its own step: the response is granted and holds a TSTInfo
 * (`timestamp_token`); the single SignerInfo's signer is found by its `sid` (never by "the
 * first certificate in the bag"), its signed attributes bind the TSTInfo (contentType,
 * messageDigest) and the signer certificate (ESSCertID/ESSCertIDv2, when present), and the
 * signature verifies (`timestamp_signature`); the signer chains to a configured anchor at the
 * instant asked for (`timestamp_chain`); the signer has the critical id-kp-timeStamping EKU
 * (`timestamp_key_usage`); and messageImprint.hashedMessage equals the expected digest
 * byte-for-byte (`timestamp_imprint`). The preimage is never hashed here.
 *
 * @packageDocumentation
 */
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { bytesEqual, fromBase64, fromHex, toHex } from '../encoding.js';
import { CoreError } from '../errors.js';
import { digest, fromPublicKeyInfo, hashNameFromOid, verifyAlgorithmSignature, type HashName, type PemOrDer } from './crypto.js';
import { StepLog, errorMessage, type VerificationReport } from './report.js';
import {
  buildCertificatePath,
  certificateFromDer,
  checkTimestampingEku,
  commonName,
  loadCertificates,
  nameToString,
  type LoadedCertificate,
} from './x509.js';

const OID_SIGNED_DATA = '1.2.840.113549.1.7.2';
const OID_TSTINFO = '1.2.840.113549.1.9.16.1.4';
const OID_CONTENT_TYPE = '1.2.840.113549.1.9.3';
const OID_MESSAGE_DIGEST = '1.2.840.113549.1.9.4';
const OID_SIGNING_CERT = '1.2.840.113549.1.9.16.2.12';
const OID_SIGNING_CERT_V2 = '1.2.840.113549.1.9.16.2.47';

/** The facts of a timestamp token, as read from its TSTInfo. */
export interface TimestampInfo {
  /** PKIStatus of the response (0 granted, 1 grantedWithMods); 0 for a bare token. */
  status: number;
  /** genTime: when the TSA says it saw the imprint. */
  genTime: Date;
  /** TSA policy OID. */
  policy: string;
  /** TSTInfo serialNumber as a signed decimal string. */
  serialNumber: string;
  /** Nonce as lower-case hex, when present. */
  nonceHex?: string;
  /** messageImprint hash algorithm OID. */
  hashAlgorithmOid: string;
  /** messageImprint hash algorithm name, when it is one we know. */
  hashAlgorithm?: HashName;
  /** messageImprint.hashedMessage as lower-case hex. */
  hashedMessageHex: string;
  /** TSTInfo.tsa as a string, when present (`DirName:` form for a directory name). */
  tsaName?: string;
}

/** A parsed (not yet verified) timestamp token. */
export interface ParsedTimestamp {
  /** TSTInfo facts. */
  info: TimestampInfo;
  /** The CMS SignedData. */
  signedData: pkijs.SignedData;
  /** The encapsulated TSTInfo DER (what messageDigest covers). */
  tstInfoDer: Uint8Array;
  /** Certificates carried in the token, with their exact DER. */
  certificates: LoadedCertificate[];
}

function signedInteger(bytes: Uint8Array): bigint {
  if (bytes.length === 0) return 0n;
  let v = 0n;
  for (const b of bytes) v = (v << 8n) | BigInt(b);
  // Two's complement: INTEGERs may be negative (one vector has a negative serial number).
  return (bytes[0]! & 0x80) !== 0 ? v - (1n << BigInt(bytes.length * 8)) : v;
}

function bad(message: string, cause?: unknown): CoreError {
  return new CoreError('invalid_timestamp_token', message, cause === undefined ? undefined : { cause });
}

function embeddedCertificates(signedDataSchema: asn1js.AsnType): LoadedCertificate[] {
  // Read the [0] certificates field from the ASN.1 directly so each certificate keeps its
  // exact DER (ESSCertID hashes are over those bytes, not over a re-encoding).
  const seq = signedDataSchema as asn1js.Sequence;
  const field = seq.valueBlock.value.find((v) => v.idBlock.tagClass === 3 && v.idBlock.tagNumber === 0);
  if (!field) return [];
  const out: LoadedCertificate[] = [];
  for (const item of (field as asn1js.Constructed).valueBlock.value) {
    // Only plain certificates (universal SEQUENCE); attribute/other certificate choices are ignored.
    if (item.idBlock.tagClass === 1 && item.idBlock.tagNumber === 16) {
      out.push(certificateFromDer(new Uint8Array(item.valueBeforeDecodeView)));
    }
  }
  return out;
}

/**
 * Parses a DER TimeStampResp, or a bare TimeStampToken (CMS ContentInfo), and requires status
 * granted (0) or grantedWithMods (1).
 * @throws CoreError `invalid_timestamp_token` on anything else.
 */
export function parseTimestampToken(der: Uint8Array): ParsedTimestamp {
  if (!(der instanceof Uint8Array) || der.length === 0) throw bad('timestamp token is empty');
  const asn = asn1js.fromBER(der);
  if (asn.offset === -1) throw bad('timestamp token is not DER');
  if (asn.offset !== der.length) throw bad('timestamp token has trailing bytes');
  const top = asn.result;
  if (!(top instanceof asn1js.Sequence) || top.valueBlock.value.length === 0) throw bad('timestamp token is not a SEQUENCE');
  let status = 0;
  let contentInfo: pkijs.ContentInfo;
  try {
    if (top.valueBlock.value[0] instanceof asn1js.ObjectIdentifier) {
      contentInfo = new pkijs.ContentInfo({ schema: top });
    } else {
      const resp = new pkijs.TimeStampResp({ schema: top });
      status = resp.status.status;
      if (status !== 0 && status !== 1) {
        const text = resp.status.statusStrings?.map((s) => s.valueBlock.value).join('; ');
        throw bad(`TSA refused the request: PKIStatus ${status}${text ? ` (${text})` : ''}`);
      }
      if (!resp.timeStampToken) throw bad('granted response carries no timeStampToken');
      contentInfo = resp.timeStampToken;
    }
  } catch (err) {
    if (err instanceof CoreError) throw err;
    throw bad(`not a TimeStampResp or TimeStampToken: ${errorMessage(err)}`, err);
  }
  if (contentInfo.contentType !== OID_SIGNED_DATA) throw bad(`token content type is ${contentInfo.contentType}, not signedData`);
  let signedData: pkijs.SignedData;
  let tst: pkijs.TSTInfo;
  let tstInfoDer: Uint8Array;
  let certificates: LoadedCertificate[];
  try {
    signedData = new pkijs.SignedData({ schema: contentInfo.content });
    if (signedData.encapContentInfo.eContentType !== OID_TSTINFO) {
      throw bad(`encapsulated content is ${signedData.encapContentInfo.eContentType}, not id-ct-TSTInfo`);
    }
    const e = signedData.encapContentInfo.eContent;
    if (!e) throw bad('token has no encapsulated TSTInfo');
    tstInfoDer = new Uint8Array(e.getValue());
    const tstAsn = asn1js.fromBER(tstInfoDer);
    if (tstAsn.offset !== tstInfoDer.length) throw bad('TSTInfo is not a single DER structure');
    tst = new pkijs.TSTInfo({ schema: tstAsn.result });
    certificates = embeddedCertificates(contentInfo.content as asn1js.AsnType);
  } catch (err) {
    if (err instanceof CoreError) throw err;
    throw bad(`token structure is invalid: ${errorMessage(err)}`, err);
  }
  if (tst.version !== 1) throw bad(`TSTInfo version is ${tst.version}, expected 1`);
  const hashAlgorithmOid = tst.messageImprint.hashAlgorithm.algorithmId;
  const tsa = tst.tsa;
  const info: TimestampInfo = {
    status,
    genTime: tst.genTime,
    policy: tst.policy,
    serialNumber: signedInteger(tst.serialNumber.valueBlock.valueHexView).toString(),
    hashAlgorithmOid,
    hashedMessageHex: toHex(new Uint8Array(tst.messageImprint.hashedMessage.valueBlock.valueHexView)),
  };
  const hashAlgorithm = hashNameFromOid(hashAlgorithmOid);
  if (hashAlgorithm) info.hashAlgorithm = hashAlgorithm;
  if (tst.nonce) info.nonceHex = toHex(new Uint8Array(tst.nonce.valueBlock.valueHexView));
  if (tsa) {
    info.tsaName =
      tsa.type === 4 && tsa.value instanceof pkijs.RelativeDistinguishedNames ? `DirName:${nameToString(tsa.value)}` : String(tsa.value);
  }
  return { info, signedData, tstInfoDer, certificates };
}

/** Options of {@link verifyTimestampToken}. */
export interface TimestampVerifyOptions {
  /** Trusted certificates (PEM text with one or more certificates, or DER); a chain must end at one. */
  trustAnchors: PemOrDer | readonly PemOrDer[];
  /** Untrusted helper certificates (e.g. the TSA leaf when the token carries none). */
  intermediates?: PemOrDer | readonly PemOrDer[];
  /** Digest the imprint must equal (bytes or hex); without it the imprint step is skipped. */
  expectedDigest?: Uint8Array | string;
  /** Hash algorithm the imprint must use. */
  expectedHashAlgorithm?: HashName;
  /** Instant at which the chain must be valid; defaults to the token's genTime. */
  at?: Date;
  /** Accept SHA-1 in imprints and signatures (off by default; only legacy tokens need it). */
  allowSha1?: boolean;
  /** When set, the signer certificate's subject CN must equal this. */
  tsaCommonName?: string;
}

/** Report of {@link verifyTimestampToken}, with the token facts when it could be read. */
export interface TimestampVerification extends VerificationReport {
  /** TSTInfo facts (present when the token parsed). */
  info?: TimestampInfo;
  /** Subject of the signer certificate, when found. */
  signerSubject?: string;
}

function toBytes(token: Uint8Array | string): Uint8Array {
  return typeof token === 'string' ? fromBase64(token.replace(/\s+/g, '')) : token;
}

function findSigner(si: pkijs.SignerInfo, candidates: readonly LoadedCertificate[]): LoadedCertificate | undefined {
  const sid = si.sid as unknown;
  if (sid instanceof pkijs.IssuerAndSerialNumber) {
    return candidates.find((c) => c.cert.issuer.isEqual(sid.issuer) && c.cert.serialNumber.isEqual(sid.serialNumber));
  }
  // subjectKeyIdentifier [0] IMPLICIT OCTET STRING
  const ski = (sid as asn1js.Primitive | undefined)?.valueBlock?.valueHexView;
  if (!ski) return undefined;
  return candidates.find((c) => {
    const ext = c.cert.extensions?.find((e) => e.extnID === '2.5.29.14')?.parsedValue as unknown;
    return ext instanceof asn1js.OctetString && bytesEqual(new Uint8Array(ext.valueBlock.valueHexView), new Uint8Array(ski));
  });
}

function attribute(si: pkijs.SignerInfo, oid: string): pkijs.Attribute[] {
  return si.signedAttrs?.attributes.filter((a) => a.type === oid) ?? [];
}

/** Checks the ESS signing-certificate binding; returns a problem or undefined. */
function essBindingProblem(si: pkijs.SignerInfo, signer: LoadedCertificate): string | undefined {
  for (const [oid, v2] of [
    [OID_SIGNING_CERT_V2, true],
    [OID_SIGNING_CERT, false],
  ] as const) {
    const attrs = attribute(si, oid);
    if (attrs.length === 0) continue;
    if (attrs.length > 1 || attrs[0]!.values.length !== 1) return 'signing-certificate attribute must occur once with one value';
    try {
      // SigningCertificate(V2) ::= SEQUENCE { certs SEQUENCE OF ESSCertID(v2), policies OPTIONAL }
      const certs = (attrs[0]!.values[0] as asn1js.Sequence).valueBlock.value[0] as asn1js.Sequence;
      const first = certs.valueBlock.value[0] as asn1js.Sequence;
      const parts = first.valueBlock.value;
      let hash: HashName | undefined = v2 ? 'sha256' : 'sha1';
      let i = 0;
      if (v2 && parts[0] instanceof asn1js.Sequence) {
        hash = hashNameFromOid(new pkijs.AlgorithmIdentifier({ schema: parts[0] }).algorithmId);
        i = 1;
      }
      if (!hash) return 'ESSCertIDv2 uses an unsupported hash algorithm';
      const certHash = new Uint8Array((parts[i] as asn1js.OctetString).valueBlock.valueHexView);
      if (!bytesEqual(certHash, digest(hash, signer.der))) return 'ESSCertID hash does not match the signer certificate';
      const issuerSerial = parts[i + 1];
      if (issuerSerial instanceof asn1js.Sequence) {
        const serial = issuerSerial.valueBlock.value[1];
        if (!(serial instanceof asn1js.Integer) || !serial.isEqual(signer.cert.serialNumber)) {
          return 'ESSCertID issuerSerial does not match the signer certificate serial number';
        }
      }
      return undefined;
    } catch (err) {
      return `signing-certificate attribute is malformed: ${errorMessage(err)}`;
    }
  }
  return undefined;
}

async function checkSignature(
  parsed: ParsedTimestamp,
  signer: LoadedCertificate,
  allowSha1: boolean,
): Promise<{ ok: boolean; detail: string }> {
  const si = parsed.signedData.signerInfos[0]!;
  if (!si.signedAttrs) return { ok: false, detail: 'SignerInfo has no signed attributes (required for TSTInfo content)' };
  const digestName = hashNameFromOid(si.digestAlgorithm.algorithmId);
  if (!digestName) return { ok: false, detail: `unsupported SignerInfo digest algorithm ${si.digestAlgorithm.algorithmId}` };
  if (digestName === 'sha1' && !allowSha1) return { ok: false, detail: 'SignerInfo uses SHA-1, which is refused (allowSha1 is off)' };
  const ct = attribute(si, OID_CONTENT_TYPE);
  const ctValue = ct[0]?.values[0];
  if (ct.length !== 1 || !(ctValue instanceof asn1js.ObjectIdentifier) || ctValue.valueBlock.toString() !== OID_TSTINFO) {
    return { ok: false, detail: 'signed contentType attribute is missing or is not id-ct-TSTInfo' };
  }
  const md = attribute(si, OID_MESSAGE_DIGEST);
  const mdValue = md[0]?.values[0];
  if (md.length !== 1 || !(mdValue instanceof asn1js.OctetString))
    return { ok: false, detail: 'signed messageDigest attribute is missing' };
  if (!bytesEqual(new Uint8Array(mdValue.valueBlock.valueHexView), digest(digestName, parsed.tstInfoDer))) {
    return { ok: false, detail: 'messageDigest attribute does not match the encapsulated TSTInfo' };
  }
  const ess = essBindingProblem(si, signer);
  if (ess) return { ok: false, detail: ess };
  let key;
  try {
    key = fromPublicKeyInfo(signer.cert.subjectPublicKeyInfo);
  } catch (err) {
    return { ok: false, detail: `signer key is unusable: ${errorMessage(err)}` };
  }
  const sig = await verifyAlgorithmSignature(
    key,
    si.signatureAlgorithm,
    new Uint8Array(si.signedAttrs.encodedValue),
    new Uint8Array(si.signature.valueBlock.valueHexView),
    { digestAlgorithmOid: si.digestAlgorithm.algorithmId, allowSha1 },
  );
  if (!sig.ok) return { ok: false, detail: `CMS signature is invalid: ${sig.reason}` };
  return { ok: true, detail: `CMS signature over the signed attributes verifies with "${nameToString(signer.cert.subject)}"` };
}

function checkImprint(info: TimestampInfo, options: TimestampVerifyOptions): { ok: boolean; detail: string } {
  let expected: Uint8Array;
  try {
    expected = typeof options.expectedDigest === 'string' ? fromHex(options.expectedDigest) : options.expectedDigest!;
  } catch {
    return { ok: false, detail: 'expected digest is not hex' };
  }
  const alg = info.hashAlgorithm ?? info.hashAlgorithmOid;
  if (options.expectedHashAlgorithm && info.hashAlgorithm !== options.expectedHashAlgorithm) {
    return { ok: false, detail: `imprint uses ${alg}, expected ${options.expectedHashAlgorithm}` };
  }
  if (info.hashAlgorithm === 'sha1' && !options.allowSha1) return { ok: false, detail: 'imprint uses SHA-1, which is refused' };
  if (!bytesEqual(fromHex(info.hashedMessageHex), expected)) {
    return { ok: false, detail: `imprint ${alg}:${info.hashedMessageHex} does not equal the expected ${toHex(expected)}` };
  }
  return { ok: true, detail: `imprint ${alg}:${info.hashedMessageHex} equals the expected digest` };
}

/**
 * Verifies an RFC 3161 timestamp (TimeStampResp or bare token; DER bytes or base64) against
 * configured trust anchors. Never throws: every problem is a failing step.
 */
export async function verifyTimestampToken(token: Uint8Array | string, options: TimestampVerifyOptions): Promise<TimestampVerification> {
  const log = new StepLog();
  const finish = (extra: Partial<TimestampVerification> = {}): TimestampVerification => ({ ...log.report(), ...extra });
  let parsed: ParsedTimestamp;
  try {
    parsed = parseTimestampToken(toBytes(token));
  } catch (err) {
    log.fail('timestamp_token', errorMessage(err));
    for (const id of ['timestamp_signature', 'timestamp_chain', 'timestamp_key_usage', 'timestamp_imprint'] as const) {
      log.skip(id, 'not checked: the timestamp token could not be read');
    }
    return finish();
  }
  const { info } = parsed;
  log.pass(
    'timestamp_token',
    `status ${info.status === 0 ? 'granted' : 'grantedWithMods'}; genTime ${info.genTime.toISOString()}, serial ${info.serialNumber}, policy ${info.policy}`,
  );
  const allowSha1 = options.allowSha1 === true;

  let anchors: LoadedCertificate[] = [];
  let extra: LoadedCertificate[] = [];
  let trustProblem: string | undefined;
  try {
    anchors = loadCertificates(options.trustAnchors);
    extra = options.intermediates === undefined ? [] : loadCertificates(options.intermediates);
  } catch (err) {
    trustProblem = `trusted certificates could not be read: ${errorMessage(err)}`;
  }
  if (!trustProblem && anchors.length === 0) trustProblem = 'no trust anchors configured';

  const signerInfos = parsed.signedData.signerInfos;
  const signer = signerInfos.length === 1 ? findSigner(signerInfos[0]!, [...parsed.certificates, ...extra, ...anchors]) : undefined;
  if (signerInfos.length !== 1) {
    log.fail('timestamp_signature', `token has ${signerInfos.length} SignerInfos; RFC 3161 requires exactly one`);
  } else if (!signer) {
    log.fail('timestamp_signature', 'signer certificate not found (neither in the token nor among the supplied certificates)');
  } else if (options.tsaCommonName !== undefined && commonName(signer.cert) !== options.tsaCommonName) {
    log.fail('timestamp_signature', `signer CN is "${commonName(signer.cert) ?? ''}", but the TSA is pinned to "${options.tsaCommonName}"`);
  } else {
    const sig = await checkSignature(parsed, signer, allowSha1);
    log.record('timestamp_signature', sig.ok, sig.detail);
  }

  if (!signer) {
    log.skip('timestamp_chain', 'not checked: no signer certificate');
    log.skip('timestamp_key_usage', 'not checked: no signer certificate');
  } else {
    const at = options.at ?? info.genTime;
    if (trustProblem) {
      log.fail('timestamp_chain', trustProblem);
    } else {
      const path = await buildCertificatePath(signer, { anchors, pool: [...parsed.certificates, ...extra], at, allowSha1 });
      log.record(
        'timestamp_chain',
        path.ok,
        path.ok
          ? `chain ${path.path.map((c) => `"${nameToString(c.cert.subject)}"`).join(' → ')} to a trusted anchor, valid at ${at.toISOString()}`
          : `no valid chain to a trusted anchor at ${at.toISOString()}: ${path.reason}`,
      );
    }
    const eku = checkTimestampingEku(signer.cert);
    log.record('timestamp_key_usage', eku.ok, eku.detail);
  }

  if (options.expectedDigest === undefined) {
    log.skip(
      'timestamp_imprint',
      `not checked: no expected digest given (imprint is ${info.hashAlgorithm ?? info.hashAlgorithmOid}:${info.hashedMessageHex})`,
    );
  } else {
    const imprint = checkImprint(info, options);
    log.record('timestamp_imprint', imprint.ok, imprint.detail);
  }
  return finish(signer ? { info, signerSubject: nameToString(signer.cert.subject) } : { info });
}
