/**
 * Server configuration: one typed object, read from flags and `COUNTERSIGN_*` environment
 * variables and validated before anything starts, so a bad setting fails with a clear message
 * instead of a half-started server.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseUpstreams } from './proxy/upstreams.js';
import { isMasterKey, type PreviousMasterKey } from './auth/master-keys.js';

/** The roles one process can play (DESIGN §1: one process may run all or a subset). */
export type Role = 'ingest' | 'management' | 'proofs' | 'tsa' | 'ledger' | 'dashboard';

/** Every role, which is what the embedded default runs. */
export const ALL_ROLES: readonly Role[] = ['ingest', 'management', 'proofs', 'tsa', 'ledger', 'dashboard'];

/** Validated server settings. */
export interface ServerConfig {
  /** Listen host. */
  host: string;
  /** Listen port (0 = ephemeral, for tests). */
  port: number;
  /** Where SQLite, keys and generated material live (created 0700; files 0600). */
  dataDir: string;
  /**
   * Start even when `dataDir` is open to group or others (`--allow-shared-data-dir`,
   * `COUNTERSIGN_ALLOW_SHARED_DATA_DIR=1`); refused by default (data-dir.ts).
   */
  allowSharedDataDir: boolean;
  /** PostgreSQL URL; when absent the SQLite file in `dataDir` is used. */
  databaseUrl: string | undefined;
  /** Roles this process serves. */
  roles: Set<Role>;
  /** Master key text; when absent one is generated into `dataDir` on first start. */
  masterKey: string | undefined;
  /** The master key before a rotation, still accepted until `until` (`COUNTERSIGN_MASTER_KEY_PREVIOUS[_UNTIL]`). */
  masterKeyPrevious: PreviousMasterKey | undefined;
  /** External RFC 3161 TSA; when absent the embedded TSA is used. */
  tsaUrl: string | undefined;
  /** PEM file of the trust roots of the external TSA (required with `tsaUrl`). */
  tsaRoots: string | undefined;
  /** External Rekor v1 ledger; when absent the embedded ledger is used. */
  ledgerUrl: string | undefined;
  /** host:port pairs admitted past the SSRF filter (empty by default). */
  allowTargets: string[];
  /** Operator-defined forward-mode upstreams, name → base URL (`COUNTERSIGN_UPSTREAMS`); presets need none. */
  upstreams: Record<string, string>;
  /** Public base URL printed and used in receipts (defaults to the listen address). */
  publicUrl: string | undefined;
  /** Largest accepted request body, bytes. */
  bodyLimit: number;
  /** In-flight admission of ingest calls, per process and per key (http/admission.ts); 0 = that bound off. */
  admission: { maxInflightBytes: number; maxInflightBytesPerKey: number; maxInflightCalls: number; maxInflightCallsPerKey: number };
  /** Client connections (http/connection-limits.ts): request/headers/keep-alive timeouts (ms) and connection caps (0 = off). */
  connections: { requestTimeoutMs: number; headersTimeoutMs: number; keepAliveTimeoutMs: number; maxPerClient: number; max: number };
  /** Payload text one log-list or trace page may carry with `include=payload`, bytes (`COUNTERSIGN_LIST_PAYLOAD_BUDGET`). */
  listPayloadBudget: number;
  /** Most entries in one `POST /v1/log` batch. */
  maxBatchLogs: number;
  /** Requests per second per key (bursts of twice that); 0 = no limit. */
  rateLimit: number;
  /** Proof batching window, ms (spec 8: 5 s). */
  proofWindowMs: number;
  /** Proxy timeouts, ms. */
  proxyTimeouts: { connect: number; firstByte: number; idle: number };
  /** pino level, or 'silent'. */
  logLevel: string;
  /** SQLite durability: `normal` survives a killed process, `full` also a power cut. */
  sqliteSync: 'normal' | 'full';
  /** Bearer token for `GET /metrics` (`COUNTERSIGN_METRICS_TOKEN`); unset = loopback clients only. */
  metricsToken: string | undefined;
  /** Webhook deliveries: per-attempt timeout and first retry delay, ms (`COUNTERSIGN_WEBHOOK_*`). */
  webhooks: { timeoutMs: number; retryBaseMs: number };
  /** How often the retention purge looks for expired entries, ms (`COUNTERSIGN_RETENTION_SWEEP_MS`). */
  retentionSweepMs: number;
  /**
   * Store deadline, ms (`COUNTERSIGN_STORE_TIMEOUT_MS`, default 5000): a hot-path write (or a
   * statement waiting on a lock) that takes longer fails with 503 `log_store_unavailable`.
   */
  storeTimeoutMs: number;
  /**
   * Seal records with the native seal when it was built (`COUNTERSIGN_NATIVE_SEAL`, `on` or
   * `off`, default on; native-seal.ts). Same bytes either way; `off` is for comparing the two.
   */
  nativeSeal: boolean;
}

