/**
 * Server configuration: one typed object, read from flags and `COUNTERSIGN_*` environment
 * variables and validated before anything starts, so a bad setting fails with a clear message
 * instead of a half-started server.
 */
import fs from 'node:fs';
import path from 'node:path';

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
  /** Where SQLite, keys and generated material live. */
  dataDir: string;
  /** PostgreSQL URL; when absent the SQLite file in `dataDir` is used. */
  databaseUrl: string | undefined;
  /** Roles this process serves. */
  roles: Set<Role>;
  /** Master key text; when absent one is generated into `dataDir` on first start. */
  masterKey: string | undefined;
  /** External RFC 3161 TSA; when absent the embedded TSA is used. */
  tsaUrl: string | undefined;
  /** PEM file of the trust roots of the external TSA (required with `tsaUrl`). */
  tsaRoots: string | undefined;
  /** External Rekor v1 ledger; when absent the embedded ledger is used. */
  ledgerUrl: string | undefined;
  /** host:port pairs admitted past the SSRF filter (empty by default). */
  allowTargets: string[];
  /** Public base URL printed and used in receipts (defaults to the listen address). */
  publicUrl: string | undefined;
  /** Largest accepted request body, bytes. */
  bodyLimit: number;
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

function sqliteSync(text: string | undefined): 'normal' | 'full' {
  if (text === undefined || text === '' || text === 'normal') return 'normal';
  if (text === 'full') return 'full';
  throw new ConfigError(`COUNTERSIGN_SQLITE_SYNC must be normal or full, got "${text}"`);
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
    databaseUrl: databaseUrl || undefined,
    roles: roles(pick('roles', 'COUNTERSIGN_ROLES')),
    masterKey: pick('masterKey', 'COUNTERSIGN_MASTER_KEY') || undefined,
    tsaUrl: url('--tsa-url / COUNTERSIGN_TSA_URL', pick('tsaUrl', 'COUNTERSIGN_TSA_URL')),
    tsaRoots: tsaRoots(pick('tsaUrl', 'COUNTERSIGN_TSA_URL'), pick('tsaRoots', 'COUNTERSIGN_TSA_ROOTS')),
    ledgerUrl: url('--ledger-url / COUNTERSIGN_LEDGER_URL', pick('ledgerUrl', 'COUNTERSIGN_LEDGER_URL')),
    allowTargets: allowTargets(pick('allowTargets', 'COUNTERSIGN_ALLOW_TARGETS')),
    publicUrl: url('--public-url / COUNTERSIGN_PUBLIC_URL', pick('publicUrl', 'COUNTERSIGN_PUBLIC_URL')),
    bodyLimit: int('COUNTERSIGN_BODY_LIMIT', env.COUNTERSIGN_BODY_LIMIT, 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
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
  };
}
