/**
 * `countersign verify --payload FILE --receipt FILE [--tsa-roots PEM] [--ledger-url URL]
 * [--ledger-key PEM] [--trust-url URL] [--offline] [--json]`: checks a proof receipt against a
 * decrypted payload with core's one verifier (`verifyReceipt`, spec 4.5), prints the step
 * report, and exits 0 only when every step passes, 1 when one fails, 2 on a usage error.
 *
 * A thin wrapper: the checks are core's; this reads files and makes the one network call the
 * procedure needs, `GET {ledgerUrl}/api/v1/log/entries?logIndex=N`. Trust is the operator's to
 * give (`--tsa-roots`, `--ledger-key`); `--trust-url` fetches a server's published
 * `/v1/proofs/trust` instead, and without `--ledger-key` the key is read from the ledger itself
 * (`/api/v1/log/publicKey`), which the report then says, since that is weaker than pinning it.
 */
import fs from 'node:fs';
import type { Command } from 'commander';
import { verifyReceipt, type ProofReceipt, type ReceiptVerificationReport } from '@countersign/core';

/** Flags of `countersign verify`. */
export interface VerifyFlags {
  payload: string;
  receipt: string;
  tsaRoots?: string;
  ledgerUrl?: string;
  ledgerKey?: string;
  trustUrl?: string;
  offline?: boolean;
  json?: boolean;
}

/** A usage problem: bad flags or unreadable input files (exit 2). */
export class UsageError extends Error {}

/** The outcome of {@link verifyFiles}: the report plus notes about where trust came from. */
export interface VerifyOutcome {
  report: ReceiptVerificationReport;
  notes: string[];
}

const FETCH_TIMEOUT_MS = 15_000;

function readText(flag: string, file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`${flag}: cannot read ${file}: ${(e as Error).message}`);
  }
}

/**
 * The receipt from a file: either the raw receipt or the proof endpoint's answer
 * (`{success, status: "sealed", receipt}`).
 */
export function receiptFromJson(text: string): ProofReceipt {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new UsageError('--receipt: the file is not JSON');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new UsageError('--receipt: the file is not a JSON object');
  const o = doc as Record<string, unknown>;
  if ('status' in o && !('merkleRoot' in o)) {
    if (o.status === 'sealed' && typeof o.receipt === 'object' && o.receipt !== null) return o.receipt as ProofReceipt;
    throw new UsageError(
      `--receipt: the file is a proof answer with status "${String(o.status)}", not a sealed receipt; fetch it again once sealed`,
    );
  }
  return o as unknown as ProofReceipt;
}

async function getJson(url: string): Promise<unknown> {
  const res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' } });
  if (!res.ok) throw new Error(`GET ${url} answered HTTP ${res.status}`);
  return res.json();
}

async function getText(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  if (!res.ok) throw new Error(`GET ${url} answered HTTP ${res.status}`);
  return res.text();
}

