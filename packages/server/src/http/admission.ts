/**
 * Admission of ingest calls (issue 8, "Bounded time and memory under hostile clients"): 20
 * concurrent 9 MB `/v1/proxy` calls to an upstream that never answered took the process from
 * 293 MB to 1.93 GB, because nothing bounded how much work was in flight. Before a body is read
 * (after authentication, since part of the budget is per key), a call reserves its request bytes
 * (the declared Content-Length, or the route's body limit when the length is unknown) and one
 * call slot, per process and per key; the reservation is released when the response closes
 * (also when the reply is hijacked and streamed, as the proxy does). Past the bound the call is
 * refused at once, before any byte of its body is buffered, parsed or recorded:
 * 429 `key_busy` when the key is over its share, 503 `server_busy` when the process is, both
 * with `Retry-After`. Nothing is written for a refused call.
 */
import type { ServerResponse } from 'node:http';
import { Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';

/** The bounds; 0 turns a bound off. */
export interface AdmissionLimits {
  /** Request bytes in flight in this process (`COUNTERSIGN_MAX_INFLIGHT_BYTES`). */
  maxInflightBytes: number;
  /** Request bytes in flight for one key (`COUNTERSIGN_MAX_INFLIGHT_BYTES_PER_KEY`). */
  maxInflightBytesPerKey: number;
  /** Calls in flight in this process (`COUNTERSIGN_MAX_INFLIGHT_CALLS`). */
  maxInflightCalls: number;
  /** Calls in flight for one key (`COUNTERSIGN_MAX_INFLIGHT_CALLS_PER_KEY`). */
  maxInflightCallsPerKey: number;
}

/** What a refused call is told to wait before retrying, seconds (work in flight ends on its own). */
export const ADMISSION_RETRY_AFTER_SECONDS = 1;

/** A reservation: `grow` adds bytes as a body of unknown length arrives; `release` is idempotent. */
export interface AdmissionTicket {
  /** Request bytes reserved so far. */
  readonly bytes: number;
  /** Reserves `more` bytes, or says which bound refused them (the ticket is then unchanged). */
  grow(more: number): AdmissionRefusal | undefined;
  release(): void;
}

/** Keys whose usage is kept while idle (see `#remember`). */
const MAX_KEYS = 10_000;

/** Why a call was not admitted: the key's share or the whole process is in use. */
export type AdmissionRefusal = { refused: 'key' | 'process'; what: 'bytes' | 'calls'; limit: number };

interface Usage {
  bytes: number;
  calls: number;
}

/**
 * Counts request bytes and calls in flight, per process and per key. A call larger than a byte
 * bound on its own is still admitted when nothing else is in flight there, so that a body the
 * body limit accepts can always pass once the way is clear.
 */
export class AdmissionBudget {
  readonly #limits: AdmissionLimits;
  readonly #total: Usage = { bytes: 0, calls: 0 };
  readonly #perKey = new Map<string, Usage>();

  constructor(limits: AdmissionLimits) {
    this.#limits = { ...limits };
  }

  /** The bounds in force. */
  get limits(): Readonly<AdmissionLimits> {
    return this.#limits;
  }

  /** Bytes and calls in flight in the process. */
  get inFlight(): Readonly<Usage> {
    return { ...this.#total };
  }

  /** Bytes and calls in flight for `key`. */
  usageOf(key: string): Readonly<Usage> {
    const u = this.#perKey.get(key);
    return u ? { ...u } : { bytes: 0, calls: 0 };
  }

  /** Reserves `bytes` and one call for `key`, or says which bound refused it. */
  admit(key: string, bytes: number): AdmissionTicket | AdmissionRefusal {
    const l = this.#limits;
    const mine = this.#perKey.get(key) ?? { bytes: 0, calls: 0 };
    // The key's own share first: a caller over it is told so (429), even when the process is full too.
    if (l.maxInflightCallsPerKey > 0 && mine.calls + 1 > l.maxInflightCallsPerKey)
      return { refused: 'key', what: 'calls', limit: l.maxInflightCallsPerKey };
    if (l.maxInflightCalls > 0 && this.#total.calls + 1 > l.maxInflightCalls)
      return { refused: 'process', what: 'calls', limit: l.maxInflightCalls };
    const over = bytesRefusal(l, mine, this.#total, bytes, 0);
    if (over) return over;
    if (!this.#perKey.has(key)) this.#remember(key, mine);
    return new Ticket(l, mine, this.#total, bytes);
  }

  /**
   * Keeps a key's usage between its calls rather than deleting it when its last call ends: a Map
   * churned per call keeps dead entries reachable to the scavenger (see slot-set.ts). Idle keys
   * are dropped once there are {@link MAX_KEYS} of them.
   */
  #remember(key: string, usage: Usage): void {
    if (this.#perKey.size >= MAX_KEYS) for (const [k, u] of this.#perKey) if (u.calls === 0 && u.bytes === 0) this.#perKey.delete(k);
    this.#perKey.set(key, usage);
  }
}

/**
 * An admitted call's reservation. A class, not an object of closures: one is made per call, and
 * the response's listeners that release it are one shared function (see {@link admitOrThrow}).
 */
class Ticket implements AdmissionTicket {
  #reserved: number;
  #released = false;

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly mine: Usage,
    private readonly total: Usage,
    bytes: number,
  ) {
    this.#reserved = bytes;
    this.#count(1, bytes);
  }

  get bytes(): number {
    return this.#reserved;
  }

  grow(more: number): AdmissionRefusal | undefined {
    if (this.#released) return undefined;
    const refusal = bytesRefusal(this.limits, this.mine, this.total, more, 1);
    if (refusal) return refusal;
    this.#count(0, more);
    this.#reserved += more;
    return undefined;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#count(-1, -this.#reserved);
  }

  /** Adds calls and bytes to the key's usage and the process's alike. */
  #count(calls: number, bytes: number): void {
    this.mine.calls += calls;
    this.total.calls += calls;
    this.mine.bytes += bytes;
    this.total.bytes += bytes;
  }
}

/** The byte bound that `more` bytes would pass, per key first; `self` = calls of the asker already counted. */
function bytesRefusal(l: AdmissionLimits, mine: Usage, total: Usage, more: number, self: number): AdmissionRefusal | undefined {
  if (exceeds(mine.bytes, more, l.maxInflightBytesPerKey, mine.calls - self))
    return { refused: 'key', what: 'bytes', limit: l.maxInflightBytesPerKey };
  if (exceeds(total.bytes, more, l.maxInflightBytes, total.calls - self))
    return { refused: 'process', what: 'bytes', limit: l.maxInflightBytes };
  return undefined;
}

/** True when adding `more` to `used` passes `limit` (0 = no limit), unless no other call is in flight there. */
function exceeds(used: number, more: number, limit: number, otherCalls: number): boolean {
  return limit > 0 && more > 0 && used + more > limit && otherCalls > 0;
}

/** True when `outcome` is a refusal. */
export function isRefusal(outcome: AdmissionTicket | AdmissionRefusal): outcome is AdmissionRefusal {
  return 'refused' in outcome;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The in-flight admission budget of this process (http/admission.ts). */
    admission: AdmissionBudget;
  }
}

/** The ticket of an admitted request whose body length is not declared, metered as it arrives. */
const metered = new WeakMap<FastifyRequest, AdmissionTicket>();

/**
 * Decorates the app with its budget and installs the metering of bodies of unknown length
 * (app.ts, once, before the routes: the hook applies to every route, and passes through at once
 * for requests that were not admitted with such a body).
 */
export function installAdmission(app: FastifyInstance, limits: AdmissionLimits): void {
  app.decorate('admission', new AdmissionBudget(limits));
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const ticket = metered.get(request);
    if (!ticket) return done(null, payload);
    // Past the bound the rest of the body is read and dropped (never kept), and the refusal is the
    // answer once it has arrived: refused while the caller still sends, the connection would be
    // reset under the answer (Fastify closes it after a body error). A trickling caller meets
    // the request timeout instead.
    let refusal: AdmissionRefusal | undefined;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, next) {
        refusal ??= ticket.grow(chunk.length);
        if (refusal) return next();
        next(null, chunk);
      },
      flush(end) {
        end(refusal ? refusalError(refusal) : null);
      },
    });
    payload.on('error', (err) => meter.destroy(err));
    done(null, payload.pipe(meter));
  });
}

