/**
 * Request telemetry (spec 2.5 "Telemetry object"): what the client records about the end
 * user's request beside a log: IP address, user agent and location. Everything collected goes
 * into the ENCRYPTED payload only (`telemetry` field), never into the plain metadata.
 *
 * Presets (per-field overrides win):
 *
 * | preset     | ip          | userAgent | location                             |
 * |------------|-------------|-----------|--------------------------------------|
 * | `strict`   | `skip`      | `skip`    | off                                  |
 * | `standard` | `anonymize` | `parse`   | on: country only                     |
 * | `full`     | `track`     | `track`   | on: country, region, city, timezone  |
 *
 * `anonymize` zeroes the last octet of an IPv4 address and the last 80 bits of an IPv6 address.
 * `parse` keeps browser, engine, OS and device (ua-parser-js) but not the raw string; `track`
 * keeps the raw string and the parsed fields. Location comes from edge headers when present
 * (Cloudflare, Vercel, CloudFront, Fastly, App Engine) and otherwise from an offline lookup in
 * the GeoLite database that the `geoip-lite` package ships: the address never leaves the process.
 */
import { isIP } from 'node:net';
import UAParser from 'ua-parser-js';
import { ClientError } from './errors.js';

/** Telemetry preset names. */
export type TelemetryPreset = 'strict' | 'standard' | 'full';
/** IP collection: keep, anonymize, or leave out. */
export type IpMode = 'track' | 'anonymize' | 'skip';
/** User-agent collection: keep raw + parsed, parsed only, or leave out. */
export type UserAgentMode = 'track' | 'parse' | 'skip';

/** The `telemetry` config object (spec 2.5). */
export interface TelemetryConfig {
  /** Shorthand for a set of defaults (default `standard`). */
  preset?: TelemetryPreset;
  /** Overrides the preset's IP setting. */
  ip?: IpMode;
  /** Overrides the preset's user-agent setting. */
  userAgent?: UserAgentMode;
  /** Overrides the preset's location setting. */
  location?: boolean;
}

/** Telemetry settings after the preset and overrides are applied. */
export interface ResolvedTelemetry {
  preset: TelemetryPreset;
  ip: IpMode;
  userAgent: UserAgentMode;
  location: boolean;
}

/** What each preset collects. */
export const TELEMETRY_PRESETS: Readonly<Record<TelemetryPreset, Omit<ResolvedTelemetry, 'preset'>>> = {
  strict: { ip: 'skip', userAgent: 'skip', location: false },
  standard: { ip: 'anonymize', userAgent: 'parse', location: true },
  full: { ip: 'track', userAgent: 'track', location: true },
};

/** The end user's request as the caller knows it: give what you have. */
export interface RequestContext {
  /** Client IP address (otherwise taken from `x-forwarded-for`, `cf-connecting-ip`, `x-real-ip`, then `socket.remoteAddress`). */
  ip?: string;
  /** User-agent string (otherwise the `user-agent` header). */
  userAgent?: string;
  /** Request headers (lower-case names), e.g. `req.headers` of node:http, Express or Fastify. */
  headers?: Record<string, string | string[] | undefined>;
  /** The socket, when a node:http request is passed as is. */
  socket?: { remoteAddress?: string | undefined };
}

/** Location as recorded. */
export interface LocationInfo {
  country?: string;
  region?: string;
  city?: string;
  timezone?: string;
  /** `edge-header` or `geoip-lite`. */
  source: 'edge-header' | 'geoip-lite';
}

/** The `telemetry` field of the encrypted payload. */
export interface TelemetryRecord {
  ip?: string;
  userAgent?: string;
  userAgentParsed?: { browser?: string; browserVersion?: string; engine?: string; os?: string; osVersion?: string; deviceType?: string };
  location?: LocationInfo;
}

/**
 * Applies the preset and overrides.
 * @throws ClientError `invalid_config` on unknown values.
 */
export function resolveTelemetry(config: TelemetryConfig | undefined): ResolvedTelemetry {
  const bad = (m: string): never => {
    throw new ClientError('invalid_config', `ServiceClient config: telemetry.${m}`);
  };
  const c = config ?? {};
  if (c === null || typeof c !== 'object') bad('must be an object');
  const preset = c.preset ?? 'standard';
  if (!Object.hasOwn(TELEMETRY_PRESETS, preset)) bad(`preset must be strict, standard or full, not ${JSON.stringify(preset)}`);
  if (c.ip !== undefined && !['track', 'anonymize', 'skip'].includes(c.ip)) bad('ip must be track, anonymize or skip');
  if (c.userAgent !== undefined && !['track', 'parse', 'skip'].includes(c.userAgent)) bad('userAgent must be track, parse or skip');
  if (c.location !== undefined && typeof c.location !== 'boolean') bad('location must be true or false');
  const base = TELEMETRY_PRESETS[preset];
  return { preset, ip: c.ip ?? base.ip, userAgent: c.userAgent ?? base.userAgent, location: c.location ?? base.location };
}

function firstHeader(headers: RequestContext['headers'], name: string): string | undefined {
  const v = headers?.[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

/** Strips an IPv4-mapped prefix, brackets, a port and an IPv6 zone. */
function cleanIp(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  let s = raw.trim();
  const bracket = /^\[([^\]]+)\](?::\d+)?$/.exec(s);
  if (bracket) s = bracket[1]!;
  else if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(s)) s = s.slice(0, s.lastIndexOf(':'));
  s = s.replace(/%.*$/, '');
  if (/^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(s)) s = s.slice(7);
  return isIP(s) ? s : undefined;
}

