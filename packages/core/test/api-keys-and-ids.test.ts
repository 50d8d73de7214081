/**
 * API keys (class prefix, checksum, stored hash), credential handover detection, and time-ordered
 * record ids.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  agentContextHeaders,
  detectCredentialHandover,
  generateApiKey,
  timeOrderedId,
  hashApiKey,
  parseApiKey,
  sha256Hex,
} from '../src/index.js';
import { isCode } from './helpers/core-error.js';

test('API keys: class prefix, checksum, prefix shown, hash stored', () => {
  for (const c of ['human', 'agent', 'service', 'live', 'master'] as const) {
    const key = generateApiKey(c);
    assert.match(key, new RegExp(`^key_${c}_[0-9A-Za-z]{38}$`));
    const parsed = parseApiKey(key);
    assert.equal(parsed.credentialClass, c);
    assert.equal(parsed.apiKeyPrefix, key.slice(0, `key_${c}_`.length + 8));
    assert.equal(hashApiKey(key), sha256Hex(key));
  }
  const key = generateApiKey('agent');
  const flipped = key.slice(0, 12) + (key[12] === 'a' ? 'b' : 'a') + key.slice(13);
  assert.throws(() => parseApiKey(flipped), isCode('invalid_key'));
  assert.throws(() => parseApiKey(key.slice(0, -1)), isCode('invalid_key'));
  assert.throws(() => parseApiKey(key.replace('key_agent_', 'key_human_')), isCode('invalid_key'));
  assert.throws(() => parseApiKey('key_robot_' + key.slice(10)), isCode('invalid_key'));
  assert.throws(() => parseApiKey('Bearer ' + key), isCode('invalid_key'));
});

test('credential handover: a human key with agent context, in any header spelling', () => {
  assert.deepEqual(agentContextHeaders(['X-Agent-Rationale', 'x_agent_tool', 'X-Service-Agent-ID', 'content-type']), [
    'x-agent-rationale',
    'x-agent-tool',
  ]);
  assert.equal(detectCredentialHandover('human', ['x-agent-rationale']).detected, true);
  // Every spelling the normalised rule (lower case, underscores as dashes, prefix x-agent-) takes.
  const names = [
    'X_Agent-Mixed',
    'x-AGENT_under',
    'X-AGENT-',
    'xagent-no',
    'x-agentno',
    'x--agent-no',
    'x-agen-t-no',
    'X-Agent',
    'y-agent-no',
  ];
  const reference = names
    .map((n) => n.toLowerCase().replace(/_/g, '-'))
    .filter((n) => n.startsWith('x-agent-'))
    .sort();
  assert.deepEqual(agentContextHeaders(names), reference);
  assert.deepEqual(reference, ['x-agent-', 'x-agent-mixed', 'x-agent-under']);
  // X-Service-Agent-ID alone is the actor label a human's CLI may set: not a handover.
  assert.equal(detectCredentialHandover('human', ['X-SERVICE-AGENT-ID']).detected, false);
  assert.equal(detectCredentialHandover('human', ['x_service_agent_id', 'x-service-run-id']).detected, false);
  assert.deepEqual(detectCredentialHandover('human', ['X-Service-Agent-ID', 'X-Agent-Rationale']), {
    detected: true,
    agentHeaders: ['x-agent-rationale'],
  });
  assert.equal(detectCredentialHandover('human', ['x-service-action', 'x-service-run-id']).detected, false);
  assert.equal(detectCredentialHandover('agent', ['x-agent-rationale']).detected, false);
  assert.equal(detectCredentialHandover('service', ['x-agent-rationale']).detected, false);
});

test('timeOrderedId: base62 of the asked length, sorting by time in byte order, random after the time', () => {
  const t0 = Date.UTC(2026, 10, 26, 12, 0, 0);
  const ids: string[] = [];
  for (let i = 0; i < 2000; i++) ids.push(timeOrderedId(24, t0 + i * 37));
  for (const id of ids) assert.match(id, /^[0-9a-z]{9}[0-9A-Za-z]{15}$/);
  // Later ids sort after earlier ones, also as JavaScript and SQLite's BINARY collation compare.
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1]!.slice(0, 9) < ids[i]!.slice(0, 9));
  assert.deepEqual([...ids].reverse().sort(), ids);
  // Ids of the same millisecond differ in their random part.
  const same = new Set(Array.from({ length: 1000 }, () => timeOrderedId(24, t0)));
  assert.equal(same.size, 1000);
  assert.equal(new Set([...same].map((id) => id.slice(0, 9))).size, 1);
  // The prefix is the time: year 5000 still fits and still sorts after today.
  assert.ok(timeOrderedId(24, Date.UTC(5000, 0, 1)) > timeOrderedId(24, t0));
  assert.equal(parseInt(timeOrderedId(24, t0).slice(0, 9), 36), t0);
  assert.throws(() => timeOrderedId(20), RangeError);
  assert.match(timeOrderedId(21, -5), /^0{9}[0-9A-Za-z]{12}$/);
});
