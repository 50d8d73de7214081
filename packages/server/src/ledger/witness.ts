/**
 * The transparency ledger as the proof batcher sees it: one interface, two implementations.
 * Embedded (default): the in-process ledger, through the store (no HTTP). External
 * (`--ledger-url`): a Rekor v1 HTTP client, with entries signed by this service's ledger key.
 */
import type { AppContext } from '../app-context.js';
import { ApiError } from '../errors.js';
import { RekorClient } from './client.js';
import { hashedRekordBody } from './entries.js';
import { loadLedgerIdentity } from './identity.js';
import { DuplicateLedgerEntryError, getEmbeddedLedger } from './log.js';
import { countingFailures } from '../metrics/registry.js';

/** Where an entry landed. */
export interface LedgerSubmission {
  logIndex: number;
  uuid: string;
  ledgerUrl: string;
  integratedTime: number;
}

/** The transparency ledger as the batcher sees it. */
export interface LedgerWitness {
  /** Appends a hashedrekord entry whose spec.data.hash.value is the merkleRoot hex (signature by our ledger key over the root). */
  submit(merkleRootHex: string): Promise<LedgerSubmission>;
  /** The Rekor v1 entry object `{ "<uuid>": {...} }` as GET /api/v1/log/entries?logIndex=N returns it. */
  getEntry(logIndex: number): Promise<Record<string, unknown>>;
  /** PEM SPKI of the ledger's signing key. */
  publicKeyPem(): Promise<string>;
}

function checkRoot(merkleRootHex: string): string {
  if (typeof merkleRootHex !== 'string' || !/^[0-9a-fA-F]{64}$/.test(merkleRootHex)) {
    throw new TypeError('merkleRootHex must be 64 hex digits');
  }
  return merkleRootHex.toLowerCase();
}

/** The URL receipts name for the embedded ledger: the public URL, else the listen address. */
export function embeddedLedgerUrl(ctx: AppContext): string {
  return ctx.baseUrl();
}

async function embeddedWitness(ctx: AppContext): Promise<LedgerWitness> {
  const ledger = await getEmbeddedLedger(ctx);
  return {
    async submit(merkleRootHex) {
      let row;
      try {
        row = await ledger.appendRoot(checkRoot(merkleRootHex));
      } catch (e) {
        // Our entry signature is deterministic, so a retry after a crash between the append and
        // the batcher saving its result submits the very same entry: answer with the one stored,
        // as Rekor answers 409 with its location.
        if (!(e instanceof DuplicateLedgerEntryError)) throw e;
        row = e.existing;
      }
      return {
        logIndex: row.logIndex,
        uuid: ledger.uuidOf(row.leafHash),
        ledgerUrl: embeddedLedgerUrl(ctx),
        integratedTime: row.integratedTime,
      };
    },
    async getEntry(logIndex) {
      const entry = await ledger.entryByIndex(logIndex);
      if (!entry) throw new ApiError('not_found', `the ledger has no entry at index ${logIndex}`);
      return entry as unknown as Record<string, unknown>;
    },
    publicKeyPem: async () => ledger.identity.publicKeyPem,
  };
}

async function externalWitness(ctx: AppContext, url: string): Promise<LedgerWitness> {
  const client = new RekorClient(url);
  // Entries are signed by this service's ledger key (the same material the embedded ledger
  // would use), so a verifier can tell our entries from anyone else's in a public log.
  const signer = await loadLedgerIdentity(ctx);
  return {
    async submit(merkleRootHex) {
      const root = checkRoot(merkleRootHex);
      const body = hashedRekordBody(root, signer.signDigest(Buffer.from(root, 'hex')), signer.publicKeyPem);
      const r = await client.submit(body);
      return { logIndex: r.logIndex, uuid: r.uuid, ledgerUrl: url, integratedTime: r.integratedTime };
    },
    getEntry: (logIndex) => client.entryByIndex(logIndex),
    publicKeyPem: () => client.publicKeyPem(),
  };
}

/** The ledger witness of `ctx`: embedded (direct store access) when `ctx.config.ledgerUrl` is unset, else a Rekor v1 client. */
export async function createLedgerWitness(ctx: AppContext): Promise<LedgerWitness> {
  const witness = ctx.config.ledgerUrl ? await externalWitness(ctx, ctx.config.ledgerUrl) : await embeddedWitness(ctx);
  // Every failed submission counts in countersign_witness_failures_total{witness="ledger"}.
  return { ...witness, submit: countingFailures('ledger', witness.submit) };
}
