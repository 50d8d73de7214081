/**
 * A Prometheus histogram for metrics observed on every call, registered in prom-client's
 * registry and rendered by it line for line as prom-client's own `Histogram` renders (a test
 * holds the two texts equal for the same observations).
 *
 * Why not prom-client's `Histogram` on the hot path: each `observe` hashes its label object
 * (sorting the label names into a string), validates it, and counts in an object keyed by the
 * bucket's bound, a float that V8 turns into a string key on every read and write. A proxied
 * call observes five histograms; in the event loop's profile at 1,000 calls/s that was 2.6 % of
 * the loop (docs/performance-log.md, tenth session). Here a series is one map lookup on its
 * label values ({@link BucketHistogram.labels}; a caller with fixed labels keeps its series),
 * and an observation is a scan of the bounds, one increment in a typed array and two additions.
 *
 * prom-client stays what renders, registers and resets every metric; this is only the storage
 * of one metric type, behind prom-client's own metric interface (`get`, `reset`, `name`, `help`,
 * `type`, `aggregator`).
 */
import type { Registry } from 'prom-client';

/** One label set's counts; observing through it looks nothing up. */
export class HistogramSeries {
  /** Observations per bucket, not cumulative (the last slot is above the highest bound). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    private readonly bounds: Float64Array,
    /** The label values by name, as rendered (shared by every line of this series). */
    readonly labels: Readonly<Record<string, string>>,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  /**
   * Counts one observation. A value that is not a finite number is dropped rather than thrown
   * (prom-client throws): a metric must never fail the call it measures.
   */
  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/** What prom-client's registry reads from a metric: one line per value. */
interface RenderedValue {
  value: number;
  labels: Record<string, string | number>;
  sharedLabels?: Readonly<Record<string, string>>;
  metricName: string;
  /** Always none (no exemplars are kept); present as prom-client's values have it. */
  exemplar: null | undefined;
}

/** A histogram whose series are created on first use and kept by label values. */
export class BucketHistogram<L extends string> {
  readonly type = 'histogram';
  /** How a cluster aggregates it (prom-client's histograms sum). */
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  readonly #labelNames: readonly L[];
  readonly #bounds: Float64Array;
  readonly #series = new Map<string, HistogramSeries>();

  constructor(config: { name: string; help: string; labelNames: readonly L[]; buckets: readonly number[]; registers: Registry[] }) {
    this.name = config.name;
    this.help = config.help;
    this.#labelNames = config.labelNames;
    this.#bounds = Float64Array.from([...config.buckets].sort((a, b) => a - b));
    if (this.#labelNames.length === 0) this.labels();
    for (const r of config.registers) r.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /**
   * The series of these label values, given in the order of `labelNames`; made on first use.
   * @throws TypeError when the number of values is not the number of label names.
   */
  labels(...values: string[]): HistogramSeries {
    if (values.length !== this.#labelNames.length) {
      throw new TypeError(`${this.name}: expected ${this.#labelNames.length} label values, got ${values.length}`);
    }
    const key = values.length === 1 ? values[0]! : values.join('\u0000');
    let s = this.#series.get(key);
    if (!s) {
      const labels: Record<string, string> = {};
      this.#labelNames.forEach((n, i) => (labels[n] = values[i]!));
      this.#series.set(key, (s = new HistogramSeries(this.#bounds, labels)));
    }
    return s;
  }

  /** Every series made so far, in the order they were made. */
  series(): IterableIterator<HistogramSeries> {
    return this.#series.values();
  }

  /** Observes through the series named by a label object (for callers off the hot path). */
  observe(labels: Record<L, string>, value: number): void {
    this.labels(...this.#labelNames.map((n) => labels[n])).observe(value);
  }

  /** prom-client's registry renders this: buckets (cumulative), `+Inf`, sum and count per series. */
  getForPromString(): Promise<{ name: string; help: string; type: 'histogram'; values: RenderedValue[]; aggregator: 'sum' }> {
    const bucket = `${this.name}_bucket`;
    const values: RenderedValue[] = [];
    for (const s of this.#series.values()) {
      let acc = 0;
      this.#bounds.forEach((le, i) => {
        acc += s.counts[i]!;
        values.push({ labels: { le }, sharedLabels: s.labels, value: acc, metricName: bucket, exemplar: null });
      });
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null },
        { labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count`, exemplar: undefined },
      );
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator });
  }

  /** The values with each line's labels whole (prom-client's `get()` shape, for JSON output). */
  async get(): Promise<{ name: string; help: string; type: 'histogram'; values: RenderedValue[]; aggregator: 'sum' }> {
    const data = await this.getForPromString();
    data.values = data.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } }));
    return data;
  }

  /**
   * Zeroes every series (prom-client's `registry.resetMetrics()`). Series are kept, not dropped
   * as prom-client drops them, because callers hold theirs: a dropped one would count unseen.
   */
  reset(): void {
    for (const s of this.#series.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}