/** Reads the files, gathers trust material, fetches the ledger entry and runs core's verifier. */
export async function verifyFiles(flags: VerifyFlags): Promise<VerifyOutcome> {
  const notes: string[] = [];
  const payload = readText('--payload', flags.payload);
  const receipt = receiptFromJson(readText('--receipt', flags.receipt));
  const offline = flags.offline === true;

  let tsaRoots = flags.tsaRoots !== undefined ? readText('--tsa-roots', flags.tsaRoots) : undefined;
  let ledgerKey = flags.ledgerKey !== undefined ? readText('--ledger-key', flags.ledgerKey) : undefined;
  let ledgerUrl = flags.ledgerUrl ?? (typeof receipt.ledgerUrl === 'string' ? receipt.ledgerUrl : undefined);
  if (flags.trustUrl !== undefined) {
    const base = flags.trustUrl.replace(/\/+$/, '');
    let trust: { tsaRootsPem?: unknown; ledgerPublicKeyPem?: unknown; ledgerUrl?: unknown };
    try {
      trust = (await getJson(`${base}/v1/proofs/trust`)) as typeof trust;
    } catch (e) {
      throw new UsageError(`--trust-url: ${(e as Error).message}`);
    }
    if (tsaRoots === undefined && typeof trust.tsaRootsPem === 'string') tsaRoots = trust.tsaRootsPem;
    if (ledgerKey === undefined && typeof trust.ledgerPublicKeyPem === 'string') ledgerKey = trust.ledgerPublicKeyPem;
    if (flags.ledgerUrl === undefined && typeof trust.ledgerUrl === 'string' && !ledgerUrl) ledgerUrl = trust.ledgerUrl;
    notes.push(`trust material taken from ${base}/v1/proofs/trust (pin it with --tsa-roots and --ledger-key for an independent check)`);
  }
  if (tsaRoots === undefined || tsaRoots.trim() === '') {
    throw new UsageError('--tsa-roots PEM (or --trust-url URL) is required: TSA trust roots never come from the token itself');
  }

  let ledgerEntry: unknown;
  if (!offline) {
    if (!ledgerUrl) throw new UsageError('the receipt names no ledgerUrl; pass --ledger-url URL or --offline');
    const base = ledgerUrl.replace(/\/+$/, '');
    if (ledgerKey === undefined) {
      try {
        ledgerKey = await getText(`${base}/api/v1/log/publicKey`);
        notes.push(`ledger public key read from ${base}/api/v1/log/publicKey (pin it with --ledger-key)`);
      } catch (e) {
        notes.push(`could not read the ledger public key: ${(e as Error).message}`);
      }
    }
    try {
      ledgerEntry = await getJson(`${base}/api/v1/log/entries?logIndex=${encodeURIComponent(String(receipt.rekorLogIndex))}`);
    } catch (e) {
      notes.push(`could not fetch the ledger entry: ${(e as Error).message}`);
    }
  }

  const report = await verifyReceipt({
    payload,
    receipt,
    trust: { tsaRoots, ...(ledgerKey !== undefined ? { ledgerPublicKey: ledgerKey } : {}) },
    ...(ledgerEntry !== undefined ? { ledgerEntry } : {}),
    now: new Date(),
    offline,
  });
  return { report, notes };
}

/** The report as lines for a terminal. */
export function formatReport(outcome: VerifyOutcome): string {
  const { report, notes } = outcome;
  const width = Math.max(...report.steps.map((s) => s.id.length));
  const lines = report.steps.map((s) => `${s.status.toUpperCase().padEnd(4)}  ${s.id.padEnd(width)}  ${s.detail}`);
  for (const n of notes) lines.push(`note: ${n}`);
  const failed = report.steps.filter((s) => s.status === 'fail').length;
  lines.push(report.ok ? 'VERIFIED: every step passed' : `NOT VERIFIED: ${failed} step${failed === 1 ? '' : 's'} failed`);
  return lines.join('\n') + '\n';
}

/** Registers the `verify` command. */
export function registerVerify(program: Command): void {
  program
    .command('verify')
    .description('verify a proof receipt against a decrypted payload (exit 0 verified, 1 a step failed, 2 usage error)')
    .requiredOption('--payload <file>', 'the decrypted log payload (JSON)')
    .requiredOption('--receipt <file>', 'the receipt, or the proof endpoint answer that holds it (JSON)')
    .option('--tsa-roots <pem>', 'PEM file of trusted TSA root certificates')
    .option('--ledger-url <url>', "ledger base URL (default: the receipt's ledgerUrl)")
    .option('--ledger-key <pem>', "PEM file of the ledger's public key (default: read from the ledger)")
    .option('--trust-url <url>', "take missing trust material from a server's GET /v1/proofs/trust")
    .option('--offline', 'do not consult the ledger (ledger steps are skipped)')
    .option('--json', 'print the report as JSON')
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2))
    .action(async (flags: VerifyFlags) => {
      let outcome: VerifyOutcome;
      try {
        outcome = await verifyFiles(flags);
      } catch (e) {
        if (e instanceof UsageError) {
          process.stderr.write(`countersign verify: ${e.message}\n`);
          process.exit(2);
        }
        throw e;
      }
      process.stdout.write(
        flags.json
          ? JSON.stringify({ ok: outcome.report.ok, steps: outcome.report.steps, notes: outcome.notes }, null, 2) + '\n'
          : formatReport(outcome),
      );
      process.exitCode = outcome.report.ok ? 0 : 1;
    });
}
