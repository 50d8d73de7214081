/**
 * The audit stream: pages of logs without payloads (the payload is read when a log is opened),
 * new entries pushed over SSE (`GET …/logs/stream` with the same filters; no polling), a
 * pause/resume switch that holds new entries back while reading, and server-side search.
 * Security events (stored, then live) are shown for live keys only: embed tokens cannot read
 * them, so for those the panel is not shown at all.
 */
import { ApiCallError, type LogFilters, type LogRowEntry, type SecurityEvent } from './api.js';
import type { DashboardContext } from './context.js';
import { byId, h, shortId, timeCell } from './dom.js';
import { showError } from './errors.js';
import { fillForm, filtersFromForm } from './filters.js';
import { follow } from './follow.js';

const PAGE = 50;
/** How long the first page waits for the live stream to answer before it loads anyway, ms. */
const STREAM_WAIT_MS = 3000;

/** The stream view; `start` loads and connects, `stop` disconnects. */
export class StreamView {
  #ctx: DashboardContext | undefined;
  #filters: LogFilters = new URLSearchParams();
  #cursor: string | null = null;
  #shown = new Set<string>();
  #events = new Set<string>();
  #abort: AbortController | undefined;
  #live: AbortController | undefined;
  #paused = false;
  #held: LogRowEntry[] = [];
  /** Trace ids seen, for the visualizer's picker. */
  readonly traceIds = new Set<string>();
  /** Called when new trace ids were seen. */
  onTraces: () => void = () => undefined;
  /** Called when the user applies filters (the page puts them in its URL). */
  onFilters: (f: LogFilters) => void = () => undefined;

