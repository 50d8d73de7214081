/**
 * Helpers of the proofs suites: ingest logs that ask for a proof (with the plain payload kept,
 * as a client would), wait for receipts through the real endpoint, fetch trust material and
 * ledger entries, and run openssl and the CLI.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { deriveEnvelopeKey, payloadHashHex, randomNonce, sealPayload, type ProofReceipt } from '@countersign/core';
import type { FastifyInstance } from 'fastify';
import type { NewLog } from '../src/store/index.js';
import { windowOf } from '../src/proofs/batch.js';
import { getWith, postLog } from './foundation-helpers.js';

const run = promisify(execFile);

/** A log as POST /v1/log would store it. */
export function proofLog(receivedAt: number, over: Partial<NewLog> = {}): NewLog {
  const id = 'log_' + randomNonce();
  return {
    id,
    projectId: over.projectId ?? 'prj_live_test',
    keyId: 'kid_test',
    receivedAt,
    occurredAt: null,
    actor: 'bot',
    action: 'test',
    traceId: null,
    actorType: 'agent',
    credentialHandoverDetected: false,
    source: 'log',
    status: 'complete',
    requestProof: true,
    payloadHash: payloadHashHex({ id, nonce: randomNonce() }),
    payload: '{}',
    metadata: null,
    ...over,
  };
}

/** The envelope key of these suites. */
export const KEY = 'proofs suite key';

/** A log made by {@link ingestProofLogs}: its id and the decrypted payload a verifier is given. */
export interface ProofLog {
  id: string;
  payload: Record<string, unknown>;
  payloadHash: string;
}

/**
 * Posts `n` logs with `requestProof: true` as client envelopes (the client computes the
 * payloadHash), in one `{logs}` batch, and returns them with their plain payloads.
 */
export async function ingestProofLogs(app: FastifyInstance, ingestKey: string, n: number, tag = 'x'): Promise<ProofLog[]> {
  const key = await deriveEnvelopeKey(KEY);
  const made: ProofLog[] = [];
  const entries = [];
  for (let i = 0; i < n; i++) {
    const id = `proof-${tag}-${i}-${randomNonce()}`;
    const payload = { request: { tag, i }, response: { ok: true }, nonce: randomNonce() };
    const payloadHash = payloadHashHex(payload);
    made.push({ id, payload, payloadHash });
    entries.push({ id, actor: 'bot', action: 'proof.test', requestProof: true, payloadHash, payload: await sealPayload(payload, key, id) });
  }
  const r = await postLog(app, ingestKey, n === 1 ? entries[0] : { logs: entries });
  assert.equal(r.statusCode, 201, r.body);
  return made;
}

/** `GET …/logs/{logId}/proof` with the live key. */
export function getProof(app: FastifyInstance, liveKey: string | undefined, projectId: string, logId: string) {
  return getWith(app, liveKey, `/v1/projects/${projectId}/logs/${logId}/proof`);
}

/** Polls the proof endpoint until the receipt is sealed (or `timeoutMs` passes). */
export async function waitForReceipt(
  app: FastifyInstance,
  liveKey: string,
  projectId: string,
  logId: string,
  timeoutMs = 30_000,
): Promise<ProofReceipt> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await getProof(app, liveKey, projectId, logId);
    if (r.statusCode === 200 && r.json().status === 'sealed') return r.json().receipt as ProofReceipt;
    assert.ok(r.statusCode === 202 && r.json().status === 'pending', `unexpected proof answer ${r.statusCode} ${r.body}`);
    if (Date.now() > deadline) throw new Error(`receipt of ${logId} not sealed within ${timeoutMs} ms: ${r.body}`);
    await sleep(100);
  }
}

/**
 * Sleeps until just after the app's next proof-window boundary (its window length, on its
 * clock), so that calls made right after land in one window (and one batch) even when the
 * machine is slow: a window is claimed as a whole once it closes, so two calls only share a
 * batch if no boundary falls between their commits.
 */
export async function atWindowStart(app: FastifyInstance): Promise<void> {
  const at = app.ctx.now();
  await sleep(windowOf(at, app.ctx.config.proofWindowMs).end - at + 20);
}

/** Waits until `check` is true (polling), failing after `timeoutMs`. */
export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Sleeps. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The server's published trust material. */
export async function fetchTrust(app: FastifyInstance): Promise<{ tsaRootsPem: string; ledgerPublicKeyPem: string; ledgerUrl: string }> {
  const r = await app.inject({ method: 'GET', url: '/v1/proofs/trust' });
  assert.equal(r.statusCode, 200, r.body);
  return r.json();
}

/** The ledger entry of `logIndex` as served by the embedded ledger (what the CLI fetches). */
export async function fetchLedgerEntry(app: FastifyInstance, logIndex: number): Promise<unknown> {
  const r = await app.inject({ method: 'GET', url: `/api/v1/log/entries?logIndex=${logIndex}` });
  assert.equal(r.statusCode, 200, r.body);
  return r.json();
}

/** Runs openssl; returns exit code and output. */
export async function openssl(args: string[]): Promise<{ code: number; out: string }> {
  try {
    const r = await run('/usr/bin/openssl', args, { encoding: 'utf8' });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof err.code === 'number' ? err.code : 1, out: `${err.stdout ?? ''}${err.stderr ?? ''}` };
  }
}

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** Runs `countersign <args>` from source, the way a user runs the CLI; resolves with exit code and output. */
export function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--conditions=development', '--import', 'tsx', 'packages/server/src/cli/index.ts', ...args], {
      cwd: repoRoot,
      env: { ...process.env, COUNTERSIGN_LOG_LEVEL: 'silent' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** Writes `files` (name → text or bytes) into `dir` and returns their paths. */
export function writeFiles<T extends Record<string, string | Uint8Array>>(dir: string, files: T): { [K in keyof T]: string } {
  const out = {} as { [K in keyof T]: string };
  for (const [name, data] of Object.entries(files)) {
    const p = path.join(dir, name);
    fs.writeFileSync(p, data);
    (out as Record<string, string>)[name] = p;
  }
  return out;
}
