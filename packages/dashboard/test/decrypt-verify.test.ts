/**
 * Browser-side decryption and the ledger fetch of verification, in Node (WebCrypto is the same):
 * envelopes from the proxy path (fingerprint kid) and a client keyring (own kid) open; a wrong
 * key and a malformed envelope fail with their codes; the ledger entry falls back to the page's
 * origin only when the receipt's URL cannot be read.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deriveEnvelopeKey, sealPayload } from '@countersign/core';
import { PayloadOpener, parseKeyStrings } from '../src/decrypt.js';
import { fetchLedgerEntry, type FetchLike } from '../src/verify.js';

test('key field: one key per line, trimmed, blanks dropped', () => {
  assert.deepEqual(parseKeyStrings(' a \n\n b\r\n'), ['a', 'b']);
  assert.deepEqual(parseKeyStrings(''), []);
});

test('opens fingerprint-kid and keyring-kid envelopes; wrong key and bad envelopes fail with a code', async () => {
  const bare = await sealPayload({ via: 'proxy' }, await deriveEnvelopeKey('secret one'), 'log_1');
  const ring = await sealPayload({ via: 'client' }, await deriveEnvelopeKey('secret two', 'k2'), 'log_2');
  const opener = new PayloadOpener(['secret one', 'secret two']);
  assert.deepEqual(await opener.open('log_1', bare), { state: 'open', payload: { via: 'proxy' } });
  assert.deepEqual(await opener.open('log_2', ring), { state: 'open', payload: { via: 'client' } });

  const wrong = await new PayloadOpener(['nope']).open('log_1', bare);
  assert.equal(wrong.state, 'failed');
  assert.equal(wrong.state === 'failed' && wrong.code, 'decryption_failed');
  // The AAD is the log id: the right key on another log id does not open it.
  assert.equal((await new PayloadOpener(['secret one']).open('log_other', bare)).state, 'failed');
  const malformed = await new PayloadOpener(['secret one']).open('log_3', { ...bare, iv: 'AAAA' });
  assert.equal(malformed.state === 'failed' && malformed.code, 'invalid_envelope');
  assert.deepEqual(await new PayloadOpener([]).open('log_1', bare), { state: 'no_key' });
});

function fakeFetch(answers: Record<string, unknown>): { fetch: FetchLike; urls: string[] } {
  const urls: string[] = [];
  return {
    urls,
    fetch: async (url) => {
      urls.push(url);
      const a = answers[url];
      if (a instanceof Error) throw a;
      if (a === undefined) return { ok: false, status: 404, json: async () => ({}) };
      return { ok: true, status: 200, json: async () => a };
    },
  };
}

test('ledger entry: from the receipt URL; else the page origin, with a note; else none', async () => {
  const path = '/api/v1/log/entries?logIndex=4';
  const direct = fakeFetch({ ['https://ledger.example' + path]: { e: 1 } });
  const a = await fetchLedgerEntry('https://ledger.example/', 4, 'https://dash.example', direct.fetch);
  assert.deepEqual(a.entry, { e: 1 });
  assert.deepEqual(direct.urls, ['https://ledger.example' + path]);

  const blocked = fakeFetch({
    ['http://0.0.0.0:8080' + path]: new TypeError('Failed to fetch'),
    ['https://dash.example' + path]: { e: 2 },
  });
  const b = await fetchLedgerEntry('http://0.0.0.0:8080', 4, 'https://dash.example', blocked.fetch);
  assert.deepEqual(b.entry, { e: 2 });
  assert.match(b.notes.join('\n'), /could not read http:\/\/0\.0\.0\.0:8080.*Failed to fetch/);
  assert.match(b.notes.join('\n'), /this server's ledger path/);

  const same = fakeFetch({});
  const c = await fetchLedgerEntry('https://dash.example', 4, 'https://dash.example/', same.fetch);
  assert.equal(c.entry, undefined);
  assert.equal(same.urls.length, 1, 'the page origin is not asked twice');
  assert.match(c.notes[0]!, /HTTP 404/);
});
