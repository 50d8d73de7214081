/**
 * The embedded RFC 3161 responder: DER TimeStampReq in, DER TimeStampResp out. A request it
 * cannot honour gets a proper `rejection` response with the RFC 3161 failure bit (never an
 * exception), so any client, openssl included, reads why.
 *
 * The token is CMS SignedData over a DER TSTInfo with the signed attributes contentType,
 * messageDigest and signingCertificateV2 (ESSCertIDv2 with the SHA-256 of the signer cert and
 * its issuer/serial: RFC 5816), signed ECDSA-with-SHA256 by the TSA key.
 */
import { createHash } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import type { TsaIdentity } from './identity.js';

/** OID of the TSTInfo content type (id-ct-TSTInfo). */
export const ID_CT_TSTINFO = '1.2.840.113549.1.9.16.1.4';
/** OID of CMS SignedData. */
export const ID_SIGNED_DATA = '1.2.840.113549.1.7.2';
const ID_CONTENT_TYPE = '1.2.840.113549.1.9.3';
const ID_MESSAGE_DIGEST = '1.2.840.113549.1.9.4';
const ID_SIGNING_CERTIFICATE_V2 = '1.2.840.113549.1.9.16.2.47';

/**
 * The policy under which the embedded TSA issues tokens: a UUID-based OID (ITU-T X.667 arc
 * 2.25), allocated once for Countersign's embedded TSA, so no registry number is needed.
 */
export const EMBEDDED_TSA_POLICY_OID = '2.25.216300143375458512395866823612429306093';

/** Digest algorithms accepted in a request's message imprint, with their digest sizes. */
export const ACCEPTED_IMPRINT_ALGORITHMS: Readonly<Record<string, { name: string; size: number }>> = {
  '2.16.840.1.101.3.4.2.1': { name: 'sha256', size: 32 },
  '2.16.840.1.101.3.4.2.2': { name: 'sha384', size: 48 },
  '2.16.840.1.101.3.4.2.3': { name: 'sha512', size: 64 },
};

/** RFC 3161 PKIFailureInfo bit numbers. */
export const FAILURE = {
  badAlg: 0,
  badRequest: 2,
  badDataFormat: 5,
  unacceptedPolicy: 15,
  unacceptedExtension: 16,
  systemFailure: 25,
} as const;

/** Name of an RFC 3161 failure. */
export type FailureName = keyof typeof FAILURE;

/** What the responder needs from its surroundings: the identity, the clock and a serial source. */
export interface ResponderContext {
  identity: TsaIdentity;
  /** Epoch ms. */
  now: () => number;
  /** Allocates the next serial number for a token (unique and increasing). */
  allocateSerial: (token: { genTime: number; hashOid: string; hashedMessageHex: string }) => Promise<number>;
}

/** A request that passed every check, ready to be granted. */
export interface AcceptedRequest {
  messageImprint: pkijs.MessageImprint;
  hashOid: string;
  hashedMessage: Uint8Array;
  nonce: asn1js.Integer | undefined;
  certReq: boolean;
}

/** A request refused with an RFC 3161 failure. */
export interface RefusedRequest {
  failure: FailureName;
  reason: string;
}

function failInfoBits(bit: number): asn1js.BitString {
  // DER named bit list: only the octets up to the last set bit, trailing zero bits unused.
  const bytes = new Uint8Array(Math.floor(bit / 8) + 1);
  bytes[bytes.length - 1] = 0x80 >> (bit % 8);
  return new asn1js.BitString({ valueHex: bytes, unusedBits: 7 - (bit % 8) });
}

/** A DER TimeStampResp with status `rejection`, the failure bit and a text saying why. */
export function rejectionResponse(failure: FailureName, reason: string): Uint8Array {
  const resp = new pkijs.TimeStampResp({
    status: new pkijs.PKIStatusInfo({
      status: pkijs.PKIStatus.rejection,
      statusStrings: [new asn1js.Utf8String({ value: reason })],
      failInfo: failInfoBits(FAILURE[failure]),
    }),
  });
  return new Uint8Array(resp.toSchema().toBER());
}

/** Parses and checks a DER TimeStampReq; never throws. */
export function parseRequest(der: Uint8Array): AcceptedRequest | RefusedRequest {
  if (der.length === 0) return { failure: 'badDataFormat', reason: 'the request body is empty; send a DER TimeStampReq' };
  const asn = asn1js.fromBER(der);
  if (asn.offset === -1 || asn.offset !== der.length) {
    return { failure: 'badDataFormat', reason: 'the request is not one DER structure' };
  }
  let req: pkijs.TimeStampReq;
  try {
    req = new pkijs.TimeStampReq({ schema: asn.result });
  } catch {
    return { failure: 'badDataFormat', reason: 'the request is not a TimeStampReq' };
  }
  if (req.version !== 1) return { failure: 'badRequest', reason: `unsupported TimeStampReq version ${req.version}` };
  const hashOid = req.messageImprint.hashAlgorithm.algorithmId;
  const alg = ACCEPTED_IMPRINT_ALGORITHMS[hashOid];
  if (!alg) return { failure: 'badAlg', reason: `unsupported hash algorithm ${hashOid}; use SHA-256, SHA-384 or SHA-512` };
  const hashedMessage = new Uint8Array(req.messageImprint.hashedMessage.valueBlock.valueHexView);
  if (hashedMessage.length !== alg.size) {
    return { failure: 'badDataFormat', reason: `a ${alg.name} imprint is ${alg.size} bytes, this one is ${hashedMessage.length}` };
  }
  if (req.reqPolicy !== undefined && req.reqPolicy !== EMBEDDED_TSA_POLICY_OID) {
    return { failure: 'unacceptedPolicy', reason: `this TSA only issues under policy ${EMBEDDED_TSA_POLICY_OID}` };
  }
  if (req.extensions && req.extensions.length > 0) {
    return { failure: 'unacceptedExtension', reason: 'this TSA accepts no request extensions' };
  }
  return { messageImprint: req.messageImprint, hashOid, hashedMessage, nonce: req.nonce, certReq: req.certReq === true };
}

