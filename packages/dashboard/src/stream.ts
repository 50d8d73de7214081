/**
 * The audit stream: the latest logs (filters, cursor paging, periodic refresh that adds new
 * entries at the top) and the security events, stored ones first, then live from the SSE stream
 * (reconnecting with Last-Event-ID). Credential handovers are highlighted in both.
 */
import { ApiCallError, type LogFilters, type LogRowEntry, type SecurityEvent } from './api.js';
import type { DashboardContext } from './context.js';
import { byId, h, shortId, timeCell } from './dom.js';
import { showError } from './errors.js';

const PAGE = 50;
const REFRESH_MS = 5000;
const MAX_BACKOFF_MS = 30_000;

/** The stream view; `start` loads and connects, `stop` disconnects. */
export class StreamView {
  #ctx: DashboardContext | undefined;
  #filters: LogFilters = {};
  #cursor: string | null = null;
  #shown = new Set<string>();
  #events = new Set<string>();
  #lastEventSeq: number | undefined;
  #abort: AbortController | undefined;
  #refreshTimer: ReturnType<typeof setInterval> | undefined;
  /** Trace ids seen, for the visualizer's picker. */
  readonly traceIds = new Set<string>();
  /** Called when new trace ids were seen. */
  onTraces: () => void = () => undefined;

