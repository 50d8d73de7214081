/**
 * docs/errors.md and ERROR_CATALOGUE say the same thing: every code with the same status, no
 * code missing on either side.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_CATALOGUE } from '../src/errors.js';

const doc = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '../../../docs/errors.md'), 'utf8');

/** `| \`code\` | status | … |` rows of the doc. */
function documented(): Map<string, number> {
  const rows = new Map<string, number>();
  for (const m of doc.matchAll(/^\|\s*`([a-z0-9_]+)`\s*\|\s*(\d{3})\s*\|/gm)) {
    assert.ok(!rows.has(m[1]!), `docs/errors.md lists ${m[1]} twice`);
    rows.set(m[1]!, Number(m[2]));
  }
  return rows;
}

test('every catalogue code is documented with its status', () => {
  const rows = documented();
  for (const [code, { status }] of Object.entries(ERROR_CATALOGUE)) {
    assert.ok(rows.has(code), `docs/errors.md has no row for ${code}`);
    assert.equal(rows.get(code), status, `docs/errors.md gives ${code} status ${rows.get(code)}, the catalogue ${status}`);
  }
});

test('every documented code is in the catalogue', () => {
  for (const code of documented().keys()) assert.ok(code in ERROR_CATALOGUE, `docs/errors.md lists ${code}, which the code cannot emit`);
});

test('statuses are what DESIGN "Errors" assigns', () => {
  for (const [code, { status }] of Object.entries(ERROR_CATALOGUE)) {
    // 408, 414 and 431 keep the status HTTP gives framework refusals (issue 8: every framework error in our shape).
    assert.ok(
      [400, 401, 403, 404, 408, 409, 413, 414, 415, 429, 431, 500, 502, 503, 504].includes(status),
      `${code} has an unexpected status ${status}`,
    );
  }
});
