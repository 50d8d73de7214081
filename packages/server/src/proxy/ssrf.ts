/**
 * The SSRF guard of the proxy. A target is checked on the addresses the connection will really
 * use: the URL is parsed with the WHATWG parser (which already folds decimal, octal, hex and
 * short IPv4 notations into dotted quads), the host name is checked, the name is resolved ONCE,
 * EVERY resolved address is classified, and the connector later dials only one of those checked
 * addresses (see upstream.ts), so a DNS answer that changes between check and connect (DNS
 * rebinding) cannot steer the connection anywhere unchecked.
 *
 * The policy is an allow-list of global unicast space: an IPv4 address must be in ipaddr.js's
 * `unicast` range and not one of the extra addresses below; an IPv6 address must be global
 * unicast (2000::/3 with no special range), or a NAT64 / 6to4 / IPv4-mapped form whose embedded
 * IPv4 passes the IPv4 rule. Everything else (loopback, RFC 1918, CGNAT, link-local, multicast,
 * broadcast, reserved, documentation, benchmarking, ULA, site-local, IPv4-compatible, Teredo,
 * metadata addresses) is refused.
 */
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** Resolves a host name to every address it has (IPv4 and IPv6), like `dns.lookup(all)`. */
export type Resolver = (hostname: string) => Promise<string[]>;

/** The system resolver (getaddrinfo through libuv, as any HTTP client would use). */
export const systemResolver: Resolver = async (hostname) => {
  const found = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return found.map((a) => a.address);
};

/** Why a target was refused (for the error message and the audit record). */
export class TargetBlockedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TargetBlockedError';
  }
}

/** The host name resolved to nothing (or DNS failed): the upstream is unreachable. */
export class TargetUnresolvableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TargetUnresolvableError';
  }
}

/** The target is not a usable URL at all (a caller mistake, 400 rather than 403). */
export class TargetInvalidError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TargetInvalidError';
  }
}

/** Cloud metadata addresses that sit outside the ranges blocked anyway (Azure's wire server). */
const EXTRA_BLOCKED_V4 = new Set(['168.63.129.16']);

/**
 * Names refused without resolving: loopback names and private-use suffixes, and the metadata
 * service names of the major clouds (their addresses are blocked too; the names make the refusal
 * explicit and independent of the resolver).
 */
const BLOCKED_NAMES = new Set([
  'localhost',
  'localhost.localdomain',
  'ip6-localhost',
  'ip6-loopback',
  'metadata',
  'metadata.google.internal',
  'metadata.goog',
  'metadata.azure.com',
  'instance-data',
  'instance-data.ec2.internal',
  'kubernetes.default',
  'kubernetes.default.svc',
]);
const BLOCKED_SUFFIXES = ['.localhost', '.local', '.localdomain', '.internal', '.home.arpa', '.intranet', '.corp', '.lan'];

/** Verdict on one address: `undefined` when it may be dialled, otherwise why not. */
export function addressBlockReason(address: string): string | undefined {
  // Only the plain forms that the socket layer dials; odd notations are refused, not reinterpreted.
  if (net.isIP(address) === 0) return 'is not a plain IP address';
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    // `parse` (not `process`) so that IPv4-mapped IPv6 is classified explicitly below.
    ip = ipaddr.parse(address);
  } catch {
    return 'is not an IP address';
  }
  return ip.kind() === 'ipv4' ? ipv4BlockReason(ip as ipaddr.IPv4) : ipv6BlockReason(ip as ipaddr.IPv6);
}

function ipv4BlockReason(ip: ipaddr.IPv4): string | undefined {
  const range = ip.range();
  if (range !== 'unicast') return `is in a ${range} IPv4 range`;
  if (EXTRA_BLOCKED_V4.has(ip.toString())) return 'is a cloud metadata address';
  return undefined;
}

