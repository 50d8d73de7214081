/** The SSE parser used on the fetch-streamed event stream. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseParser, type SseEvent } from '../src/sse.js';

function parse(chunks: string[]): { events: SseEvent[]; comments: string[] } {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const p = new SseParser(
    (e) => events.push(e),
    (c) => comments.push(c),
  );
  for (const c of chunks) p.push(c);
  return { events, comments };
}

const STREAM =
  ': connected\n\nid: 7\nevent: security.policy_violation\ndata: {"a":1}\n\n: heartbeat\n\nid: 8\nevent: security.policy_violation\ndata: {"b":\ndata: 2}\n\n';

test('frames: id, event, multi-line data; comments reported apart', () => {
  const { events, comments } = parse([STREAM]);
  assert.deepEqual(events, [
    { id: '7', event: 'security.policy_violation', data: '{"a":1}' },
    { id: '8', event: 'security.policy_violation', data: '{"b":\n2}' },
  ]);
  assert.deepEqual(comments, ['connected', 'heartbeat']);
});

test('any chunking gives the same events, CRLF and CR line ends included', () => {
  const whole = parse([STREAM]).events;
  for (let size = 1; size < 12; size++) {
    const chunks: string[] = [];
    for (let i = 0; i < STREAM.length; i += size) chunks.push(STREAM.slice(i, i + size));
    assert.deepEqual(parse(chunks).events, whole, `chunks of ${size}`);
  }
  const crlf = STREAM.replace(/\n/g, '\r\n');
  assert.deepEqual(parse(crlf.split('')).events, whole, 'CRLF split between \\r and \\n');
  // A final lone CR may be half of a CRLF, so its frame waits for the next byte.
  const cr = STREAM.replace(/\n/g, '\r');
  assert.deepEqual(parse([cr]).events, whole.slice(0, 1));
  assert.deepEqual(parse([cr, ': next\r']).events, whole);
});

test('an unfinished frame is not dispatched; a frame without data is dropped; default event name', () => {
  assert.deepEqual(parse(['data: x\n']).events, []);
  assert.deepEqual(parse(['event: e\n\n']).events, []);
  assert.deepEqual(parse(['data:no-space\n\n']).events, [{ event: 'message', data: 'no-space' }]);
  assert.deepEqual(parse(['id: 1\ndata: a\n\ndata: b\n\n']).events, [
    { id: '1', event: 'message', data: 'a' },
    { id: '1', event: 'message', data: 'b' },
  ]);
});

test('the last event id, also from a frame with no data (a stream that names where it starts)', () => {
  const events: SseEvent[] = [];
  const p = new SseParser((e) => events.push(e));
  assert.equal(p.lastEventId, undefined);
  p.push(': connected\nid: 41\n\n');
  assert.deepEqual(events, [], 'an id-only frame dispatches nothing');
  assert.equal(p.lastEventId, '41');
  p.push('id: 42\nevent: log\ndata: {}\n\n');
  assert.equal(p.lastEventId, '42');
  assert.deepEqual(events, [{ id: '42', event: 'log', data: '{}' }]);
});
