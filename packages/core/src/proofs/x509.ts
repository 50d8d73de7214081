/**
 * X.509 for timestamp verification: loading certificates, building and checking a path from a
 * signer to a configured trust anchor at a given instant, and the timestamping EKU rule.
 *
 * pkijs parses; the checks are done here so that the policy is explicit and small: signatures
 * (via {@link verifyAlgorithmSignature}), validity at the instant asked for, CA basic
 * constraints with path length, keyCertSign, and no unknown critical extension. There is no
 * revocation checking (verification is offline by design; see docs/verification.md).
 *
 * @packageDocumentation
 */
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { bytesEqual } from '../encoding.js';
import { CoreError } from '../errors.js';
import { fromPublicKeyInfo, pemBlocks, verifyAlgorithmSignature, type PemOrDer } from './crypto.js';

/** A parsed certificate together with its exact DER bytes (hashes are taken over those). */
export interface LoadedCertificate {
  /** pkijs view of the certificate. */
  cert: pkijs.Certificate;
  /** The DER encoding exactly as received. */
  der: Uint8Array;
}

/**
 * Parses one DER certificate.
 * @throws CoreError `invalid_certificate`.
 */
export function certificateFromDer(der: Uint8Array): LoadedCertificate {
  const asn = asn1js.fromBER(der);
  if (asn.offset === -1 || asn.offset !== der.length) {
    throw new CoreError('invalid_certificate', 'certificate is not a single DER structure');
  }
  try {
    return { cert: new pkijs.Certificate({ schema: asn.result }), der: new Uint8Array(der) };
  } catch (err) {
    throw new CoreError('invalid_certificate', 'bytes are not an X.509 certificate', { cause: err });
  }
}

/**
 * Loads certificates from PEM text (any number of `CERTIFICATE` blocks) and/or DER bytes.
 * @throws CoreError `invalid_certificate` when an input holds no certificate or a bad one.
 */
export function loadCertificates(inputs: PemOrDer | readonly PemOrDer[]): LoadedCertificate[] {
  const list = Array.isArray(inputs) ? (inputs as readonly PemOrDer[]) : [inputs as PemOrDer];
  const out: LoadedCertificate[] = [];
  for (const input of list) {
    if (input instanceof Uint8Array) {
      out.push(certificateFromDer(input));
    } else if (typeof input === 'string') {
      let blocks: Array<{ label: string; der: Uint8Array }>;
      try {
        blocks = pemBlocks(input).filter((b) => b.label === 'CERTIFICATE');
      } catch (err) {
        throw new CoreError('invalid_certificate', 'certificate PEM is not valid base64', { cause: err });
      }
      if (blocks.length === 0) throw new CoreError('invalid_certificate', 'no "CERTIFICATE" PEM block found');
      for (const b of blocks) out.push(certificateFromDer(b.der));
    } else {
      throw new CoreError('invalid_certificate', 'a certificate must be PEM text or DER bytes');
    }
  }
  return out;
}

const NAME_ATTRS: Record<string, string> = {
  '2.5.4.3': 'CN',
  '2.5.4.6': 'C',
  '2.5.4.7': 'L',
  '2.5.4.8': 'ST',
  '2.5.4.10': 'O',
  '2.5.4.11': 'OU',
  '2.5.4.5': 'serialNumber',
  '1.2.840.113549.1.9.1': 'emailAddress',
};

/** A distinguished name as `C=US, O=Example, CN=Name` (attribute order as encoded). */
export function nameToString(name: pkijs.RelativeDistinguishedNames): string {
  return name.typesAndValues.map((tv) => `${NAME_ATTRS[tv.type] ?? tv.type}=${String(tv.value.valueBlock.value)}`).join(', ');
}

/** Common name (CN) of a certificate's subject, if it has one. */
export function commonName(cert: pkijs.Certificate): string | undefined {
  const tv = cert.subject.typesAndValues.find((t) => t.type === '2.5.4.3');
  return tv ? String(tv.value.valueBlock.value) : undefined;
}