  constructor() {
    const form = byId<HTMLFormElement>('filters');
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.onFilters(filtersFromForm(form));
    });
    form.addEventListener('reset', () => setTimeout(() => this.onFilters(new URLSearchParams())));
    byId('logs-more').addEventListener('click', () => void this.#loadPage());
    byId('live-toggle').addEventListener('click', () => this.#setPaused(!this.#paused));
  }

  /** The filters in force. */
  get filters(): LogFilters {
    return new URLSearchParams(this.#filters);
  }

  /** Starts the view for a signed-in session; `events` shows the security events panel. */
  start(ctx: DashboardContext, filters: LogFilters, events: boolean): void {
    this.stop();
    this.#ctx = ctx;
    this.#abort = new AbortController();
    byId('events-card').hidden = !events;
    if (events) void this.#loadEvents(this.#abort.signal);
    this.apply(filters);
  }

  /** Applies filters: fills the form, reloads the first page and reconnects the live stream. */
  apply(filters: LogFilters): void {
    if (!this.#ctx) return;
    const same = filters.toString() === this.#filters.toString() && this.#live !== undefined;
    this.#filters = new URLSearchParams(filters);
    fillForm(byId<HTMLFormElement>('filters'), filters);
    if (same) return;
    this.#live?.abort();
    const live = (this.#live = new AbortController());
    this.#held = [];
    // The live stream first, the first page once the stream answered: the server fixes where the
    // stream starts (after the newest entry) before it answers, so an entry written while the page
    // loads comes on the stream (shown once: rows are keyed by id), and none falls between the
    // two. Loading the page first left a gap until the stream connected. A stream that fails or is
    // refused still lets the page load, and so does one whose answer is held back (a proxy that
    // buffers event streams) past STREAM_WAIT_MS.
    let loaded = false;
    const load = () => {
      clearTimeout(waiting);
      if (loaded || live.signal.aborted) return;
      loaded = true;
      void this.reload();
    };
    const waiting = setTimeout(load, STREAM_WAIT_MS);
    void this.#followLogs(live.signal, load);
  }

  /** Stops streams and clears the view. */
  stop(): void {
    this.#abort?.abort();
    this.#live?.abort();
    this.#abort = this.#live = undefined;
    this.#ctx = undefined;
    this.#shown.clear();
    this.#events.clear();
    this.#held = [];
    this.#filters = new URLSearchParams();
    this.traceIds.clear();
    byId('logs').replaceChildren();
    byId('events').replaceChildren();
    setState('stream-state', 'idle', 'not connected');
    setState('logs-state', 'idle', 'not connected');
  }

  /** Reloads the first page with the current filters. */
  async reload(): Promise<void> {
    this.#cursor = null;
    this.#shown.clear();
    byId('logs').replaceChildren();
    await this.#loadPage();
  }

  #setPaused(paused: boolean): void {
    this.#paused = paused;
    const b = byId('live-toggle');
    b.textContent = paused ? 'Resume' : 'Pause';
    b.setAttribute('aria-pressed', String(paused));
    if (!paused) {
      const held = this.#held;
      this.#held = [];
      for (const l of held) this.#addLive(l);
    }
    this.#heldNote();
  }

  #heldNote(): void {
    const n = this.#held.length;
    byId('logs-held').textContent = this.#paused ? (n ? `paused: ${n} new entr${n === 1 ? 'y' : 'ies'} held` : 'paused') : '';
  }

  /** Loads the next older page (the first when there is no cursor), adding entries not shown yet. */
  async #loadPage(): Promise<void> {
    const ctx = this.#ctx;
    if (!ctx) return;
    const box = byId('logs-error');
    try {
      const page = await ctx.api.listLogs(this.#filters, PAGE, this.#cursor ?? undefined);
      if (ctx !== this.#ctx) return;
      showError(box, undefined);
      byId('logs').append(...page.logs.filter((l) => !this.#shown.has(l.id)).map((l) => this.#row(l, false)));
      this.#cursor = page.nextCursor;
      byId('logs-more').hidden = page.nextCursor === null;
      byId('logs-empty').hidden = this.#shown.size > 0;
      this.onTraces();
    } catch (err) {
      if (ctx === this.#ctx) showError(box, err);
    }
  }

  /** Follows new entries; `started` runs at the stream's first state (open, retrying, or refused). */
  #followLogs(signal: AbortSignal, started: () => void): Promise<void> {
    const ctx = this.#ctx;
    if (!ctx) return Promise.resolve();
    let last: string | undefined;
    return follow(
      (onOpen) =>
        ctx.api.streamLogs(
          this.#filters,
          {
            onOpen,
            onPosition: (id) => (last = id),
            onLog: (l) => {
              if (this.#paused) {
                this.#held.push(l);
                this.#heldNote();
              } else this.#addLive(l);
            },
          },
          signal,
          last,
        ),
      signal,
      (state, text, err) => {
        setState('logs-state', state, text);
        started();
        // A refusal is worth a box; a server without the stream (404) only loses live updates.
        const refused = err instanceof ApiCallError && err.status !== 404;
        showError(byId('logs-error'), state === 'unavailable' && refused ? err : undefined);
      },
    );
  }

  #addLive(l: LogRowEntry): void {
    if (this.#shown.has(l.id)) return;
    byId('logs').prepend(this.#row(l, true));
    byId('logs-empty').hidden = true;
    this.onTraces();
  }

  #row(l: LogRowEntry, fresh: boolean): HTMLTableRowElement {
    this.#shown.add(l.id);
    if (l.traceId) this.traceIds.add(l.traceId);
    const trace = l.traceId
      ? h(
          'a',
          {
            href: `#view=trace&trace=${encodeURIComponent(l.traceId)}&entry=${encodeURIComponent(l.id)}`,
            class: 'trace-link',
            title: l.traceId,
          },
          shortId(l.traceId, 8),
        )
      : h('span', { class: 'muted' }, '—');
    trace.addEventListener('click', (ev) => {
      ev.preventDefault();
      ev.stopPropagation();
      if (l.traceId) this.#ctx?.openTrace(l.traceId, l.id);
    });
    const cls = [l.credentialHandoverDetected ? 'handover' : '', fresh ? 'fresh' : ''].filter(Boolean).join(' ');
    const tr = h(
      'tr',
      { 'data-log-id': l.id, class: cls || undefined },
      h('td', {}, timeCell(l.receivedAt)),
      h('td', {}, l.actor),
      h('td', {}, h('span', { class: `badge ${l.actorType}` }, l.actorType)),
      h('td', {}, l.action),
      h('td', {}, trace),
      h('td', {}, l.source),
      h('td', {}, h('span', { class: `status ${l.status}` }, l.status)),
      h('td', {}, l.requestProof ? 'requested' : ''),
      h('td', {}, l.credentialHandoverDetected ? h('span', { class: 'flag' }, '⚠ handover') : ''),
    );
    tr.addEventListener('click', () => this.#ctx?.openLog(l.id));
    return tr;
  }

  async #loadEvents(signal: AbortSignal): Promise<void> {
    const ctx = this.#ctx;
    if (!ctx) return;
    // Where the live stream resumes: after the newest stored event of any type (0 when there is
    // none), so that an event stored between the list and the stream is replayed, not lost
    // (without Last-Event-ID the stream has no replay); then after the last one it sent. A list
    // that failed gives no such point.
    let resumeAfter: string | undefined;
    try {
      const stored = await ctx.api.listEvents(20);
      if (signal.aborted) return;
      for (const e of stored.reverse()) this.#addEvent(e, false);
      resumeAfter = String(stored.reduce((m, e) => Math.max(m, e.seq), 0));
    } catch (err) {
      if (signal.aborted) return;
      showError(byId('events-error'), err);
      if (err instanceof ApiCallError && err.status >= 400 && err.status < 500) return;
    }
    await follow(
      (onOpen) =>
        ctx.api.streamEvents(
          { onOpen, onPosition: (id) => (resumeAfter = id), onEvent: (e) => this.#addEvent(e, true) },
          signal,
          resumeAfter,
        ),
      signal,
      (state, text, err) => {
        setState('stream-state', state, text);
        showError(byId('events-error'), state === 'unavailable' ? err : undefined);
      },
    );
  }

  #addEvent(e: SecurityEvent, live: boolean): void {
    // This panel shows handovers; other project events (retention.purged) have no log or actor.
    if ((e as { type: string }).type !== 'security.policy_violation') return;
    if (this.#events.has(e.id)) return;
    this.#events.add(e.id);
    const link = h(
      'a',
      { href: `#view=entry&entry=${encodeURIComponent(e.logId)}`, class: 'trace-link', title: e.logId },
      shortId(e.logId, 10),
    );
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
    // The handover's log is new too: when the log stream is not live, read the newest page once.
    if (live && byId('logs-state').dataset.state !== 'live') void this.#loadNewest();
  }

  /** Adds entries of the newest page not shown yet (a fallback for a server without the log stream). */
  async #loadNewest(): Promise<void> {
    const ctx = this.#ctx;
    if (!ctx) return;
    try {
      const page = await ctx.api.listLogs(this.#filters, PAGE);
      if (ctx === this.#ctx) for (const l of page.logs.reverse()) this.#addLive(l);
    } catch {
      /* the next live entry or a reload shows it */
    }
  }
}

function setState(id: string, state: string, text: string): void {
  const pill = byId(id);
  pill.dataset.state = state;
  pill.textContent = text;
}
