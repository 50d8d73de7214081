/**
 * The Story Visualizer's model: a trace's entries as a span tree, pure (no DOM) so it is tested
 * in Node. Nodes are the entries (plus one "run" node per parent span that no entry owns, such
 * as the span `runAsAgent` opens); edges join a child to its parent span's node (`parent`), and,
 * for entries with no parent at all, each to the previous such entry in time (`sequence`, the
 * fallback when nothing says how they relate). Lanes are agents (actors).
 *
 * Where span facts come from, first match wins: the entry's plain `spanId` / `parentSpanId`
 * fields (DESIGN §4), then its plain `metadata`, then the decrypted payload (top level,
 * `metadata`, `agent`, recorded `request.headers`): `spanId` / `span_id` is the entry's own span;
 * `parentSpanId` / `parent_span_id` / `parentId`, or else a W3C `traceparent`
 * (`00-<trace>-<span>-<flags>`, whose span is the caller's, i.e. this entry's parent).
 */
import type { LogEntry } from './api.js';

/** Plain span fields of an entry (DESIGN §4); optional so entries from older servers still read. */
export interface SpanFields {
  spanId?: string;
  parentSpanId?: string;
  startedAt?: string;
  endedAt?: string;
  durationMs?: number | null;
}

/** Span facts of one entry. */
export interface SpanFacts {
  spanId?: string;
  parentSpanId?: string;
  /** Where the parent was read from (for the detail panel), e.g. `parentSpanId` or `payload.agent.traceparent`. */
  parentFrom?: string;
}

/** One node of the canvas and the waterfall. */
export interface TraceNode {
  /** The log id, or `span:<id>` for a run node. */
  key: string;
  /** The entry; undefined for a run node. */
  entry?: LogEntry;
  /** Position in time order (0-based). */
  index: number;
  /** The agent (actor) whose lane the node sits in. */
  agent: string;
  /** Label: the action, or `run` for a run node. */
  action: string;
  span: SpanFacts;
  /** Start and end (ms since epoch); end is undefined when unknown. */
  startMs: number;
  endMs: number | undefined;
  /** Index of the parent node, when known. */
  parent: number | undefined;
  /** Depth in the span tree (0 = root). */
  depth: number;
}

/** One edge, between node indexes. */
export interface TraceEdge {
  from: number;
  to: number;
  /** `parent`: a span's node to its first child; `sequence`: a step to the next step of the same span. */
  kind: 'sequence' | 'parent';
}

