/**
 * `ServiceClient` (spec 2.5): direct logging with client-side encryption, redaction and
 * references, background delivery with a failure path, decryption with a keyring, embed
 * tokens, proof verification, agent context and a proxy helper. One instance per process.
 */
import {
  CoreError,
  HEADERS,
  canonicalize,
  fromBase64,
  fromUtf8,
  isCoreError,
  openPayload,
  newSpanId,
  sealPayloadWithHash,
  sealPayload,
  toBase64Url,
  utf8,
  type Envelope,
  type LogEntry,
  type ReceiptVerificationReport,
} from '@countersign/core';
import {
  makeAgentContext,
  runInAgentContext,
  currentAgentContext,
  traceparentFor,
  runAndThen,
  type AgentContext,
  type AgentRunOptions,
} from './agent-context.js';
import { newLogId, resolveConfig, type ResolvedConfig, type ServiceClientConfig } from './config.js';
import { DeliveryQueue, type FailedLog } from './delivery.js';
import { signEmbedToken, type EmbedTokenClaims } from './embed.js';
import { assertMetadataSize, buildPayload, checkEntry, type ClientLogPayload, type LogEntryInput } from './entry.js';
import { ClientError } from './errors.js';
import { applyFieldPolicies } from './references.js';
import { LogReader, type LogReaderOptions } from './reader.js';
import { collectTelemetry } from './telemetry.js';
import { configureTrust, verifyProofReport, type ProofTrustConfig, type VerifyProofOptions } from './verify.js';
import { callProxy, type ProxyRequest, type ProxyResult } from './proxy.js';

/** Options of {@link ServiceClient.shutdown}. */
export interface ShutdownOptions {
  /** After this many ms, logs still queued or retrying go to the failure path with reason `shutdown` (default 30 000). */
  timeoutMs?: number;
}

/** A log entry read back with its payload opened. */
export type DecryptedLog = LogEntry & { decryptedPayload: Record<string, unknown> };

/** The AAD of an `X-Agent-Rationale` envelope: bound to its run, so it cannot be replayed into another. */
function rationaleAad(runId: string): string {
  return 'x-agent-rationale:' + runId;
}

/** The Countersign client. Create one per process and reuse it. */
export class ServiceClient {
  readonly #config: ResolvedConfig;
  readonly #delivery: DeliveryQueue;
  readonly #rationaleHeaders = new WeakMap<AgentContext, Promise<string>>();
  #closed = false;
  readonly #onBeforeExit = (): void => {
    if (this.#delivery.pending > 0) void this.flush();
  };

