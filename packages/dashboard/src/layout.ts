/**
 * Layout of a trace graph: ELK's layered algorithm (elkjs) places the span tree in columns
 * (layers, left to right, crossings minimised, time order kept inside a layer); rows are lanes,
 * one per agent, and nodes of one agent that share a column stack inside its lane.
 *
 * ELK is 1.6 MB of compiled Java, so it runs in a web worker loaded from its own file the first
 * time a trace is drawn: the dashboard's main bundle carries only the small `elk-api` shim, and
 * the page never blocks while ELK works. When the worker cannot start, columns fall back to time
 * order, so a trace is always drawn.
 */
import ELK from 'elkjs/lib/elk-api.js';
import type { ElkNode } from 'elkjs/lib/elk-api.js';
import elkWorkerUrl from 'elkjs/lib/elk-worker.min.js?url';
import type { TraceGraph } from './graph.js';

/** A node's width on the canvas, in its units (pixels at zoom 1). */
export const NODE_W = 196;
/** A node's height on the canvas, in its units (pixels at zoom 1). */
export const NODE_H = 64;
const LAYER_GAP = 56;
const STACK_GAP = 14;
const LANE_GAP = 22;
/** Left margin that holds the lane labels. */
export const LANE_LABEL_W = 150;
const PAD = 20;

/** Where each node and lane is. */
export interface GraphLayout {
  /** Top-left of node i. */
  pos: Array<{ x: number; y: number }>;
  lanes: Array<{ agent: string; y: number; height: number }>;
  width: number;
  height: number;
  /** `elk` or `time-order` (the fallback). */
  engine: 'elk' | 'time-order';
}

let elk: InstanceType<typeof ELK> | undefined;

/** ELK columns: the x of each node's layer, and ELK's y as the order inside a lane. */
async function elkColumns(graph: TraceGraph): Promise<{ x: number[]; order: number[] }> {
  elk ??= new ELK({ workerFactory: () => new Worker(elkWorkerUrl) });
  const root: ElkNode = {
    id: 'root',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'RIGHT',
      'elk.layered.spacing.nodeNodeBetweenLayers': String(LAYER_GAP),
      'elk.spacing.nodeNode': String(STACK_GAP),
      'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
    },
    children: graph.nodes.map((n) => ({ id: String(n.index), width: NODE_W, height: NODE_H })),
    edges: graph.edges.map((e, i) => ({ id: `e${i}`, sources: [String(e.from)], targets: [String(e.to)] })),
  };
  const out = await elk.layout(root);
  const x: number[] = [];
  const order: number[] = [];
  for (const c of out.children ?? []) {
    x[Number(c.id)] = c.x ?? 0;
    order[Number(c.id)] = c.y ?? 0;
  }
  return { x, order };
}

function timeColumns(graph: TraceGraph): { x: number[]; order: number[] } {
  return { x: graph.nodes.map((n) => n.index * (NODE_W + LAYER_GAP)), order: graph.nodes.map((n) => n.index) };
}

/** Lays out `graph` (ELK in a worker; time order when ELK is not available). */
export async function layoutGraph(graph: TraceGraph): Promise<GraphLayout> {
  let cols: { x: number[]; order: number[] };
  let engine: GraphLayout['engine'] = 'elk';
  try {
    cols = graph.nodes.length > 0 ? await elkColumns(graph) : { x: [], order: [] };
  } catch {
    cols = timeColumns(graph);
    engine = 'time-order';
  }
  // Inside each lane, nodes sharing a column stack; the stack slot follows ELK's order.
  const byLane = new Map<string, number[]>();
  for (const n of graph.nodes) (byLane.get(n.agent) ?? byLane.set(n.agent, []).get(n.agent)!).push(n.index);
  const pos: GraphLayout['pos'] = [];
  const lanes: GraphLayout['lanes'] = [];
  let y = PAD;
  for (const agent of graph.agents) {
    const members = (byLane.get(agent) ?? []).sort((a, b) => cols.order[a]! - cols.order[b]! || a - b);
    const slots = new Map<number, number>();
    let depth = 1;
    for (const i of members) {
      const x = cols.x[i] ?? 0;
      const slot = slots.get(x) ?? 0;
      slots.set(x, slot + 1);
      depth = Math.max(depth, slot + 1);
      pos[i] = { x: LANE_LABEL_W + PAD + x, y: y + STACK_GAP / 2 + slot * (NODE_H + STACK_GAP) };
    }
    const height = depth * (NODE_H + STACK_GAP);
    lanes.push({ agent, y, height });
    y += height + LANE_GAP;
  }
  const width = LANE_LABEL_W + PAD * 2 + Math.max(NODE_W, ...pos.map((p) => p.x - LANE_LABEL_W - PAD + NODE_W));
  return { pos, lanes, width, height: Math.max(y - LANE_GAP + PAD, NODE_H + PAD * 2), engine };
}