function ipv6BlockReason(ip: ipaddr.IPv6): string | undefined {
  const range = ip.range();
  const parts = ip.parts;
  const embeddedV4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  switch (range) {
    case 'ipv4Mapped':
      return prefixed('an IPv4-mapped address that', ipv4BlockReason(ip.toIPv4Address()));
    case 'rfc6052': {
      // 64:ff9b::/96 embeds the IPv4 in the last 32 bits; the local-use 64:ff9b:1::/48 is private.
      if (parts[2] !== 0) return 'is in the local-use NAT64 range';
      return prefixed('a NAT64 address that', ipv4BlockReason(embeddedV4(parts[6]!, parts[7]!)));
    }
    case '6to4':
      return prefixed('a 6to4 address that', ipv4BlockReason(embeddedV4(parts[1]!, parts[2]!)));
    case 'unicast':
      break;
    default:
      // loopback, unspecified, linkLocal, uniqueLocal, multicast, deprecatedSiteLocal, teredo,
      // rfc6145, reserved (documentation), benchmarking, discard, orchid, …
      return `is in a ${range} IPv6 range`;
  }
  // IPv4-compatible ::a.b.c.d (deprecated) and anything else outside global unicast 2000::/3.
  if (parts[0]! < 0x2000 || parts[0]! > 0x3fff) return 'is outside global unicast IPv6 space';
  return undefined;
}

function prefixed(what: string, reason: string | undefined): string | undefined {
  return reason === undefined ? undefined : `is ${what} ${reason}`;
}

/** Verdict on a host name before resolution: `undefined` when it may be resolved. */
export function hostnameBlockReason(hostname: string): string | undefined {
  const name = hostname.toLowerCase().replace(/\.+$/, '');
  if (name === '') return 'has an empty host';
  if (BLOCKED_NAMES.has(name)) return `names a local or metadata host (${name})`;
  for (const suffix of BLOCKED_SUFFIXES) if (name.endsWith(suffix)) return `is under the private-use suffix ${suffix}`;
  return undefined;
}

/** A target that passed the guard: what the connector will dial. */
export interface CheckedTarget {
  /** The parsed target URL. */
  url: URL;
  /** `scheme://host:port`, the undici pool key. */
  origin: string;
  /** Host name without IPv6 brackets or trailing dot. */
  hostname: string;
  /** Effective port. */
  port: number;
  /** The checked addresses, in resolver order; the connector dials only these. */
  addresses: string[];
  /** True when the target was admitted by `allowTargets` rather than by the address policy. */
  allowListed: boolean;
}

/**
 * Parses a target URL and checks its scheme, credentials and host name (no resolution).
 * @throws TargetInvalidError when it is not an absolute URL; TargetBlockedError when refused.
 */
