#!/usr/bin/env node
// Runs the compiled CLI (built by `npm install` through the root `prepare` script). Under the
// "development" export condition (`node --conditions=development --import tsx`, as the tests run)
// the package resolves to its TypeScript sources, and so does this command: tests drive this very
// file without a build, and never a stale one.
const fromSources = import.meta.resolve('@countersign/server').endsWith('.ts');
await import(fromSources ? '../src/cli/index.ts' : '../dist/cli/index.js');
