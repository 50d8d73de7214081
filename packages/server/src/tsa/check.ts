/**
 * Checks an RFC 3161 answer before anything is built on it: status granted, a SignedData
 * token over a TSTInfo, the imprint equal to the digest we sent (compared byte for byte: the
 * digest IS the hashedMessage, nothing is hashed again), the nonce echoed, the CMS signature
 * valid for the signer certificate (with its messageDigest attribute), that signer carrying
 * the critical id-kp-timeStamping EKU, and, when trust roots are known, a chain to them.
 */
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { ID_CT_TSTINFO, ID_SIGNED_DATA } from './responder.js';

const SHA256_OID = '2.16.840.1.101.3.4.2.1';
const ID_DATA = '1.2.840.113549.1.7.1';
const ID_CONTENT_TYPE = '1.2.840.113549.1.9.3';
const EKU_OID = '2.5.29.37';
const ID_KP_TIME_STAMPING = '1.3.6.1.5.5.7.3.8';

/** Why a timestamp answer was refused. */
export type TimestampCheckFailure = 'malformed' | 'not_granted' | 'imprint_mismatch' | 'nonce_mismatch' | 'bad_signature' | 'bad_signer';

/** Thrown by {@link checkTimestampResponse}; `failure` says which check failed. */
export class TimestampCheckError extends Error {
  constructor(
    readonly failure: TimestampCheckFailure,
    message: string,
  ) {
    super(message);
    this.name = 'TimestampCheckError';
  }
}

/** What we asked for, to compare the answer with. */
export interface TimestampExpectation {
  /** The SHA-256 digest sent as hashedMessage (32 bytes). */
  digest: Uint8Array;
  /** The nonce sent (big-endian unsigned bytes), if any. */
  nonce?: Uint8Array;
  /** Trust anchors; when given, the signer must chain to one of them. */
  trustRoots?: pkijs.Certificate[];
  /** Extra certificates for chain building (intermediates, or the signer when not embedded). */
  intermediates?: pkijs.Certificate[];
}

/** The checked token's main facts. */
export interface CheckedTimestamp {
  genTime: Date;
  serialNumberHex: string;
  policy: string;
  /** The signer certificate. */
  signer: pkijs.Certificate;
}

function bytesOfInteger(i: asn1js.Integer): bigint {
  return i.toBigInt();
}

function fail(failure: TimestampCheckFailure, message: string): never {
  throw new TimestampCheckError(failure, message);
}

function statusText(info: pkijs.PKIStatusInfo): string {
  const texts = (info.statusStrings ?? []).map((s) => s.valueBlock.value).join('; ');
  return `status ${info.status}${texts ? ` (${texts})` : ''}`;
}

function hasCriticalTimeStampingEku(cert: pkijs.Certificate): boolean {
  const ext = cert.extensions?.find((e) => e.extnID === EKU_OID);
  if (!ext || !ext.critical) return false;
  const parsed = ext.parsedValue as pkijs.ExtKeyUsage | undefined;
  return !!parsed && parsed.keyPurposes.length === 1 && parsed.keyPurposes[0] === ID_KP_TIME_STAMPING;
}

/**
 * Checks a DER TimeStampResp against what was asked.
 * @throws TimestampCheckError naming the failed check.
 */
