/** The Story Visualizer's model: time order, parent spans from metadata, payloads and traceparent. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LogEntry } from '../src/api.js';
import { buildTraceGraph, formatDuration, spanFacts, traceparentSpanId, waterfallOrder } from '../src/graph.js';

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

test('span facts: the plain spanId/parentSpanId fields win over metadata and payload', () => {
  assert.deepEqual(spanFacts({ spanId: 'own', parentSpanId: 'par', metadata: { spanId: 'm', parentSpanId: 'mp' } }), {
    spanId: 'own',
    parentSpanId: 'par',
    parentFrom: 'parentSpanId',
  });
});

test('graph: parents from plain span ids, a run node for a parent span no entry owns, steps in time order, lanes by agent', () => {
  // planner's run (span R, no entry of its own) holds plan + an LLM call + a nested tool run (span T, owned by an entry).
  const entries = [
    entry('tool-step', '2026-01-01T00:00:04Z', { actor: 'tool', parentSpanId: 'T', spanId: 's3' } as Partial<LogEntry>),
    entry('plan', '2026-01-01T00:00:01Z', { actor: 'planner', parentSpanId: 'R', spanId: 's1' } as Partial<LogEntry>),
    entry('llm', '2026-01-01T00:00:02Z', {
      actor: 'planner',
      parentSpanId: 'R',
      spanId: 's2',
      startedAt: '2026-01-01T00:00:02.000Z',
      endedAt: '2026-01-01T00:00:03.250Z',
    } as Partial<LogEntry>),
    entry('tool-run', '2026-01-01T00:00:03Z', { actor: 'tool', parentSpanId: 'R', spanId: 'T' } as Partial<LogEntry>),
  ];
  const g = buildTraceGraph(entries);
  assert.deepEqual(
    g.nodes.map((n) => n.key),
    ['span:R', 'plan', 'llm', 'tool-run', 'tool-step'],
  );
  const idx = (k: string) => g.nodes.find((n) => n.key === k)!.index;
  assert.deepEqual(
    g.edges.map((e) => [g.nodes[e.from]!.key, g.nodes[e.to]!.key, e.kind]),
    [
      ['span:R', 'plan', 'parent'],
      ['plan', 'llm', 'sequence'],
      ['llm', 'tool-run', 'sequence'],
      ['tool-run', 'tool-step', 'parent'],
    ],
    "a span's node points to its first step; the steps of one span follow one another",
  );
  assert.deepEqual(
    g.nodes.map((n) => (n.parent === undefined ? undefined : g.nodes[n.parent]!.key)),
    [undefined, 'span:R', 'span:R', 'span:R', 'tool-run'],
  );
  assert.deepEqual(g.agents, ['planner', 'tool']);
  assert.equal(g.nodes[idx('span:R')]!.agent, 'planner');
  assert.equal(g.nodes[idx('tool-step')]!.depth, 2);
  const llm = g.nodes[idx('llm')]!;
  assert.equal(llm.endMs! - llm.startMs, 1250);
  assert.equal(formatDuration(1250), '1.25 s');
  assert.deepEqual(
    waterfallOrder(g).map((n) => n.key),
    ['span:R', 'plan', 'llm', 'tool-run', 'tool-step'],
  );
});

test('graph: entries with no parent fall back to trace order (sequence edges); payload span facts count', () => {
  const entries = [
    entry('c', '2026-01-01T00:00:03Z', { metadata: { parentSpanId: 'root' } }),
    entry('a', '2026-01-01T00:00:01Z', { metadata: { spanId: 'root' } }),
    entry('b', '2026-01-01T00:00:02Z'),
    entry('d', '2026-01-01T00:00:09Z', { occurredAt: '2026-01-01T00:00:00Z' }),
  ];
  const payloads = new Map([['b', { agent: { traceparent: `00-${'1'.repeat(32)}-${'ab'.repeat(8)}-01` } }]]);
  const g = buildTraceGraph(entries, payloads);
  assert.deepEqual(
    g.nodes.map((n) => n.key),
    ['d', 'a', 'span:abababababababab', 'b', 'c'],
    'occurredAt wins over receivedAt; the run node sorts before its first child',
  );
  assert.deepEqual(
    g.edges.map((e) => [g.nodes[e.from]!.key, g.nodes[e.to]!.key, e.kind]),
    [
      ['d', 'a', 'sequence'],
      ['a', 'span:abababababababab', 'sequence'],
      ['span:abababababababab', 'b', 'parent'],
      ['a', 'c', 'parent'],
    ],
    'roots (d, a, the run) follow one another in time',
  );
});

test('graph: an entry is never its own parent; an empty trace is empty; durations format', () => {
  const g = buildTraceGraph([entry('x', '2026-01-01T00:00:00Z', { metadata: { spanId: 's', parentSpanId: 's' } })]);
  assert.equal(g.edges.length, 0);
  assert.equal(g.nodes.length, 1);
  const empty = buildTraceGraph([]);
  assert.deepEqual([empty.nodes.length, empty.edges.length, empty.agents.length], [0, 0, 0]);
  assert.equal(formatDuration(850), '850 ms');
  assert.equal(formatDuration(undefined), '');
  assert.equal(formatDuration(125_000), '2 min 5 s');
});
