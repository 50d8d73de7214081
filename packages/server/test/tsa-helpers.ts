/**
 * Helpers of the TSA and ledger suites: a real app with an injectable clock (the shared
 * `startApp` has none), openssl/curl runners, and PEM/DER shorthands.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import * as pkijs from 'pkijs';
import { buildApp } from '../src/app.js';
import { loadConfig, type ServerConfig } from '../src/config.js';
import { freshPostgresDatabase, tempDir, type StoreKind } from './helpers/server.js';
import { ApiError } from '../src/errors.js';

const run = promisify(execFile);

/** A running app for these suites. */
export interface WitnessApp {
  app: FastifyInstance;
  url: string;
  dataDir: string;
  databaseUrl: string | undefined;
  close: () => Promise<void>;
}

/** Options of {@link startWitnessApp}. */
export interface WitnessAppOptions {
  store: StoreKind;
  dataDir?: string;
  databaseUrl?: string;
  now?: () => number;
  config?: Partial<ServerConfig>;
  listen?: boolean;
}

/** Builds (and by default listens) a real app on loopback. */
export async function startWitnessApp(o: WitnessAppOptions): Promise<WitnessApp> {
  const dataDir = o.dataDir ?? tempDir();
  const databaseUrl = o.databaseUrl ?? (o.store === 'postgres' ? await freshPostgresDatabase() : undefined);
  const config: ServerConfig = { ...loadConfig({ dataDir, port: '0', logLevel: 'silent' }, {}), databaseUrl, ...o.config };
  const app = await buildApp(config, o.now ? { now: o.now } : {});
  const url = o.listen === false ? '' : await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url, dataDir, databaseUrl, close: () => app.close() };
}

/** Runs openssl; resolves with stdout+stderr, rejects (with both in the message) on a non-zero exit. */
export async function openssl(args: string[], cwd?: string): Promise<string> {
  try {
    const r = await run('/usr/bin/openssl', args, { cwd, encoding: 'utf8' });
    return r.stdout + r.stderr;
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`openssl ${args.join(' ')} failed: ${err.stdout ?? ''}${err.stderr ?? ''}`);
  }
}

/** Runs a shell pipeline (for `openssl … | curl …`). */
export async function shell(command: string, cwd: string): Promise<string> {
  const r = await run('/bin/sh', ['-c', command], { cwd, encoding: 'utf8' });
  return r.stdout + r.stderr;
}

/** Writes `text` to `dir/name` and returns the path. */
export function writeFile(dir: string, name: string, data: string | Uint8Array): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, data);
  return p;
}

/** The certificates of a PEM text, as pkijs objects. */
export function pemCerts(pem: string): pkijs.Certificate[] {
  return [...pem.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)].map((m) =>
    pkijs.Certificate.fromBER(new Uint8Array(Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64'))),
  );
}

/** Status, failure bits and status text of a DER TimeStampResp. */
export function replyStatus(der: Uint8Array): { status: number; failBits: number[]; text: string } {
  const resp = pkijs.TimeStampResp.fromBER(new Uint8Array(der));
  const fi = resp.status.failInfo;
  const failBits: number[] = [];
  if (fi) {
    const bytes = new Uint8Array(fi.valueBlock.valueHexView);
    bytes.forEach((b, i) => {
      for (let bit = 0; bit < 8; bit++) if (b & (0x80 >> bit)) failBits.push(i * 8 + bit);
    });
  }
  return { status: resp.status.status, failBits, text: (resp.status.statusStrings ?? []).map((s) => s.valueBlock.value).join('; ') };
}

/** Asserts that `p` rejects with an ApiError of `code` whose message matches. */
export async function rejectsWith(p: Promise<unknown>, code: string, message: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof ApiError, `expected an ApiError, got ${String(e)}`);
    assert.equal(e.code, code);
    assert.match(e.message, message);
    return true;
  });
}
