/**
 * The server's native seal (packages/server/native/seal.c, built by `npm run build` with
 * node-gyp against this Node's own headers), installed into core as its seal accelerator: the
 * proxy's records and `/v1/log` entries are then sealed and hashed in one native call with a
 * keyed OpenSSL context per derived key, instead of a Node cipher set up per record. Same
 * algorithm, key, AAD and bytes (native-seal.test.ts opens what it seals with core's own
 * `openBytes` and compares the hash with core's). Where the addon was not built (no compiler),
 * nothing is installed and core seals with Node's cipher, as before.
 */
import { createRequire } from 'node:module';
import { installSealAccelerator, type SealAccelerator } from '@countersign/core';

/** Where `npm run build` leaves the addon, from this module in src/ or dist/ alike. */
const ADDON = '../native/build/Release/countersign_seal.node';

let loaded: SealAccelerator | null | undefined;

/** The addon, or `null` when it was not built or does not load here. */
export function nativeSeal(): SealAccelerator | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)(ADDON) as SealAccelerator;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

/**
 * Installs the native seal into core when `enabled` (ServerConfig `nativeSeal`) and built, else
 * removes it; returns whether it is in use (buildApp reports it as `countersign_native_seal`).
 * Core's seal is one per process: the last app built decides.
 */
export function useNativeSeal(enabled: boolean): boolean {
  const impl = enabled ? nativeSeal() : null;
  installSealAccelerator(impl ?? undefined);
  return impl !== null;
}
