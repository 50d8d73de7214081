/**
 * Sealing a plain `/v1/log` payload with the caller's key: canonical JSON once, then its hash
 * (the entry's `payloadHash`, equal to core's `payloadHashHex`) and its envelope from the same
 * bytes. Runs on the main thread, or in the offload pool for large bodies (offload/pool.ts).
 */
import { canonicalBytes, sealBytes, sha256Hex, type Envelope, type EnvelopeKey } from '@countersign/core';

/** A sealed log payload. */
export interface SealedLogPayload {
  envelope: Envelope;
  payloadHash: string;
}

/** Seals `payload` for log `logId` (the AAD). */
export async function sealLogPayload(payload: Record<string, unknown>, key: EnvelopeKey, logId: string): Promise<SealedLogPayload> {
  const bytes = canonicalBytes(payload);
  return { payloadHash: sha256Hex(bytes), envelope: await sealBytes(bytes, key, logId) };
}
