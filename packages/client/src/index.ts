/**
 * `@countersign/client`: the Node.js client library of Countersign (`ServiceClient`).
 *
 * @packageDocumentation
 */
export { ServiceClient, type DecryptedLog, type ShutdownOptions } from './client.js';
export {
  resolveConfig,
  newLogId,
  DEFAULT_ENDPOINT,
  DEFAULT_KEY_ID,
  MAX_KEYRING_KEYS,
  type ServiceClientConfig,
  type DeliveryOptions,
  type ResolvedConfig,
} from './config.js';
export { ClientError, isClientError, type ClientErrorCode } from './errors.js';
export { type LogEntryInput, type ClientLogPayload, type PayloadAgent } from './entry.js';
export { MAX_METADATA_BYTES } from '@countersign/core';
export {
  retryAfterMs,
  backoffMs,
  type WireEntry,
  type FailedLog,
  type DeliveryFailure,
  type DeliveryFailureReason,
  type DeliveryFailureHandler,
  type DeliveryFailureSink,
  type BatchResult,
} from './delivery.js';
export {
  FileFallbackTransport,
  replayFallbackFile,
  utcDay,
  type FileFallbackOptions,
  type FallbackLine,
  type ReplayOptions,
  type ReplayReport,
} from './fallback.js';
export {
  InMemoryReferenceStore,
  hydrateReferences,
  referenceId,
  parseReference,
  redactedPlaceholder,
  referencePlaceholder,
  type ReferenceRecord,
  type ReferenceStore,
  type ReferenceResolver,
} from './references.js';
export {
  TELEMETRY_PRESETS,
  resolveTelemetry,
  collectTelemetry,
  anonymizeIp,
  clientIpOf,
  locationFromHeaders,
  locationFromIp,
  type TelemetryConfig,
  type TelemetryPreset,
  type ResolvedTelemetry,
  type IpMode,
  type UserAgentMode,
  type RequestContext,
  type TelemetryRecord,
  type LocationInfo,
} from './telemetry.js';
export { currentAgentContext, type AgentRunOptions, type AgentContext } from './agent-context.js';
export { EMBED_TOKEN_AUDIENCE, DEFAULT_EMBED_TOKEN_SECONDS, MAX_EMBED_TOKEN_SECONDS, type EmbedTokenClaims } from './embed.js';
export { type VerifyProofOptions, type ProofTrustConfig } from './verify.js';
export { LogReader, type LogReaderOptions, type LogFilter, type ReadLog } from './reader.js';
export { type ProxyRequest, type ProxyResult } from './proxy.js';
