/**
 * Reading at scale (DESIGN §4 "Reading"): the list filters (prefix and contains, status, source,
 * metadata key=value, time range), the export (CSV and JSONL, the whole filtered range, oldest
 * first) and the live stream (`…/logs/stream`, SSE with Last-Event-ID), one filter reading for
 * all three; on SQLite and PostgreSQL.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { SignJWT } from 'jose';
import { STORES, startApp, type TestApp } from './helpers/server.js';
import { fullProject, getWith, postLog } from './foundation-helpers.js';
import { runCli } from './proofs-helpers.js';

const KEY = 'reading key';

for (const store of STORES) {
  describe(`log reads: filters, export, live stream (${store})`, () => {
    let t: TestApp;
    let p: Awaited<ReturnType<typeof fullProject>>;
    before(async () => {
      t = await startApp({ store, listen: true });
      p = await fullProject(t);
      const logs = [
        {
          actor: 'tool-runner',
          action: 'search.web',
          traceId: 'run-a1',
          metadata: { region: 'eu', tier: 2, paid: true },
          payload: { n: 1 },
        },
        { actor: 'Tool-Builder', action: 'search.files', traceId: 'run-a2', metadata: { region: 'us' }, payload: { n: 2 } },
        { actor: 'planner', action: 'plan.make', traceId: 'run-b1', metadata: { region: 'eu', tier: 3 }, payload: { n: 3 } },
        { actor: '=cmd|evil', action: 'odd, "quoted"\nline', traceId: 'x_y%z', payload: { n: 4 } },
      ];
      const r = await postLog(t.app, p.agent, { logs }, { 'x-service-encryption-key': KEY });
      assert.equal(r.statusCode, 201, r.body);
    });
    after(async () => t?.close());

    const list = async (query: string) => {
      const r = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?${query}`);
      assert.equal(r.statusCode, 200, r.body);
      return (r.json() as { logs: Array<{ actor: string; action: string; payload?: unknown }> }).logs.map((l) => l.actor).sort();
    };

    test('prefix and contains are case-insensitive and take wildcards literally; status, source, metadata, range', async () => {
      assert.deepEqual(await list('actorPrefix=tool-'), ['Tool-Builder', 'tool-runner']);
      assert.deepEqual(await list('actorContains=OOL'), ['Tool-Builder', 'tool-runner']);
      assert.deepEqual(await list('actionPrefix=search.f'), ['Tool-Builder']);
      assert.deepEqual(await list('actionContains=plan'), ['planner']);
      assert.deepEqual(await list('traceIdPrefix=run-a'), ['Tool-Builder', 'tool-runner']);
      assert.deepEqual(await list(`traceIdPrefix=${encodeURIComponent('x_y%')}`), ['=cmd|evil']);
      assert.deepEqual(await list('traceIdPrefix=x%25'), [], '% is a character, not a wildcard');
      assert.deepEqual(await list('actorPrefix=_ool'), [], '_ is a character, not a wildcard');
      assert.deepEqual(await list('meta=region%3Deu'), ['planner', 'tool-runner']);
      assert.deepEqual(await list('meta=region%3Deu&meta=tier%3D3'), ['planner']);
      assert.deepEqual(await list('meta=paid%3Dtrue'), ['tool-runner']);
      assert.equal((await list('status=complete,pending')).length, 4);
      assert.deepEqual(await list('status=failed'), []);
      assert.equal((await list('source=log')).length, 4);
      assert.deepEqual(await list('source=proxy'), []);
      assert.deepEqual(await list(`from=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`), []);
      const bad = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs?meta=novalue`);
      assert.equal(bad.statusCode, 400);
      assert.equal(bad.json().error.code, 'invalid_request');
    });

    test('export: CSV of the plain fields (quoted, formula-safe) and JSONL of whole entries, oldest first', async () => {
      const csv = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/export?format=csv`);
      assert.equal(csv.statusCode, 200);
      assert.match(String(csv.headers['content-type']), /^text\/csv/);
      assert.match(String(csv.headers['content-disposition']), /attachment; filename=".*\.csv"/);
      const rows = csv.body.split('\r\n').filter((l) => l !== '');
      assert.equal(rows[0]!.split(',')[0], 'id');
      assert.ok(rows[1]!.includes('tool-runner'), 'oldest first');
      assert.ok(csv.body.includes(`"odd, ""quoted""\nline"`), 'quotes, commas and line breaks are quoted');
      assert.ok(csv.body.includes(`'=cmd|evil`), 'a formula-looking cell is neutralised');
      assert.ok(!csv.body.includes('"ct"'), 'no payload in CSV');
      const jsonl = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/export?format=jsonl&actorPrefix=tool-`);
      assert.equal(jsonl.statusCode, 200);
      const entries = jsonl.body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { actor: string; payload: { ct: string } });
      assert.deepEqual(
        entries.map((e) => e.actor),
        ['tool-runner', 'Tool-Builder'],
      );
      assert.ok(
        entries.every((e) => typeof e.payload.ct === 'string'),
        'JSONL carries the envelopes',
      );
      const none = await getWith(t.app, p.live, `/v1/projects/${p.projectId}/logs/export?format=xml`);
      assert.equal(none.statusCode, 400);
    });

    test('live stream: new entries only, filtered, resumable with Last-Event-ID', async () => {
      const open = (lastEventId?: string) =>
        request(`${t.url}/v1/projects/${p.projectId}/logs/stream?actorPrefix=live-`, {
          headers: { authorization: `Bearer ${p.live}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
        });
      const r = await open();
      assert.equal(r.statusCode, 200);
      assert.match(String(r.headers['content-type']), /^text\/event-stream/);
      let text = '';
      r.body.setEncoding('utf8');
      r.body.on('data', (c: string) => (text += c));
      await postLog(t.app, p.agent, { actor: 'other', action: 'x', payload: {} }, { 'x-service-encryption-key': KEY });
      const posted = await postLog(t.app, p.agent, { actor: 'live-one', action: 'x', payload: {} }, { 'x-service-encryption-key': KEY });
      const id = (posted.json() as { id: string }).id;
      for (let i = 0; i < 100 && !text.includes(id); i++) await new Promise((res) => setTimeout(res, 50));
      r.body.destroy();
      const frames = text.split('\n\n').filter((f) => f.includes('event: log'));
      assert.equal(frames.length, 1, text);
      const seq = /^id: (\d+)$/m.exec(frames[0]!)![1]!;
      assert.equal((JSON.parse(/^data: (.*)$/m.exec(frames[0]!)![1]!) as { id: string; payload?: unknown }).id, id);
      assert.ok(!frames[0]!.includes('"payload"'), 'no payload on the stream');

      // Resuming before that entry replays it.
      const again = await open(String(Number(seq) - 1));
      let replay = '';
      again.body.setEncoding('utf8');
      again.body.on('data', (c: string) => (replay += c));
      for (let i = 0; i < 100 && !replay.includes(id); i++) await new Promise((res) => setTimeout(res, 50));
      again.body.destroy();
      assert.ok(replay.includes(id));
    });

    test('live stream: it opens by naming where it starts, and resuming from there loses nothing written meanwhile', async () => {
      const url = `${t.url}/v1/projects/${p.projectId}/logs/stream?actorPrefix=resume-`;
      const first = await request(url, { headers: { authorization: `Bearer ${p.live}` } });
      assert.equal(first.statusCode, 200);
      let text = '';
      first.body.setEncoding('utf8');
      first.body.on('data', (c: string) => (text += c));
      for (let i = 0; i < 100 && !/\n\n/.test(text); i++) await new Promise((res) => setTimeout(res, 20));
      first.body.destroy();
      // The opening frame: an id and no data (an SSE client keeps the id and dispatches nothing).
      const opening = text.split('\n\n')[0]!;
      const start = /^id: (\d+)$/m.exec(opening)?.[1];
      assert.ok(start !== undefined, text);
      assert.ok(!/^data:/m.test(opening), text);
      // Written while no stream is open; a reconnect from the opening id replays it.
      const posted = await postLog(t.app, p.agent, { actor: 'resume-one', action: 'x', payload: {} }, { 'x-service-encryption-key': KEY });
      const id = (posted.json() as { id: string }).id;
      const again = await request(url, { headers: { authorization: `Bearer ${p.live}`, 'last-event-id': start } });
      let replay = '';
      again.body.setEncoding('utf8');
      again.body.on('data', (c: string) => (replay += c));
      for (let i = 0; i < 100 && !replay.includes(id); i++) await new Promise((res) => setTimeout(res, 50));
      again.body.destroy();
      assert.ok(replay.includes(id), replay);
    });

    test('an embed token exports and streams only inside its scope, and still cannot read events', async () => {
      const iat = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({ projectId: p.projectId, scope: { traceId: 'run-a1' } })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setAudience('countersign:embed')
        .setIssuedAt(iat)
        .setExpirationTime(iat + 600)
        .sign(new TextEncoder().encode(p.clientSecret));
      const exported = await getWith(t.app, token, `/v1/projects/${p.projectId}/logs/export?format=jsonl`);
      assert.equal(exported.statusCode, 200, exported.body);
      const rows = exported.body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { traceId: string });
      assert.deepEqual(
        rows.map((r) => r.traceId),
        ['run-a1'],
        'the scope is forced on the export',
      );
      // Asking for another trace gives nothing rather than widening the scope.
      const other = await getWith(t.app, token, `/v1/projects/${p.projectId}/logs/export?format=csv&traceId=run-b1`);
      assert.equal(other.statusCode, 200, other.body);
      assert.equal(other.body.trim().split('\r\n').length, 1, 'the header line only');

      const stream = await request(`${t.url}/v1/projects/${p.projectId}/logs/stream`, {
        headers: { authorization: `Bearer ${token}`, 'last-event-id': '0' },
      });
      assert.equal(stream.statusCode, 200);
      let text = '';
      stream.body.setEncoding('utf8');
      stream.body.on('data', (c: string) => (text += c));
      for (let i = 0; i < 100 && !text.includes('run-a1'); i++) await new Promise((res) => setTimeout(res, 50));
      stream.body.destroy();
      assert.ok(text.includes('run-a1'), 'the scoped trace arrives');
      assert.ok(!text.includes('run-b1') && !text.includes('run-a2'), 'nothing outside the scope');

      const events = await getWith(t.app, token, `/v1/projects/${p.projectId}/events`);
      assert.equal(events.statusCode, 403);
      assert.equal(events.json().error.code, 'wrong_credential_class');
    });

    test('embedOrigins: set with the master key; embed-token reads from a listed origin get CORS, keys and other origins do not', async () => {
      const patch = await t.app.inject({
        method: 'PATCH',
        url: `/v1/projects/${p.projectId}`,
        headers: { authorization: `Bearer ${t.masterKey}`, 'content-type': 'application/json' },
        payload: { embedOrigins: ['https://App.example', 'http://localhost:5173'] },
      });
      assert.equal(patch.statusCode, 200, patch.body);
      assert.deepEqual(patch.json().project.embedOrigins, ['https://app.example', 'http://localhost:5173']);
      const bad = await t.app.inject({
        method: 'PATCH',
        url: `/v1/projects/${p.projectId}`,
        headers: { authorization: `Bearer ${t.masterKey}`, 'content-type': 'application/json' },
        payload: { embedOrigins: ['https://app.example/path'] },
      });
      assert.equal(bad.statusCode, 400, 'an origin has no path');

      const iat = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({ projectId: p.projectId })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setAudience('countersign:embed')
        .setIssuedAt(iat)
        .setExpirationTime(iat + 600)
        .sign(new TextEncoder().encode(p.clientSecret));
      const read = (credential: string, origin: string) =>
        t.app.inject({ url: `/v1/projects/${p.projectId}/logs`, headers: { authorization: `Bearer ${credential}`, origin } });
      const allowed = await read(token, 'https://app.example');
      assert.equal(allowed.statusCode, 200, allowed.body);
      assert.equal(allowed.headers['access-control-allow-origin'], 'https://app.example');
      assert.equal((await read(token, 'https://evil.example')).headers['access-control-allow-origin'], undefined);
      assert.equal((await read(p.live, 'https://app.example')).headers['access-control-allow-origin'], undefined, 'never for keys');
      const preflight = await t.app.inject({
        method: 'OPTIONS',
        url: `/v1/projects/${p.projectId}/logs`,
        headers: { origin: 'http://localhost:5173', 'access-control-request-method': 'GET' },
      });
      assert.equal(preflight.statusCode, 204);
      assert.equal(preflight.headers['access-control-allow-origin'], 'http://localhost:5173');
      assert.match(String(preflight.headers['access-control-allow-headers']), /authorization/);
      const refused = await t.app.inject({
        method: 'OPTIONS',
        url: `/v1/projects/${p.projectId}/logs`,
        headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
      });
      assert.equal(refused.headers['access-control-allow-origin'], undefined);

      // The same from the CLI: set, then clear.
      const conn = ['--url', t.url, '--master-key', t.masterKey];
      const set = await runCli(['projects', 'embed-origins', p.projectId, 'https://cli.example', ...conn]);
      assert.equal(set.code, 0, set.stderr);
      assert.match(set.stdout, /embedding origins: https:\/\/cli\.example/);
      assert.deepEqual(await t.app.ctx.store.projects.embedOrigins(p.projectId), ['https://cli.example']);
      const cleared = await runCli(['projects', 'embed-origins', p.projectId, ...conn]);
      assert.match(cleared.stdout, /no embedding origins/);
    });
  });
}
