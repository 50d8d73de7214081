/**
 * The Story Visualizer: a trace as a layered graph (ELK) in lanes by agent, with pan, zoom,
 * fit-to-view and a minimap, and beside it the waterfall of the same spans. Selecting a node in
 * either selects it in both and opens the side panel (proof, verification log, decrypted
 * request and response, the LLM call) next to the canvas.
 */
import type { LogEntry } from './api.js';
import { GraphCanvas } from './canvas.js';
import type { DashboardContext } from './context.js';
import type { DetailView } from './detail.js';
import { byId, h } from './dom.js';
import { showError } from './errors.js';
import { buildTraceGraph, type TraceGraph, type TraceNode } from './graph.js';
import { layoutGraph } from './layout.js';
import { Waterfall } from './waterfall.js';

const PICK = 'Pick a trace: every log with the same run id, as a span tree.';

/** The visualizer view. */
export class StoryView {
  #ctx: DashboardContext | undefined;
  #traceId: string | undefined;
  #entries: LogEntry[] = [];
  #selected: string | undefined;
  #load = 0;
  #canvas: GraphCanvas | undefined;
  #waterfall: Waterfall | undefined;
  #graph: TraceGraph | undefined;
  #fitted = false;
  /** Called when the user selects a node (the page puts it in its URL). */
  onSelect: (traceId: string | undefined, logId: string | undefined) => void = () => undefined;

  constructor(private readonly detail: DetailView) {
    byId<HTMLFormElement>('trace-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const id = byId<HTMLInputElement>('trace-input').value.trim();
      if (id) this.#ctx?.openTrace(id);
    });
  }

  /** The open trace id. */
  get traceId(): string | undefined {
    return this.#traceId;
  }

  /** Binds the view to a session (or clears it with undefined). */
  bind(ctx: DashboardContext | undefined): void {
    this.#ctx = ctx;
    this.#traceId = undefined;
    this.#entries = [];
    this.#selected = undefined;
    this.#canvas = this.#waterfall = this.#graph = undefined;
    byId('canvas-wrap').replaceChildren();
    byId('waterfall-wrap').replaceChildren();
    byId('trace-summary').textContent = PICK;
    byId<HTMLInputElement>('trace-input').value = '';
    showError(byId('trace-error'), undefined);
    this.detail.clear();
  }

  /** Offers these trace ids in the picker. */
  setTraceOptions(ids: Iterable<string>): void {
    byId('trace-options').replaceChildren(...[...ids].slice(0, 200).map((id) => h('option', { value: id })));
  }

  /** Fits the canvas once it is visible (a trace drawn while its tab was hidden could not measure). */
  shown(): void {
    if (this.#canvas && !this.#fitted) this.#fitted = this.#fit();
  }

  /** Loads and draws a trace; selects `selectLogId` when given. A trace already open is only reselected. */
  async open(traceId: string, selectLogId?: string): Promise<void> {
    const ctx = this.#ctx;
    if (!ctx) return;
    if (traceId === this.#traceId && this.#graph) {
      // Back on the open trace (the tab, a link): keep the selection unless another is named.
      if (selectLogId !== undefined) this.#select(selectLogId, true);
      this.shown();
      return;
    }
    const load = ++this.#load;
    byId<HTMLInputElement>('trace-input').value = traceId;
    byId('trace-summary').textContent = `Loading trace ${traceId}…`;
    try {
      const entries = await ctx.api.getTrace(traceId);
      if (load !== this.#load) return;
      showError(byId('trace-error'), undefined);
      this.#traceId = traceId;
      this.#entries = entries;
      this.#selected = selectLogId;
      await this.redraw();
    } catch (err) {
      if (load !== this.#load) return;
      showError(byId('trace-error'), err);
      byId('trace-summary').textContent = '';
      byId('canvas-wrap').replaceChildren();
      byId('waterfall-wrap').replaceChildren();
    }
  }

  /** Shows one log that has no trace, as a graph of one. */
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
    if (!ctx || this.#entries.length === 0) return;
    const load = this.#load;
    const opened = await Promise.all(this.#entries.map(async (e) => [e.id, await ctx.opener.open(e.id, e.payload)] as const));
    const payloads = new Map<string, Record<string, unknown>>();
    for (const [id, r] of opened) if (r.state === 'open') payloads.set(id, r.payload);
    const graph = buildTraceGraph(this.#entries, payloads);
    const layout = await layoutGraph(graph);
    if (load !== this.#load || ctx !== this.#ctx) return;
    const parents = graph.edges.filter((e) => e.kind === 'parent').length;
    const n = this.#entries.length;
    byId('trace-summary').textContent = this.#traceId
      ? `Trace ${this.#traceId}: ${n} entr${n === 1 ? 'y' : 'ies'}, ${graph.agents.length} agent lane${graph.agents.length === 1 ? '' : 's'}, ${parents} parent link${
          parents === 1 ? '' : 's'
        }${ctx.opener.size === 0 ? ' (enter the decryption key to read payloads)' : ''}.`
      : 'A log without a trace id.';
    const pick = (node: TraceNode) => {
      this.#select(node.key, false);
      this.onSelect(this.#traceId, node.entry?.id);
    };
    this.#graph = graph;
    this.#canvas = new GraphCanvas(graph, layout, pick);
    this.#waterfall = new Waterfall(graph, pick);
    byId('canvas-wrap').replaceChildren(this.#canvas.element);
    byId('waterfall-wrap').replaceChildren(this.#waterfall.element);
    byId('canvas-wrap').dataset.nodes = String(graph.nodes.length);
    this.#fitted = this.#fit();
    this.#select(this.#selected, true);
  }

  #fit(): boolean {
    const box = byId('canvas-wrap').getBoundingClientRect();
    if (!this.#canvas || box.width === 0) return false;
    this.#canvas.fit();
    return true;
  }

  #select(key: string | undefined, reveal: boolean): void {
    const ctx = this.#ctx;
    const node = key === undefined ? undefined : this.#graph?.nodes.find((n) => n.key === key);
    this.#selected = node?.key;
    this.#canvas?.select(node?.key, reveal);
    this.#waterfall?.select(node?.key);
    byId('view-story').classList.toggle('with-detail', node !== undefined);
    if (!ctx || !node) return this.detail.clear();
    if (node.entry) void this.detail.show(ctx, node.entry, node.span, node);
    else this.detail.showRun(node, this.#graph!);
  }
}
