/**
 * Each request's logger, made when something is first logged through it.
 *
 * Fastify gives every request a pino child bound to its request id (`reqId`). Making one
 * (an object per request, its bindings serialized to JSON text) cost ~0.9 % of the event loop
 * at 1,000 proxied calls/s (docs/performance-log.md, tenth session), for requests that almost
 * never log: at the default level a successful call writes nothing. This stands in for the
 * child with the same bindings and options, and makes the real child on the first line at an
 * enabled level, so every line still carries `reqId`. A line below the level makes nothing.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js';
import { levels, type LogFn } from 'pino';

const METHODS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;

/** A request's logger: the real child is made on first use (see the file's comment). */
export class DeferredRequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;
  declare fatal: LogFn;
  declare error: LogFn;
  declare warn: LogFn;
  declare info: LogFn;
  declare debug: LogFn;
  declare trace: LogFn;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  /** The real child (made now if it was not yet). */
  materialize(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }

  /** True once a line was logged, a child asked for, or the level set. */
  get materialized(): boolean {
    return this.#child !== undefined;
  }

  get level(): string {
    return this.#child?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.materialize().level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.materialize().child(bindings, options);
  }

  silent(): void {}

  /** False when a line at `method`'s level would be dropped (known levels only; else the child decides). */
  enabled(method: (typeof METHODS)[number]): boolean {
    const level = this.level;
    if (level === 'silent') return false;
    const threshold = levels.values[level];
    return threshold === undefined || levels.values[method]! >= threshold;
  }
}

// One function per level on the prototype, not per instance: a request costs one small object.
for (const method of METHODS) {
  Object.defineProperty(DeferredRequestLogger.prototype, method, {
    value: function (this: DeferredRequestLogger, ...args: unknown[]): void {
      if (!this.materialized && !this.enabled(method)) return;
      (this.materialize()[method] as (...a: unknown[]) => void)(...args);
    },
    writable: true,
    configurable: true,
  });
}

/** Fastify's `childLoggerFactory`: a {@link DeferredRequestLogger} per request. */
export function deferredRequestLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new DeferredRequestLogger(logger, bindings, options);
}
