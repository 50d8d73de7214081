/**
 * The Story Visualizer: a trace drawn as a canvas (SVG). Columns are time order, rows are parent
 * spans; dashed edges join each entry to the next, solid ones a child to the entry that owns
 * its parent span. Selecting a node shows its detail (fields, payload, proof, verification).
 */
import type { LogEntry } from './api.js';
import type { DashboardContext } from './context.js';
import type { DetailView } from './detail.js';
import { byId, h, shortId, svg } from './dom.js';
import { showError } from './errors.js';
import { buildTraceGraph, type TraceGraph } from './graph.js';

const NODE_W = 184;
const NODE_H = 66;
const COL_GAP = 44;
const ROW_GAP = 34;
const LABEL_W = 128;
const PAD = 18;

/** The visualizer view. */
export class StoryView {
  #ctx: DashboardContext | undefined;
  #traceId: string | undefined;
  #entries: LogEntry[] = [];
  #selected: string | undefined;
  #load = 0;

  constructor(private readonly detail: DetailView) {
    byId<HTMLFormElement>('trace-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const id = byId<HTMLInputElement>('trace-input').value.trim();
      if (id) void this.open(id);
    });
  }

  /** Binds the view to a session (or clears it with undefined). */
  bind(ctx: DashboardContext | undefined): void {
    this.#ctx = ctx;
    this.#traceId = undefined;
    this.#entries = [];
    this.#selected = undefined;
    byId('canvas-wrap').replaceChildren();
    byId('trace-summary').textContent = 'Pick a trace: every log with the same run id, in time order.';
    byId<HTMLInputElement>('trace-input').value = '';
    showError(byId('trace-error'), undefined);
    this.detail.clear();
  }

  /** Offers these trace ids in the picker. */
  setTraceOptions(ids: Iterable<string>): void {
    byId('trace-options').replaceChildren(...[...ids].slice(0, 200).map((id) => h('option', { value: id })));
  }

  /** Loads and draws a trace; selects `selectLogId` (or keeps the selection) when given. */
  async open(traceId: string, selectLogId?: string): Promise<void> {
    const ctx = this.#ctx;
    if (!ctx) return;
    const load = ++this.#load;
    byId<HTMLInputElement>('trace-input').value = traceId;
    byId('trace-summary').textContent = `Loading trace ${traceId}…`;
    try {
      const entries = await ctx.api.getTrace(traceId);
      if (load !== this.#load) return;
      showError(byId('trace-error'), undefined);
      this.#traceId = traceId;
      this.#entries = entries;
      this.#selected = selectLogId ?? (this.#selected && entries.some((e) => e.id === this.#selected) ? this.#selected : undefined);
      await this.redraw();
    } catch (err) {
      if (load !== this.#load) return;
      showError(byId('trace-error'), err);
      byId('trace-summary').textContent = '';
      byId('canvas-wrap').replaceChildren();
    }
  }

  /** Shows one log that has no trace, as a canvas of one. */
  async openSingle(entry: LogEntry): Promise<void> {
    this.#load++;
    this.#traceId = undefined;
    this.#entries = [entry];
    this.#selected = entry.id;
    byId<HTMLInputElement>('trace-input').value = '';
    showError(byId('trace-error'), undefined);
    await this.redraw();
  }

  /** Redraws with the current key (payloads may now open, and with them span facts). */
  async redraw(): Promise<void> {
    const ctx = this.#ctx;
    // Nothing open yet (a key entered before any trace was picked): nothing to redraw.
    if (!ctx || this.#entries.length === 0) return;
    const opened = await Promise.all(this.#entries.map(async (e) => [e.id, await ctx.opener.open(e.id, e.payload)] as const));
    const payloads = new Map<string, Record<string, unknown>>();
    for (const [id, r] of opened) if (r.state === 'open') payloads.set(id, r.payload);
    const graph = buildTraceGraph(this.#entries, payloads);
    const parents = graph.edges.filter((e) => e.kind === 'parent').length;
    byId('trace-summary').textContent = this.#traceId
      ? `Trace ${this.#traceId}: ${graph.nodes.length} entr${graph.nodes.length === 1 ? 'y' : 'ies'}, ${graph.lanes.length} span lane${
          graph.lanes.length === 1 ? '' : 's'
        }, ${parents} parent link${parents === 1 ? '' : 's'}${ctx.opener.size === 0 ? ' (enter the decryption key to read payloads and their span ids)' : ''}.`
      : 'A log without a trace id.';
    byId('canvas-wrap').replaceChildren(this.#draw(graph));
    const chosen = graph.nodes.find((n) => n.entry.id === this.#selected);
    if (chosen) void this.detail.show(ctx, chosen.entry, chosen.span);
    else this.detail.clear();
  }

  #draw(graph: TraceGraph): SVGSVGElement {
    const cols = Math.max(1, graph.nodes.length);
    const rows = Math.max(1, graph.lanes.length);
    const width = LABEL_W + PAD * 2 + cols * NODE_W + (cols - 1) * COL_GAP;
    const height = PAD * 2 + rows * NODE_H + (rows - 1) * ROW_GAP;
    const pos = (i: number) => {
      const n = graph.nodes[i]!;
      return { x: LABEL_W + PAD + n.index * (NODE_W + COL_GAP), y: PAD + n.lane * (NODE_H + ROW_GAP) };
    };
    const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'trace canvas' });
    root.append(
      svg(
        'defs',
        {},
        svg(
          'marker',
          { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
          svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8c99ab' }),
        ),
      ),
    );
    graph.lanes.forEach((lane, i) => {
      const y = PAD + i * (NODE_H + ROW_GAP) + NODE_H / 2;
      const label = lane.parentSpanId === undefined ? 'no parent span' : `span ${shortId(lane.parentSpanId, 6)}`;
      root.append(svg('line', { class: 'lane-line', x1: LABEL_W, x2: width - PAD, y1: y, y2: y }));
      root.append(
        svg(
          'text',
          { class: 'lane-label', x: PAD / 2, y: y + 4 },
          label,
          svg('title', {}, lane.parentSpanId ?? 'entries with no known parent span'),
        ),
      );
    });
    for (const e of graph.edges) {
      const a = pos(e.from);
      const b = pos(e.to);
      let d: string;
      if (e.kind === 'sequence') {
        const [x1, y1, x2, y2] = [a.x + NODE_W, a.y + NODE_H / 2, b.x, b.y + NODE_H / 2];
        d = `M${x1},${y1} C${x1 + COL_GAP / 2},${y1} ${x2 - COL_GAP / 2},${y2} ${x2},${y2}`;
      } else {
        const [x1, y1, x2, y2] = [a.x + NODE_W / 2, a.y + NODE_H, b.x + NODE_W / 2, b.y];
        d = `M${x1},${y1} C${x1},${y1 + ROW_GAP} ${x2},${y2 - ROW_GAP} ${x2},${y2}`;
      }
      root.append(svg('path', { class: `edge ${e.kind}`, d, 'marker-end': 'url(#arrow)', 'data-from': e.from, 'data-to': e.to }));
    }
    for (const n of graph.nodes) {
      const { x, y } = pos(n.index);
      const l = n.entry;
      const g = svg(
        'g',
        {
          class: `trace-node${l.credentialHandoverDetected ? ' handover' : ''}${l.id === this.#selected ? ' selected' : ''}`,
          transform: `translate(${x},${y})`,
          tabindex: 0,
          role: 'button',
          'data-log-id': l.id,
          'data-index': n.index,
        },
        svg('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 8 }),
        svg('rect', { class: `type-bar ${l.actorType}`, width: 5, height: NODE_H - 12, x: 5, y: 6, rx: 2 }),
        svg('text', { x: 18, y: 20 }, clip(l.action, 24)),
        svg('text', { class: 'sub', x: 18, y: 37 }, `${clip(l.actor, 16)} · ${l.actorType}`),
        svg('text', { class: 'sub', x: 18, y: 54 }, `#${n.index + 1} · ${new Date(l.occurredAt ?? l.receivedAt).toLocaleTimeString()}`),
        l.requestProof ? svg('text', { class: 'tag proof', x: NODE_W - 10, y: 20, 'text-anchor': 'end' }, 'PROOF') : null,
        l.credentialHandoverDetected ? svg('text', { class: 'tag ho', x: NODE_W - 10, y: 54, 'text-anchor': 'end' }, 'HANDOVER') : null,
        svg('title', {}, `${l.action} by ${l.actor} (${l.id})`),
      );
      const select = () => {
        this.#selected = l.id;
        for (const el of root.querySelectorAll('.trace-node.selected')) el.classList.remove('selected');
        g.classList.add('selected');
        if (this.#ctx) void this.detail.show(this.#ctx, l, n.span);
      };
      g.addEventListener('click', select);
      g.addEventListener('keydown', (ev) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), select()));
      root.append(g);
    }
    return root;
  }
}

function clip(text: string, n: number): string {
  return text.length > n ? text.slice(0, n - 1) + '…' : text;
}
