/**
 * Small helpers the inspectJson suites share (json-text*.test.ts): inspect a string's UTF-8
 * bytes, assert that it scans and return the inspection, and build n-deep nesting.
 */
import assert from 'node:assert/strict';
import { inspectJson, type JsonInspectResult, type JsonInspection } from '../../src/index.js';

type InspectOptions = Parameters<typeof inspectJson>[1];

export const enc = new TextEncoder();
/** inspectJson over the UTF-8 bytes of `text`. */
export const inspect = (text: string, opts?: InspectOptions): JsonInspectResult => inspectJson(enc.encode(text), opts);
/** inspectJson that must succeed; returns its inspection. */
export const ok = (text: string, opts?: InspectOptions): JsonInspection => {
  const r = inspect(text, opts);
  assert.ok(r.ok, `${text.slice(0, 80)}: ${r.ok ? '' : r.message}`);
  return r.value;
};
/** `depth` opening brackets followed by as many closing ones. */
export const nested = (depth: number, open = '[', close = ']') => open.repeat(depth) + close.repeat(depth);
