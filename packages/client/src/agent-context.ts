/**
 * Agent context (spec 5.4): code that runs inside an agent run is marked through
 * AsyncLocalStorage, so every log and proxied call made anywhere below it, across awaits,
 * carries the run id, the agent id, a W3C `traceparent`, and the agent's rationale, encrypted
 * with the client's active key, in `X-Agent-Rationale`.
 *
 * Headers sent from inside a run: `X-Service-Run-ID` (run id), `X-Service-Agent-ID` (agent id),
 * `traceparent` (`00-<trace id>-<run span id>-01`, the trace id derived from the run id so every
 * call of a run shares it, the run's span as parent of every entry made in it), and
 * `X-Agent-Rationale` when a rationale is given. Each entry has a span of its own (`spanId`,
 * plain); a run is itself recorded as an `agent.run` entry under its enclosing run's span. A human-class key
 * used inside a run is what the server reports as credential handover.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { newSpanId, parseTraceparent, randomId, sha256Hex } from '@countersign/core';

/** What marks an agent run. */
export interface AgentRunOptions {
  /** Run id: stitches logs and calls into one trace (`traceId`). Default: inherited from an outer run, else a new `run_…` id. */
  runId?: string;
  /** Agent id: the default `actor` of logs and `X-Service-Agent-ID` of calls. Default: inherited, else `agent`. */
  agentId?: string;
  /** Why the agent acts; sent encrypted as `X-Agent-Rationale` and stored inside the encrypted payload. */
  rationale?: string;
  /** An incoming W3C `traceparent` to continue: its trace id is kept and its parent-id becomes the run's parent span. */
  traceparent?: string;
  /**
   * Record the run itself as an entry when it ends (action `agent.run`, the run's span, its
   * parent, start and end): the node that nested runs and calls link to. Default true.
   */
  recordRun?: boolean;
}

/** The agent context in effect. */
export interface AgentContext {
  runId: string;
  agentId: string;
  rationale: string | undefined;
  /** 32 hex digits: the W3C trace id shared by every call of the run. */
  traceIdHex: string;
  /** 16 hex digits: the span of the run itself (parent of each call's span). */
  spanIdHex: string;
  /** The enclosing run's span, or the parent-id of an incoming `traceparent`; undefined for a root run. */
  parentSpanIdHex: string | undefined;
  /** When the run started (epoch ms). */
  startedAt: number;
}

const storage = new AsyncLocalStorage<AgentContext>();

/** The agent context of the current async call chain, or undefined outside any run. */
export function currentAgentContext(): AgentContext | undefined {
  return storage.getStore();
}

/** Builds the context a run would have under the current one. */
export function makeAgentContext(options: AgentRunOptions, outer: AgentContext | undefined = currentAgentContext()): AgentContext {
  const runId = options.runId ?? outer?.runId ?? 'run_' + randomId(20);
  if (runId.length === 0 || runId.length > 256) throw new RangeError('runId must be 1-256 characters');
  const agentId = options.agentId ?? outer?.agentId ?? 'agent';
  if (agentId.length === 0 || agentId.length > 256) throw new RangeError('agentId must be 1-256 characters');
  const incoming = options.traceparent ? parseTraceparent(options.traceparent.toLowerCase()) : undefined;
  const traceIdHex = incoming?.traceId ?? (options.runId === undefined && outer ? outer.traceIdHex : sha256Hex(runId).slice(0, 32));
  return {
    runId,
    agentId,
    rationale: options.rationale ?? outer?.rationale,
    traceIdHex,
    spanIdHex: newSpanId(),
    parentSpanIdHex: incoming?.parentId ?? outer?.spanIdHex,
    startedAt: Date.now(),
  };
}

/** Runs `fn` inside an agent context (see {@link makeAgentContext}); returns what `fn` returns. */
export function runInAgentContext<T>(context: AgentContext, fn: () => T): T {
  return storage.run(context, fn);
}

/**
 * {@link runInAgentContext}, then `onEnd` once the run has ended: at once for a synchronous
 * `fn`, when its promise settles for an async one; with what it threw or rejected with, else
 * undefined. Returns (or throws) exactly what `fn` does.
 */
export function runAndThen<T>(context: AgentContext, fn: () => T, onEnd: (error: unknown) => void): T {
  let result: T;
  try {
    result = storage.run(context, fn);
  } catch (err) {
    onEnd(err);
    throw err;
  }
  if (!(result instanceof Promise)) {
    onEnd(undefined);
    return result;
  }
  return result.then(
    (value) => {
      onEnd(undefined);
      return value;
    },
    (err: unknown) => {
      onEnd(err);
      throw err;
    },
  ) as T;
}

/**
 * The W3C traceparent of calls inside `context`: the run's trace id, and the run's span as
 * parent-id, so each call's entry (which gets a span of its own) is a child of the run.
 */
export function traceparentFor(context: AgentContext): string {
  return `00-${context.traceIdHex}-${context.spanIdHex}-01`;
}