/**
 * The request bytes a call reserves before its body is read: the declared Content-Length (at
 * most the route's body limit, above which the body is refused 413 anyway), 0 for a request
 * without a body, and `undefined` for a body of unknown length (chunked), which is then counted
 * as it arrives.
 */
export function declaredBytes(request: FastifyRequest): number | undefined {
  const limit = request.routeOptions.bodyLimit ?? request.server.ctx.config.bodyLimit;
  const length = request.headers['content-length'];
  if (request.headers['transfer-encoding'] !== undefined) return undefined;
  if (length === undefined) return 0;
  return /^\d{1,15}$/.test(length) ? Math.min(Number(length), limit) : limit;
}

/** The budget's key of the caller: the API key, or the embed token's project. */
function budgetKey(request: FastifyRequest): string {
  const p = request.principal;
  if (!p) return 'anonymous';
  if (p.kind === 'key') return p.keyId;
  if (p.kind === 'embed') return `embed:${p.projectId}`;
  return 'master';
}

/**
 * Admits a call whose body is read into memory (`POST /v1/log`, `POST /v1/proxy`) with its
 * request bytes, or refuses it (throws 429 `key_busy` / 503 `server_busy`, with `Retry-After`).
 * Call it from the route's `onRequest` hook right AFTER the route's guard (the key must be
 * known), so before the body is read, in the same hook: a hook of its own would cost every
 * call a promise and a turn of Fastify's hook runner. The reservation is released when the
 * response closes, however it ends (sent, streamed after `hijack`, or cut).
 */