export async function checkTimestampResponse(der: Uint8Array, expect: TimestampExpectation): Promise<CheckedTimestamp> {
  let resp: pkijs.TimeStampResp;
  try {
    resp = pkijs.TimeStampResp.fromBER(new Uint8Array(der));
  } catch {
    fail('malformed', 'the answer is not a DER TimeStampResp');
  }
  if (resp.status.status !== pkijs.PKIStatus.granted && resp.status.status !== pkijs.PKIStatus.grantedWithMods) {
    fail('not_granted', `the TSA refused the request: ${statusText(resp.status)}`);
  }
  const token = resp.timeStampToken;
  if (!token || token.contentType !== ID_SIGNED_DATA) fail('malformed', 'a granted answer carries no SignedData token');
  let signed: pkijs.SignedData;
  let tst: pkijs.TSTInfo;
  try {
    signed = new pkijs.SignedData({ schema: token.content });
    if (signed.encapContentInfo.eContentType !== ID_CT_TSTINFO || !signed.encapContentInfo.eContent) throw new Error('not a TSTInfo');
    tst = pkijs.TSTInfo.fromBER(signed.encapContentInfo.eContent.getValue());
  } catch {
    fail('malformed', 'the token does not hold a TSTInfo');
  }
  if (signed.signerInfos.length !== 1) fail('malformed', `the token has ${signed.signerInfos.length} signers, expected 1`);

  const imprint = tst.messageImprint;
  const hashed = new Uint8Array(imprint.hashedMessage.valueBlock.valueHexView);
  if (imprint.hashAlgorithm.algorithmId !== SHA256_OID) fail('imprint_mismatch', 'the token is not over a SHA-256 imprint');
  if (Buffer.compare(Buffer.from(hashed), Buffer.from(expect.digest)) !== 0) {
    fail('imprint_mismatch', 'the token timestamps a different digest than the one sent');
  }
  if (expect.nonce) {
    const want = BigInt('0x' + (Buffer.from(expect.nonce).toString('hex') || '0'));
    if (!tst.nonce || bytesOfInteger(tst.nonce) !== want) fail('nonce_mismatch', 'the token does not echo the nonce sent');
  }

  const sid = signed.signerInfos[0]!.sid;
  const candidates = [...(signed.certificates ?? []), ...(expect.intermediates ?? [])].filter(
    (c): c is pkijs.Certificate => c instanceof pkijs.Certificate,
  );
  const signer =
    sid instanceof pkijs.IssuerAndSerialNumber
      ? candidates.find((c) => c.issuer.isEqual(sid.issuer) && c.serialNumber.isEqual(sid.serialNumber))
      : undefined;
  if (!signer) fail('bad_signer', 'the signer certificate is neither in the token nor in the configured certificates');
  if (!hasCriticalTimeStampingEku(signer))
    fail('bad_signer', 'the signer certificate lacks a critical id-kp-timeStamping extended key usage');
  if (!signed.certificates?.includes(signer)) signed.certificates = [...(signed.certificates ?? []), signer];

  const contentTypeAttr = signed.signerInfos[0]!.signedAttrs?.attributes.find((a) => a.type === ID_CONTENT_TYPE);
  const attrType = contentTypeAttr?.values[0];
  if (!(attrType instanceof asn1js.ObjectIdentifier) || attrType.valueBlock.toString() !== ID_CT_TSTINFO) {
    fail('malformed', 'the signed contentType attribute is not id-ct-TSTInfo');
  }
  // pkijs's TSTInfo branch of verify() wants the preimage and hashes it; here the digest IS the
  // message, compared above. Presenting the content as plain data makes pkijs check exactly the
  // rest: messageDigest attribute = SHA-256(eContent), the signature over the signed
  // attributes, and (with roots) the chain.
  signed.encapContentInfo.eContentType = ID_DATA;
  const checkChain = (expect.trustRoots?.length ?? 0) > 0;
  let verified: boolean;
  try {
    const r = await signed.verify({ signer: 0, checkChain, trustedCerts: expect.trustRoots ?? [], extendedMode: true });
    verified = r.signatureVerified === true;
  } catch (e) {
    const why = e instanceof Error ? e.message : (e as { message?: string }).message;
    fail('bad_signature', `the token signature or chain does not verify${why ? `: ${why}` : ''}`);
  }
  if (!verified) fail('bad_signature', 'the token signature does not verify');
  return {
    genTime: tst.genTime,
    serialNumberHex: Buffer.from(tst.serialNumber.valueBlock.valueHexView).toString('hex'),
    policy: tst.policy,
    signer,
  };
}