/** The client IP of a request context. The first `x-forwarded-for` hop is trusted as given: set `ip` yourself behind untrusted proxies. */
export function clientIpOf(ctx: RequestContext): string | undefined {
  if (ctx.ip) return cleanIp(ctx.ip);
  const forwarded = firstHeader(ctx.headers, 'x-forwarded-for')?.split(',')[0];
  return (
    cleanIp(forwarded) ??
    cleanIp(firstHeader(ctx.headers, 'cf-connecting-ip')) ??
    cleanIp(firstHeader(ctx.headers, 'x-real-ip')) ??
    cleanIp(ctx.socket?.remoteAddress)
  );
}

/**
 * Anonymizes an address: IPv4 keeps the first three octets (`203.0.113.77` → `203.0.113.0`),
 * IPv6 keeps the first 48 bits (the last 80 are zeroed). Returns undefined for a non-address.
 */
export function anonymizeIp(address: string): string | undefined {
  const ip = cleanIp(address);
  if (!ip) return undefined;
  if (isIP(ip) === 4) return ip.replace(/\.\d+$/, '.0');
  const groups = expandIpv6(ip);
  return compressIpv6([...groups.slice(0, 3), 0, 0, 0, 0, 0]);
}

function expandIpv6(ip: string): number[] {
  let text = ip.toLowerCase();
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const o = v4[1]!.split('.').map(Number);
    text = text.slice(0, -v4[1]!.length) + ((o[0]! << 8) | o[1]!).toString(16) + ':' + ((o[2]! << 8) | o[3]!).toString(16);
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const h = head ? head.split(':').filter(Boolean) : [];
  const t = tail ? tail.split(':').filter(Boolean) : [];
  const fill = tail === undefined ? [] : new Array<string>(8 - h.length - t.length).fill('0');
  return [...h, ...fill, ...t].map((g) => parseInt(g, 16));
}

function compressIpv6(groups: number[]): string {
  // Longest run of zero groups becomes "::" (RFC 5952).
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return hex.slice(0, best).join(':') + '::' + hex.slice(best + bestLen).join(':');
}

/** Location from edge headers (Cloudflare, Vercel, CloudFront, Fastly, App Engine), if any. */
export function locationFromHeaders(headers: RequestContext['headers']): LocationInfo | undefined {
  const h = (n: string) => firstHeader(headers, n);
  const country =
    h('cf-ipcountry') ??
    h('x-vercel-ip-country') ??
    h('cloudfront-viewer-country') ??
    h('fastly-client-country') ??
    h('x-country-code') ??
    h('x-appengine-country');
  if (!country || country === 'XX' || country === 'T1') return undefined;
  const loc: LocationInfo = { country: country.toUpperCase(), source: 'edge-header' };
  const region = h('x-vercel-ip-country-region') ?? h('cloudfront-viewer-country-region') ?? h('cf-region-code') ?? h('x-appengine-region');
  const city = h('x-vercel-ip-city') ?? h('cloudfront-viewer-city') ?? h('cf-ipcity') ?? h('x-appengine-city');
  const timezone = h('x-vercel-ip-timezone') ?? h('cloudfront-viewer-time-zone') ?? h('cf-timezone');
  if (region) loc.region = region;
  if (city) loc.city = safeDecode(city);
  if (timezone) loc.timezone = timezone;
  return loc;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

type GeoLookup = (ip: string) => { country: string; region: string; city: string; timezone: string } | null;
let geoLookup: Promise<GeoLookup> | undefined;

/** Loads geoip-lite once, on first need (its database takes some memory and a moment to read). */
function geo(): Promise<GeoLookup> {
  geoLookup ??= import('geoip-lite').then((m) => (ip: string) => m.default.lookup(ip));
  return geoLookup;
}

/** Location by offline database lookup (geoip-lite); undefined for private or unknown addresses. */
export async function locationFromIp(ip: string): Promise<LocationInfo | undefined> {
  const hit = (await geo())(ip);
  if (!hit || !hit.country) return undefined;
  const loc: LocationInfo = { country: hit.country, source: 'geoip-lite' };
  if (hit.region) loc.region = hit.region;
  if (hit.city) loc.city = hit.city;
  if (hit.timezone) loc.timezone = hit.timezone;
  return loc;
}

/**
 * Collects telemetry for one request under the given settings. `standard` keeps the country
 * only; `full` keeps region, city and timezone as well.
 */
export async function collectTelemetry(settings: ResolvedTelemetry, ctx: RequestContext | undefined): Promise<TelemetryRecord | undefined> {
  if (!ctx) return undefined;
  const out: TelemetryRecord = {};
  const ip = clientIpOf(ctx);
  if (ip && settings.ip === 'track') out.ip = ip;
  if (ip && settings.ip === 'anonymize') out.ip = anonymizeIp(ip);
  const ua = ctx.userAgent ?? firstHeader(ctx.headers, 'user-agent');
  if (ua && settings.userAgent !== 'skip') {
    const r = UAParser(ua);
    const parsed: NonNullable<TelemetryRecord['userAgentParsed']> = {};
    if (r.browser.name) parsed.browser = r.browser.name;
    if (r.browser.version) parsed.browserVersion = r.browser.version;
    if (r.engine.name) parsed.engine = r.engine.name;
    if (r.os.name) parsed.os = r.os.name;
    if (r.os.version) parsed.osVersion = r.os.version;
    if (r.device.type) parsed.deviceType = r.device.type;
    out.userAgentParsed = parsed;
    if (settings.userAgent === 'track') out.userAgent = ua;
  }
  if (settings.location) {
    let loc = locationFromHeaders(ctx.headers);
    if (!loc && ip) loc = await locationFromIp(ip);
    if (loc) out.location = settings.preset === 'full' ? loc : { country: loc.country, source: loc.source };
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
