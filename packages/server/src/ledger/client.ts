/**
 * Rekor v1 HTTP client (`--ledger-url`): works against any Rekor v1 server, the public one
 * (https://rekor.sigstore.dev) and our own embedded ledger included. What a server answers is
 * checked before it is used: the entry's data hash must be ours and its signed entry timestamp
 * must verify with the log's public key.
 */
import { request } from 'undici';
import { verifyLedgerEntry } from '@countersign/core';
import { ApiError } from '../errors.js';
import type { HashedRekord } from './entries.js';

/** A Rekor v1 server at a base URL (without `/api/v1/...`). */
export class RekorClient {
  private publicKey: Promise<string> | undefined;

  constructor(
    /** Base URL, e.g. `https://rekor.sigstore.dev`. */
    readonly baseUrl: string,
    private readonly timeoutMs = 15_000,
  ) {}

  private async call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; text: string; location?: string }> {
    const url = this.baseUrl + path;
    try {
      const res = await request(url, {
        method,
        headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      const text = await res.body.text();
      const location = res.headers.location;
      return { status: res.statusCode, text, ...(typeof location === 'string' ? { location } : {}) };
    } catch (cause) {
      throw new ApiError(
        'ledger_unavailable',
        `the ledger at ${this.baseUrl} did not answer ${method} ${path}: ${(cause as Error).message}`,
        {
          cause,
        },
      );
    }
  }

  private parseEntry(text: string, what: string): Record<string, unknown> {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ApiError('ledger_response_invalid', `the ledger at ${this.baseUrl} answered ${what} with something that is not JSON`);
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json) || Object.keys(json).length !== 1) {
      throw new ApiError(
        'ledger_response_invalid',
        `the ledger at ${this.baseUrl} answered ${what} with something other than one { "<uuid>": entry }`,
      );
    }
    return json as Record<string, unknown>;
  }

  private failure(status: number, text: string, what: string): ApiError {
    if (status === 404) return new ApiError('not_found', `the ledger at ${this.baseUrl} has no ${what}`);
    return new ApiError('ledger_unavailable', `the ledger at ${this.baseUrl} answered ${what} with HTTP ${status}: ${text.slice(0, 200)}`);
  }

  /** PEM of the log's public key (`GET /api/v1/log/publicKey`), fetched once. */
  async publicKeyPem(): Promise<string> {
    if (!this.publicKey) {
      this.publicKey = (async () => {
        const r = await this.call('GET', '/api/v1/log/publicKey');
        if (r.status !== 200) throw this.failure(r.status, r.text, 'public key');
        if (!r.text.includes('-----BEGIN PUBLIC KEY-----'))
          throw new ApiError('ledger_response_invalid', `the ledger at ${this.baseUrl} served no PEM public key`);
        return r.text;
      })();
      this.publicKey.catch(() => (this.publicKey = undefined));
    }
    return this.publicKey;
  }

  /** The entry at `logIndex` as the server returns it (`{ "<uuid>": entry }`). */
  async entryByIndex(logIndex: number): Promise<Record<string, unknown>> {
    const r = await this.call('GET', `/api/v1/log/entries?logIndex=${logIndex}`);
    if (r.status !== 200) throw this.failure(r.status, r.text, `entry at index ${logIndex}`);
    return this.parseEntry(r.text, `entry ${logIndex}`);
  }

  /** The entry with `uuid`. */
  async entryByUuid(uuid: string): Promise<Record<string, unknown>> {
    const r = await this.call('GET', `/api/v1/log/entries/${encodeURIComponent(uuid)}`);
    if (r.status !== 200) throw this.failure(r.status, r.text, `entry ${uuid}`);
    return this.parseEntry(r.text, `entry ${uuid}`);
  }

  /**
   * Submits a hashedrekord and returns the created entry, after checking that it records our
   * digest and that its signed entry timestamp verifies with the log key.
   * @throws ApiError `ledger_unavailable` / `ledger_response_invalid` / `invalid_ledger_entry`.
   */
  async submit(entry: HashedRekord): Promise<{ uuid: string; logIndex: number; integratedTime: number; entry: Record<string, unknown> }> {
    const r = await this.call('POST', '/api/v1/log/entries', entry);
    let json: Record<string, unknown>;
    if (r.status === 201) json = this.parseEntry(r.text, 'the submission');
    else if (r.status === 409 && r.location) json = await this.entryByUuid(r.location.split('/').pop()!);
    else if (r.status === 400)
      throw new ApiError('invalid_ledger_entry', `the ledger at ${this.baseUrl} refused the entry: ${r.text.slice(0, 300)}`);
    else throw this.failure(r.status, r.text, 'the submission');
    const report = await verifyLedgerEntry(json, {
      publicKey: await this.publicKeyPem(),
      expectedDataHash: entry.spec.data.hash.value,
      requireInclusionProof: false,
      requireCheckpoint: false,
    });
    if (!report.ok || !report.entry) {
      const failed = report.steps.filter((s) => s.status === 'fail').map((s) => `${s.id}: ${s.detail}`);
      throw new ApiError('ledger_response_invalid', `the entry returned by ${this.baseUrl} does not check out (${failed.join('; ')})`);
    }
    const uuid = Object.keys(json)[0]!;
    return { uuid, logIndex: report.entry.logIndex, integratedTime: report.entry.integratedTime, entry: json };
  }
}
