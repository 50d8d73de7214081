/**
 * Verification in the browser: gathers what core's `verifyReceipt` needs (trust material and
 * the ledger entry) and runs it. The checks are core's, the same function the CLI and the
 * client library call; this file only fetches inputs and says where they came from.
 */
import { verifyReceipt, type ProofReceipt, type ReceiptVerificationReport } from '@countersign/core';

/** Trust material for a verification. */
export interface TrustInput {
  tsaRootsPem: string;
  ledgerPublicKeyPem?: string;
  /** Where it came from, for the log (e.g. "pinned in this page" or the trust URL). */
  origin: string;
}

/** The fetched ledger entry and where it was read. */
export interface LedgerFetch {
  entry?: unknown;
  notes: string[];
}

/** Minimal fetch, injectable for tests. */
export type FetchLike = (url: string, init?: RequestInit) => Promise<Pick<Response, 'ok' | 'status' | 'json'>>;

const trim = (url: string) => url.replace(/\/+$/, '');

/**
 * Fetches `GET {ledgerUrl}/api/v1/log/entries?logIndex=N`. When the receipt's ledger URL cannot
 * be read from this page (another origin without CORS, or a listen address such as
 * `http://0.0.0.0:8080` that means nothing to a browser), the same path on the page's own origin
 * is tried, since the embedded ledger is served there. Where the entry came from does not change
 * what it proves: the ledger steps check its signatures against the ledger key, not its address.
 */
export async function fetchLedgerEntry(
  ledgerUrl: string,
  logIndex: number,
  pageOrigin: string,
  fetchImpl: FetchLike = (u, i) => fetch(u, i),
): Promise<LedgerFetch> {
  const notes: string[] = [];
  const path = `/api/v1/log/entries?logIndex=${encodeURIComponent(String(logIndex))}`;
  const candidates = [trim(ledgerUrl)];
  if (trim(ledgerUrl) !== trim(pageOrigin)) candidates.push(trim(pageOrigin));
  for (const base of candidates) {
    const url = base + path;
    try {
      const res = await fetchImpl(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
      if (!res.ok) {
        notes.push(`GET ${url} answered HTTP ${res.status}`);
        continue;
      }
      const entry: unknown = await res.json();
      if (base !== candidates[0])
        notes.push(`ledger entry read from this server's ledger path (${url}) instead of the receipt's ${ledgerUrl}`);
      else notes.push(`ledger entry read from ${url}`);
      return { entry, notes };
    } catch (err) {
      notes.push(`could not read ${url} from this page: ${(err as Error).message}`);
    }
  }
  return { notes };
}

/** The outcome shown as the verification log. */
export interface BrowserVerification {
  report: ReceiptVerificationReport;
  notes: string[];
}

/** Runs core's verifier with the fetched inputs. */
export async function verifyInBrowser(
  payload: Record<string, unknown>,
  receipt: ProofReceipt,
  trust: TrustInput,
  pageOrigin: string,
  fetchImpl?: FetchLike,
): Promise<BrowserVerification> {
  const ledger = await fetchLedgerEntry(receipt.ledgerUrl, receipt.rekorLogIndex, pageOrigin, fetchImpl);
  const notes = [`trust material: ${trust.origin}`, ...ledger.notes];
  const report = await verifyReceipt({
    payload,
    receipt,
    trust: { tsaRoots: trust.tsaRootsPem, ...(trust.ledgerPublicKeyPem ? { ledgerPublicKey: trust.ledgerPublicKeyPem } : {}) },
    ...(ledger.entry !== undefined ? { ledgerEntry: ledger.entry } : {}),
    now: new Date(),
  });
  return { report, notes };
}
