/**
 * The Story Visualizer's model: a trace's entries as a graph, pure (no DOM) so it is tested in
 * Node. Nodes are the entries in time order; edges join each entry to the next (`sequence`) and
 * a child to its parent span (`parent`) when the entry's metadata or decrypted payload names one.
 *
 * Where the parent comes from, first match wins, in metadata then in the decrypted payload:
 * `parentSpanId` / `parent_span_id` / `parentId`, then a W3C `traceparent`
 * (`00-<trace id>-<span id>-<flags>`), whose span id is the caller's span, i.e. the parent of
 * this entry. It is looked for at the top level, under `metadata`, `agent` (the client
 * library's agent context) and `request.headers` (what the proxy recorded). An entry's own span
 * is `spanId` / `span_id` at the same places.
 */
import type { LogEntry } from './api.js';

/** Span facts of one entry. */
export interface SpanFacts {
  /** The entry's own span id (lower-case hex or as given). */
  spanId?: string;
  /** The span it ran under. */
  parentSpanId?: string;
  /** Where the parent was read from (for the detail panel), e.g. `payload.agent.traceparent`. */
  parentFrom?: string;
}

/** One node of the canvas. */
export interface TraceNode {
  entry: LogEntry;
  /** Position in time order (0-based); also the column. */
  index: number;
  /** Row: one per parent span, in order of first appearance (0 = no parent known). */
  lane: number;
  span: SpanFacts;
}

/** One edge, between node indexes. */
export interface TraceEdge {
  from: number;
  to: number;
  kind: 'sequence' | 'parent';
}

/** A lane: the entries sharing a parent span. */
export interface TraceLane {
  /** The parent span id, or undefined for entries with no known parent. */
  parentSpanId: string | undefined;
  /** The node (index) that owns this span, when one of the trace's entries is that span. */
  ownerIndex: number | undefined;
}

/** The whole graph. */
export interface TraceGraph {
  nodes: TraceNode[];
  edges: TraceEdge[];
  lanes: TraceLane[];
}

const TRACEPARENT_RE = /^[0-9a-f]{2}-[0-9a-f]{32}-([0-9a-f]{16})-[0-9a-f]{2}$/i;

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const idText = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 && v.length <= 256 ? v : undefined);

/** The span id of a W3C traceparent value, or undefined when it is not one. */
export function traceparentSpanId(value: unknown): string | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string') return undefined;
  const m = TRACEPARENT_RE.exec(text.trim());
  return m && !/^0+$/.test(m[1]!) ? m[1]!.toLowerCase() : undefined;
}

function headerValue(headers: unknown, name: string): unknown {
  if (!isObject(headers)) return undefined;
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
  return undefined;
}

/** Places that may carry span facts, with their display names. */
function places(entry: Pick<LogEntry, 'metadata'>, payload: Json | undefined): Array<[string, Json]> {
  const out: Array<[string, Json]> = [];
  if (isObject(entry.metadata)) out.push(['metadata', entry.metadata]);
  if (payload) {
    out.push(['payload', payload]);
    for (const k of ['metadata', 'agent'] as const) if (isObject(payload[k])) out.push([`payload.${k}`, payload[k]]);
    const req = payload.request;
    if (isObject(req) && isObject(req.headers)) out.push(['payload.request.headers', req.headers]);
  }
  return out;
}

/** Reads the span facts of an entry from its metadata and (when opened) its payload. */
export function spanFacts(entry: Pick<LogEntry, 'metadata'>, payload?: Json): SpanFacts {
  const facts: SpanFacts = {};
  for (const [where, o] of places(entry, payload)) {
    const own = idText(o.spanId) ?? idText(o.span_id);
    if (facts.spanId === undefined && own !== undefined) facts.spanId = own;
    if (facts.parentSpanId !== undefined) continue;
    for (const k of ['parentSpanId', 'parent_span_id', 'parentId']) {
      const v = idText(o[k]);
      if (v !== undefined) {
        facts.parentSpanId = v;
        facts.parentFrom = `${where}.${k}`;
        break;
      }
    }
    if (facts.parentSpanId !== undefined) continue;
    const tp = traceparentSpanId(where.endsWith('headers') ? headerValue(o, 'traceparent') : o.traceparent);
    if (tp !== undefined) {
      facts.parentSpanId = tp;
      facts.parentFrom = `${where}.traceparent`;
    }
  }
  return facts;
}

function timeOf(e: LogEntry): number {
  const t = Date.parse(e.occurredAt ?? e.receivedAt);
  return Number.isNaN(t) ? Date.parse(e.receivedAt) : t;
}

/**
 * Builds the graph of a trace.
 * @param entries the trace's entries (any order; sorted by occurredAt, else receivedAt, stably).
 * @param payloads decrypted payloads by log id, where the key opened them.
 */
export function buildTraceGraph(entries: readonly LogEntry[], payloads: ReadonlyMap<string, Json> = new Map()): TraceGraph {
  const ordered = entries.map((entry, i) => ({ entry, i })).sort((a, b) => timeOf(a.entry) - timeOf(b.entry) || a.i - b.i);
  const spans = ordered.map(({ entry }) => spanFacts(entry, payloads.get(entry.id)));
  const ownerOf = new Map<string, number>();
  spans.forEach((s, i) => s.spanId !== undefined && !ownerOf.has(s.spanId) && ownerOf.set(s.spanId, i));

  const lanes: TraceLane[] = [{ parentSpanId: undefined, ownerIndex: undefined }];
  const laneOf = new Map<string, number>();
  const nodes: TraceNode[] = ordered.map(({ entry }, index) => {
    const parent = spans[index]!.parentSpanId;
    let lane = 0;
    if (parent !== undefined) {
      lane = laneOf.get(parent) ?? lanes.length;
      if (lane === lanes.length) {
        laneOf.set(parent, lane);
        lanes.push({ parentSpanId: parent, ownerIndex: ownerOf.get(parent) });
      }
    }
    return { entry, index, lane, span: spans[index]! };
  });

  const edges: TraceEdge[] = [];
  for (let i = 1; i < nodes.length; i++) edges.push({ from: i - 1, to: i, kind: 'sequence' });
  for (const n of nodes) {
    const owner = n.span.parentSpanId !== undefined ? ownerOf.get(n.span.parentSpanId) : undefined;
    if (owner !== undefined && owner !== n.index) edges.push({ from: owner, to: n.index, kind: 'parent' });
  }
  // Lane 0 holds entries without a parent; drop it when every entry has one.
  if (nodes.length > 0 && nodes.every((n) => n.lane > 0)) {
    lanes.shift();
    for (const n of nodes) n.lane -= 1;
  }
  return { nodes, edges, lanes };
}
