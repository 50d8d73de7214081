/**
 * The process's Prometheus metrics: one prom-client registry and every metric the server
 * records, so any module records with one import (`metrics.rateLimited.inc(...)`)
 * and `GET /metrics` (metrics/plugin.ts) renders them all.
 *
 * One registry per process, not per app: the store's write queues and the witnesses record
 * without an app at hand, and production runs one app per process. (Tests that start several
 * apps in one process share the counters; they compare before and after.)
 *
 * Cost on the hot path: label values are strings that already exist (route patterns from the
 * route config, fixed enums, a cached status text). The histograms observed on every call are
 * {@link BucketHistogram}s, a series found by one map lookup on its label values (see
 * bucket-histogram.ts for why); the rest are prom-client's own. Gauges that need the database
 * are set when scraped (plugin.ts), never on a request.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { BucketHistogram } from './bucket-histogram.js';

/** The registry `GET /metrics` renders. */
export const registry = new Registry();

/** Seconds, from half a millisecond (a cached read) to a minute (a slow upstream). */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Seconds for what the proxy itself adds: finer at the low end, where it should stay. */
const ADDED_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
/** Items per batch (group commits, proof batches). */
const SIZE_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 20000, 100000];

const registers = [registry];

/** A write queue's depth, read when scraped (no gauge update per item). */
interface DepthCounter {
  /** Items submitted and not yet committed or failed. */
  value: number;
}
const queueDepths = new Map<string, DepthCounter>();

/** Store writers' busy time: seconds of busy periods that ended, and the writers busy now. */
const busyTime = { closedSeconds: 0, open: new Set<BusyClock>() };

