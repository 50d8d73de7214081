/**
 * Proof verification of `@countersign/core`: RFC 9162 Merkle trees, RFC 3161 timestamps,
 * Rekor v1 ledger entries and the receipt that ties them together. Pure and runtime-agnostic.
 *
 * @packageDocumentation
 */
export type { StepStatus, VerificationReport, VerificationStep, VerificationStepId } from './report.js';
export * from './merkle.js';
export {
  digest,
  hashNameFromOid,
  parsePublicKey,
  parseSpki,
  pemBlocks,
  verifyEcdsaDigest,
  verifyEd25519,
  verifyPlainSignature,
  type HashName,
  type ParsedPublicKey,
  type PemOrDer,
} from './crypto.js';
export { certificateFromDer, checkTimestampingEku, commonName, loadCertificates, nameToString, type LoadedCertificate } from './x509.js';
export * from './timestamp.js';
export * from './checkpoint.js';
export * from './ledger.js';
export * from './bundle.js';
export * from './verify.js';