  /**
   * Validates `config` and starts the client.
   * @throws ClientError `invalid_config` naming the first problem (missing key, keyring over 5
   * keys, active id not in the keyring, bad endpoint URL, unknown redact/reference key, …).
   */
  constructor(config: ServiceClientConfig) {
    this.#config = resolveConfig(config);
    const c = this.#config;
    this.#delivery = new DeliveryQueue({ ...c.delivery, endpoint: c.endpoint, apiKey: c.apiKey, onDeliveryFailure: c.onDeliveryFailure });
    if (c.flushOnExit) process.on('beforeExit', this.#onBeforeExit);
  }

  /** The ingestion endpoint in use (no trailing slash). */
  get endpoint(): string {
    return this.#config.endpoint;
  }

  /** The keyring id that seals new logs. */
  get activeEncryptionKeyId(): string {
    return this.#config.activeKeyId;
  }

  /** Logs queued or in flight right now. */
  get pendingLogs(): number {
    return this.#delivery.pending;
  }

  /** Counters since start: delivered, duplicates (retries the server already had), failed, requests. */
  get stats(): Readonly<{ delivered: number; duplicates: number; failed: number; requests: number }> {
    return { ...this.#delivery.stats };
  }

  /**
   * Records a log: applies redaction and references, collects telemetry, encrypts the payload
   * on this machine (envelope `kid` = the active keyring id, AAD = the log id), computes
   * `payloadHash`, and queues it for background delivery. Resolves with the log id once the
   * log is sealed and queued (not yet delivered: see {@link ServiceClient.flush}).
   * @throws ClientError `invalid_entry` (bad field), `client_closed` (after shutdown),
   * `reference_store_failed` (the reference store refused a value; nothing was queued).
   */
  async log(entry: LogEntryInput): Promise<string> {
    if (this.#closed)
      throw new ClientError('client_closed', 'log() after shutdown(); create the client once per process and shut it down last');
    const c = this.#config;
    const checked = checkEntry(entry);
    const id = checked.id ?? newLogId();
    const agent = currentAgentContext();
    // The place in the queue is taken now, so logs are sent in the order log() was called.
    const slot = this.#delivery.reserve(agent ? `${agent.runId}\u0000${agent.agentId}\u0000${agent.spanIdHex}` : '');
    try {
      const policy = applyFieldPolicies(
        { actor: checked.actor ?? agent?.agentId, target: checked.target, metadata: checked.metadata },
        { redactKeys: c.redactKeys, referenceKeys: c.referenceKeys, referenceSecret: c.referenceSecret },
        id,
      );
      const { actor, target, metadata } = policy.fields;
      assertMetadataSize(metadata);
      if (c.referenceStore) {
        for (const ref of policy.references) {
          try {
            await c.referenceStore.put(ref);
          } catch (cause) {
            throw new ClientError('reference_store_failed', `the reference store refused ${ref.key}; the log was not queued`, { cause });
          }
        }
      }
      const traceId = checked.traceId ?? agent?.runId;
      const parentSpanId = checked.parentSpanId ?? agent?.spanIdHex;
      const headers = agent ? await this.#agentHeaders(agent) : {};
      const payload = buildPayload({
        action: checked.action,
        actor,
        target,
        traceId,
        metadata,
        payload: checked.payload,
        occurredAt: checked.occurredAt,
        telemetry: await collectTelemetry(c.telemetry, entry.request),
        agent: agent && {
          runId: agent.runId,
          agentId: agent.agentId,
          ...(agent.rationale !== undefined ? { rationale: agent.rationale } : {}),
          traceparent: headers.traceparent!,
        },
      });
      let sealed: { envelope: Envelope; payloadHash: string };
      try {
        sealed = await sealPayloadWithHash(payload, await c.keyring.activeKey(), id);
      } catch (err) {
        if (isCoreError(err) && err.code === 'invalid_json')
          throw new ClientError('invalid_entry', `log(): payload must be JSON-serializable (${err.message})`);
        throw err;
      }
      const log: FailedLog = {
        entry: {
          id,
          action: checked.action,
          ...(actor !== undefined ? { actor } : {}),
          ...(traceId !== undefined ? { traceId } : {}),
          ...(checked.requestProof !== undefined ? { requestProof: checked.requestProof } : {}),
          occurredAt: checked.occurredAt,
          ...(metadata !== undefined ? { metadata } : {}),
          // Spans in the clear (DESIGN §4): every entry its own span, under its run's.
          spanId: checked.spanId ?? newSpanId(),
          ...(parentSpanId !== undefined ? { parentSpanId } : {}),
          ...(checked.startedAt !== undefined ? { startedAt: checked.startedAt } : {}),
          ...(checked.endedAt !== undefined ? { endedAt: checked.endedAt } : {}),
          payload: sealed.envelope,
          payloadHash: sealed.payloadHash,
        },
        headers,
      };
      if (slot) slot.fill(log);
      else
        this.#delivery.reject(
          [log],
          'queue_full',
          new ClientError('request_failed', `more than ${c.delivery.maxQueueSize} logs are waiting`),
        );
      return id;
    } catch (err) {
      slot?.cancel();
      throw err;
    }
  }

  /** Context headers of logs made inside a run: one set per run context, so its logs batch together. */
  async #agentHeaders(agent: AgentContext): Promise<Record<string, string>> {
    const headers: Record<string, string> = {
      [HEADERS.runId]: agent.runId,
      [HEADERS.agentId]: agent.agentId,
      traceparent: `00-${agent.traceIdHex}-${agent.spanIdHex}-01`,
    };
    if (agent.rationale !== undefined) headers[HEADERS.agentRationale] = await this.#rationaleHeader(agent);
    return headers;
  }

  #rationaleHeader(agent: AgentContext): Promise<string> {
    let made = this.#rationaleHeaders.get(agent);
    if (!made) {
      made = this.sealAgentRationale(agent.rationale ?? '', agent.runId);
      this.#rationaleHeaders.set(agent, made);
    }
    return made;
  }

