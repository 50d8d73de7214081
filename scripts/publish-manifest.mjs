#!/usr/bin/env node
// The published form of a package's manifest, swapped in around `npm pack` / `npm publish`.
//
// In this repository, the `development` export condition points at the TypeScript sources, so
// tests (tsx) and the type checker run on src without a build. Published, that condition would
// send bundlers that set it by default in dev mode (webpack, Vite) to .ts files, so the packed
// package.json leaves it out: `types` and `default` point at the built dist. Runs in the
// package folder as its `prepack` (save the manifest, write the published one) and `postpack`
// (put the saved one back) script; a leftover copy from an interrupted pack is restored first.
import fs from 'node:fs';

const MANIFEST = 'package.json';
const SAVED = '.package.json.dev';

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
  if (fs.existsSync(SAVED)) fs.copyFileSync(SAVED, MANIFEST);
  const text = fs.readFileSync(MANIFEST, 'utf8');
  fs.writeFileSync(SAVED, text);
  fs.writeFileSync(MANIFEST, JSON.stringify(published(JSON.parse(text)), null, 2) + '\n');
} else if (step === 'postpack') {
  if (fs.existsSync(SAVED)) {
    fs.copyFileSync(SAVED, MANIFEST);
    fs.rmSync(SAVED);
  }
} else {
  process.stderr.write('usage: publish-manifest.mjs prepack|postpack (run by npm in a package folder)\n');
  process.exit(2);
}
