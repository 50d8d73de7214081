/**
 * Where the embedded witnesses (TSA and ledger) keep their key material, decided once here:
 *
 * - SQLite (one process, one data dir): PEM files in `<dataDir>/<name>/`, mode 0600 (folder 0700).
 * - PostgreSQL (possibly many instances): one row of `witness_keys` per witness, so every
 *   instance signs with the same identity. The first instance to start creates it; a second
 *   one starting at the same moment loses the insert race and adopts the stored material.
 *
 * Material is a flat object of named text values; names ending in `Key` are private keys,
 * names ending in `Json` are JSON files, the rest PEM files (all written 0600).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { AppContext } from '../app-context.js';
import { makePrivateDir, writePrivateFile } from '../data-dir.js';

/** Named PEM/text values of one witness (e.g. `{ rootCert, rootKey, tsaCert, tsaKey }`). */
export type WitnessMaterial = Record<string, string>;

// `rootCert` → root-cert.pem, `treeJson` → tree.json.
const fileName = (field: string): string => {
  const kebab = field.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
  return kebab.endsWith('-json') ? kebab.slice(0, -5) + '.json' : kebab + '.pem';
};

function readFiles(dir: string, fields: readonly string[]): WitnessMaterial | undefined {
  const out: WitnessMaterial = {};
  for (const field of fields) {
    const file = path.join(dir, fileName(field));
    if (!fs.existsSync(file)) return undefined;
    out[field] = fs.readFileSync(file, 'utf8');
  }
  return out;
}

function writeFiles(dir: string, material: WitnessMaterial): void {
  makePrivateDir(dir);
  for (const [field, text] of Object.entries(material)) {
    // Write beside, then rename: a crash mid-write never leaves half a key behind. Every file is
    // owner-only (0600, whatever the umask), certificates too: one rule for the whole data dir.
    const file = path.join(dir, fileName(field));
    const tmp = `${file}.${process.pid}.tmp`;
    writePrivateFile(tmp, text);
    fs.renameSync(tmp, file);
  }
}

/**
 * Loads the material of witness `name`, creating it with `create` on first start.
 * `fields` lists what a complete set holds; an incomplete file set is an error rather than
 * silently replaced (replacing a TSA or ledger key would orphan every proof made with it).
 */
export async function loadOrCreateMaterial(
  ctx: AppContext,
  name: string,
  fields: readonly string[],
  create: () => Promise<WitnessMaterial>,
): Promise<WitnessMaterial> {
  if (ctx.store.dialect === 'postgres') {
    const stored = await ctx.store.witnessKeys.get(name);
    if (stored) return stored;
    return ctx.store.witnessKeys.putIfAbsent(name, await create(), ctx.now());
  }
  const dir = path.join(ctx.config.dataDir, name);
  const existing = readFiles(dir, fields);
  if (existing) return existing;
  const present = fields.filter((f) => fs.existsSync(path.join(dir, fileName(f))));
  if (present.length > 0) {
    throw new Error(
      `${dir} holds only part of the ${name} key material (${present.map(fileName).join(', ')}); restore the missing files or move the folder away to start a new identity`,
    );
  }
  const made = await create();
  writeFiles(dir, made);
  return made;
}