  /**
   * Encrypts a rationale for the `X-Agent-Rationale` header: a base64url envelope sealed with
   * the active key, bound to `runId`. Open it with {@link ServiceClient.openAgentRationale}.
   */
  async sealAgentRationale(rationale: string, runId: string): Promise<string> {
    const envelope = await sealPayload({ rationale }, await this.#config.keyring.activeKey(), rationaleAad(runId));
    return toBase64Url(utf8(canonicalize(envelope)));
  }

  /**
   * Opens an `X-Agent-Rationale` header value with any key of the keyring.
   * @throws ClientError `decryption_failed`.
   */
  async openAgentRationale(headerValue: string, runId: string): Promise<string> {
    let envelope: Envelope;
    try {
      envelope = JSON.parse(fromUtf8(fromBase64(headerValue))) as Envelope;
    } catch (cause) {
      throw new ClientError('decryption_failed', 'X-Agent-Rationale is not a base64url envelope', { cause });
    }
    const opened = await this.decrypt(envelope, rationaleAad(runId));
    return String(opened.rationale);
  }

  /**
   * Opens an envelope with whichever keyring key sealed it: by keyring id, or by fingerprint id
   * for envelopes sealed with a bare key string (the proxy's `X-Service-Encryption-Key`). Old
   * logs stay readable after rotation as long as their key stays in the keyring.
   * @param logId the log id (the envelope's AAD).
   * @throws ClientError `decryption_failed` (no such key, wrong log id, altered data).
   */
  async decrypt(envelope: Envelope, logId: string): Promise<Record<string, unknown>> {
    try {
      return await openPayload(envelope, await this.#config.keyring.keyFor(envelope), logId);
    } catch (err) {
      if (isCoreError(err)) throw new ClientError('decryption_failed', (err as CoreError).message, { cause: err });
      throw err;
    }
  }

  /** Opens a log entry as read back (`GET …/logs/{logId}`): the entry plus `decryptedPayload`. */
  async decryptLog(entry: LogEntry): Promise<DecryptedLog> {
    return { ...entry, decryptedPayload: await this.decrypt(entry.payload, entry.id) };
  }

  /**
   * A reader for the read API (`GET /v1/projects/{projectId}/logs`, traces, events, proofs) with a
   * `key_live_` key or an embed token, that decrypts with this client's keyring.
   */
  reader(options: Omit<LogReaderOptions, 'decrypt' | 'endpoint'> & { endpoint?: string }): LogReader {
    return new LogReader({ endpoint: this.#config.endpoint, ...options, decrypt: (e, id) => this.decrypt(e, id) });
  }

  /**
   * Runs `fn` inside an agent run: logs and `proxy()` calls made below it (across awaits) carry
   * the run id, agent id, W3C `traceparent` and encrypted `X-Agent-Rationale`. Runs nest; an
   * inner run inherits what it does not set. Returns what `fn` returns.
   */
  runAsAgent<T>(options: AgentRunOptions, fn: () => T): T {
    const context = makeAgentContext(options);
    if (options.recordRun === false) return runInAgentContext(context, fn);
    return runAndThen(context, fn, (error) => this.#recordRun(context, error));
  }

  /**
   * Logs the run that just ended as an entry of its own (action `agent.run`): its span, the
   * enclosing run's as parent, start and end, in the clear; the outcome sealed. It is the node
   * that nested runs and calls link to in a trace. Best effort: a run's result never waits on
   * or fails with it (a log that cannot be delivered takes the usual failure path).
   */
  #recordRun(context: AgentContext, error: unknown): void {
    if (this.#closed) return;
    void this.log({
      action: 'agent.run',
      actor: context.agentId,
      traceId: context.runId,
      spanId: context.spanIdHex,
      ...(context.parentSpanIdHex !== undefined ? { parentSpanId: context.parentSpanIdHex } : {}),
      startedAt: new Date(context.startedAt),
      endedAt: new Date(),
      payload: {
        runId: context.runId,
        agentId: context.agentId,
        outcome: error === undefined ? 'ok' : 'error',
        ...(error !== undefined ? { error: error instanceof Error ? error.message : String(error) } : {}),
      },
    }).catch(() => undefined);
  }

  /**
   * Calls `POST /v1/proxy`: the proxy forwards `payload` to `target` and records the call,
   * encrypted with this client's active key (sent as `X-Service-Encryption-Key`). Inside an
   * agent run the agent context headers go with it.
   */
  async proxy(request: ProxyRequest): Promise<ProxyResult> {
    const c = this.#config;
    const agent = currentAgentContext();
    const headers: Record<string, string> = {};
    if (agent) {
      headers[HEADERS.runId] = agent.runId;
      headers[HEADERS.agentId] = agent.agentId;
      headers.traceparent = traceparentFor(agent);
      if (agent.rationale !== undefined) headers[HEADERS.agentRationale] = await this.#rationaleHeader(agent);
    }
    return callProxy(c.endpoint, c.apiKey, c.keys[c.activeKeyId]!, headers, request);
  }

  /**
   * Signs an embed token (HS256, with `clientSecret`): read-only, expiring (default 15 minutes)
   * access to this project's logs, traces and proofs, optionally scoped to one trace or actor.
   * @throws ClientError `embed_token_unavailable` without `projectId` and `clientSecret`.
   */
  generateEmbedToken(claims?: EmbedTokenClaims): Promise<string> {
    return signEmbedToken(this.#config.projectId, this.#config.clientSecret, claims);
  }

  /**
   * Resolves when every log queued so far is delivered or handed to `onDeliveryFailure` (and
   * the handler has finished).
   */
  async flush(): Promise<void> {
    await this.#delivery.flush();
  }

  /**
   * Stops taking logs, delivers what is queued (or hands it to the failure path), and detaches
   * from the process. After `timeoutMs` the rest goes to the failure path with reason `shutdown`.
   */
  async shutdown(options: ShutdownOptions = {}): Promise<void> {
    this.#closed = true;
    process.off('beforeExit', this.#onBeforeExit);
    const timer = setTimeout(() => this.#delivery.abandon(), options.timeoutMs ?? 30_000);
    timer.unref();
    try {
      await this.#delivery.flush();
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Sets the process-wide trust of {@link ServiceClient.verifyProof}: the TSA roots and ledger
   * key you pinned (and optionally a ledger URL to ask). `null` clears it. Without it (and
   * without `COUNTERSIGN_TSA_ROOTS` / `COUNTERSIGN_LEDGER_KEY`), verification needs trust in
   * each call's options.
   * @throws ClientError `invalid_config` when `tsaRoots` is missing.
   */
  static configureTrust(trust: ProofTrustConfig | null): void {
    configureTrust(trust);
  }

  /**
   * Verifies a proof receipt (spec 4.5) against a decrypted log payload through core's verifier:
   * payload hash, Merkle path, RFC 3161 timestamp against your trust roots, and the ledger entry
   * (fetched from the receipt's ledger URL unless `offline`). True when the log is unaltered,
   * false when any step fails. Trust comes from `options`, else {@link ServiceClient.configureTrust},
   * else `COUNTERSIGN_TSA_ROOTS` / `COUNTERSIGN_LEDGER_KEY` / `COUNTERSIGN_LEDGER_URL`.
   * @throws ClientError `trust_not_configured` when none of them gives the TSA roots (and, unless
   * `offline`, the ledger key): an unchecked receipt is not an altered one.
   */
  static async verifyProof(decryptedLogPayload: unknown, proofReceipt: unknown, options?: VerifyProofOptions): Promise<boolean> {
    return (await verifyProofReport(decryptedLogPayload, proofReceipt, options)).ok;
  }

  /** Like {@link ServiceClient.verifyProof}, returning core's step-by-step report (and throwing the same way). */
  static verifyProofReport(
    decryptedLogPayload: unknown,
    proofReceipt: unknown,
    options?: VerifyProofOptions,
  ): Promise<ReceiptVerificationReport> {
    return verifyProofReport(decryptedLogPayload, proofReceipt, options);
  }
}

export type { ClientLogPayload };
