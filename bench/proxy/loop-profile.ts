/**
 * Where the proxy's event loop spends its time, by part (`TAIL_PROFILE=1` in the tail benchmark).
 *
 * `perf record -g` samples the event loop's thread for a few seconds mid-run; the process runs
 * with `--perf-basic-prof`, so V8's JIT code has names and source paths. Each sample is charged
 * to the first frame, walking from the leaf towards the root, that belongs to one of
 * {@link PARTS}: time in the kernel, in OpenSSL or in V8's runtime is charged to the part of our
 * code (or of a library) that asked for it. A sample with a garbage collector's frame anywhere is
 * charged to GC. What no part claims is `other` (Node's internals with no JavaScript frame that
 * names a part, e.g. the event loop's own polling).
 *
 * Earlier sessions did this by hand (docs/performance-log.md, fourth session); this keeps the
 * parts fixed, so that two runs' tables can be compared.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canPerfRecord, perfRecord } from './perf-record.js';

/** A part of a call's work and the frames that belong to it (tested in this order). */
interface Part {
  name: string;
  frame: RegExp;
}

/**
 * The parts, most specific first. A JavaScript frame carries its source path; native frames
 * their symbol. Order matters where paths nest (core's JSON before core as a whole).
 */
export const PARTS: readonly Part[] = [
  { name: 'GC', frame: /Scavenger|MarkCompact|Heap::CollectGarbage|ConcurrentMarking|Heap::PerformGarbageCollection|MinorMarkCompact/ },
  {
    name: 'JSON inspection and parsing',
    frame: /core\/dist\/json-(lexical|text)\.js|http\/json-(body|inspect)\.js|proxy\/capture\.js|JsonParser|JsonParse/,
  },
  {
    name: 'sealing, canonical JSON, hashing',
    frame: /core\/dist\/(envelope|envelope-keys|canonical|hash|native|payload|encoding|random)\.js|proxy\/record\.js|offload\//,
  },
  { name: 'PostgreSQL driver (pg)', frame: /node_modules\/(pg|pg-protocol|pg-pool|pg-types|pg-cursor|postgres-[a-z-]+)\// },
  { name: 'hand-off to the store writer', frame: /server\/dist\/store\// },
  { name: 'LLM summary', frame: /proxy\/llm\// },
  { name: 'metrics', frame: /prom-client|server\/dist\/metrics\// },
  { name: 'authentication, admission, service headers', frame: /server\/dist\/(auth|http|ingest|ratelimit)\// },
  { name: 'pipeline (proxy/)', frame: /server\/dist\/proxy\/|server\/dist\/(errors|error-handler)\.js/ },
  { name: 'other of ours (core, server)', frame: /packages\/(core|server)\/dist\// },
  {
    name: 'Fastify (and pino, ajv, find-my-way)',
    frame:
      /node_modules\/(fastify|@fastify|find-my-way|avvio|pino|ajv|fast-json-stringify|fast-uri|light-my-request|process-warning|toad-cache|fast-querystring|abstract-logging|rfdc)\b/,
  },
  { name: 'undici', frame: /node_modules\/undici\b|node:internal\/deps\/undici/ },
  {
    name: "Node's HTTP, net, streams",
    frame: /node:(_http_\w+|http|net|internal\/streams|internal\/http|stream|internal\/stream_base_commons|internal\/net)/,
  },
  // Native-only stacks (no JavaScript frame): the HTTP server's socket reads and llhttp, and the
  // store writer's replies arriving on the message port.
  { name: "Node's HTTP, net, streams", frame: /LibuvStreamWrap::ReadStart|uv__read\b/ },
  { name: 'hand-off to the store writer', frame: /MessagePort::OnMessage/ },
  { name: 'timers and microtasks', frame: /node:internal\/(timers|process\/task_queues)|RunMicrotasks|MicrotaskQueue/ },
];

/** Samples per part, and the run's total. */
export interface LoopProfile {
  samples: number;
  seconds: number;
  /** Share of the event loop's samples, % (sorted, largest first). */
  parts: Record<string, number>;
  /** The leaf frames with the most samples (self), for a closer look. */
  top_self: Array<[string, number]>;
  /** For samples no part claims: their innermost JavaScript frame (or, without one, the root-most frame). */
  other_by_frame: Array<[string, number]>;
}

/** Where the last profile's stacks are left, as `perf script` printed them. */
export const STACKS_FILE = path.join(os.tmpdir(), 'loop-profile-stacks.txt');

/** True when `perf` can record call graphs of a thread here. */
export function canProfileLoop(): boolean {
  return canPerfRecord(['-g']);
}

/** Samples thread `tid` with call graphs for `seconds` (perf on `loadCore`). Resolves with the data file, or undefined. */
export function recordLoop(tid: number, seconds: number, loadCore: string): Promise<string | undefined> {
  return perfRecord('loop-profile', ['-g', '-F', '2999', '-t', String(tid)], seconds, loadCore);
}

/** The part a stack (leaf first) is charged to. */
export function partOf(frames: readonly string[]): string {
  if (frames.some((f) => PARTS[0]!.frame.test(f))) return PARTS[0]!.name;
  for (const f of frames) for (let i = 1; i < PARTS.length; i++) if (PARTS[i]!.frame.test(f)) return PARTS[i]!.name;
  return 'other';
}

/** Reads the data file (removed afterwards) into shares by part. */
export function loopProfileReport(file: string, seconds: number): LoopProfile {
  const script = spawnSync('perf', ['script', '-i', file, '-F', 'ip,sym,symoff,dso'], { encoding: 'utf8', maxBuffer: 1 << 30 });
  fs.rmSync(file, { force: true });
  // The stacks stay for a closer look (the last run's only).
  fs.writeFileSync(STACKS_FILE, script.stdout);
  const byPart = new Map<string, number>();
  const bySelf = new Map<string, number>();
  const byOther = new Map<string, number>();
  let samples = 0;
  // perf script prints one sample per block: its frames one per line (leaf first), a blank line after.
  for (const block of script.stdout.split(/\n\s*\n/)) {
    const frames = block
      .split('\n')
      .map((l) => l.trim().replace(/^[0-9a-f]+\s+/, ''))
      .filter(Boolean);
    if (frames.length === 0) continue;
    samples++;
    const part = partOf(frames);
    byPart.set(part, (byPart.get(part) ?? 0) + 1);
    if (part === 'other') {
      const where = clean(frames.find((f) => f.startsWith('JS:')) ?? frames[frames.length - 1]!);
      byOther.set(where, (byOther.get(where) ?? 0) + 1);
    }
    const leaf = clean(frames[0]!);
    bySelf.set(leaf, (bySelf.get(leaf) ?? 0) + 1);
  }
  const pct = (n: number) => Math.round((n / Math.max(1, samples)) * 1000) / 10;
  const top = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, c]) => [k.slice(0, 140), pct(c)] as [string, number]);
  const parts = Object.fromEntries([...byPart].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, pct(n)]));
  return { samples, seconds, parts, top_self: top(bySelf, 25), other_by_frame: top(byOther, 15) };
}

/** A frame without its offset and object file. */
function clean(frame: string): string {
  return frame.replace(/\+0x[0-9a-f]+/, '').replace(/\s+\(.*\)$/, '');
}

/**
 * The report's lines. With the event loop's CPU per call, each part is also given in µs per call
 * (its share of that CPU), which is what compares across targets: the floor's and Countersign's
 * shares are of different totals.
 */
export function describeLoopProfile(p: LoopProfile, loopUsPerCall?: number): string {
  const us = (share: number) => (loopUsPerCall === undefined ? '' : ` (${Math.round((share / 100) * loopUsPerCall)} µs)`);
  const parts = Object.entries(p.parts)
    .map(([k, v]) => `${k} ${v} %${us(v)}`)
    .join(', ');
  const list = (rows: Array<[string, number]>) => rows.map(([k, v]) => `  ${v} %  ${k}`).join('\n');
  return [
    `event loop by part (${p.samples} samples in ${p.seconds} s${loopUsPerCall === undefined ? '' : `, ${loopUsPerCall} µs per call`}): ${parts}`,
    `leaf frames (self):\n${list(p.top_self)}`,
    `'other', by innermost JavaScript frame:\n${list(p.other_by_frame)}`,
    `(the stacks: ${STACKS_FILE})`,
  ].join('\n');
}