export function admitIngest(request: FastifyRequest, reply: FastifyReply): void {
  const bytes = declaredBytes(request);
  const ticket = admitOrThrow(request, reply, bytes ?? 0);
  if (bytes === undefined) metered.set(request, ticket);
}

/**
 * Admits a call whose request bytes the route knows before its body is read (forward mode: the
 * declared length of a body it reads ahead, 0 for one that streams through and holds only its
 * capture). Same placement as {@link admitIngest}, in the route's own `onRequest` hook.
 */
export function admitCall(request: FastifyRequest, reply: FastifyReply, bytes: number): void {
  admitOrThrow(request, reply, bytes);
}

/** Where a response keeps its call's ticket, for {@link releaseTicket}. */
const TICKET = Symbol('countersign.admissionTicket');

/** Listener of a response's 'finish' and 'close': releases the ticket it carries (release is idempotent). */
function releaseTicket(this: ServerResponse & { [TICKET]?: AdmissionTicket }): void {
  this[TICKET]?.release();
}

function admitOrThrow(request: FastifyRequest, reply: FastifyReply, bytes: number): AdmissionTicket {
  const outcome = request.server.admission.admit(budgetKey(request), bytes);
  if (isRefusal(outcome)) throw refusalError(outcome);
  const res = reply.raw as ServerResponse & { [TICKET]?: AdmissionTicket };
  res[TICKET] = outcome;
  // 'finish' when the answer is written; 'close' also when the connection ends first. One shared
  // listener, no closure per call.
  res.on('finish', releaseTicket);
  res.on('close', releaseTicket);
  if (res.destroyed) outcome.release();
  return outcome;
}

/** The answer for a refused call. */
export function refusalError(r: AdmissionRefusal): ApiError {
  const headers = { 'retry-after': String(ADMISSION_RETRY_AFTER_SECONDS) };
  const bound = r.what === 'bytes' ? `${r.limit} request bytes` : `${r.limit} calls`;
  if (r.refused === 'key') {
    return new ApiError('key_busy', `this key already has ${bound} in flight; retry after ${ADMISSION_RETRY_AFTER_SECONDS} s`, {
      headers,
    });
  }
  return new ApiError('server_busy', `the server already has ${bound} in flight; retry after ${ADMISSION_RETRY_AFTER_SECONDS} s`, {
    headers,
  });
}
