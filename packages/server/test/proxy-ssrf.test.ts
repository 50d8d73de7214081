/**
 * The SSRF guard on a corpus of targets: every blocked one must be refused before anything is
 * sent, every allowed one must pass with exactly the addresses that were checked. Host names
 * go through a fake resolver, so the corpus also covers names that resolve somewhere bad.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  addressBlockReason,
  parseTarget,
  TargetBlockedError,
  TargetGuard,
  TargetInvalidError,
  TargetUnresolvableError,
  type Resolver,
} from '../src/proxy/ssrf.js';

const DNS: Record<string, string[]> = {
  // bad answers
  'rebind.example': ['127.0.0.1'],
  'mixed.example': ['93.184.216.34', '10.0.0.5'],
  'mixed-late.example': ['2606:4700::6812:7c0', '8.8.8.8', 'fe80::1'],
  'v6local.example': ['::1'],
  'mapped.example': ['::ffff:169.254.169.254'],
  'cgnat.example': ['100.64.1.1'],
  'ula.example': ['fd00::5'],
  '169.254.169.254.nip.io': ['169.254.169.254'],
  '127.0.0.1.nip.io': ['127.0.0.1'],
  'private.example': ['192.168.10.20'],
  'nat64bad.example': ['64:ff9b::a00:1'],
  'zero.example': ['0.0.0.0'],
  'multicast.example': ['239.1.2.3'],
  // good answers
  'api.openai.com': ['104.18.7.192', '2606:4700::6812:7c0'],
  'api.anthropic.com': ['160.79.104.10'],
  'example.com': ['93.184.216.34'],
  'dual.example': ['8.8.4.4', '2001:4860:4860::8844'],
  'localhost-ish.example': ['1.2.3.4'],
};

const fakeResolver: Resolver = async (name) => {
  const hit = DNS[name.toLowerCase()];
  if (!hit) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
  return hit;
};

const BLOCKED: string[] = [
  // loopback in every IPv4 notation the WHATWG parser folds
  'http://127.0.0.1/',
  'http://127.1/',
  'http://2130706433/',
  'http://0x7f000001/',
  'http://017700000001/',
  'http://0177.0.0.1/',
  'http://0x7f.0x0.0x0.0x1/',
  'http://127.0.0.255:8080/',
  'http://127.255.255.254/',
  // "this network"
  'http://0.0.0.0/',
  'http://0/',
  'http://0.1.2.3/',
  // RFC 1918
  'http://10.0.0.1/',
  'http://10.255.255.255/',
  'http://012.0.0.1/',
  'http://167772161/',
  'http://172.16.0.1/',
  'http://172.31.255.255/',
  'http://192.168.0.1/',
  'https://192.168.1.1:443/',
  'http://0xc0a80001/',
  // link-local and cloud metadata
  'http://169.254.169.254/latest/meta-data/',
  'http://169.254.170.2/v2/credentials',
  'http://2852039166/',
  'http://0xa9fea9fe/',
  'http://0251.0376.0251.0376/',
  'http://169.254.0.1/',
  'http://168.63.129.16/machine',
  'http://100.100.100.200/latest/meta-data/',
  // CGNAT
  'http://100.64.0.1/',
  'http://100.127.255.255/',
  // multicast, broadcast, reserved, documentation, benchmarking, special purpose
  'http://224.0.0.1/',
  'http://239.255.255.250:1900/',
  'http://255.255.255.255/',
  'http://240.0.0.1/',
  'http://192.0.2.1/',
  'http://198.51.100.7/',
  'http://203.0.113.9/',
  'http://198.18.0.1/',
  'http://192.0.0.192/',
  'http://192.88.99.1/',
  // IPv6 loopback, unspecified
  'http://[::1]/',
  'http://[0:0:0:0:0:0:0:1]/',
  'http://[::]/',
  // IPv4-mapped and IPv4-compatible forms
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:7f00:1]/',
  'http://[::ffff:10.0.0.1]/',
  'http://[::ffff:169.254.169.254]/',
  'http://[::ffff:a9fe:a9fe]/',
  'http://[::ffff:192.168.0.1]/',
  'http://[::127.0.0.1]/',
  'http://[::10.0.0.1]/',
  'http://[::8.8.8.8]/',
  'http://[::ffff:0:7f00:1]/',
  // NAT64, 6to4, Teredo embedding blocked IPv4 (or private by definition)
  'http://[64:ff9b::127.0.0.1]/',
  'http://[64:ff9b::a9fe:a9fe]/',
  'http://[64:ff9b:1::1]/',
  'http://[2002:7f00:1::]/',
  'http://[2002:a9fe:a9fe::1]/',
  'http://[2002:c0a8:101::1]/',
  'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
  // link-local, ULA, site-local, multicast, documentation, discard, benchmarking
  'http://[fe80::1]/',
  'http://[fc00::1]/',
  'http://[fd00:ec2::254]/latest/meta-data/',
  'http://[fd12:3456:789a::1]/',
  'http://[fec0::1]/',
  'http://[ff02::1]/',
  'http://[ff05::1:3]/',
  'http://[2001:db8::1]/',
  'http://[3fff::1]/',
  'http://[100::1]/',
  'http://[2001:2::1]/',
  // names refused without resolving
  'http://localhost/',
  'http://LOCALHOST:8080/',
  'http://localhost./',
  'http://api.localhost/',
  'http://metadata.google.internal/computeMetadata/v1/',
  'http://metadata/',
  'http://instance-data/',
  'http://printer.local/',
  'http://db.corp.internal/',
  'http://router.home.arpa/',
  // names that resolve somewhere bad (one bad address is enough)
  'http://rebind.example/',
  'http://mixed.example/',
  'https://mixed-late.example/',
  'http://v6local.example/',
  'http://mapped.example/',
  'http://cgnat.example/',
  'http://ula.example/',
  'http://169.254.169.254.nip.io/',
  'http://127.0.0.1.nip.io/',
  'http://private.example/',
  'http://nat64bad.example/',
  'http://zero.example/',
  'http://multicast.example/',
  // schemes and credentials
  'file:///etc/passwd',
  'gopher://127.0.0.1:70/_x',
  'ftp://example.com/',
  'ws://example.com/socket',
  'javascript:alert(1)',
  'data:text/plain,hi',
  'http://user:pass@example.com/',
  'https://user@example.com/',
];

const ALLOWED: Array<[string, string[]]> = [
  ['https://api.openai.com/v1/chat/completions', ['104.18.7.192', '2606:4700::6812:7c0']],
  ['https://api.anthropic.com/v1/messages', ['160.79.104.10']],
  ['https://example.com:8443/x', ['93.184.216.34']],
  ['https://dual.example/', ['8.8.4.4', '2001:4860:4860::8844']],
  ['http://localhost-ish.example/', ['1.2.3.4']],
  ['http://93.184.216.34/', ['93.184.216.34']],
  ['https://8.8.8.8/', ['8.8.8.8']],
  ['http://1.1.1.1:8080/path?q=1', ['1.1.1.1']],
  ['http://134744072/', ['8.8.8.8']],
  ['https://[2606:4700:4700::1111]/', ['2606:4700:4700::1111']],
  ['https://[2001:4860:4860::8888]/', ['2001:4860:4860::8888']],
  ['http://[::ffff:8.8.8.8]/', ['::ffff:808:808']],
  ['http://[64:ff9b::808:808]/', ['64:ff9b::808:808']],
  ['http://[2002:808:808::1]/', ['2002:808:808::1']],
  ['http://172.15.255.255/', ['172.15.255.255']],
  ['http://172.32.0.1/', ['172.32.0.1']],
  ['http://100.63.255.255/', ['100.63.255.255']],
  ['http://100.128.0.1/', ['100.128.0.1']],
  ['http://192.169.0.1/', ['192.169.0.1']],
  ['http://11.0.0.1/', ['11.0.0.1']],
  ['http://169.253.255.255/', ['169.253.255.255']],
];

test('the corpus is as large as the issue asks', () => {
  assert.ok(BLOCKED.length >= 80, `blocked corpus has ${BLOCKED.length}`);
  assert.ok(ALLOWED.length >= 15, `allowed corpus has ${ALLOWED.length}`);
});

test('every blocked target is refused, with a reason and without an upstream address', async () => {
  const guard = new TargetGuard({ resolver: fakeResolver });
  for (const target of BLOCKED) {
    await assert.rejects(
      guard.check(target),
      (e: unknown) => e instanceof TargetBlockedError && e.message.length > 10,
      `expected ${target} to be blocked`,
    );
  }
});

test('every allowed target passes with exactly the checked addresses', async () => {
  const guard = new TargetGuard({ resolver: fakeResolver });
  for (const [target, addresses] of ALLOWED) {
    const checked = await guard.check(target);
    assert.deepEqual(checked.addresses, addresses, target);
    assert.equal(checked.allowListed, false);
    assert.equal(checked.origin, new URL(target).origin);
  }
});

test('a malformed target is a caller mistake, not a refusal', async () => {
  const guard = new TargetGuard({ resolver: fakeResolver });
  for (const target of ['', 'not a url', '/relative/path', 'http://', 'http://[fe80::1%25eth0]/', 'http://exa mple.com/']) {
    await assert.rejects(guard.check(target), TargetInvalidError, JSON.stringify(target));
  }
});

test('a name that does not resolve is unresolvable (502), not blocked', async () => {
  const guard = new TargetGuard({ resolver: fakeResolver });
  await assert.rejects(guard.check('https://nowhere.example/'), TargetUnresolvableError);
  const empty = new TargetGuard({ resolver: async () => [] });
  await assert.rejects(empty.check('https://empty.example/'), TargetUnresolvableError);
});

test('the allow list admits exactly the named host:port pairs', async () => {
  const guard = new TargetGuard({
    resolver: async () => ['127.0.0.1'],
    allowTargets: ['127.0.0.1:9999', 'localhost:7000', '[::1]:7001', 'internal.svc.local:80'],
  });
  assert.equal((await guard.check('http://127.0.0.1:9999/x')).allowListed, true);
  assert.deepEqual((await guard.check('http://localhost:7000/')).addresses, ['127.0.0.1']);
  assert.equal((await guard.check('http://[::1]:7001/')).allowListed, true);
  assert.equal((await guard.check('http://internal.svc.local/')).allowListed, true);
  // Other ports of the same host, and other notations' ports, stay blocked.
  await assert.rejects(guard.check('http://127.0.0.1:9998/'), TargetBlockedError);
  await assert.rejects(guard.check('http://localhost:7001/'), TargetBlockedError);
  await assert.rejects(guard.check('https://internal.svc.local/'), TargetBlockedError);
  await assert.rejects(guard.check('http://[::1]:9999/'), TargetBlockedError);
});

test('the check resolves once and the connector side reuses exactly that checked answer', async () => {
  let calls = 0;
  // A rebinding resolver: public on the first query, loopback afterwards.
  const rebinding: Resolver = async () => (++calls === 1 ? ['93.184.216.34'] : ['127.0.0.1']);
  const guard = new TargetGuard({ resolver: rebinding });
  assert.deepEqual((await guard.check('http://rebinder.example/')).addresses, ['93.184.216.34']);
  // What the connector asks for (same host and port) is the checked answer, not a new one.
  assert.deepEqual(await guard.addressesFor('rebinder.example', 80), ['93.184.216.34']);
  assert.equal(calls, 1);
});

test('without a cache every resolution is checked again, so a rebinding answer is refused', async () => {
  let calls = 0;
  const rebinding: Resolver = async () => (++calls === 1 ? ['93.184.216.34'] : ['127.0.0.1']);
  const guard = new TargetGuard({ resolver: rebinding, cacheTtlMs: 0 });
  await guard.check('http://rebinder.example/');
  await assert.rejects(guard.addressesFor('rebinder.example', 80), TargetBlockedError);
  assert.equal(calls, 2);
});

test('address classification refuses odd notations from a resolver instead of reinterpreting them', () => {
  for (const odd of ['0x7f.0.0.1', '0177.0.0.1', '2130706433', '127.1', 'localhost', '', '1.2.3.4.5']) {
    assert.notEqual(addressBlockReason(odd), undefined, odd);
  }
  assert.equal(addressBlockReason('8.8.8.8'), undefined);
  assert.equal(addressBlockReason('2001:4860:4860::8888'), undefined);
});

test('parseTarget folds alternate IPv4 notations and strips IPv6 brackets', () => {
  assert.equal(parseTarget('http://0x7f000001:81/').hostname, '127.0.0.1');
  assert.equal(parseTarget('http://0x7f000001:81/').port, 81);
  assert.equal(parseTarget('https://[::1]/').hostname, '::1');
  assert.equal(parseTarget('https://[::1]/').port, 443);
  assert.equal(parseTarget('http://Example.COM./').hostname, 'example.com');
});