/** Thrown for a setting that cannot be used; the CLI prints `message` and exits 2. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Flags as parsed by the CLI (all optional, all strings). */
export type ConfigFlags = Partial<
  Record<
    | 'host'
    | 'port'
    | 'dataDir'
    | 'databaseUrl'
    | 'roles'
    | 'tsaUrl'
    | 'tsaRoots'
    | 'ledgerUrl'
    | 'allowTargets'
    | 'allowSharedDataDir'
    | 'upstreams'
    | 'publicUrl'
    | 'logLevel'
    | 'masterKey',
    string
  >
>;

function int(name: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${text}"`);
  return n;
}

function flag(name: string, text: string | undefined): boolean {
  if (text === undefined || text === '' || text === '0' || text === 'false') return false;
  if (text === '1' || text === 'true') return true;
  throw new ConfigError(`${name} must be 1 or 0, got "${text}"`);
}

function url(name: string, text: string | undefined): string | undefined {
  if (text === undefined || text === '') return undefined;
  try {
    const u = new URL(text);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    return text.replace(/\/+$/, '');
  } catch {
    throw new ConfigError(`${name} must be an http(s) URL, got "${text}"`);
  }
}

function roles(text: string | undefined): Set<Role> {
  if (text === undefined || text === '' || text === 'all') return new Set(ALL_ROLES);
  const out = new Set<Role>();
  for (const r of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (!(ALL_ROLES as readonly string[]).includes(r))
      throw new ConfigError(`unknown role "${r}"; roles are ${ALL_ROLES.join(', ')} or all`);
    out.add(r as Role);
  }
  return out;
}

function allowTargets(text: string | undefined): string[] {
  if (!text) return [];
  return text
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean)
    .map((t) => {
      if (!/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+):\d{1,5}$/.test(t))
        throw new ConfigError(`--allow-targets entries must be host:port, got "${t}"`);
      return t;
    });
}

function upstreams(text: string | undefined): Record<string, string> {
  try {
    return parseUpstreams(text);
  } catch (e) {
    throw new ConfigError(`--upstreams / COUNTERSIGN_UPSTREAMS: ${(e as Error).message}`);
  }
}

function masterKeyPrevious(key: string | undefined, until: string | undefined): PreviousMasterKey | undefined {
  if (!key) {
    if (until) throw new ConfigError('COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL needs COUNTERSIGN_MASTER_KEY_PREVIOUS');
    return undefined;
  }
  if (!isMasterKey(key)) throw new ConfigError('COUNTERSIGN_MASTER_KEY_PREVIOUS must be a key_master_… key (the one being replaced)');
  if (!until) return { key, until: undefined };
  const t = Date.parse(until);
  if (Number.isNaN(t)) throw new ConfigError(`COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL must be an ISO 8601 time, got "${until}"`);
  return { key, until: t };
}

const MIB = 1024 * 1024;

function admissionLimits(env: NodeJS.ProcessEnv): ServerConfig['admission'] {
  const setting = (name: string, fallback: number, max: number) => int(name, env[name], fallback, 0, max);
  // Defaults from the measured cost (SECURITY.md "Limits"): a 9 MB proxied call peaks at ~130 MB of RSS.
  return {
    maxInflightBytes: setting('COUNTERSIGN_MAX_INFLIGHT_BYTES', 64 * MIB, 64 * 1024 * MIB),
    maxInflightBytesPerKey: setting('COUNTERSIGN_MAX_INFLIGHT_BYTES_PER_KEY', 32 * MIB, 64 * 1024 * MIB),
    maxInflightCalls: setting('COUNTERSIGN_MAX_INFLIGHT_CALLS', 4096, 1_000_000),
    maxInflightCallsPerKey: setting('COUNTERSIGN_MAX_INFLIGHT_CALLS_PER_KEY', 512, 1_000_000),
  };
}

