/**
 * The setting of the forward-mode suites that drive clients nobody here wrote (forward-sdk,
 * forward-http): a real listening Countersign with the two fake providers as operator-defined
 * upstreams (`upstreams`, the config field of COUNTERSIGN_UPSTREAMS: names of their own, and the
 * `openai` / `anthropic` presets overridden to point at the fakes) and allowed loopback
 * targets, a project made through the API with an agent key (the caller) and a live key (the
 * reader), plus the checks both suites make: a `fetch` that keeps a copy of what a client sent
 * and received, the record read back over HTTP and opened, and "nothing of ours went upstream".
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import { request } from 'undici';
import { deriveEnvelopeKey, openPayload, type Envelope } from '@countersign/core';
import { addKey, createProject } from '../foundation-helpers.js';
import { startAnthropicFake, startOpenAiFake, type FakeExchange, type FakeProvider } from './fake-providers.js';
import { startApp, type StoreKind, type TestApp } from './server.js';

/** The operator-defined upstream names the suites route through. */
export const OPENAI_NAME = 'acme-openai';
export const ANTHROPIC_NAME = 'acme-anthropic';

/** The X-Service-Encryption-Key of the suites. */
export const ENC = 'forward clients encryption key';

/** The provider keys the fakes accept. */
export const OPENAI_KEY = 'sk-proj-fake-openai-0123456789';
export const ANTHROPIC_KEY = 'sk-ant-api03-fake-anthropic-0123456789';

/** A running setting. */
export interface ForwardHarness {
  t: TestApp;
  openai: FakeProvider;
  anthropic: FakeProvider;
  projectId: string;
  /** The agent key the callers send in X-Service-Key. */
  agentKey: string;
  /** The live key that reads records back. */
  liveKey: string;
  /** A human key (for the handover rule). */
  humanKey: string;
  /** Strings of ours that must never reach a provider. */
  secrets: () => string[];
  close: () => Promise<void>;
}

/** Starts the fakes and the app (proof windows of 1 s, so a receipt comes within seconds). */
export async function startForwardHarness(store: StoreKind): Promise<ForwardHarness> {
  const openai = await startOpenAiFake({ apiKey: OPENAI_KEY });
  const anthropic = await startAnthropicFake({ apiKey: ANTHROPIC_KEY });
  const t = await startApp({
    store,
    listen: true,
    config: {
      allowTargets: [openai.hostPort, anthropic.hostPort],
      // Operator names of their own, and the built-in presets overridden (as an operator may) so
      // `/v1/forward/openai` and `/v1/forward/anthropic`, the paths the README gives, reach the fakes.
      upstreams: {
        [OPENAI_NAME]: `${openai.url}/v1`,
        [ANTHROPIC_NAME]: anthropic.url,
        openai: `${openai.url}/v1`,
        anthropic: anthropic.url,
      },
      proofWindowMs: 1000,
    },
  });
  const made = await createProject(t, 'agent', 'forward clients');
  const live = await addKey(t, made.projectId, 'live');
  const human = await addKey(t, made.projectId, 'human');
  return {
    t,
    openai,
    anthropic,
    projectId: made.projectId,
    agentKey: made.apiKey,
    liveKey: live.apiKey,
    humanKey: human.apiKey,
    secrets: () => [made.apiKey, live.apiKey, human.apiKey, ENC, t.masterKey],
    close: async () => {
      await t.close();
      await openai.close();
      await anthropic.close();
    },
  };
}

/** One call a client made, as its `fetch` saw it. */
export interface CapturedCall {
  method: string;
  url: string;
  /** The request headers the client set (fetch adds host, length and the like later). */
  headers: Headers;
  /** The exact request body bytes (multipart included, boundary and all). */
  body: Buffer;
  status: number;
  responseHeaders: Headers;
  /** Every byte the client received, once the answer has ended (or the client cancelled it). */
  received: Promise<Buffer>;
}

/**
 * A `fetch` for an SDK's `fetch` option that sends exactly what the SDK built and keeps a copy
 * of both directions: the request body read from a clone, the answer seen through a pass-through
 * stream (not a clone: a tee would keep reading after the SDK cancels, hiding a client that
 * stops early from the proxy).
 */
export function capturingFetch(): { fetch: typeof fetch; calls: CapturedCall[]; last: () => CapturedCall } {
  const calls: CapturedCall[] = [];
  const wrapped = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const req = new Request(input, init);
    const body = req.body ? Buffer.from(await req.clone().arrayBuffer()) : Buffer.alloc(0);
    const res = await fetch(req);
    const chunks: Uint8Array[] = [];
    let ended!: () => void;
    const received = new Promise<void>((r) => (ended = r)).then(() => Buffer.concat(chunks));
    const reader = res.body?.getReader();
    const tapped =
      reader &&
      new ReadableStream<Uint8Array>({
        async pull(controller) {
          const next = await reader.read();
          if (next.done) {
            ended();
            controller.close();
          } else {
            chunks.push(next.value);
            controller.enqueue(next.value);
          }
        },
        cancel(reason) {
          ended();
          return reader.cancel(reason);
        },
      });
    if (!reader) ended();
    const out = new Response(tapped ?? null, { status: res.status, statusText: res.statusText, headers: res.headers });
    Object.defineProperty(out, 'url', { value: res.url });
    calls.push({
      method: req.method,
      url: req.url,
      headers: req.headers,
      body,
      status: res.status,
      responseHeaders: res.headers,
      received,
    });
    return out;
  };
  return {
    fetch: wrapped,
    calls,
    last: () => {
      const c = calls.at(-1);
      if (!c) throw new Error('the client made no call');
      return c;
    },
  };
}

