/**
 * Configuration fails fast with clear messages; telemetry presets and IP anonymization;
 * reference ids and hydration; embed tokens need projectId and clientSecret.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  ServiceClient,
  anonymizeIp,
  collectTelemetry,
  hydrateReferences,
  InMemoryReferenceStore,
  referenceId,
  resolveTelemetry,
  locationFromHeaders,
  type ServiceClientConfig,
} from '../src/index.js';

const apiKey = 'key_service_' + 'a'.repeat(38);
const base: ServiceClientConfig = { apiKey, encryptionKey: 'k', endpoint: 'http://127.0.0.1:1', flushOnExit: false };

function refuses(config: Partial<ServiceClientConfig> & Record<string, unknown>, message: RegExp) {
  assert.throws(
    () => new ServiceClient(config as ServiceClientConfig),
    (e: Error & { code?: string }) => {
      assert.equal(e.code, 'invalid_config');
      assert.match(e.message, message);
      return true;
    },
  );
}

describe('ServiceClient config', () => {
  it('needs an encryption key, or a keyring with an active id', () => {
    refuses({ apiKey, endpoint: 'http://x' }, /encryptionKey is required unless both keyring and activeEncryptionKeyId/);
    refuses({ apiKey, keyring: { a: 'x' } }, /activeEncryptionKeyId \(required with keyring\)/);
    refuses({ apiKey, activeEncryptionKeyId: 'a' }, /keyring must be an object/);
    refuses({ apiKey, encryptionKey: '' }, /encryptionKey must be a non-empty string/);
    refuses({ apiKey, encryptionKey: 'x', keyring: { a: 'x' }, activeEncryptionKeyId: 'a' }, /not both/);
  });

  it('refuses more than 5 keyring keys and an active id outside the keyring', () => {
    const keyring = Object.fromEntries(['a', 'b', 'c', 'd', 'e', 'f'].map((k) => [k, 'secret-' + k]));
    refuses({ apiKey, keyring, activeEncryptionKeyId: 'a' }, /holds 6 keys; the maximum is 5/);
    refuses({ apiKey, keyring: { a: 'x', b: 'y' }, activeEncryptionKeyId: 'c' }, /"c" is not a key of the keyring \(ids: a, b\)/);
    refuses({ apiKey, keyring: { 'sha256:abc': 'x' }, activeEncryptionKeyId: 'sha256:abc' }, /must be 1-64 characters/);
    refuses({ apiKey, keyring: {}, activeEncryptionKeyId: 'a' }, /keyring is empty/);
  });

  it('refuses a bad endpoint URL', () => {
    refuses({ ...base, endpoint: 'not a url' }, /endpoint "not a url" is not a valid URL/);
    refuses({ ...base, endpoint: 'ftp://example.com' }, /http or https/);
    refuses({ ...base, endpoint: 'https://u:p@example.com' }, /must not carry credentials/);
    refuses({ ...base, endpoint: 'https://example.com/?a=1' }, /without a query/);
  });

  it('refuses a missing or read-only apiKey', () => {
    refuses({ ...base, apiKey: '' }, /apiKey must be a non-empty string/);
    refuses({ ...base, apiKey: 'key_live_' + 'a'.repeat(38) }, /ingest key/);
  });

  it('refuses unknown redact/reference keys, overlaps and bad telemetry', () => {
    refuses({ ...base, redactKeys: ['email'] }, /"email" is not "actor", "target" or "metadata.<fieldName>"/);
    refuses({ ...base, redactKeys: ['actor'], referenceKeys: ['actor'] }, /both redactKeys and referenceKeys/);
    refuses({ ...base, telemetry: { preset: 'paranoid' as 'strict' } }, /preset must be strict, standard or full/);
    refuses({ ...base, telemetry: { ip: 'hash' as 'skip' } }, /ip must be track, anonymize or skip/);
    refuses({ ...base, delivery: { batchSize: 0 } }, /delivery.batchSize must be an integer/);
    refuses({ ...base, referenceStore: {} as never }, /put\(reference\)/);
    refuses({ ...base, onDeliveryFailure: {} as never }, /onDeliveryFailure must be a function or a FileFallbackTransport/);
  });

  it('accepts a good keyring and trims the endpoint', async () => {
    const c = new ServiceClient({
      apiKey,
      keyring: { k1: 'one', k2: 'two' },
      activeEncryptionKeyId: 'k2',
      endpoint: 'https://ex.com/',
      flushOnExit: false,
    });
    assert.equal(c.endpoint, 'https://ex.com');
    assert.equal(c.activeEncryptionKeyId, 'k2');
    await c.shutdown();
  });

  it('generateEmbedToken needs projectId and clientSecret', async () => {
    const c = new ServiceClient(base);
    await assert.rejects(c.generateEmbedToken(), { code: 'embed_token_unavailable', message: /needs projectId and clientSecret/ });
    await c.shutdown();
  });

  it('log() refuses bad entries with the field named, and everything after shutdown', async () => {
    const c = new ServiceClient(base);
    await assert.rejects(c.log({} as never), { code: 'invalid_entry', message: /action is required/ });
    await assert.rejects(c.log({ action: 'a', id: 'short' }), { code: 'invalid_entry', message: /id must be 16-128/ });
    await assert.rejects(c.log({ action: 'a', occurredAt: 'yesterday' }), { code: 'invalid_entry', message: /occurredAt/ });
    await assert.rejects(c.log({ action: 'a', metadata: { big: 'x'.repeat(5000) } }), { code: 'invalid_entry', message: /limit is 4096/ });
    await assert.rejects(c.log({ action: 'a', payload: { n: 10n } }), { code: 'invalid_entry', message: /JSON-serializable/ });
    assert.equal(c.pendingLogs, 0, 'a refused entry leaves nothing queued');
    await c.shutdown();
    await assert.rejects(c.log({ action: 'a' }), { code: 'client_closed' });
  });
});

describe('telemetry', () => {
  it('presets collect what the docs say', () => {
    assert.deepEqual(resolveTelemetry({ preset: 'strict' }), { preset: 'strict', ip: 'skip', userAgent: 'skip', location: false });
    assert.deepEqual(resolveTelemetry(undefined), { preset: 'standard', ip: 'anonymize', userAgent: 'parse', location: true });
    assert.deepEqual(resolveTelemetry({ preset: 'full', ip: 'anonymize' }), {
      preset: 'full',
      ip: 'anonymize',
      userAgent: 'track',
      location: true,
    });
  });

  it('anonymizes IPv4 (last octet) and IPv6 (last 80 bits)', () => {
    assert.equal(anonymizeIp('203.0.113.77'), '203.0.113.0');
    assert.equal(anonymizeIp('::ffff:198.51.100.9'), '198.51.100.0');
    assert.equal(anonymizeIp('2001:db8:85a3:8d3:1319:8a2e:370:7348'), '2001:db8:85a3::');
    assert.equal(anonymizeIp('2001:db8::1'), '2001:db8::');
    assert.equal(anonymizeIp('[2001:db8:1:2::9]:443'), '2001:db8:1::');
    assert.equal(anonymizeIp('not-an-ip'), undefined);
  });

  const ua = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15';
  it('strict collects nothing; standard anonymizes, parses, keeps the country', async () => {
    const req = { headers: { 'x-forwarded-for': '8.8.8.8, 10.0.0.1', 'user-agent': ua } };
    assert.equal(await collectTelemetry(resolveTelemetry({ preset: 'strict' }), req), undefined);
    const std = await collectTelemetry(resolveTelemetry({}), req);
    assert.equal(std?.ip, '8.8.8.0');
    assert.equal(std?.userAgent, undefined, 'standard does not keep the raw user agent');
    assert.equal(std?.userAgentParsed?.browser, 'Safari');
    assert.equal(std?.userAgentParsed?.os, 'Mac OS');
    assert.deepEqual(std?.location, { country: 'US', source: 'geoip-lite' });
  });

  it('full keeps the raw values; edge headers win over the database; skip overrides work', async () => {
    const headers = { 'user-agent': ua, 'cf-ipcountry': 'de', 'cf-ipcity': 'M%C3%BCnchen' };
    const full = await collectTelemetry(resolveTelemetry({ preset: 'full' }), { ip: '8.8.8.8', headers });
    assert.equal(full?.ip, '8.8.8.8');
    assert.equal(full?.userAgent, ua);
    assert.deepEqual(full?.location, { country: 'DE', city: 'München', source: 'edge-header' });
    const noUa = await collectTelemetry(resolveTelemetry({ preset: 'full', userAgent: 'skip', location: false }), {
      ip: '8.8.8.8',
      headers,
    });
    assert.deepEqual(noUa, { ip: '8.8.8.8' });
    assert.equal(locationFromHeaders({ 'x-vercel-ip-country': 'FR' })?.country, 'FR');
    assert.equal(locationFromHeaders({ 'cloudfront-viewer-country': 'JP' })?.country, 'JP');
    assert.equal(locationFromHeaders({ 'cf-ipcountry': 'XX' }), undefined);
  });

  it('private addresses have no location', async () => {
    const t = await collectTelemetry(resolveTelemetry({}), { socket: { remoteAddress: '::ffff:192.168.1.20' } });
    assert.deepEqual(t, { ip: '192.168.1.0' });
  });
});

describe('references', () => {
  it('ids are stable per value and secret, and differ across secrets', () => {
    assert.equal(referenceId('alice@example.com', 's1'), referenceId('alice@example.com', 's1'));
    assert.notEqual(referenceId('alice@example.com', 's1'), referenceId('bob@example.com', 's1'));
    assert.notEqual(referenceId('alice@example.com', 's1'), referenceId('alice@example.com', 's2'));
    assert.match(referenceId({ a: 1 }, 's'), /^ref_[0-9a-f]{32}$/);
  });

  it('hydration replaces known references anywhere and keeps unknown ones', async () => {
    const store = new InMemoryReferenceStore();
    const id = referenceId('alice', 's');
    store.put({ id, key: 'actor', value: 'alice', logId: 'log_x' });
    const unknown = `[REF:ref_${'0'.repeat(32)}]`;
    const out = await hydrateReferences(
      { actor: `[REF:${id}]`, metadata: { list: [`[REF:${id}]`, unknown], text: `x [REF:${id}]` } },
      store,
    );
    assert.deepEqual(out, { actor: 'alice', metadata: { list: ['alice', unknown], text: `x [REF:${id}]` } });
    const viaFn = await hydrateReferences(`[REF:${id}]`, async (ref) => (ref === id ? 'A' : undefined));
    assert.equal(viaFn, 'A');
  });
});
