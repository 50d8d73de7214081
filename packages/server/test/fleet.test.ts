/**
 * A fleet, proven (issue 12): three `countersign serve` processes on one PostgreSQL database
 * behind a real load balancer (Debian's nginx running deploy/nginx/countersign.conf, TLS
 * terminated there), proxied (`/v1/proxy`, forward mode) and direct (`/v1/log`) traffic with
 * proofs through it, one instance SIGKILLed mid-load and started again. Asserted:
 * - every request the upstream received has its record, settled (complete, or interrupted for a
 *   call cut by the kill), none left pending; every call answered 200/201 has its record complete;
 * - every proof window is sealed exactly once (one batch per window, every leaf once);
 * - a security event raised on one instance reaches an SSE reader connected to another;
 * - every receipt verifies against the trust material the fleet publishes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { generateApiKey, verifyReceipt, type ProofReceipt } from '@countersign/core';
import { STORES, freshPostgresDatabase, tempDir } from './helpers/server.js';
import { serveChild, type ChildServer } from './helpers/serve-child.js';
import { decryptRecord } from './helpers/upstreams.js';
import { Store } from '../src/store/index.js';
import { freePort, nginxMissing, startBalancer, type Balancer } from './fleet/nginx.js';

const ENC = 'fleet-suite-key';
const LOAD_MS = 4000;
const KILL_AT_MS = 1500;
const RESTART_AT_MS = 2500;

interface Call {
  kind: 'proxy' | 'forward' | 'log';
  marker: string;
  status: number;
  logId?: string;
}

const missing = nginxMissing();

// PostgreSQL only: a fleet shares one database (CI always has it: COUNTERSIGN_REQUIRE_POSTGRES).
for (const _ of STORES.filter((s) => s === 'postgres')) {
  test(
    'three instances on one PostgreSQL behind nginx: kill -9 one mid-load, restart it; nothing lost',
    { skip: missing.skip, timeout: 120_000 },
    async () => {
      assert.equal(missing.fail, undefined, missing.fail);
      const databaseUrl = await freshPostgresDatabase();
      const masterKey = generateApiKey('master');
      // The upstream counts what it received, by the marker each call carries.
      const received = new Set<string>();
      const upstream = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const m = /"marker":"([^"]+)"/.exec(Buffer.concat(chunks).toString('utf8'));
          if (m) received.add(m[1]!);
          // A little latency, so calls are in flight when an instance dies.
          setTimeout(() => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ ok: true, marker: m?.[1] }));
          }, 30);
        });
      });
      await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
      const upHost = `127.0.0.1:${(upstream.address() as AddressInfo).port}`;

      const ports = [await freePort(), await freePort(), await freePort()];
      let lb: Balancer | undefined;
      const instances: ChildServer[] = [];
      const start = (port: number, publicUrl: string) =>
        serveChild(
          masterKey,
          ['--port', String(port), '--database-url', databaseUrl, '--public-url', publicUrl, '--allow-targets', upHost],
          {
            COUNTERSIGN_PROOF_WINDOW_MS: '1000',
            COUNTERSIGN_MAX_CONNECTIONS_PER_CLIENT: '0',
          },
        );
      let store: Store | undefined;
      try {
        // The balancer first (its URL is every instance's public URL), then the instances.
        const lbPort = await freePort();
        const publicUrl = `https://127.0.0.1:${lbPort}`;
        for (const port of ports) instances.push(await start(port, publicUrl));
        lb = await startBalancer(
          ports.map((p) => `127.0.0.1:${p}`),
          lbPort,
        );
        const d = lb.dispatcher;
        const api = async (
          path: string,
          init: { method?: string; headers?: Record<string, string>; body?: string } = {},
          base = lb!.url,
        ) => {
          const r = await request(base + path, {
            dispatcher: base === lb!.url ? d : undefined,
            method: (init.method ?? 'GET') as 'GET',
            headers: init.headers ?? {},
            body: init.body ?? null,
          });
          const text = await r.body.text();
          return { status: r.statusCode, headers: r.headers, text };
        };
        const json = (headers: Record<string, string>) => ({ 'content-type': 'application/json', ...headers });

        // A project and its keys, through the balancer.
        const created = await api('/v1/projects', {
          method: 'POST',
          headers: json({ authorization: `Bearer ${masterKey}` }),
          body: JSON.stringify({ name: 'fleet', credentialClass: 'agent' }),
        });
        assert.equal(created.status, 201, created.text);
        const project = JSON.parse(created.text).project as { id: string; apiKey: string };
        const addKey = async (credentialClass: string) => {
          const r = await api(`/v1/projects/${project.id}/keys`, {
            method: 'POST',
            headers: json({ authorization: `Bearer ${masterKey}` }),
            body: JSON.stringify({ credentialClass }),
          });
          assert.equal(r.status, 201, r.text);
          return JSON.parse(r.text).key.apiKey as string;
        };
        const live = await addKey('live');
        const human = await addKey('human');

        // An SSE reader of security events, connected straight to the third instance.
        const sse = await request(`${instances[2]!.url}/v1/projects/${project.id}/events/stream`, {
          headers: { authorization: `Bearer ${live}`, accept: 'text/event-stream' },
        });
        assert.equal(sse.statusCode, 200);
        let events = '';
        sse.body.setEncoding('utf8');
        sse.body.on('data', (c: string) => (events += c));
        sse.body.on('error', () => undefined);

        // The load: eight callers, each cycling through the three doors, for LOAD_MS.
        const calls: Call[] = [];
        let n = 0;
        const began = Date.now();
        const one = async (kind: Call['kind']): Promise<void> => {
          const marker = `m${n++}`;
          const call: Call = { kind, marker, status: 0 };
          calls.push(call);
          const body = JSON.stringify({ marker });
          try {
            const r =
              kind === 'proxy'
                ? await api('/v1/proxy', {
                    method: 'POST',
                    headers: json({ authorization: `Bearer ${project.apiKey}`, 'x-service-encryption-key': ENC }),
                    body: `{"target":"http://${upHost}/v1/things","payload":${body},"requestProof":true}`,
                  })
                : kind === 'forward'
                  ? await api('/v1/forward/v1/things', {
                      method: 'POST',
                      // Also in a header: a forward call's write-ahead record has its headers, not yet its
                      // streamed body, so an interrupted one is found by the header.
                      headers: json({
                        'x-marker': marker,
                        'x-service-key': project.apiKey,
                        'x-service-encryption-key': ENC,
                        'x-service-target-base': `http://${upHost}`,
                        'x-service-request-proof': 'true',
                      }),
                      body,
                    })
                  : await api('/v1/log', {
                      method: 'POST',
                      headers: json({ authorization: `Bearer ${project.apiKey}`, 'x-service-encryption-key': ENC }),
                      body: JSON.stringify({ action: 'fleet.direct', requestProof: true, payload: { marker } }),
                    });
            call.status = r.status;
            const id = r.headers['x-service-log-id'] ?? (r.status === 201 ? JSON.parse(r.text).id : undefined);
            if (typeof id === 'string') call.logId = id;
          } catch {
            call.status = -1; // the connection broke (an instance died under it)
          }
        };
        const kinds: Call['kind'][] = ['proxy', 'forward', 'log'];
        let killed = false;
        let restarted: Promise<void> | undefined;
        await Promise.all(
          Array.from({ length: 8 }, async (_, w) => {
            for (let i = w; Date.now() - began < LOAD_MS; i++) {
              const elapsed = Date.now() - began;
              if (!killed && elapsed >= KILL_AT_MS) {
                killed = true;
                instances[1]!.proc.kill('SIGKILL');
              }
              if (killed && !restarted && elapsed >= RESTART_AT_MS) {
                restarted = start(ports[1]!, publicUrl).then((s) => {
                  instances[1] = s;
                });
              }
              await one(kinds[i % 3]!);
            }
          }),
        );
        await restarted;

        // A handover on the first instance (a human key with agent headers) reaches the reader on the third.
        const handover = await api(
          '/v1/log',
          {
            method: 'POST',
            headers: json({ authorization: `Bearer ${human}`, 'x-service-encryption-key': ENC, 'x-agent-run': 'fleet' }),
            body: JSON.stringify({ action: 'handover', payload: {} }),
          },
          instances[0]!.url,
        );
        assert.equal(handover.status, 201, handover.text);
        for (let i = 0; i < 100 && !events.includes('credential_handover'); i++) await new Promise((r) => setTimeout(r, 100));
        sse.body.destroy();
        assert.ok(events.includes('credential_handover'), `the event reached the other instance's reader: ${events.slice(0, 300)}`);

        // Every record settles (the restarted instance marks its predecessor's records interrupted).
        store = await Store.open({ dataDir: tempDir(), databaseUrl });
        const rows = async () => {
          const out = [];
          let cursorSeq: number | undefined;
          for (;;) {
            const page = await store!.logs.page(project.id, {}, { order: 'oldest', limit: 500, cursorSeq, payloadBudget: 1 << 30 });
            out.push(...page.rows);
            if (page.nextSeq === null) return out;
            cursorSeq = page.nextSeq;
          }
        };
        let all = await rows();
        for (let i = 0; i < 300 && all.some((r) => r.status === 'pending'); i++) {
          await new Promise((r) => setTimeout(r, 100));
          all = await rows();
        }
        assert.deepEqual(
          all.filter((r) => r.status === 'pending').map((r) => r.id),
          [],
          'no record left pending',
        );

        // Every request the upstream received has its record; answered calls are complete.
        const byMarker = new Map<string, (typeof all)[number]>();
        for (const row of all) {
          const plain = (await decryptRecord(row.payload!, ENC, row.id)) as {
            request?: { body?: { marker?: string }; headers?: Record<string, string> };
            marker?: string;
          };
          const marker = plain.request?.body?.marker ?? plain.request?.headers?.['x-marker'] ?? plain.marker;
          if (marker) byMarker.set(marker, row);
        }
        for (const marker of received) {
          const row = byMarker.get(marker);
          if (!row) {
            const call = calls.find((c) => c.marker === marker);
            const byId = all.find((r) => r.id === call?.logId);
            const plain = byId ? await decryptRecord(byId.payload!, ENC, byId.id) : undefined;
            const odd = [];
            for (const r of all.filter((x) => x.status !== 'complete'))
              odd.push([r.status, r.source, JSON.stringify(await decryptRecord(r.payload!, ENC, r.id)).slice(0, 500)]);
            assert.fail(
              `the upstream received ${marker} but no record names it: ${JSON.stringify(call)} ${JSON.stringify(plain)?.slice(0, 600)}; records not complete: ${JSON.stringify(odd)}`,
            );
          }
          assert.ok(['complete', 'interrupted'].includes(row.status), `${marker}: ${row.status}`);
        }
        const answered = calls.filter((c) => c.status === 200 || c.status === 201);
        for (const c of answered) assert.equal(byMarker.get(c.marker)?.status, 'complete', `${c.kind} ${c.marker} answered ${c.status}`);
        const cut = calls.filter((c) => c.status !== 200 && c.status !== 201);
        assert.ok(answered.length > 100, `${answered.length} calls answered`);

        // Proof windows: one batch per window, every leaf once, all sealed.
        let batches = await store.proofs.listBatches();
        for (let i = 0; i < 300 && (batches.length === 0 || batches.some((b) => b.state !== 'sealed')); i++) {
          await new Promise((r) => setTimeout(r, 100));
          batches = await store.proofs.listBatches();
        }
        assert.ok(
          batches.every((b) => b.state === 'sealed'),
          'every batch sealed',
        );
        assert.equal(new Set(batches.map((b) => b.windowStart)).size, batches.length, 'one batch per window');
        const leaves = (await Promise.all(batches.map((b) => store!.proofs.leaves(b.id)))).flat().map((l) => l.logId);
        assert.equal(new Set(leaves).size, leaves.length, 'every leaf once');

        // Every receipt of an answered call verifies, fetched through the balancer.
        const trust = JSON.parse((await api('/v1/proofs/trust')).text) as { tsaRootsPem: string; ledgerPublicKeyPem: string };
        for (const c of answered) {
          const row = byMarker.get(c.marker)!;
          let receipt: ProofReceipt | undefined;
          for (let i = 0; i < 300 && !receipt; i++) {
            const r = await api(`/v1/projects/${project.id}/logs/${row.id}/proof`, { headers: { authorization: `Bearer ${live}` } });
            if (r.status === 200 && JSON.parse(r.text).status === 'sealed') receipt = JSON.parse(r.text).receipt as ProofReceipt;
            else await new Promise((res) => setTimeout(res, 100));
          }
          assert.ok(receipt, `receipt of ${c.marker}`);
          const entry = JSON.parse((await api(`/api/v1/log/entries?logIndex=${receipt.rekorLogIndex}`)).text) as unknown;
          const report = await verifyReceipt({
            payload: await decryptRecord(row.payload!, ENC, row.id),
            receipt,
            trust: { tsaRoots: trust.tsaRootsPem, ledgerPublicKey: trust.ledgerPublicKeyPem },
            ledgerEntry: entry,
            now: new Date(),
          });
          assert.ok(report.ok, `${c.marker}: ${JSON.stringify(report.steps.filter((s) => s.status === 'fail'))}`);
        }
        process.stdout.write(
          `# fleet: ${calls.length} calls (${answered.length} answered, ${cut.length} cut by the kill), upstream received ${received.size}, ${all.length} records (${all.filter((r) => r.status === 'interrupted').length} interrupted), ${batches.length} proof windows, ${answered.length} receipts verified\n`,
        );
      } finally {
        await store?.close();
        await lb?.stop();
        for (const s of instances) await s.stop().catch(() => undefined);
        await new Promise<void>((r) => upstream.close(() => r()));
      }
    },
  );
}