export function parseTarget(target: string): { url: URL; hostname: string; port: number } {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new TargetInvalidError('target must be an absolute http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TargetBlockedError(`target scheme ${url.protocol} is not allowed; only http and https are proxied`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new TargetBlockedError('target URLs may not carry credentials; send them in X-Service-Upstream-Authorization');
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return { url, hostname, port };
}

/** Options of {@link TargetGuard}. */
export interface TargetGuardOptions {
  /** `host:port` entries admitted past the address policy (config.allowTargets). */
  allowTargets?: readonly string[];
  /** Name resolver (the system resolver by default; tests pass a fake one). */
  resolver?: Resolver;
  /** How long a resolved, checked answer is reused, ms (0 = resolve on every check). */
  cacheTtlMs?: number;
  /** Clock, ms. */
  now?: () => number;
}

const CACHE_MAX = 1000;

/** A target as {@link TargetGuard} remembers it once parsed (no addresses: those expire). */
type ParsedTarget = Omit<CheckedTarget, 'addresses'>;

/**
 * Checks targets and remembers the checked addresses of each host for a short time, so the
 * per-request check costs no DNS round trip and the connector dials exactly what was checked.
 */
export class TargetGuard {
  readonly #allow: Set<string>;
  readonly #ttl: number;
  readonly #now: () => number;
  readonly #cache = new Map<string, { addresses: string[]; until: number }>();
  readonly #parsed = new Map<string, ParsedTarget>();
  /** The resolver in use (replaceable, for tests of the running app). */
  resolver: Resolver;

  constructor(options: TargetGuardOptions = {}) {
    this.#allow = new Set((options.allowTargets ?? []).map((t) => t.toLowerCase()));
    this.resolver = options.resolver ?? systemResolver;
    this.#ttl = options.cacheTtlMs ?? 5_000;
    this.#now = options.now ?? Date.now;
  }

  /** True when `hostname:port` is on the allow list (IPv6 written in brackets there). */
  isAllowListed(hostname: string, port: number): boolean {
    if (this.#allow.size === 0) return false;
    const host = hostname.includes(':') ? `[${hostname}]` : hostname;
    return this.#allow.has(`${host.toLowerCase()}:${port}`);
  }

  /**
   * Checks a target end to end: URL, host name, and every address it resolves to.
   * @throws TargetInvalidError, TargetBlockedError, TargetUnresolvableError.
   */
  async check(target: string): Promise<CheckedTarget> {
    const p = this.#parse(target);
    const addresses = await this.addressesFor(p.hostname, p.port);
    return { url: p.url, origin: p.origin, hostname: p.hostname, port: p.port, addresses, allowListed: p.allowListed };
  }

  /**
   * {@link parseTarget} and what follows from the URL alone, remembered per target text: a
   * service calls the same few targets, and parsing the URL was ~1 % of the event loop's time.
   * Only accepted targets are kept (a refused one throws every time). The URL object is shared
   * by the calls of one target: read it, never change it.
   */
  #parse(target: string): ParsedTarget {
    const hit = this.#parsed.get(target);
    if (hit !== undefined) return hit;
    const { url, hostname, port } = parseTarget(target);
    const parsed = { url, hostname, port, origin: `${url.protocol}//${url.host}`, allowListed: this.isAllowListed(hostname, port) };
    if (this.#parsed.size >= CACHE_MAX) this.#parsed.delete(this.#parsed.keys().next().value as string);
    this.#parsed.set(target, parsed);
    return parsed;
  }

  /**
   * The checked addresses for `hostname:port`: from the short cache, or resolved once and
   * classified. The connector calls this too, so it dials only addresses that passed.
   * @throws TargetBlockedError when the name or ANY of its addresses is refused.
   */
  async addressesFor(hostname: string, port: number): Promise<string[]> {
    const allowListed = this.isAllowListed(hostname, port);
    if (net.isIP(hostname) !== 0) {
      const reason = allowListed ? undefined : addressBlockReason(hostname);
      if (reason) throw new TargetBlockedError(`target address ${hostname} ${reason}${allowHint(hostname, port)}`);
      return [hostname];
    }
    if (!allowListed) {
      const reason = hostnameBlockReason(hostname);
      if (reason) throw new TargetBlockedError(`target host ${reason}${allowHint(hostname, port)}`);
    }
    const key = `${hostname.toLowerCase()}:${port}`;
    const hit = this.#cache.get(key);
    const now = this.#now();
    if (hit && hit.until > now) return hit.addresses;
    let addresses: string[];
    try {
      addresses = await this.resolver(hostname);
    } catch (cause) {
      throw new TargetUnresolvableError(`target host ${hostname} did not resolve`, { cause });
    }
    if (addresses.length === 0) throw new TargetUnresolvableError(`target host ${hostname} has no addresses`);
    if (!allowListed) {
      for (const a of addresses) {
        const reason = addressBlockReason(a);
        // One bad address refuses the host: a resolver that mixes a public and a private answer
        // is exactly what a rebinding attack looks like.
        if (reason) throw new TargetBlockedError(`target host ${hostname} resolves to ${a}, which ${reason}${allowHint(hostname, port)}`);
      }
    }
    if (this.#ttl > 0) {
      if (this.#cache.size >= CACHE_MAX) this.#cache.delete(this.#cache.keys().next().value as string);
      this.#cache.set(key, { addresses, until: now + this.#ttl });
    }
    return addresses;
  }

  /** Forgets cached answers (tests; a resolver swap). */
  clearCache(): void {
    this.#cache.clear();
  }
}

/** How an operator admits a destination the guard refuses (said where the 403 happens). */
function allowHint(hostname: string, port: number): string {
  const host = net.isIPv6(hostname) ? `[${hostname}]` : hostname;
  return `; if this destination is yours, start the server with --allow-targets ${host}:${port} (or COUNTERSIGN_ALLOW_TARGETS)`;
}