function connectionLimits(env: NodeJS.ProcessEnv): ServerConfig['connections'] {
  const requestTimeoutMs = int('COUNTERSIGN_REQUEST_TIMEOUT_MS', env.COUNTERSIGN_REQUEST_TIMEOUT_MS, 60_000, 100, 3_600_000);
  // Node requires the headers to arrive no later than the whole request.
  const headersTimeoutMs = Math.min(
    requestTimeoutMs,
    int('COUNTERSIGN_HEADERS_TIMEOUT_MS', env.COUNTERSIGN_HEADERS_TIMEOUT_MS, 20_000, 100, 3_600_000),
  );
  return {
    requestTimeoutMs,
    headersTimeoutMs,
    keepAliveTimeoutMs: int('COUNTERSIGN_KEEP_ALIVE_TIMEOUT_MS', env.COUNTERSIGN_KEEP_ALIVE_TIMEOUT_MS, 30_000, 100, 3_600_000),
    maxPerClient: int('COUNTERSIGN_MAX_CONNECTIONS_PER_CLIENT', env.COUNTERSIGN_MAX_CONNECTIONS_PER_CLIENT, 1024, 0, 1_000_000),
    max: int('COUNTERSIGN_MAX_CONNECTIONS', env.COUNTERSIGN_MAX_CONNECTIONS, 0, 0, 1_000_000),
  };
}

function onOff(name: string, text: string | undefined, fallback: boolean): boolean {
  if (text === undefined || text === '') return fallback;
  if (text === 'on' || text === 'off') return text === 'on';
  throw new ConfigError(`${name} must be on or off, got "${text}"`);
}

function sqliteSync(text: string | undefined): 'normal' | 'full' {
  if (text === undefined || text === '' || text === 'normal') return 'normal';
  if (text === 'full') return 'full';
  throw new ConfigError(`COUNTERSIGN_SQLITE_SYNC must be normal or full, got "${text}"`);
}

function metricsToken(text: string | undefined): string | undefined {
  if (text === undefined || text === '') return undefined;
  // A short token is guessable by anyone who can reach /metrics; it is compared in constant time.
  if (text.length < 16 || /\s/.test(text))
    throw new ConfigError('COUNTERSIGN_METRICS_TOKEN must be at least 16 characters, without spaces');
  return text;
}

function tsaRoots(tsaUrl: string | undefined, file: string | undefined): string | undefined {
  // An outside TSA's tokens are worth nothing unless they chain to roots the operator chose;
  // the roots are never taken from the tokens themselves.
  if (tsaUrl && !file) throw new ConfigError("--tsa-url needs --tsa-roots / COUNTERSIGN_TSA_ROOTS: a PEM file of that TSA's trust roots");
  if (!file) return undefined;
  const resolved = path.resolve(file);
  if (!fs.existsSync(resolved)) throw new ConfigError(`--tsa-roots file not found: ${resolved}`);
  return resolved;
}

/**
 * Builds the configuration from flags (which win) and the environment.
 * @throws ConfigError naming the setting and what it must be.
 */
