/**
 * The Story Visualizer's canvas: the laid-out graph as SVG inside a d3-zoom viewport (wheel and
 * pinch zoom, drag to pan, buttons for zoom and fit-to-view), with a minimap that shows the
 * whole graph and the visible part and pans on click. Zooming moves one transform on one
 * group, so 500 nodes stay smooth; nodes are built once per trace, never per frame.
 */
import { select } from 'd3-selection';
import { zoom, zoomIdentity, type ZoomBehavior, type ZoomTransform } from 'd3-zoom';
import { h, svg } from './dom.js';
import { formatDuration, type TraceGraph, type TraceNode } from './graph.js';
import { NODE_H, NODE_W, type GraphLayout } from './layout.js';

const MINI_W = 168;
const MINI_H = 96;

/** One drawn canvas, with its controls. */
export class GraphCanvas {
  readonly element: HTMLElement;
  readonly #svg: SVGSVGElement;
  readonly #viewport: SVGGElement;
  readonly #lanesLabels: SVGGElement;
  readonly #miniView: SVGRectElement;
  readonly #miniBox: HTMLElement;
  readonly #zoom: ZoomBehavior<SVGSVGElement, unknown>;
  readonly #nodes = new Map<string, SVGGElement>();
  #miniScale = 1;
  /** True once the user panned or zoomed: a resize then keeps their view instead of refitting. */
  #userMoved = false;

