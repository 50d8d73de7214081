/**
 * The `ServiceClient` configuration (spec 2.5) and its validation. Validation runs in the
 * constructor and fails fast with a message that names the field and says what to do, so a
 * misconfigured service stops at start-up rather than losing logs later.
 */
import { EnvelopeKeyring, LOG_ID_PATTERN, timeOrderedId } from '@countersign/core';
import { ClientError } from './errors.js';
import type { DeliveryFailureHandler, DeliveryFailureSink } from './delivery.js';
import type { ReferenceStore } from './references.js';
import { resolveTelemetry, type ResolvedTelemetry, type TelemetryConfig } from './telemetry.js';

/** Largest keyring (spec 8: 5 keys). */
export const MAX_KEYRING_KEYS = 5;

/**
 * Default base URL of the ingestion worker: `COUNTERSIGN_ENDPOINT` when set, otherwise the
 * embedded server's default address (`countersign serve` listens on 127.0.0.1:8080).
 */
export const DEFAULT_ENDPOINT = 'http://127.0.0.1:8080';

/** Tuning of background delivery. Every field has a sensible default. */
export interface DeliveryOptions {
  /** Logs per `POST /v1/log` request (default 100; the server takes at most 500 unless configured). */
  batchSize?: number;
  /** How long a log may wait for its batch to fill before it is sent, in ms (default 250). */
  flushIntervalMs?: number;
  /** Retries of one batch after the first attempt (default 5). 0 hands a batch to the failure path at once. */
  maxRetries?: number;
  /** First backoff step in ms (default 200); attempt n waits a random time in [0, min(max, base·2^n)] (full jitter). */
  retryBaseDelayMs?: number;
  /** Upper bound of one wait, including a server's `Retry-After` (default 30 000). */
  maxRetryDelayMs?: number;
  /** Logs held in memory at most; beyond it new logs go straight to the failure path (default 10 000). */
  maxQueueSize?: number;
  /** Requests in flight at once (default 4). */
  maxConcurrentRequests?: number;
  /** Time limit of one request, in ms (default 10 000). */
  requestTimeoutMs?: number;
}

/** The constructor argument of `ServiceClient` (spec 2.5; names kept exactly). */
export interface ServiceClientConfig {
  /** Bearer token for the ingestion worker (`key_human_…`, `key_agent_…` or `key_service_…`). */
  apiKey: string;
  /** Client-side AES-256-GCM key string (the key is SHA-256 of it). Required unless `keyring` and `activeEncryptionKeyId` are given. */
  encryptionKey?: string;
  /** Keyring id that seals new logs. */
  activeEncryptionKeyId?: string;
  /** Key id → key string; older keys stay to open older logs. At most 5 keys. */
  keyring?: Record<string, string>;
  /** Base URL of the ingestion worker (default `COUNTERSIGN_ENDPOINT` or http://127.0.0.1:8080). */
  endpoint?: string;
  /** Project id (`prj_live_…`); needed for `generateEmbedToken()`. */
  projectId?: string;
  /** The project's client secret; signs HS256 embed tokens. */
  clientSecret?: string;
  /** IP, user-agent and location collection (default preset `standard`). */
  telemetry?: TelemetryConfig;
  /** Fields replaced with `[REDACTED:<key>]` before encryption: `actor`, `target`, `metadata.<fieldName>`. */
  redactKeys?: string[];
  /** Fields replaced with `[REF:<id>]` before encryption: `actor`, `target`, `metadata.<fieldName>`. */
  referenceKeys?: string[];
  /** Where the original values of `referenceKeys` fields go (your system hydrates them later). */
  referenceStore?: ReferenceStore;
  /**
   * Secret of the keyed HMAC that makes reference ids. Default: derived from the encryption key
   * that is active at start-up, so ids stay stable until that key rotates; set this to keep
   * ids stable across rotations.
   */
  referenceSecret?: string;
  /** Called with logs that could not be delivered; a `FileFallbackTransport` can be passed as is. */
  onDeliveryFailure?: DeliveryFailureHandler | DeliveryFailureSink;
  /** Background delivery tuning. */
  delivery?: DeliveryOptions;
  /** Flush queued logs when the process is about to exit normally (`beforeExit`); default true. */
  flushOnExit?: boolean;
}

