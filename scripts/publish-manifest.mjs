#!/usr/bin/env node
// The published form of a package's manifest, swapped in around `npm pack` / `npm publish`.
//
// In this repository, the `development` export condition points at the TypeScript sources, so
// tests (tsx) and the type checker run on src without a build. Published, that condition would
// send bundlers that set it by default in dev mode (webpack, Vite) to .ts files, so the packed
// package.json leaves it out: `types` and `default` point at the built dist. Runs in the
// package folder as its `prepack` (save the manifest, write the published one) and `postpack`
// (put the saved one back) script; a leftover copy from an interrupted pack is restored first.
//
// The manifest is only ever replaced by a rename, never rewritten in place: other processes read
// it meanwhile (the test suite packs while other test files start tsx children, whose resolver
// failed with "Error parsing package.json" on a half-written file). A reader sees the development
// manifest or the published one; with the published one it resolves the built dist, which the
// `tsc -b` before the swap has just brought up to date.
import fs from 'node:fs';

const MANIFEST = 'package.json';
const SAVED = '.package.json.dev';

/** Replaces `file` with `text` in one step (a rename within the folder). */
function replaceFile(file, text) {
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, text);
  fs.renameSync(temporary, file);
}

/** The manifest as published: every `development` export condition removed. */
function published(manifest) {
  const strip = (value) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => key !== 'development')
        .map(([key, v]) => [key, strip(v)]),
    );
  };
  return { ...manifest, exports: strip(manifest.exports) };
}

const step = process.argv[2];
if (step === 'prepack') {
  if (fs.existsSync(SAVED)) replaceFile(MANIFEST, fs.readFileSync(SAVED, 'utf8'));
  const text = fs.readFileSync(MANIFEST, 'utf8');
  replaceFile(SAVED, text);
  replaceFile(MANIFEST, JSON.stringify(published(JSON.parse(text)), null, 2) + '\n');
} else if (step === 'postpack') {
  if (fs.existsSync(SAVED)) {
    replaceFile(MANIFEST, fs.readFileSync(SAVED, 'utf8'));
    fs.rmSync(SAVED);
  }
} else {
  process.stderr.write('usage: publish-manifest.mjs prepack|postpack (run by npm in a package folder)\n');
  process.exit(2);
}