export function loadConfig(flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const pick = (flag: keyof ConfigFlags, envName: string): string | undefined => flags[flag] ?? env[envName];
  const dataDir = path.resolve(pick('dataDir', 'COUNTERSIGN_DATA_DIR') ?? '.countersign');
  const databaseUrl = flags.databaseUrl ?? env.COUNTERSIGN_DATABASE_URL ?? env.DATABASE_URL;
  if (databaseUrl !== undefined && databaseUrl !== '' && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('--database-url / DATABASE_URL must be a postgres:// URL');
  }
  return {
    host: pick('host', 'COUNTERSIGN_HOST') ?? '127.0.0.1',
    port: int('--port / COUNTERSIGN_PORT', pick('port', 'COUNTERSIGN_PORT'), 8080, 0, 65535),
    dataDir,
    allowSharedDataDir: flag(
      '--allow-shared-data-dir / COUNTERSIGN_ALLOW_SHARED_DATA_DIR',
      pick('allowSharedDataDir', 'COUNTERSIGN_ALLOW_SHARED_DATA_DIR'),
    ),
    databaseUrl: databaseUrl || undefined,
    roles: roles(pick('roles', 'COUNTERSIGN_ROLES')),
    masterKey: pick('masterKey', 'COUNTERSIGN_MASTER_KEY') || undefined,
    masterKeyPrevious: masterKeyPrevious(env.COUNTERSIGN_MASTER_KEY_PREVIOUS, env.COUNTERSIGN_MASTER_KEY_PREVIOUS_UNTIL),
    tsaUrl: url('--tsa-url / COUNTERSIGN_TSA_URL', pick('tsaUrl', 'COUNTERSIGN_TSA_URL')),
    tsaRoots: tsaRoots(pick('tsaUrl', 'COUNTERSIGN_TSA_URL'), pick('tsaRoots', 'COUNTERSIGN_TSA_ROOTS')),
    ledgerUrl: url('--ledger-url / COUNTERSIGN_LEDGER_URL', pick('ledgerUrl', 'COUNTERSIGN_LEDGER_URL')),
    allowTargets: allowTargets(pick('allowTargets', 'COUNTERSIGN_ALLOW_TARGETS')),
    upstreams: upstreams(pick('upstreams', 'COUNTERSIGN_UPSTREAMS')),
    publicUrl: url('--public-url / COUNTERSIGN_PUBLIC_URL', pick('publicUrl', 'COUNTERSIGN_PUBLIC_URL')),
    bodyLimit: int('COUNTERSIGN_BODY_LIMIT', env.COUNTERSIGN_BODY_LIMIT, 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    admission: admissionLimits(env),
    connections: connectionLimits(env),
    listPayloadBudget: int('COUNTERSIGN_LIST_PAYLOAD_BUDGET', env.COUNTERSIGN_LIST_PAYLOAD_BUDGET, 8 * MIB, 1024, 1024 * MIB),
    maxBatchLogs: int('COUNTERSIGN_MAX_BATCH_LOGS', env.COUNTERSIGN_MAX_BATCH_LOGS, 500, 1, 10000),
    rateLimit: int('COUNTERSIGN_RATE_LIMIT', env.COUNTERSIGN_RATE_LIMIT, 0, 0, 1_000_000),
    proofWindowMs: int('COUNTERSIGN_PROOF_WINDOW_MS', env.COUNTERSIGN_PROOF_WINDOW_MS, 5000, 100, 600000),
    proxyTimeouts: {
      connect: int('COUNTERSIGN_PROXY_CONNECT_TIMEOUT_MS', env.COUNTERSIGN_PROXY_CONNECT_TIMEOUT_MS, 10000, 1, 600000),
      firstByte: int('COUNTERSIGN_PROXY_FIRST_BYTE_TIMEOUT_MS', env.COUNTERSIGN_PROXY_FIRST_BYTE_TIMEOUT_MS, 120000, 1, 3600000),
      idle: int('COUNTERSIGN_PROXY_IDLE_TIMEOUT_MS', env.COUNTERSIGN_PROXY_IDLE_TIMEOUT_MS, 120000, 1, 3600000),
    },
    logLevel: pick('logLevel', 'COUNTERSIGN_LOG_LEVEL') ?? 'info',
    sqliteSync: sqliteSync(env.COUNTERSIGN_SQLITE_SYNC),
    metricsToken: metricsToken(env.COUNTERSIGN_METRICS_TOKEN),
    webhooks: {
      timeoutMs: int('COUNTERSIGN_WEBHOOK_TIMEOUT_MS', env.COUNTERSIGN_WEBHOOK_TIMEOUT_MS, 10_000, 100, 120_000),
      retryBaseMs: int('COUNTERSIGN_WEBHOOK_RETRY_BASE_MS', env.COUNTERSIGN_WEBHOOK_RETRY_BASE_MS, 5_000, 10, 3_600_000),
    },
    retentionSweepMs: int('COUNTERSIGN_RETENTION_SWEEP_MS', env.COUNTERSIGN_RETENTION_SWEEP_MS, 600_000, 1_000, 86_400_000),
    storeTimeoutMs: int('COUNTERSIGN_STORE_TIMEOUT_MS', env.COUNTERSIGN_STORE_TIMEOUT_MS, 5_000, 50, 600_000),
    nativeSeal: onOff('COUNTERSIGN_NATIVE_SEAL', env.COUNTERSIGN_NATIVE_SEAL, true),
  };
}
