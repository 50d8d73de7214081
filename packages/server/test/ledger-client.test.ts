/**
 * The LedgerWitness as a Rekor v1 client (`--ledger-url`), against our own embedded ledger
 * running as its own role over a real socket, and against ledgers that misbehave.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { STORES } from './helpers/server.js';
import { rejectsWith, startWitnessApp, type WitnessApp } from './tsa-helpers.js';
import { assertEntryVerifies } from './ledger-helpers.js';
import { createLedgerWitness } from '../src/ledger/witness.js';
import { loadLedgerIdentity } from '../src/ledger/identity.js';
import type { Role } from '../src/config.js';

const rootOf = (s: string): string => createHash('sha256').update(s).digest('hex');

/** A loopback server that answers with `handler`, or forwards to `upstream` when it returns undefined. */
async function fakeRekor(
  upstream: string,
  handler: (
    method: string,
    url: string,
    body: string,
  ) => { status: number; body: string; type?: string } | undefined | Promise<{ status: number; body: string; type?: string } | undefined>,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      void (async () => {
        let answer = await handler(req.method!, req.url!, body);
        if (!answer) {
          const r = await fetch(upstream + req.url!, {
            method: req.method!,
            ...(req.method === 'POST' ? { body, headers: { 'content-type': 'application/json' } } : {}),
          });
          answer = { status: r.status, body: await r.text(), type: r.headers.get('content-type') ?? 'application/json' };
        }
        res.writeHead(answer.status, { 'content-type': answer.type ?? 'application/json' });
        res.end(answer.body);
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(() => r())) };
}

for (const store of STORES) {
  describe(`LedgerWitness as a Rekor v1 client (${store})`, () => {
    let ledger: WitnessApp;
    let ledgerKey: string;

    before(async () => {
      ledger = await startWitnessApp({ store, config: { roles: new Set<Role>(['ledger']) } });
      ledgerKey = await (await fetch(`${ledger.url}/api/v1/log/publicKey`)).text();
    });
    after(() => ledger.close());

    const withClient = async (
      ledgerUrl: string,
      body: (w: Awaited<ReturnType<typeof createLedgerWitness>>, app: WitnessApp) => Promise<void>,
    ) => {
      // The client is another instance (its own data dir, and on PostgreSQL its own database).
      const app = await startWitnessApp({ store, listen: false, config: { ledgerUrl, roles: new Set<Role>(['proofs']) } });
      try {
        await body(await createLedgerWitness(app.app.ctx), app);
      } finally {
        await app.close();
      }
    };

    it('submits a Merkle root to the ledger over a socket; the entry verifies with core', () =>
      withClient(ledger.url, async (w, app) => {
        assert.equal(await w.publicKeyPem(), ledgerKey);
        const root = rootOf('batch over the wire');
        const s = await w.submit(root);
        assert.equal(s.ledgerUrl, ledger.url);
        assert.match(s.uuid, /^[0-9a-f]{80}$/);
        const entry = await w.getEntry(s.logIndex);
        assert.deepEqual(Object.keys(entry), [s.uuid]);
        // Signed by the submitting service's ledger key; logged under the ledger's own key.
        const signer = (await loadLedgerIdentity(app.app.ctx)).publicKeyPem;
        await assertEntryVerifies(entry, {
          publicKey: ledgerKey,
          entrySignerKey: signer,
          expectedDataHash: root,
          expectedLogIndex: s.logIndex,
          expectedUuid: s.uuid,
        });
        // The same entry, read straight from the ledger.
        const direct = await (await fetch(`${ledger.url}/api/v1/log/entries/${s.uuid}`)).json();
        assert.deepEqual(direct, entry);
      }));

    it('getEntry of an index the ledger does not have → not_found', () =>
      withClient(ledger.url, (w) => rejectsWith(w.getEntry(10_000), 'not_found', /no entry at index 10000/)));

    it('no ledger listening → ledger_unavailable', async () => {
      const gone = await fakeRekor(ledger.url, () => undefined);
      await gone.close();
      await withClient(gone.url, (w) => rejectsWith(w.submit(rootOf('x')), 'ledger_unavailable', /did not answer/));
    });

    it('a ledger answering 500 → ledger_unavailable', async () => {
      const fake = await fakeRekor(ledger.url, (m) => (m === 'POST' ? { status: 500, body: '{"code":500,"message":"boom"}' } : undefined));
      try {
        await withClient(fake.url, (w) => rejectsWith(w.submit(rootOf('x')), 'ledger_unavailable', /HTTP 500/));
      } finally {
        await fake.close();
      }
    });

    it('a ledger answering something that is not one entry → ledger_response_invalid', async () => {
      const fake = await fakeRekor(ledger.url, (m) => (m === 'POST' ? { status: 201, body: '[1,2]' } : undefined));
      try {
        await withClient(fake.url, (w) => rejectsWith(w.submit(rootOf('x')), 'ledger_response_invalid', /one \{ "<uuid>": entry \}/));
      } finally {
        await fake.close();
      }
    });

    it('a ledger that records another root (a replayed entry) → ledger_response_invalid', async () => {
      const old = await (await fetch(`${ledger.url}/api/v1/log/entries?logIndex=0`)).text();
      const fake = await fakeRekor(ledger.url, (m) => (m === 'POST' ? { status: 201, body: old } : undefined));
      try {
        await withClient(fake.url, (w) => rejectsWith(w.submit(rootOf('a new root')), 'ledger_response_invalid', /ledger_root_match/));
      } finally {
        await fake.close();
      }
    });

    it('a ledger whose entries are not signed by the key it publishes → ledger_response_invalid', async () => {
      const impostorKey = (await startWitnessApp({ store: 'sqlite', listen: false, config: { roles: new Set<Role>(['ledger']) } })).app;
      const otherPem = (await loadLedgerIdentity(impostorKey.ctx)).publicKeyPem;
      await impostorKey.close();
      const fake = await fakeRekor(ledger.url, (m, url) =>
        m === 'GET' && url === '/api/v1/log/publicKey' ? { status: 200, body: otherPem, type: 'application/x-pem-file' } : undefined,
      );
      try {
        await withClient(fake.url, (w) => rejectsWith(w.submit(rootOf('y')), 'ledger_response_invalid', /ledger_set|logID/));
      } finally {
        await fake.close();
      }
    });

    it('a ledger refusing the entry (400) → invalid_ledger_entry', async () => {
      const fake = await fakeRekor(ledger.url, (m) => (m === 'POST' ? { status: 400, body: '{"code":400,"message":"no"}' } : undefined));
      try {
        await withClient(fake.url, (w) => rejectsWith(w.submit(rootOf('z')), 'invalid_ledger_entry', /refused the entry/));
      } finally {
        await fake.close();
      }
    });

    it('submit() refuses a root that is not 64 hex digits', () =>
      withClient(ledger.url, (w) => assert.rejects(w.submit('abc'), TypeError)));
  });
}