/** Hex SHA-256. */
export const sha = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/** A record as read back with the live key (`GET …/logs/{logId}`), and its payload opened. */
export interface ReadRecord {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read the entry's and payload's members freely
  entry: any;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  payload: any;
}

/** Reads a record over HTTP with the live key and opens it with the suites' encryption key. */
export async function readRecord(h: ForwardHarness, logId: string | null | undefined): Promise<ReadRecord> {
  assert.match(String(logId), /^log_/, 'the answer carries X-Service-Log-ID');
  const r = await request(`${h.t.url}/v1/projects/${h.projectId}/logs/${logId}`, { headers: { authorization: `Bearer ${h.liveKey}` } });
  const text = await r.body.text();
  assert.equal(r.statusCode, 200, text);
  const entry = JSON.parse(text).log;
  const payload = await openPayload(entry.payload as Envelope, await deriveEnvelopeKey(ENC), String(logId));
  return { entry, payload };
}

/** Checks the plain fields of a finished forward-mode record: complete, timing in the clear. */
export function assertCompleteEntry(entry: ReadRecord['entry'], upstreamStatus: number): void {
  assert.equal(entry.status, 'complete', 'the outcome is committed before the client has its last byte');
  assert.equal(entry.source, 'proxy');
  assert.equal(entry.upstreamStatus, upstreamStatus);
  assert.equal(typeof entry.firstByteMs, 'number');
  assert.equal(typeof entry.durationMs, 'number');
  assert.ok(
    entry.firstByteMs >= 0 && entry.durationMs >= entry.firstByteMs,
    `firstByteMs ${entry.firstByteMs} ≤ durationMs ${entry.durationMs}`,
  );
  assert.match(String(entry.payloadHash), /^[0-9a-f]{64}$/);
}

/** Checks the sealed request and response halves against the bytes both ends saw. */
export function assertRecordedBytes(payload: ReadRecord['payload'], sent: Buffer, answered: Buffer, status: number): void {
  assert.equal(payload.via, 'forward');
  assert.equal(payload.outcome, 'complete');
  if (sent.length > 0 || payload.request.sha256 !== undefined) {
    // A request without a body may be recorded without body members; with one, they pin it down.
    assert.equal(payload.request.sha256, sha(sent));
    assert.equal(payload.request.bytes, sent.length);
  }
  assert.equal(payload.response.status, status);
  assert.equal(payload.response.sha256, sha(answered));
  assert.equal(payload.response.bytes, answered.length);
  assert.equal(payload.response.truncated, false);
}

/** Neither an X-Service-* / X-Agent-* header nor any key of ours reached the provider. */
export function assertNothingOfOurs(h: ForwardHarness, ex: FakeExchange): void {
  for (const name of ex.request.rawHeaderNames) assert.ok(!/^x-(service|agent)-/i.test(name), `${name} reached the provider`);
  const seen = JSON.stringify(ex.request.headers) + ex.request.body.toString('latin1');
  for (const s of h.secrets()) assert.ok(!seen.includes(s), 'a key of ours reached the provider');
}

/** The record keeps no provider key and no key of ours in the clear inside the payload either. */
export function assertNoKeysInRecord(h: ForwardHarness, payload: ReadRecord['payload'], providerKey: string): void {
  const text = JSON.stringify(payload);
  for (const s of [...h.secrets(), providerKey]) assert.ok(!text.includes(s), 'a key is kept in the record');
}

const HOP = new Set([
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-connection',
  'host',
]);

/** Every header the client set, other than ours and hop-by-hop ones, reached the provider with its value. */
export function assertHeadersThrough(sent: Headers, received: IncomingHttpHeaders): void {
  sent.forEach((value, name) => {
    if (/^x-(service|agent)-/.test(name) || HOP.has(name)) return;
    assert.equal(received[name], value, `header ${name} reached the provider unchanged`);
  });
}

/**
 * SSE arrived as it was sent, not gathered at the end: most events reached the client before the
 * fake wrote its last one, and the arrivals spread over a good part of the sending time. Loose on
 * purpose (relative, never absolute times).
 */
export function assertStreamedAsSent(clientTimes: number[], ex: FakeExchange): void {
  const sent = ex.chunks.map((c) => c.at);
  assert.ok(clientTimes.length >= 3 && sent.length >= 3, 'several events on both sides');
  const lastWrite = sent.at(-1)!;
  const early = clientTimes.filter((t) => t < lastWrite).length;
  assert.ok(
    early >= clientTimes.length / 2,
    `only ${early} of ${clientTimes.length} events reached the client before the provider wrote its last`,
  );
  const clientSpan = clientTimes.at(-1)! - clientTimes[0]!;
  const sentSpan = lastWrite - sent[0]!;
  assert.ok(clientSpan >= sentSpan / 3, `events arrived within ${clientSpan.toFixed(0)} ms though sent over ${sentSpan.toFixed(0)} ms`);
}

/** `performance.now()`, for arrival times comparable with the fakes' write times. */
export const now = (): number => performance.now();