function extension(cert: pkijs.Certificate, oid: string): pkijs.Extension | undefined {
  return cert.extensions?.find((e) => e.extnID === oid);
}

const ID_KP_TIMESTAMPING = '1.3.6.1.5.5.7.3.8';

/**
 * RFC 3161 §2.3: the TSA certificate must have exactly one extendedKeyUsage extension, marked
 * critical, whose only purpose is id-kp-timeStamping.
 */
export function checkTimestampingEku(cert: pkijs.Certificate): { ok: boolean; detail: string } {
  const ekus = cert.extensions?.filter((e) => e.extnID === '2.5.29.37') ?? [];
  if (ekus.length === 0) return { ok: false, detail: 'TSA certificate has no extendedKeyUsage extension' };
  if (ekus.length > 1) return { ok: false, detail: 'TSA certificate has more than one extendedKeyUsage extension' };
  const eku = ekus[0]!;
  const parsed = eku.parsedValue as unknown;
  const purposes = parsed instanceof pkijs.ExtKeyUsage ? parsed.keyPurposes : [];
  if (purposes.length !== 1 || purposes[0] !== ID_KP_TIMESTAMPING) {
    return { ok: false, detail: `extendedKeyUsage must be exactly id-kp-timeStamping, found [${purposes.join(', ')}]` };
  }
  if (!eku.critical) return { ok: false, detail: 'extendedKeyUsage id-kp-timeStamping is present but not marked critical' };
  return { ok: true, detail: 'signer certificate has a critical extendedKeyUsage of exactly id-kp-timeStamping' };
}

// Extensions whose meaning we either enforce or that carry no constraint for this use.
const UNDERSTOOD_CRITICAL = new Set(['2.5.29.15', '2.5.29.19', '2.5.29.37', '2.5.29.17', '2.5.29.14', '2.5.29.35', '2.5.29.32']);

function unknownCritical(cert: pkijs.Certificate): string | undefined {
  return cert.extensions?.find((e) => e.critical && !UNDERSTOOD_CRITICAL.has(e.extnID))?.extnID;
}

function validAt(c: LoadedCertificate, at: Date): string | undefined {
  const nb = c.cert.notBefore.value;
  const na = c.cert.notAfter.value;
  if (at.getTime() < nb.getTime())
    return `"${nameToString(c.cert.subject)}" is not valid before ${nb.toISOString()} (checked at ${at.toISOString()})`;
  if (at.getTime() > na.getTime())
    return `"${nameToString(c.cert.subject)}" expired at ${na.toISOString()} (checked at ${at.toISOString()})`;
  return undefined;
}

/** Why `issuer` may not issue a certificate with `below` intermediates under it, or undefined. */
function caProblem(issuer: LoadedCertificate, below: number, isAnchor: boolean): string | undefined {
  const name = nameToString(issuer.cert.subject);
  const bcExt = extension(issuer.cert, '2.5.29.19');
  const bc = bcExt?.parsedValue as unknown;
  if (!(bc instanceof pkijs.BasicConstraints)) {
    // A v1 trust anchor has no extensions at all; it is trusted by configuration.
    if (isAnchor && issuer.cert.version === 0) return undefined;
    return `"${name}" is not a CA (no basicConstraints)`;
  }
  if (!bc.cA) return `"${name}" is not a CA (basicConstraints cA is false)`;
  if (bc.pathLenConstraint !== undefined) {
    const limit = typeof bc.pathLenConstraint === 'number' ? bc.pathLenConstraint : bc.pathLenConstraint.valueBlock.valueDec;
    if (below > limit) return `"${name}" allows ${limit} intermediate(s) below it, path has ${below}`;
  }
  const ku = extension(issuer.cert, '2.5.29.15')?.parsedValue as unknown;
  if (ku instanceof asn1js.BitString) {
    const bits = ku.valueBlock.valueHexView;
    // keyCertSign is bit 5 of the KeyUsage BIT STRING (0x04 of the first byte).
    if (bits.length === 0 || (bits[0]! & 0x04) === 0) return `"${name}" keyUsage lacks keyCertSign`;
  }
  return undefined;
}

