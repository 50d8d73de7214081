/**
 * The offload pool's worker (pool.ts): the same functions the main thread runs on small inputs,
 * applied to large ones. Nothing else runs here.
 */
import { sealPayloadWithHash, type Envelope, type EnvelopeKey } from '@countersign/core';
import { inspectBody, type InspectedBody } from '../http/json-inspect.js';
import { sealHere, type ProxyPayload, type SealedPayload } from '../proxy/record.js';
import { nameThisThread, THREAD_NAMES } from '../thread-name.js';

nameThisThread(THREAD_NAMES.offload);

/** Work the pool does. */
export type OffloadTask =
  | { kind: 'seal'; payload: ProxyPayload; key: EnvelopeKey; logId: string; requestJcs?: string }
  | { kind: 'sealLog'; payload: Record<string, unknown>; key: EnvelopeKey; logId: string }
  | { kind: 'parse'; raw: Uint8Array };

/** What it answers. */
export type OffloadResult =
  ({ kind: 'seal' } & SealedPayload) | { kind: 'sealLog'; envelope: Envelope; payloadHash: string } | ({ kind: 'parse' } & InspectedBody);

/** Piscina calls the default export with each task. */
export default async function run(task: OffloadTask): Promise<OffloadResult> {
  if (task.kind === 'seal') return { kind: 'seal', ...(await sealHere(task.payload, task.key, task.logId, task.requestJcs)) };
  if (task.kind === 'sealLog') return { kind: 'sealLog', ...(await sealPayloadWithHash(task.payload, task.key, task.logId)) };
  return { kind: 'parse', ...inspectBody(Buffer.from(task.raw.buffer, task.raw.byteOffset, task.raw.byteLength)) };
}
