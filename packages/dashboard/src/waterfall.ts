/**
 * The waterfall timeline beside the canvas (as in Jaeger or Langfuse): one row per node in
 * span-tree order, indented by depth, with a bar from its start to its end on the trace's time
 * axis and its duration. Selecting a row selects the same node as the canvas.
 */
import { h } from './dom.js';
import { formatDuration, waterfallOrder, type TraceGraph, type TraceNode } from './graph.js';

/** Builds the waterfall of `graph`. */
export class Waterfall {
  readonly element: HTMLElement;
  readonly #rows = new Map<string, HTMLElement>();

  /** @param onSelect called when a row is clicked or activated by keyboard. */
  constructor(graph: TraceGraph, onSelect: (n: TraceNode) => void) {
    const t0 = Math.min(...graph.nodes.map((n) => n.startMs));
    const t1 = Math.max(...graph.nodes.map((n) => n.endMs ?? n.startMs));
    const span = Math.max(1, t1 - t0);
    const rows = waterfallOrder(graph).map((n) => {
      const end = n.endMs ?? n.startMs;
      const left = ((n.startMs - t0) / span) * 100;
      const width = Math.max(0.4, ((end - n.startMs) / span) * 100);
      const dur = formatDuration(n.endMs !== undefined ? n.endMs - n.startMs : undefined);
      // CSSOM, not style attributes: the page's CSP (style-src 'self') blocks inline styles.
      const label = h(
        'div',
        { class: 'wf-label', title: `${n.action} · ${n.agent}` },
        h('span', { class: 'wf-action' }, n.action),
        h('span', { class: 'wf-agent muted' }, n.agent),
      );
      label.style.paddingLeft = `${Math.min(n.depth, 12) * 14 + 6}px`;
      const bar = h('div', { class: `wf-bar ${n.entry?.status ?? 'run'}` });
      bar.style.left = `${left.toFixed(3)}%`;
      bar.style.width = `${width.toFixed(3)}%`;
      const row = h(
        'div',
        {
          class: `wf-row${n.entry ? '' : ' run'}${n.entry?.credentialHandoverDetected ? ' handover' : ''}`,
          role: 'button',
          tabindex: 0,
          'data-key': n.key,
          'data-log-id': n.entry?.id,
          'data-duration-ms': n.endMs !== undefined ? String(n.endMs - n.startMs) : undefined,
        },
        label,
        h('div', { class: 'wf-track' }, bar),
        h('div', { class: 'wf-dur mono' }, dur || '—'),
      );
      const activate = () => onSelect(n);
      row.addEventListener('click', activate);
      row.addEventListener('keydown', (ev) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), activate()));
      this.#rows.set(n.key, row);
      return row;
    });
    this.element = h(
      'div',
      { class: 'waterfall', 'aria-label': 'waterfall timeline' },
      h(
        'div',
        { class: 'wf-head small muted' },
        h('span', {}, 'Span'),
        h('span', {}, `0 – ${formatDuration(span) || '0 ms'}`),
        h('span', {}, 'Duration'),
      ),
      ...rows,
    );
  }

  /** Marks the selected row and scrolls it into view. */
  select(key: string | undefined): void {
    for (const [k, r] of this.#rows) r.classList.toggle('selected', k === key);
    if (key !== undefined) this.#rows.get(key)?.scrollIntoView({ block: 'nearest' });
  }
}