/** The configuration after validation, with defaults filled in. */
export interface ResolvedConfig {
  apiKey: string;
  endpoint: string;
  keyring: EnvelopeKeyring;
  /** Key id → key string (the active key string travels as `X-Service-Encryption-Key` in `proxy`). */
  keys: Record<string, string>;
  activeKeyId: string;
  projectId: string | undefined;
  clientSecret: string | undefined;
  telemetry: ResolvedTelemetry;
  redactKeys: string[];
  referenceKeys: string[];
  referenceStore: ReferenceStore | undefined;
  referenceSecret: string;
  onDeliveryFailure: DeliveryFailureHandler | undefined;
  delivery: Required<DeliveryOptions>;
  flushOnExit: boolean;
}

/** The keyring id used when only `encryptionKey` is configured. */
export const DEFAULT_KEY_ID = 'default';

const FIELD_KEY = /^(actor|target|metadata\.[^.\s]{1,128})$/;

function fail(message: string): never {
  throw new ClientError('invalid_config', `ServiceClient config: ${message}`);
}

function nonEmptyString(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) fail(`${name} must be a non-empty string`);
  return value;
}

function optionalString(name: string, value: unknown): string | undefined {
  return value === undefined ? undefined : nonEmptyString(name, value);
}

function fieldKeys(name: string, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) fail(`${name} must be an array of "actor", "target" or "metadata.<fieldName>"`);
  for (const k of value) {
    if (typeof k !== 'string' || !FIELD_KEY.test(k))
      fail(`${name} entry ${JSON.stringify(k)} is not "actor", "target" or "metadata.<fieldName>"`);
  }
  return [...new Set(value as string[])];
}

function positiveInt(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
    fail(`delivery.${name} must be an integer from ${min} to ${max}`);
  return value;
}

