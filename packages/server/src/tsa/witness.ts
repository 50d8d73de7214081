/**
 * The timestamp authority as the proof batcher sees it: one interface, two implementations.
 * Embedded (default): the in-process TSA, called directly. External (`--tsa-url`): an RFC 3161
 * HTTP client. Either way the answer is checked before it is returned.
 */
import fs from 'node:fs';
import * as pkijs from 'pkijs';
import * as x509 from '@peculiar/x509';
import type { AppContext } from '../app-context.js';
import { ApiError } from '../errors.js';
import { checkTimestampResponse, TimestampCheckError } from './check.js';
import { buildTimestampQuery, freshNonce, requestTimestamp } from './client.js';
import { getEmbeddedTsa } from './embedded.js';
import { countingFailures } from '../metrics/registry.js';

/** A timestamp authority as the batcher sees it. */
export interface TimestampWitness {
  /** RFC 3161: timestamps a SHA-256 digest (hashedMessage = these 32 bytes). Returns the DER TimeStampResp, already checked (status granted, imprint equals digest, nonce echoed, signature valid). */
  timestamp(digest: Uint8Array): Promise<Uint8Array>;
  /** PEM of the trust roots a verifier should use for this TSA (embedded: our root CA). */
  trustRootsPem(): Promise<string>;
}

function certsFromPem(pem: string): pkijs.Certificate[] {
  return pem
    .split(/(?=-----BEGIN CERTIFICATE-----)/)
    .filter((b) => b.includes('-----BEGIN CERTIFICATE-----'))
    .map((b) => pkijs.Certificate.fromBER(new Uint8Array(new x509.X509Certificate(b.trim()).rawData)));
}

async function embeddedWitness(ctx: AppContext): Promise<TimestampWitness> {
  const tsa = await getEmbeddedTsa(ctx);
  const roots = certsFromPem(tsa.identity.rootPem);
  return {
    async timestamp(digest) {
      if (!(digest instanceof Uint8Array) || digest.length !== 32) throw new TypeError('digest must be 32 bytes (SHA-256)');
      const nonce = freshNonce();
      const outcome = await tsa.respond(buildTimestampQuery(digest, nonce));
      if (!outcome.granted) {
        throw new ApiError('tsa_unavailable', `the embedded TSA refused: ${outcome.reason ?? 'unknown reason'}`, { cause: outcome.error });
      }
      try {
        await checkTimestampResponse(outcome.response, { digest, nonce, trustRoots: roots });
      } catch (cause) {
        if (cause instanceof TimestampCheckError)
          throw new ApiError('tsa_response_invalid', `embedded TSA token: ${cause.message}`, { cause });
        throw cause;
      }
      return outcome.response;
    },
    trustRootsPem: async () => tsa.identity.rootPem,
  };
}

function externalWitness(ctx: AppContext, url: string): TimestampWitness {
  // Trust roots of an outside TSA are the operator's to give (--tsa-roots, a PEM file; config
  // refuses --tsa-url without it); they are never taken from the tokens the TSA returns.
  const rootsFile = ctx.config.tsaRoots;
  const rootsPem = rootsFile ? fs.readFileSync(rootsFile, 'utf8') : '';
  const roots = rootsPem ? certsFromPem(rootsPem) : undefined;
  if (!roots) {
    ctx.log.warn({ tsaUrl: url }, 'no --tsa-roots for the external TSA: tokens are checked for signature but not chained to a root');
  }
  return {
    timestamp: (digest) => requestTimestamp(url, digest, roots ? { trustRoots: roots } : {}),
    trustRootsPem: async () => rootsPem,
  };
}

/** The TSA witness of `ctx`: embedded when `ctx.config.tsaUrl` is unset, else an RFC 3161 client to that URL. */
export async function createTimestampWitness(ctx: AppContext): Promise<TimestampWitness> {
  const witness = ctx.config.tsaUrl ? externalWitness(ctx, ctx.config.tsaUrl) : await embeddedWitness(ctx);
  // Every failed timestamp counts in countersign_witness_failures_total{witness="tsa"}.
  return { ...witness, timestamp: countingFailures('tsa', witness.timestamp) };
}
