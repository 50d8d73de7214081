/**
 * Where the shared interop vectors are: `../shared/vectors` beside the repository (the layout
 * the brief fixes), else `/work/shared/vectors` (these machines; CI clones the repository
 * elsewhere), else `COUNTERSIGN_VECTORS_DIR`. A missing directory fails the suite: the interop
 * tests must run, never skip.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');

/** The directory of one vector set (`merkle`, `rfc3161`, `rekor`). */
export function vectorsDir(set: string): string {
  const candidates = [process.env.COUNTERSIGN_VECTORS_DIR, join(repoRoot, '..', 'shared', 'vectors'), '/work/shared/vectors'].filter(
    (d): d is string => typeof d === 'string' && d !== '',
  );
  for (const base of candidates) if (existsSync(join(base, set))) return join(base, set);
  throw new Error(`interop vectors "${set}" not found in ${candidates.join(', ')} (set COUNTERSIGN_VECTORS_DIR)`);
}