  /**
   * @param onSelect called with the node's key when a node is clicked or activated by keyboard.
   */
  constructor(
    readonly graph: TraceGraph,
    readonly layout: GraphLayout,
    onSelect: (node: TraceNode) => void,
  ) {
    this.#viewport = svg('g', { class: 'viewport' });
    this.#lanesLabels = svg('g', { class: 'lane-labels' });
    this.#svg = svg('svg', { class: 'graph', role: 'img', 'aria-label': 'trace graph' }, defs(), this.#viewport, this.#lanesLabels);
    this.#draw(onSelect);
    const mini = this.#minimap();
    this.#miniBox = mini;
    this.#miniView = mini.querySelector('rect.mini-view')!;
    const button = (label: string, title: string, act: () => void, cls: string) => {
      const b = h('button', { type: 'button', title, 'aria-label': title, class: cls }, label);
      b.addEventListener('click', act);
      return b;
    };
    this.#zoom = zoom<SVGSVGElement, unknown>()
      .scaleExtent([0.02, 3])
      .on('zoom', (ev: { transform: ZoomTransform; sourceEvent: unknown }) => {
        if (ev.sourceEvent) this.#userMoved = true;
        this.#applied(ev.transform);
      });
    this.element = h(
      'div',
      { class: 'graph-box', 'data-engine': layout.engine },
      this.#svg,
      h(
        'div',
        { class: 'graph-controls' },
        button('+', 'Zoom in', () => this.zoomBy(1.4), 'zoom-in'),
        button('−', 'Zoom out', () => this.zoomBy(1 / 1.4), 'zoom-out'),
        button('Fit', 'Fit the whole trace in view', () => this.fit(), 'zoom-fit'),
      ),
      mini,
    );
    select(this.#svg).call(this.#zoom).on('dblclick.zoom', null);
    // The box changes size when the side panel opens or the tab is shown: keep the graph fitted.
    new ResizeObserver(() => {
      if (!this.#userMoved) this.fit();
    }).observe(this.element);
  }

  /** The current zoom transform (for tests and the minimap). */
  get transform(): ZoomTransform {
    return (this.#svg as unknown as { __zoom?: ZoomTransform }).__zoom ?? zoomIdentity;
  }

  /** Scales the view around its centre. */
  zoomBy(k: number): void {
    this.#userMoved = true;
    select(this.#svg).call(this.#zoom.scaleBy, k);
  }

  /** Fits the whole graph in the visible box (never enlarged past 1:1); later resizes refit. */
  fit(): void {
    this.#userMoved = false;
    const { width, height } = this.#svg.getBoundingClientRect();
    if (width === 0 || height === 0) return;
    const k = Math.min(1, (width - 16) / this.layout.width, (height - 16) / this.layout.height);
    const t = zoomIdentity.translate((width - this.layout.width * k) / 2, (height - this.layout.height * k) / 2).scale(k);
    select(this.#svg).call(this.#zoom.transform, t);
  }

  /** Centres a node (when it is out of view) and marks it selected. */
  select(key: string | undefined, reveal = false): void {
    for (const [k, g] of this.#nodes) g.classList.toggle('selected', k === key);
    const n = key === undefined ? undefined : this.graph.nodes.find((x) => x.key === key);
    if (!n || !reveal) return;
    const p = this.layout.pos[n.index]!;
    const { width, height } = this.#svg.getBoundingClientRect();
    const t = this.transform;
    const [sx, sy] = [t.applyX(p.x), t.applyY(p.y)];
    if (sx >= 0 && sy >= 0 && sx + NODE_W * t.k <= width && sy + NODE_H * t.k <= height) return;
    select(this.#svg).call(this.#zoom.translateTo, p.x + NODE_W / 2, p.y + NODE_H / 2);
  }

  #applied(t: ZoomTransform): void {
    this.#viewport.setAttribute('transform', t.toString());
    // Lane labels stay at the left edge, following only the vertical pan and zoom.
    this.#lanesLabels.setAttribute('transform', `translate(0,${t.y}) scale(1,${t.k})`);
    const { width, height } = this.#svg.getBoundingClientRect();
    // The minimap shows only while part of the graph is out of view (it would only cover nodes).
    const whole =
      t.applyX(0) >= -1 && t.applyY(0) >= -1 && t.applyX(this.layout.width) <= width + 1 && t.applyY(this.layout.height) <= height + 1;
    this.#miniBox.hidden = whole;
    const s = this.#miniScale;
    this.#miniView.setAttribute('x', String((-t.x / t.k) * s));
    this.#miniView.setAttribute('y', String((-t.y / t.k) * s));
    this.#miniView.setAttribute('width', String((width / t.k) * s));
    this.#miniView.setAttribute('height', String((height / t.k) * s));
  }

  #draw(onSelect: (node: TraceNode) => void): void {
    const { graph, layout } = this;
    const bands = svg('g', { class: 'lanes' });
    for (const lane of layout.lanes) {
      bands.append(svg('rect', { class: 'lane-band', x: 0, y: lane.y, width: layout.width, height: lane.height }));
      this.#lanesLabels.append(
        svg(
          'text',
          { class: 'lane-label', x: 10, y: lane.y + 20, 'data-agent': lane.agent },
          clip(lane.agent, 20),
          svg('title', {}, lane.agent),
        ),
      );
    }
    const edges = svg('g', { class: 'edges' });
    for (const e of graph.edges) {
      const a = layout.pos[e.from]!;
      const b = layout.pos[e.to]!;
      const [x1, y1, x2, y2] = [a.x + NODE_W, a.y + NODE_H / 2, b.x, b.y + NODE_H / 2];
      const mid = Math.max(24, (x2 - x1) / 2);
      const d = `M${x1},${y1} C${x1 + mid},${y1} ${x2 - mid},${y2} ${x2},${y2}`;
      edges.append(svg('path', { class: `edge ${e.kind}`, d, 'marker-end': 'url(#arrow)', 'data-from': e.from, 'data-to': e.to }));
    }
    const nodes = svg('g', { class: 'nodes' });
    for (const n of graph.nodes) {
      const g = nodeElement(n, layout.pos[n.index]!);
      const activate = () => onSelect(n);
      g.addEventListener('click', activate);
      g.addEventListener('keydown', (ev) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), activate()));
      this.#nodes.set(n.key, g);
      nodes.append(g);
    }
    this.#viewport.append(bands, edges, nodes);
  }

  #minimap(): HTMLElement {
    const { layout, graph } = this;
    const s = Math.min(MINI_W / layout.width, MINI_H / layout.height);
    this.#miniScale = s;
    const box = svg('svg', { class: 'minimap', width: MINI_W, height: MINI_H, 'aria-label': 'minimap' });
    for (const n of graph.nodes) {
      const p = layout.pos[n.index]!;
      box.append(
        svg('rect', {
          class: `mini-node${n.entry ? '' : ' run'}`,
          x: p.x * s,
          y: p.y * s,
          width: Math.max(1, NODE_W * s),
          height: Math.max(1, NODE_H * s),
        }),
      );
    }
    box.append(svg('rect', { class: 'mini-view', x: 0, y: 0, width: 0, height: 0 }));
    box.addEventListener('click', (ev) => {
      const r = box.getBoundingClientRect();
      this.#userMoved = true;
      select(this.#svg).call(this.#zoom.translateTo, (ev.clientX - r.left) / s, (ev.clientY - r.top) / s);
    });
    return h('div', { class: 'minimap-box', title: 'Click to move the view' }, box);
  }
}

function defs(): SVGDefsElement {
  return svg(
    'defs',
    {},
    svg(
      'marker',
      { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8c99ab' }),
    ),
  );
}

function nodeElement(n: TraceNode, p: { x: number; y: number }): SVGGElement {
  const l = n.entry;
  const dur = formatDuration(n.endMs !== undefined ? n.endMs - n.startMs : undefined);
  const status = l ? l.status : 'span';
  const cls = ['trace-node', l ? `status-${l.status}` : 'run', l?.credentialHandoverDetected ? 'handover' : ''].filter(Boolean).join(' ');
  return svg(
    'g',
    {
      class: cls,
      transform: `translate(${p.x},${p.y})`,
      tabindex: 0,
      role: 'button',
      'data-key': n.key,
      'data-log-id': l?.id,
      'data-index': n.index,
    },
    svg('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 8 }),
    svg('rect', { class: `type-bar ${l?.actorType ?? 'run'}`, width: 5, height: NODE_H - 12, x: 5, y: 6, rx: 2 }),
    svg('text', { class: 'title', x: 18, y: 20 }, clip(n.action, 22)),
    svg('text', { class: 'sub', x: 18, y: 37 }, clip(n.agent, 24)),
    svg('text', { class: 'sub dur', x: 18, y: 54 }, dur ? `${dur} · ${status}` : status),
    l?.requestProof ? svg('text', { class: 'tag proof', x: NODE_W - 10, y: 20, 'text-anchor': 'end' }, 'PROOF') : null,
    l?.credentialHandoverDetected ? svg('text', { class: 'tag ho', x: NODE_W - 10, y: 54, 'text-anchor': 'end' }, 'HANDOVER') : null,
    svg('title', {}, l ? `${l.action} by ${l.actor} (${l.id})` : `run span ${n.span.spanId ?? ''} of ${n.agent}`),
  );
}

function clip(text: string, n: number): string {
  return text.length > n ? text.slice(0, n - 1) + '…' : text;
}
