/** The Story Visualizer's model: time order, parent spans from metadata, payloads and traceparent. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LogEntry } from '../src/api.js';
import { buildTraceGraph, spanFacts, traceparentSpanId } from '../src/graph.js';

function entry(id: string, at: string, extra: Partial<LogEntry> = {}): LogEntry {
  return {
    id,
    projectId: 'prj_live_x',
    receivedAt: at,
    actor: 'a',
    action: 'act',
    traceId: 't',
    actorType: 'agent',
    credentialHandoverDetected: false,
    source: 'log',
    status: 'complete',
    requestProof: false,
    payloadHash: null,
    payload: { v: 1, alg: 'A256GCM', kid: 'k', iv: '', ct: '', tag: '' },
    ...extra,
  };
}

const SPAN = '00f067aa0ba902b7';
const TP = `00-4bf92f3577b34da6a3ce929d0e0e4736-${SPAN}-01`;

test('traceparent: the span id of a valid header, nothing for malformed or all-zero ones', () => {
  assert.equal(traceparentSpanId(TP), SPAN);
  assert.equal(traceparentSpanId([TP.toUpperCase()]), SPAN);
  assert.equal(traceparentSpanId(`00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`), undefined);
  for (const bad of ['', 'nope', `00-short-${SPAN}-01`, 42, null, undefined, {}]) assert.equal(traceparentSpanId(bad), undefined);
});

test('span facts: metadata first, then the payload (top level, metadata, agent, recorded request headers)', () => {
  assert.deepEqual(spanFacts({ metadata: { spanId: 's1', parentSpanId: 'p1' } }), {
    spanId: 's1',
    parentSpanId: 'p1',
    parentFrom: 'metadata.parentSpanId',
  });
  assert.deepEqual(spanFacts({ metadata: { traceparent: TP } }), { parentSpanId: SPAN, parentFrom: 'metadata.traceparent' });
  assert.deepEqual(spanFacts({}, { agent: { traceparent: TP } }), { parentSpanId: SPAN, parentFrom: 'payload.agent.traceparent' });
  assert.deepEqual(spanFacts({}, { request: { headers: { TraceParent: TP } } }), {
    parentSpanId: SPAN,
    parentFrom: 'payload.request.headers.traceparent',
  });
  assert.deepEqual(spanFacts({}, { metadata: { parent_span_id: 'p2', span_id: 's2' } }), {
    spanId: 's2',
    parentSpanId: 'p2',
    parentFrom: 'payload.metadata.parent_span_id',
  });
  // Plain metadata wins over the payload; junk values are ignored.
  assert.equal(spanFacts({ metadata: { parentId: 'meta' } }, { parentSpanId: 'payload' }).parentSpanId, 'meta');
  assert.deepEqual(spanFacts({ metadata: { parentSpanId: 7, spanId: '' } }), {});
});

test('graph: nodes in time order, sequence edges, parent edges and lanes by parent span', () => {
  const entries = [
    entry('c', '2026-01-01T00:00:03Z', { metadata: { parentSpanId: 'root' } }),
    entry('a', '2026-01-01T00:00:01Z', { metadata: { spanId: 'root' } }),
    entry('b', '2026-01-01T00:00:02Z'),
    entry('d', '2026-01-01T00:00:09Z', { occurredAt: '2026-01-01T00:00:00Z' }),
  ];
  const payloads = new Map([['b', { agent: { traceparent: `00-${'1'.repeat(32)}-${'ab'.repeat(8)}-01` } }]]);
  const g = buildTraceGraph(entries, payloads);
  assert.deepEqual(
    g.nodes.map((n) => n.entry.id),
    ['d', 'a', 'b', 'c'],
    'occurredAt wins over receivedAt',
  );
  assert.deepEqual(
    g.edges.filter((e) => e.kind === 'sequence').map((e) => [e.from, e.to]),
    [
      [0, 1],
      [1, 2],
      [2, 3],
    ],
  );
  assert.deepEqual(
    g.edges.filter((e) => e.kind === 'parent').map((e) => [e.from, e.to]),
    [[1, 3]],
    'a owns span root, c names it as parent; b names a span no entry owns',
  );
  assert.deepEqual(
    g.lanes.map((l) => [l.parentSpanId, l.ownerIndex]),
    [
      [undefined, undefined],
      ['abababababababab', undefined],
      ['root', 1],
    ],
  );
  assert.deepEqual(
    g.nodes.map((n) => n.lane),
    [0, 0, 1, 2],
  );
});

test('graph: equal times keep the server order; an empty trace and an all-children trace have no empty lane', () => {
  const same = '2026-01-01T00:00:00Z';
  const g = buildTraceGraph([entry('x', same, { metadata: { parentId: 'p' } }), entry('y', same, { metadata: { parentId: 'p' } })]);
  assert.deepEqual(
    g.nodes.map((n) => [n.entry.id, n.lane]),
    [
      ['x', 0],
      ['y', 0],
    ],
  );
  assert.equal(g.lanes.length, 1);
  assert.equal(g.lanes[0]!.parentSpanId, 'p');
  const empty = buildTraceGraph([]);
  assert.deepEqual([empty.nodes.length, empty.edges.length, empty.lanes.length], [0, 0, 1]);
});

test('graph: an entry is never its own parent', () => {
  const g = buildTraceGraph([entry('x', '2026-01-01T00:00:00Z', { metadata: { spanId: 's', parentSpanId: 's' } })]);
  assert.equal(g.edges.length, 0);
});