/** Options of {@link buildCertificatePath}. */
export interface PathOptions {
  /** Certificates trusted by configuration; a path must end at one of them. */
  anchors: readonly LoadedCertificate[];
  /** Untrusted certificates that may serve as intermediates (token bag, supplied chain). */
  pool: readonly LoadedCertificate[];
  /** Instant at which every certificate on the path must be valid. */
  at: Date;
  /** Accept SHA-1 certificate signatures (legacy tokens only). */
  allowSha1?: boolean;
}

/** A verified path, leaf first and trust anchor last, or the reason none was found. */
export type PathResult = { ok: true; path: LoadedCertificate[] } | { ok: false; reason: string };

const MAX_DEPTH = 8;

/**
 * Builds and checks a certification path from `leaf` to one of `anchors` (depth-first over
 * every issuer candidate whose subject matches, so a spoofed certificate with the right name
 * but the wrong key is simply skipped). The leaf itself may be an anchor (a pinned TSA cert).
 */
export async function buildCertificatePath(leaf: LoadedCertificate, options: PathOptions): Promise<PathResult> {
  const isAnchor = (c: LoadedCertificate): boolean => options.anchors.some((a) => bytesEqual(a.der, c.der));
  const candidates: LoadedCertificate[] = [];
  for (const c of [...options.anchors, ...options.pool]) {
    if (!candidates.some((x) => bytesEqual(x.der, c.der))) candidates.push(c);
  }
  let lastReason = '';

  const extend = async (path: LoadedCertificate[]): Promise<LoadedCertificate[] | undefined> => {
    const cur = path[path.length - 1]!;
    const expired = validAt(cur, options.at);
    if (expired) {
      lastReason = expired;
      return undefined;
    }
    if (isAnchor(cur)) return path;
    const critical = unknownCritical(cur.cert);
    if (critical) {
      lastReason = `"${nameToString(cur.cert.subject)}" has an unsupported critical extension ${critical}`;
      return undefined;
    }
    if (path.length > MAX_DEPTH) {
      lastReason = 'certificate path is too long';
      return undefined;
    }
    let matched = false;
    for (const cand of candidates) {
      if (path.some((p) => bytesEqual(p.der, cand.der)) || !cand.cert.subject.isEqual(cur.cert.issuer)) continue;
      matched = true;
      const problem = caProblem(cand, path.length - 1, isAnchor(cand));
      if (problem) {
        lastReason = problem;
        continue;
      }
      let key;
      try {
        key = fromPublicKeyInfo(cand.cert.subjectPublicKeyInfo);
      } catch (err) {
        lastReason = `issuer key of "${nameToString(cand.cert.subject)}" is unusable: ${err instanceof Error ? err.message : String(err)}`;
        continue;
      }
      const sig = await verifyAlgorithmSignature(
        key,
        cur.cert.signatureAlgorithm,
        cur.cert.tbsView,
        cur.cert.signatureValue.valueBlock.valueHexView,
        { allowSha1: options.allowSha1 },
      );
      if (!sig.ok) {
        lastReason = `"${nameToString(cur.cert.subject)}" is not signed by "${nameToString(cand.cert.subject)}": ${sig.reason}`;
        continue;
      }
      const found = await extend([...path, cand]);
      if (found) return found;
    }
    if (!matched) {
      lastReason = `unable to get issuer certificate "${nameToString(cur.cert.issuer)}" of "${nameToString(cur.cert.subject)}"`;
    }
    return undefined;
  };

  const path = await extend([leaf]);
  return path ? { ok: true, path } : { ok: false, reason: lastReason };
}