/** The whole graph. */
export interface TraceGraph {
  nodes: TraceNode[];
  edges: TraceEdge[];
  /** Agents in order of first appearance: the canvas's lanes. */
  agents: string[];
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

/** Reads the span facts of an entry from its plain fields, its metadata and (when opened) its payload. */
export function spanFacts(entry: Pick<LogEntry, 'metadata'> & SpanFields, payload?: Json): SpanFacts {
  const facts: SpanFacts = {};
  if (idText(entry.spanId)) facts.spanId = entry.spanId;
  if (idText(entry.parentSpanId)) {
    facts.parentSpanId = entry.parentSpanId;
    facts.parentFrom = 'parentSpanId';
  }
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

/** Start and end of an entry in ms: startedAt, else occurredAt, else receivedAt; endedAt, else start + durationMs. */
export function timesOf(e: LogEntry & SpanFields): { startMs: number; endMs: number | undefined } {
  const parse = (s: string | undefined) => (s === undefined ? NaN : Date.parse(s));
  let startMs = parse(e.startedAt);
  if (Number.isNaN(startMs)) startMs = parse(e.occurredAt ?? undefined);
  if (Number.isNaN(startMs)) startMs = parse(e.receivedAt);
  let endMs: number | undefined = parse(e.endedAt);
  if (Number.isNaN(endMs)) endMs = typeof e.durationMs === 'number' ? startMs + e.durationMs : undefined;
  return { startMs, endMs };
}

/** A duration for display: `850 ms`, `2.4 s`, `3 min 5 s`. */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/**
 * Builds the graph of a trace.
 * @param entries the trace's entries (any order; sorted by start time, stably).
 * @param payloads decrypted payloads by log id, where the key opened them.
 */
export function buildTraceGraph(entries: readonly LogEntry[], payloads: ReadonlyMap<string, Json> = new Map()): TraceGraph {
  type Draft = Omit<TraceNode, 'index' | 'parent' | 'depth'>;
  const drafts: Draft[] = entries.map((entry) => ({
    key: entry.id,
    entry,
    agent: entry.actor,
    action: entry.action,
    span: spanFacts(entry as LogEntry & SpanFields, payloads.get(entry.id)),
    ...timesOf(entry as LogEntry & SpanFields),
  }));
  const owned = new Set(drafts.map((d) => d.span.spanId).filter((s): s is string => s !== undefined));
  // A parent span no entry owns (a `runAsAgent` run): one node for it, spanning its children.
  const runs = new Map<string, Draft>();
  for (const d of drafts) {
    const p = d.span.parentSpanId;
    if (p === undefined || owned.has(p) || p === d.span.spanId) continue;
    const run = runs.get(p);
    if (!run) {
      runs.set(p, {
        key: `span:${p}`,
        agent: d.agent,
        action: 'run',
        span: { spanId: p },
        startMs: d.startMs,
        endMs: d.endMs ?? d.startMs,
      });
    } else {
      run.startMs = Math.min(run.startMs, d.startMs);
      run.endMs = Math.max(run.endMs ?? run.startMs, d.endMs ?? d.startMs);
    }
  }
  const all = [...drafts, ...runs.values()]
    .map((d, i) => ({ d, i }))
    // Runs sort before their first child (same start); otherwise time, then the server's order.
    .sort((a, b) => a.d.startMs - b.d.startMs || Number(!!a.d.entry) - Number(!!b.d.entry) || a.i - b.i);
  const nodes: TraceNode[] = all.map(({ d }, index) => ({ ...d, index, parent: undefined, depth: 0 }));
  const ownerOf = new Map<string, number>();
  for (const n of nodes) if (n.span.spanId !== undefined && !ownerOf.has(n.span.spanId)) ownerOf.set(n.span.spanId, n.index);

  // A child goes under its parent span's node; the steps of one span (and the roots) follow one
  // another in time: the parent points to its first step, each step to the next. So a run of 50
  // steps reads left to right as a story rather than as a column of 50 siblings.
  const edges: TraceEdge[] = [];
  const lastOf = new Map<number | undefined, number>();
  for (const n of nodes) {
    const owner = n.span.parentSpanId !== undefined ? ownerOf.get(n.span.parentSpanId) : undefined;
    if (owner !== undefined && owner !== n.index) n.parent = owner;
    const prev = lastOf.get(n.parent);
    if (prev !== undefined) edges.push({ from: prev, to: n.index, kind: 'sequence' });
    else if (n.parent !== undefined) edges.push({ from: n.parent, to: n.index, kind: 'parent' });
    lastOf.set(n.parent, n.index);
  }
  // Depths, guarding against cycles in bad data (a span naming its own descendant).
  for (const n of nodes) {
    let d = 0;
    for (let p = n.parent, seen = 0; p !== undefined && seen < nodes.length; p = nodes[p]!.parent, seen++) d++;
    n.depth = d;
  }
  const agents: string[] = [];
  for (const n of nodes) if (!agents.includes(n.agent)) agents.push(n.agent);
  return { nodes, edges, agents };
}

/** The nodes in waterfall order: depth-first over the span tree, children by start time. */
export function waterfallOrder(graph: TraceGraph): TraceNode[] {
  const children = new Map<number | undefined, TraceNode[]>();
  for (const n of graph.nodes) {
    const p = n.parent !== undefined && graph.nodes[n.parent] ? n.parent : undefined;
    (children.get(p) ?? children.set(p, []).get(p)!).push(n);
  }
  const out: TraceNode[] = [];
  const seen = new Set<number>();
  const walk = (p: number | undefined) => {
    for (const c of children.get(p) ?? []) {
      if (seen.has(c.index)) continue;
      seen.add(c.index);
      out.push(c);
      walk(c.index);
    }
  };
  walk(undefined);
  // Nodes caught in a cycle have no root: list them after the rest.
  for (const n of graph.nodes) if (!seen.has(n.index)) out.push(n);
  return out;
}