function endpointOf(value: unknown): string {
  const raw = value === undefined ? (process.env.COUNTERSIGN_ENDPOINT ?? DEFAULT_ENDPOINT) : value;
  if (typeof raw !== 'string') fail('endpoint must be a URL string such as https://ingest.example.com');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    fail(`endpoint ${JSON.stringify(raw)} is not a valid URL; give a base URL such as https://ingest.example.com`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') fail(`endpoint must use http or https, not ${url.protocol}`);
  if (url.username || url.password) fail('endpoint must not carry credentials; the apiKey travels in the Authorization header');
  if (url.search || url.hash) fail('endpoint must be a base URL without a query or fragment');
  return url.toString().replace(/\/+$/, '');
}

/**
 * Validates a configuration and fills in defaults.
 * @throws ClientError `invalid_config` naming the first problem.
 */
export function resolveConfig(config: ServiceClientConfig): ResolvedConfig {
  if (config === null || typeof config !== 'object') fail('pass one configuration object');
  const apiKey = nonEmptyString('apiKey', config.apiKey);
  if (!/^key_(human|agent|service)_\S+$/.test(apiKey))
    fail('apiKey must be an ingest key (key_human_…, key_agent_… or key_service_…); live keys only read');

  let keys: Record<string, string>;
  let activeKeyId: string;
  if (config.keyring !== undefined || config.activeEncryptionKeyId !== undefined) {
    if (config.keyring === null || typeof config.keyring !== 'object' || Array.isArray(config.keyring))
      fail('keyring must be an object mapping key ids to key strings, given together with activeEncryptionKeyId');
    const entries = Object.entries(config.keyring);
    if (entries.length === 0) fail('keyring is empty; add at least the active key');
    if (entries.length > MAX_KEYRING_KEYS)
      fail(`keyring holds ${entries.length} keys; the maximum is ${MAX_KEYRING_KEYS} (drop keys whose logs you no longer read)`);
    for (const [id, secret] of entries) {
      if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(id) || id.startsWith('sha256:'))
        fail(`keyring id ${JSON.stringify(id)} must be 1-64 characters of A-Z a-z 0-9 _ . : - and not start with "sha256:"`);
      nonEmptyString(`keyring["${id}"]`, secret);
    }
    activeKeyId = nonEmptyString('activeEncryptionKeyId (required with keyring)', config.activeEncryptionKeyId);
    if (!Object.hasOwn(config.keyring, activeKeyId))
      fail(`activeEncryptionKeyId "${activeKeyId}" is not a key of the keyring (ids: ${entries.map(([id]) => id).join(', ')})`);
    keys = { ...config.keyring };
    if (config.encryptionKey !== undefined) fail('give either encryptionKey or keyring + activeEncryptionKeyId, not both');
  } else {
    if (config.encryptionKey === undefined) fail('encryptionKey is required unless both keyring and activeEncryptionKeyId are given');
    keys = { [DEFAULT_KEY_ID]: nonEmptyString('encryptionKey', config.encryptionKey) };
    activeKeyId = DEFAULT_KEY_ID;
  }

  const redactKeys = fieldKeys('redactKeys', config.redactKeys);
  const referenceKeys = fieldKeys('referenceKeys', config.referenceKeys);
  const both = redactKeys.filter((k) => referenceKeys.includes(k));
  if (both.length > 0) fail(`${both.join(', ')} is in both redactKeys and referenceKeys; pick one`);
  const store = config.referenceStore;
  if (store !== undefined && (store === null || typeof store.put !== 'function'))
    fail('referenceStore must be an object with a put(reference) method');

  const handler = config.onDeliveryFailure;
  let onDeliveryFailure: DeliveryFailureHandler | undefined;
  if (typeof handler === 'function') onDeliveryFailure = handler;
  else if (handler !== undefined) {
    if (handler === null || typeof handler.handleDeliveryFailure !== 'function')
      fail('onDeliveryFailure must be a function or a FileFallbackTransport');
    onDeliveryFailure = (failure) => handler.handleDeliveryFailure(failure);
  }

  const d = config.delivery ?? {};
  const delivery: Required<DeliveryOptions> = {
    batchSize: positiveInt('batchSize', d.batchSize, 100, 1, 10_000),
    flushIntervalMs: positiveInt('flushIntervalMs', d.flushIntervalMs, 250, 0, 60_000),
    maxRetries: positiveInt('maxRetries', d.maxRetries, 5, 0, 100),
    retryBaseDelayMs: positiveInt('retryBaseDelayMs', d.retryBaseDelayMs, 200, 0, 60_000),
    maxRetryDelayMs: positiveInt('maxRetryDelayMs', d.maxRetryDelayMs, 30_000, 0, 3_600_000),
    maxQueueSize: positiveInt('maxQueueSize', d.maxQueueSize, 10_000, 1, 10_000_000),
    maxConcurrentRequests: positiveInt('maxConcurrentRequests', d.maxConcurrentRequests, 4, 1, 64),
    requestTimeoutMs: positiveInt('requestTimeoutMs', d.requestTimeoutMs, 10_000, 1, 600_000),
  };

  const projectId = optionalString('projectId', config.projectId);
  if (projectId !== undefined && !/^prj_live_[0-9A-Za-z]{1,64}$/.test(projectId)) fail('projectId must look like prj_live_<id>');

  return {
    apiKey,
    endpoint: endpointOf(config.endpoint),
    keyring: new EnvelopeKeyring(keys, activeKeyId),
    keys,
    activeKeyId,
    projectId,
    clientSecret: optionalString('clientSecret', config.clientSecret),
    telemetry: resolveTelemetry(config.telemetry),
    redactKeys,
    referenceKeys,
    referenceStore: store,
    referenceSecret: optionalString('referenceSecret', config.referenceSecret) ?? 'countersign-ref:' + keys[activeKeyId]!,
    onDeliveryFailure,
    delivery,
    flushOnExit: config.flushOnExit ?? true,
  };
}

/**
 * A new log id in the server's accepted shape (`log_` + 24 base62; DESIGN: the AAD of the
 * envelope), time-ordered like the server's own (core `timeOrderedId`: the store's id index
 * grows at its right edge).
 */
export function newLogId(): string {
  return 'log_' + timeOrderedId(24);
}

/** The server's log id rule, checked for ids a caller brings. */
export const LOG_ID_RE = new RegExp(LOG_ID_PATTERN);