/** Every metric of the server, by what it measures. */
export const metrics = {
  /** Requests answered, by method, route pattern and status (`route="unmatched"` for 404s without a route). */
  httpRequests: new Counter({
    name: 'countersign_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers,
    // The count of each series of the duration histogram, copied when scraped: a request is
    // counted once, by the histogram, not twice.
    collect() {
      this.reset();
      for (const s of metrics.httpDuration.series()) this.inc(s.labels, s.count);
    },
  }),
  /** Time to answer, by method, route pattern and status (headers and body written). */
  httpDuration: new BucketHistogram({
    name: 'countersign_http_request_duration_seconds',
    help: 'Time from receiving a request to the end of its answer, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  }),
  /**
   * What the proxy adds to a proxied call: its total time minus the upstream's time
   * (recorded by proxy/pipeline.ts), by door (`proxy` or `forward`).
   */
  proxyAddedLatency: new BucketHistogram({
    name: 'countersign_proxy_added_latency_seconds',
    help: 'Proxy overhead per proxied call: total time minus upstream time, by door (proxy|forward)',
    labelNames: ['via'] as const,
    buckets: ADDED_BUCKETS,
    registers,
  }),
  /** The upstream's part of a proxied call (dispatch to the end of its answer), by door and outcome. */
  proxyUpstreamTime: new BucketHistogram({
    name: 'countersign_proxy_upstream_seconds',
    help: 'Upstream time per proxied call (dispatch to the end of the answer), by door and outcome',
    labelNames: ['via', 'outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  }),
  /** One group commit (a batch of log inserts or proxy outcomes), by queue and result. */
  storeCommitSeconds: new BucketHistogram({
    name: 'countersign_store_commit_seconds',
    help: 'Time of one group-commit batch (log inserts or proxy outcomes), by queue and result (ok|error)',
    labelNames: ['queue', 'result'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  }),
  /**
   * Seconds the hot-path store writer had a group commit in flight, summed over the process's
   * writers (one in production). Its rate is the writer's utilisation: the backends commit one
   * batch at a time, so near 1 every write queues behind the one in flight (USE method). A
   * batch still in flight counts up to the scrape, so a hung store shows at once, not when its
   * batch ends.
   */
  storeBusySeconds: new Counter({
    name: 'countersign_store_busy_seconds_total',
    help: "Seconds during which the store writer had at least one group commit in flight; its rate is the writer's utilisation (0-1)",
    registers,
    collect() {
      const now = performance.now();
      let seconds = busyTime.closedSeconds;
      for (const clock of busyTime.open) seconds += clock.openSeconds(now);
      this.reset();
      this.inc(seconds);
    },
  }),
  /** One SQLite checkpoint that copied frames, by thread (writer | background) and mode. */
  sqliteCheckpointSeconds: new Histogram({
    name: 'countersign_sqlite_checkpoint_seconds',
    help: 'Time of one SQLite WAL checkpoint that copied frames, by thread (writer: the write path waits for it; background: it does not) and mode',
    labelNames: ['thread', 'mode'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  }),
  /** Items per group commit, by queue. */
  storeBatchSize: new BucketHistogram({
    name: 'countersign_store_commit_batch_size',
    help: 'Items per group-commit batch, by queue',
    labelNames: ['queue'] as const,
    buckets: SIZE_BUCKETS,
    registers,
  }),
  /** Items waiting in (or being written by) a write queue. */
  storeQueueDepth: new Gauge({
    name: 'countersign_store_queue_depth',
    help: 'Writes submitted to a group-commit queue and not yet committed, by queue',
    labelNames: ['queue'] as const,
    registers,
    collect() {
      for (const [queue, depth] of queueDepths) this.set({ queue }, depth.value);
    },
  }),
  /** Proxy outcomes held in memory since a store outage (app.proxy.owed.size), set on scrape. */
  owedOutcomes: new Gauge({
    name: 'countersign_proxy_owed_outcomes',
    help: 'Outcomes of proxied calls held in memory because the store refused them, waiting to be written',
    registers,
  }),
  /** 1 when records are sealed by the native seal (native-seal.ts), 0 when by Node's cipher. */
  nativeSeal: new Gauge({
    name: 'countersign_native_seal',
    help: "Whether records are sealed by the native seal (1) or by Node's cipher (0); same bytes either way",
    registers,
  }),
  /** Write-ahead records still `pending` in the store (all instances), set on scrape. */
  pendingRecords: new Gauge({
    name: 'countersign_pending_records',
    help: 'Proxy records still pending in the store (all instances; counted at most every few seconds)',
    registers,
  }),
  /** Age of the oldest proof batch not yet sealed, from its window's end; 0 when all are sealed. Set on scrape. */
  proofLag: new Gauge({
    name: 'countersign_proof_lag_seconds',
    help: 'Seconds since the window end of the oldest proof batch not yet sealed (0 when every batch is sealed)',
    registers,
  }),
  /** Proof batches not yet sealed (timestamping or ledger step pending), set on scrape. */
  proofBatchesUnsealed: new Gauge({
    name: 'countersign_proof_batches_unsealed',
    help: 'Proof batches claimed but not yet sealed (being built, or the TSA or ledger step pending)',
    registers,
  }),
  /** Leaves per claimed proof batch (recorded by the instance that claims it). */
  proofBatchLeaves: new Histogram({
    name: 'countersign_proof_batch_leaves',
    help: 'Leaves (logs) per proof batch, recorded when a window is claimed',
    buckets: SIZE_BUCKETS,
    registers,
  }),
  /** Window end to sealed, per batch (recorded by the instance that seals it). */
  proofSealDelay: new Histogram({
    name: 'countersign_proof_seal_delay_seconds',
    help: 'Seconds from a proof window end to its batch being sealed (timestamped and in the ledger)',
    buckets: [0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400],
    registers,
  }),
  /** Failed calls to the timestamp authority or the ledger, by witness (`tsa`|`ledger`) and error code. */
  witnessFailures: new Counter({
    name: 'countersign_witness_failures_total',
    help: 'Failed calls to the timestamp authority or the transparency ledger, by witness (tsa|ledger) and error code',
    labelNames: ['witness', 'code'] as const,
    registers,
  }),
  /** Requests refused with 429 rate_limited, by route pattern. */
  rateLimited: new Counter({
    name: 'countersign_rate_limited_total',
    help: 'Requests refused with 429 rate_limited, by route pattern',
    labelNames: ['route'] as const,
    registers,
  }),
  /** Webhook delivery attempts, by result (`delivered`, `failed`: will retry, `gave_up`). */
  webhookAttempts: new Counter({
    name: 'countersign_webhook_attempts_total',
    help: 'Webhook delivery attempts, by result (delivered|failed|gave_up)',
    labelNames: ['result'] as const,
    registers,
  }),
  /** Webhook deliveries waiting to be (re)tried (all instances), set on scrape. */
  webhookBacklog: new Gauge({
    name: 'countersign_webhook_backlog',
    help: 'Webhook deliveries not yet delivered and not given up (all instances)',
    registers,
  }),
  /** Rows removed by the retention purge and by project deletion, by table. */
  purgedRows: new Counter({
    name: 'countersign_purged_rows_total',
    help: 'Rows deleted by retention purges and project deletion, by table',
    labelNames: ['table'] as const,
    registers,
  }),
};

/**
 * The depth counter of the write queue `name` (one per name, shared by every queue of that name
 * in the process): the queue adds on submit and subtracts when a batch settles.
 */
export function queueDepth(name: string): DepthCounter {
  let d = queueDepths.get(name);
  if (!d) queueDepths.set(name, (d = { value: 0 }));
  return d;
}

/**
 * One store writer's busy clock, behind `countersign_store_busy_seconds_total`: the writer
 * starts it when a batch goes out with none in flight and stops it when the last one settles.
 * Times are `performance.now()` milliseconds, which the writer reads anyway.
 */
export class BusyClock {
  /** When the current busy period began, or -1 while idle. */
  #since = -1;

  /** A busy period begins (no-op while one is open). */
  start(now: number): void {
    if (this.#since >= 0) return;
    this.#since = now;
    busyTime.open.add(this);
  }

  /** The busy period ends (no-op while idle). */
  stop(now: number): void {
    if (this.#since < 0) return;
    busyTime.closedSeconds += (now - this.#since) / 1000;
    this.#since = -1;
    busyTime.open.delete(this);
  }

  /** Seconds of the open busy period up to `now` (0 while idle). */
  openSeconds(now: number): number {
    return this.#since < 0 ? 0 : (now - this.#since) / 1000;
  }
}

const statusText: string[] = [];
/** A status code as label text, made once per code (no string per request). */
export function statusLabel(code: number): string {
  return (statusText[code] ??= String(code));
}

let defaultsOn = false;
/**
 * Turns on Node's default metrics (event-loop delay, CPU, memory, GC, handles) once per process;
 * called by the metrics plugin, so a CLI command that only imports the store starts no monitor.
 */
export function enableDefaultMetrics(): void {
  if (defaultsOn) return;
  defaultsOn = true;
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 10 });
}

/**
 * Wraps a witness call so that a failure counts in `countersign_witness_failures_total`
 * (the error still propagates; the code is the ApiError code or the error's name).
 */
export function countingFailures<A extends unknown[], R>(
  witness: 'tsa' | 'ledger',
  call: (...args: A) => Promise<R>,
): (...args: A) => Promise<R> {
  return async (...args: A) => {
    try {
      return await call(...args);
    } catch (err) {
      metrics.witnessFailures.inc({ witness, code: failureCode(err) });
      throw err;
    }
  };
}

/** A bounded label for an error: a catalogue code, else the error class name. */
function failureCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Za-z_]{1,40}$/.test(code)) return code;
  const name = (err as { name?: unknown } | null)?.name;
  return typeof name === 'string' && /^[A-Za-z]{1,40}$/.test(name) ? name : 'error';
}