  constructor() {
    const form = byId<HTMLFormElement>('filters');
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.#filters = filtersOf(form);
      void this.reload();
    });
    form.addEventListener('reset', () => {
      this.#filters = {};
      setTimeout(() => void this.reload());
    });
    byId('logs-more').addEventListener('click', () => void this.#loadPage(false));
    byId<HTMLInputElement>('auto-refresh').addEventListener('change', () => this.#schedule());
  }

  /** Starts the view for a signed-in session. */
  start(ctx: DashboardContext): void {
    this.stop();
    this.#ctx = ctx;
    this.#abort = new AbortController();
    void this.reload();
    void this.#loadEvents(this.#abort.signal);
    this.#schedule();
  }

  /** Stops streams and timers and clears the view. */
  stop(): void {
    this.#abort?.abort();
    this.#abort = undefined;
    clearInterval(this.#refreshTimer);
    this.#ctx = undefined;
    this.#shown.clear();
    this.#events.clear();
    this.#lastEventSeq = undefined;
    this.traceIds.clear();
    byId('logs').replaceChildren();
    byId('events').replaceChildren();
    setStreamState('idle', 'not connected');
  }

  /** Reloads the first page with the current filters. */
  async reload(): Promise<void> {
    this.#cursor = null;
    this.#shown.clear();
    byId('logs').replaceChildren();
    await this.#loadPage(false);
  }

  #schedule(): void {
    clearInterval(this.#refreshTimer);
    if (byId<HTMLInputElement>('auto-refresh').checked) this.#refreshTimer = setInterval(() => void this.#loadPage(true), REFRESH_MS);
  }

  /** Loads the next older page, or (`fresh`) the newest page, adding only entries not shown yet. */
  async #loadPage(fresh: boolean): Promise<void> {
    const ctx = this.#ctx;
    if (!ctx) return;
    const box = byId('logs-error');
    try {
      const page = await ctx.api.listLogs(this.#filters, PAGE, fresh ? undefined : (this.#cursor ?? undefined));
      if (ctx !== this.#ctx) return;
      showError(box, undefined);
      const rows = page.logs.filter((l) => !this.#shown.has(l.id)).map((l) => this.#row(l));
      if (fresh) byId('logs').prepend(...rows);
      else {
        byId('logs').append(...rows);
        this.#cursor = page.nextCursor;
        byId('logs-more').hidden = page.nextCursor === null;
      }
      byId('logs-empty').hidden = this.#shown.size > 0;
      this.onTraces();
    } catch (err) {
      if (ctx === this.#ctx) showError(box, err);
    }
  }

  #row(l: LogRowEntry): HTMLTableRowElement {
    this.#shown.add(l.id);
    if (l.traceId) this.traceIds.add(l.traceId);
    const trace = l.traceId
      ? h('a', { href: `#trace=${encodeURIComponent(l.traceId)}`, class: 'trace-link', title: l.traceId }, shortId(l.traceId, 12))
      : h('span', { class: 'muted' }, '—');
    trace.addEventListener('click', (ev) => {
      ev.preventDefault();
      ev.stopPropagation();
      if (l.traceId) this.#ctx?.openTrace(l.traceId, l.id);
    });
    const tr = h(
      'tr',
      { 'data-log-id': l.id, class: l.credentialHandoverDetected ? 'handover' : undefined },
      h('td', {}, timeCell(l.receivedAt)),
      h('td', {}, l.actor),
      h('td', {}, h('span', { class: `badge ${l.actorType}` }, l.actorType)),
      h('td', {}, l.action),
      h('td', {}, trace),
      h('td', {}, l.source),
      h('td', {}, l.status),
      h('td', {}, l.requestProof ? 'requested' : ''),
      h('td', {}, l.credentialHandoverDetected ? h('span', { class: 'flag' }, '⚠ handover') : ''),
    );
    tr.addEventListener('click', () => this.#ctx?.openLog(l.id));
    return tr;
  }

  async #loadEvents(signal: AbortSignal): Promise<void> {
    const ctx = this.#ctx;
    if (!ctx) return;
    try {
      const stored = await ctx.api.listEvents(20);
      if (signal.aborted) return;
      for (const e of stored.reverse()) this.#addEvent(e, false);
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiCallError && err.code === 'wrong_credential_class') {
        setStreamState('unavailable', 'needs a key_live_ key');
        showError(byId('events-error'), err);
        return;
      }
      showError(byId('events-error'), err);
    }
    await this.#follow(signal);
  }

  /** Follows the live stream, reconnecting with backoff; stops on abort or a refusal. */
  async #follow(signal: AbortSignal): Promise<void> {
    let backoff = 1000;
    while (!signal.aborted && this.#ctx) {
      const ctx = this.#ctx;
      try {
        await ctx.api.streamEvents(
          {
            onOpen: () => {
              backoff = 1000;
              showError(byId('events-error'), undefined);
              setStreamState('live', 'live');
            },
            onEvent: (e) => this.#addEvent(e, true),
          },
          signal,
          this.#lastEventSeq !== undefined ? String(this.#lastEventSeq) : undefined,
        );
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ApiCallError && err.status >= 400 && err.status < 500) {
          setStreamState('unavailable', 'stream refused');
          showError(byId('events-error'), err);
          return;
        }
      }
      if (signal.aborted) return;
      setStreamState('reconnecting', `reconnecting in ${Math.round(backoff / 1000)} s`);
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  #addEvent(e: SecurityEvent, live: boolean): void {
    // This panel shows handovers; other project events (retention.purged) have no log or actor.
    if ((e as { type: string }).type !== 'security.policy_violation') return;
    if (this.#events.has(e.id)) return;
    this.#events.add(e.id);
    if (this.#lastEventSeq === undefined || e.seq > this.#lastEventSeq) this.#lastEventSeq = e.seq;
    const link = h('a', { href: '#', class: 'trace-link', title: e.logId }, shortId(e.logId, 10));
    link.addEventListener('click', (ev) => {
      ev.preventDefault();
      this.#ctx?.openLog(e.logId);
    });
    const li = h(
      'li',
      { 'data-event-id': e.id, 'data-log-id': e.logId, class: live ? 'fresh' : undefined },
      timeCell(e.createdAt),
      h('span', { class: 'flag' }, '⚠ Credential handover'),
      h('span', {}, `${e.credentialClass}-class key used by `, h('strong', {}, e.actor), ` with ${e.agentHeaders.join(', ')}`),
      link,
    );
    byId('events').prepend(li);
    byId('events-empty').hidden = true;
    // The handover's log is new too: show it without waiting for the next refresh.
    if (live) void this.#loadPage(true);
  }
}

function filtersOf(form: HTMLFormElement): LogFilters {
  const data = new FormData(form);
  const text = (k: string) => {
    const v = String(data.get(k) ?? '').trim();
    return v === '' ? undefined : v;
  };
  const f: LogFilters = {};
  for (const k of ['actor', 'action', 'traceId'] as const) {
    const v = text(k);
    if (v !== undefined) f[k] = v;
  }
  const actorType = text('actorType');
  if (actorType === 'human' || actorType === 'agent' || actorType === 'service') f.actorType = actorType;
  if (data.get('handover')) f.handover = true;
  return f;
}

function setStreamState(state: string, text: string): void {
  const pill = byId('stream-state');
  pill.dataset.state = state;
  pill.textContent = text;
}
