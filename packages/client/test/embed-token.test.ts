/**
 * Embed tokens end to end against a REAL server: generateEmbedToken() signs what the server
 * accepts as read-only, scoped, expiring access to the project's logs, traces and proofs; the
 * server pins HS256, requires exp, and refuses everything else.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPair, SignJWT, UnsecuredJWT } from 'jose';
import { ServiceClient, EMBED_TOKEN_AUDIENCE } from '../src/index.js';
import { STORES, startServer, type ClientTestServer, type TestProject } from './helpers/server.js';

for (const storeKind of STORES) {
  describe(`embed tokens (${storeKind})`, () => {
    let srv: ClientTestServer;
    let other: TestProject;
    let client: ServiceClient;
    const ids: Record<string, string> = {};
    before(async () => {
      srv = await startServer({ store: storeKind });
      other = await srv.newProject();
      client = new ServiceClient({
        apiKey: srv.project.keys.service,
        encryptionKey: 'embed key',
        endpoint: srv.url,
        projectId: srv.project.id,
        clientSecret: srv.project.clientSecret,
        flushOnExit: false,
      });
      ids.a1 = await client.log({ action: 'x', actor: 'alice', traceId: 'trace-a' });
      ids.a2 = await client.log({ action: 'y', actor: 'bob', traceId: 'trace-a' });
      ids.b1 = await client.log({ action: 'z', actor: 'alice', traceId: 'trace-b' });
      await client.flush();
    });
    after(async () => {
      await client.shutdown();
      await srv.close();
    });

    const get = async (token: string, path: string, projectId = srv.project.id) => {
      const res = await fetch(`${srv.url}/v1/projects/${projectId}${path}`, { headers: { authorization: `Bearer ${token}` } });
      return {
        status: res.status,
        body: (await res.json()) as Record<string, unknown> & { logs?: Array<{ id: string }>; error?: { code: string; message: string } },
      };
    };
    const secret = () => new TextEncoder().encode(srv.project.clientSecret);
    const sign = (claims: Record<string, unknown>, build: (j: SignJWT) => SignJWT = (j) => j) =>
      build(
        new SignJWT({ projectId: srv.project.id, ...claims }).setProtectedHeader({ alg: 'HS256' }).setAudience(EMBED_TOKEN_AUDIENCE),
      ).sign(secret());

    it('an unscoped token reads the project logs, one log, a trace and decrypts them; it is a short-lived HS256 JWT', async () => {
      const token = await client.generateEmbedToken();
      const [header, payload] = token
        .split('.')
        .slice(0, 2)
        .map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, number | string>);
      assert.equal(header!.alg, 'HS256');
      assert.equal(payload!.projectId, srv.project.id);
      assert.equal(Number(payload!.exp) - Number(payload!.iat), 900, 'default expiry: 15 minutes');
      const list = await get(token, '/logs');
      assert.equal(list.status, 200);
      assert.equal(list.body.logs!.length, 3);
      assert.equal((await get(token, `/logs/${ids.b1}`)).status, 200);
      const trace = await client.reader({ projectId: srv.project.id, readKey: token }).getTrace('trace-a');
      assert.deepEqual(
        trace.map((l) => l.id),
        [ids.a1, ids.a2],
      );
      assert.equal(trace[0]!.decryptedPayload?.actor, 'alice');
    });

    it('a token scoped to a trace or an actor sees only that', async () => {
      const t = await client.generateEmbedToken({ traceId: 'trace-a', expiresIn: 60 });
      assert.deepEqual((await get(t, '/logs')).body.logs!.map((l) => l.id).sort(), [ids.a1, ids.a2].sort());
      assert.deepEqual((await get(t, '/logs?traceId=trace-b')).body.logs, [], 'asking outside the scope finds nothing');
      assert.equal((await get(t, `/logs/${ids.b1}`)).status, 404);
      assert.equal((await get(t, '/traces/trace-b')).status, 404);
      assert.equal((await get(t, '/traces/trace-a')).status, 200);
      assert.equal((await get(t, `/logs/${ids.b1}/proof`)).status, 404, 'proofs outside the scope are hidden too');
      assert.notEqual((await get(t, `/logs/${ids.a1}/proof`)).status, 403);

      const byActor = await client.generateEmbedToken({ actor: 'alice' });
      assert.deepEqual((await get(byActor, '/logs')).body.logs!.map((l) => l.id).sort(), [ids.a1, ids.b1].sort());
      assert.deepEqual(
        (await get(byActor, '/traces/trace-a')).body.logs!.map((l) => l.id),
        [ids.a1],
      );
      assert.equal((await get(byActor, `/logs/${ids.a2}`)).status, 404);
    });

    it('is read-only: no ingest, no proxy, no events, no key management, no other project', async () => {
      const token = await client.generateEmbedToken();
      const post = (path: string, body: unknown) =>
        fetch(srv.url + path, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const ingest = await post('/v1/log', { payload: { a: 1 } });
      assert.equal(ingest.status, 403);
      assert.equal(((await ingest.json()) as { error: { code: string } }).error.code, 'wrong_credential_class');
      assert.equal((await post('/v1/proxy', { target: 'https://example.com', payload: {} })).status, 403);
      assert.equal((await post('/v1/projects', { name: 'x', credentialClass: 'live' })).status, 403);
      const events = await get(token, '/events');
      assert.equal(events.status, 403);
      assert.match(events.body.error!.message, /embed tokens read logs, traces and proofs only/);
      const foreign = await get(token, '/logs', other.id);
      assert.equal(foreign.status, 403);
      assert.equal(foreign.body.error!.code, 'project_forbidden');
    });

    it('refuses alg none, RS256, expired, no exp, too long, wrong secret, wrong audience, unknown project, tampered, garbage', async () => {
      const now = Math.floor(Date.now() / 1000);
      const { privateKey } = await generateKeyPair('RS256');
      const other256 = await new SignJWT({ projectId: other.id })
        .setProtectedHeader({ alg: 'HS256' })
        .setAudience(EMBED_TOKEN_AUDIENCE)
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(other.clientSecret));
      const good = await client.generateEmbedToken();
      const [h, p, s] = good.split('.');
      const claims = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
      const tampered = [
        h,
        Buffer.from(JSON.stringify({ ...claims, projectId: srv.project.id, scope: undefined, exp: now + 9999 })).toString('base64url'),
        s,
      ].join('.');
      const cases: Array<[string, string, RegExp]> = [
        [
          'alg none',
          new UnsecuredJWT({ projectId: srv.project.id }).setAudience(EMBED_TOKEN_AUDIENCE).setIssuedAt().setExpirationTime('5m').encode(),
          /algorithm "none"/,
        ],
        [
          'RS256',
          await new SignJWT({ projectId: srv.project.id })
            .setProtectedHeader({ alg: 'RS256' })
            .setAudience(EMBED_TOKEN_AUDIENCE)
            .setIssuedAt()
            .setExpirationTime('5m')
            .sign(privateKey),
          /algorithm "RS256"/,
        ],
        ['expired', await sign({}, (j) => j.setIssuedAt(now - 600).setExpirationTime(now - 300)), /expired/],
        ['no exp', await sign({}, (j) => j.setIssuedAt()), /"exp"/],
        ['no iat', await sign({}, (j) => j.setExpirationTime('5m')), /"iat"/],
        ['lifetime over 24 h', await sign({}, (j) => j.setIssuedAt().setExpirationTime('25h')), /lifetime/],
        [
          'wrong secret',
          await new SignJWT({ projectId: srv.project.id })
            .setProtectedHeader({ alg: 'HS256' })
            .setAudience(EMBED_TOKEN_AUDIENCE)
            .setIssuedAt()
            .setExpirationTime('5m')
            .sign(new TextEncoder().encode('nope')),
          /signature/,
        ],
        [
          'wrong audience',
          await new SignJWT({ projectId: srv.project.id })
            .setProtectedHeader({ alg: 'HS256' })
            .setAudience('someone-else')
            .setIssuedAt()
            .setExpirationTime('5m')
            .sign(secret()),
          /"aud"/,
        ],
        [
          'unknown project',
          await new SignJWT({ projectId: 'prj_live_unknown0000' })
            .setProtectedHeader({ alg: 'HS256' })
            .setAudience(EMBED_TOKEN_AUDIENCE)
            .setIssuedAt()
            .setExpirationTime('5m')
            .sign(secret()),
          /signature/,
        ],
        ['tampered claims', tampered, /signature/],
        ['bad scope', await sign({ scope: { logId: 'x' } }, (j) => j.setIssuedAt().setExpirationTime('5m')), /unknown scope field/],
        ['garbage', 'a.b.c', /not a readable JWT/],
      ];
      for (const [name, token, why] of cases) {
        const r = await get(token, '/logs');
        assert.equal(r.status, 401, name);
        assert.equal(r.body.error!.code, 'invalid_api_key', name);
        assert.match(r.body.error!.message, why, name);
      }
      // A valid token of another project reads its own project, never this one.
      assert.equal((await get(other256, '/logs')).status, 403);
      assert.equal((await get(other256, '/logs', other.id)).status, 200);
    });

    it('the client refuses lifetimes over 24 hours', async () => {
      await assert.rejects(client.generateEmbedToken({ expiresIn: 86_401 }), { code: 'invalid_entry' });
    });
  });
}