function sha256(data: Uint8Array | ArrayBuffer): Uint8Array {
  return new Uint8Array(createHash('sha256').update(new Uint8Array(data)).digest());
}

function signingCertificateV2(identity: TsaIdentity): asn1js.Sequence {
  const cert = identity.tsaCert;
  // ESSCertIDv2 { hashAlgorithm DEFAULT sha256 (so omitted), certHash, issuerSerial }.
  const issuerSerial = new asn1js.Sequence({
    value: [new pkijs.GeneralNames({ names: [new pkijs.GeneralName({ type: 4, value: cert.issuer })] }).toSchema(), cert.serialNumber],
  });
  const essCertIdV2 = new asn1js.Sequence({ value: [new asn1js.OctetString({ valueHex: sha256(identity.tsaCertDer) }), issuerSerial] });
  return new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [essCertIdV2] })] });
}

/** Issues a granted TimeStampResp for an accepted request. */
export async function grant(rc: ResponderContext, req: AcceptedRequest): Promise<Uint8Array> {
  // Whole seconds, with a declared accuracy of one second: DER GeneralizedTime must not carry
  // trailing zeros in a fraction, and second precision is what the 5 s batch needs.
  const genTime = Math.floor(rc.now() / 1000) * 1000;
  const serial = await rc.allocateSerial({
    genTime,
    hashOid: req.hashOid,
    hashedMessageHex: Buffer.from(req.hashedMessage).toString('hex'),
  });
  const tst = new pkijs.TSTInfo({
    version: 1,
    policy: EMBEDDED_TSA_POLICY_OID,
    messageImprint: req.messageImprint,
    serialNumber: asn1js.Integer.fromBigInt(BigInt(serial)),
    genTime: new Date(genTime),
    accuracy: new pkijs.Accuracy({ seconds: 1 }),
    ...(req.nonce ? { nonce: req.nonce } : {}),
    tsa: new pkijs.GeneralName({ type: 4, value: rc.identity.tsaCert.subject }),
  });
  const tstDer = tst.toSchema().toBER();
  const signerInfo = new pkijs.SignerInfo({
    version: 1,
    sid: new pkijs.IssuerAndSerialNumber({ issuer: rc.identity.tsaCert.issuer, serialNumber: rc.identity.tsaCert.serialNumber }),
    signedAttrs: new pkijs.SignedAndUnsignedAttributes({
      type: 0,
      attributes: [
        new pkijs.Attribute({ type: ID_CONTENT_TYPE, values: [new asn1js.ObjectIdentifier({ value: ID_CT_TSTINFO })] }),
        new pkijs.Attribute({ type: ID_MESSAGE_DIGEST, values: [new asn1js.OctetString({ valueHex: sha256(tstDer) })] }),
        new pkijs.Attribute({ type: ID_SIGNING_CERTIFICATE_V2, values: [signingCertificateV2(rc.identity)] }),
      ],
    }),
  });
  const encapContentInfo = new pkijs.EncapsulatedContentInfo({ eContentType: ID_CT_TSTINFO });
  // Set after construction: pkijs's constructor would turn it into a constructed (BER) OCTET
  // STRING, which strict DER parsers of timestamp tokens refuse.
  encapContentInfo.eContent = new asn1js.OctetString({ valueHex: tstDer });
  // The signed attributes are listed in DER SET OF order (by encoding: shortest first here).
  const signed = new pkijs.SignedData({
    version: 3,
    encapContentInfo,
    signerInfos: [signerInfo],
    ...(req.certReq ? { certificates: [rc.identity.tsaCert] } : {}),
  });
  await signed.sign(rc.identity.tsaKey, 0, 'SHA-256');
  const token = new pkijs.ContentInfo({ contentType: ID_SIGNED_DATA, content: signed.toSchema(true) });
  const resp = new pkijs.TimeStampResp({ status: new pkijs.PKIStatusInfo({ status: pkijs.PKIStatus.granted }), timeStampToken: token });
  return new Uint8Array(resp.toSchema().toBER());
}

/**
 * Answers one DER request: a granted response, or a rejection naming the failure. Errors of
 * the machinery itself (the store down) become `systemFailure` rejections.
 */
export async function respond(rc: ResponderContext, der: Uint8Array): Promise<RespondOutcome> {
  const parsed = parseRequest(der);
  if ('failure' in parsed) return { response: rejectionResponse(parsed.failure, parsed.reason), granted: false, reason: parsed.reason };
  try {
    return { response: await grant(rc, parsed), granted: true };
  } catch (error) {
    const reason = 'the TSA cannot issue a timestamp right now; retry later';
    return { response: rejectionResponse('systemFailure', reason), granted: false, reason, error };
  }
}

/** Result of {@link respond}: the DER answer, and for a refusal why (and the fault, if any). */
export interface RespondOutcome {
  response: Uint8Array;
  granted: boolean;
  reason?: string;
  /** The internal fault behind a `systemFailure` rejection, for the server log. */
  error?: unknown;
}
