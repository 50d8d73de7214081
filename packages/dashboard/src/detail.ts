/**
 * The side panel of a selected node: the entry's fields and timing, its decrypted payload (for
 * a proxied call the request and response halves, and for an LLM call the model, tokens and
 * messages), its proof receipt (pending or sealed) and the verification log, which is core's
 * `verifyReceipt` report run in this page, every step with pass / fail / skip and its reason.
 */
import type { ProofReceipt } from '@countersign/core';
import type { LogEntry, PublishedTrust } from './api.js';
import type { DashboardContext } from './context.js';
import { byId, h, jsonBlock, timeCell, type Child } from './dom.js';
import { errorView } from './errors.js';
import { formatDuration, type SpanFacts, type TraceGraph, type TraceNode } from './graph.js';
import { llmView, recordedBody } from './llm.js';
import type { TrustInput } from './verify.js';

/** The detail panel. */
export class DetailView {
  #gen = 0;
  #poll: ReturnType<typeof setTimeout> | undefined;
  #trust: Promise<PublishedTrust> | undefined;
  #trustFor: DashboardContext | undefined;

  /** Called when the user closes the panel. */
  onClose: () => void = () => undefined;

  /** Hides the panel. */
  clear(): void {
    this.#gen++;
    clearTimeout(this.#poll);
    byId('detail').hidden = true;
    byId('detail').replaceChildren();
  }

  #head(title: string, sub: string): HTMLElement {
    const close = h('button', { type: 'button', class: 'ghost close', 'aria-label': 'Close the panel', title: 'Close' }, '×');
    close.addEventListener('click', () => {
      this.clear();
      this.onClose();
    });
    return h('div', { class: 'card-head' }, h('h2', {}, `${title} `, h('span', { class: 'muted mono small' }, sub)), close);
  }

  /** Shows a run node (a span no entry owns: a `runAsAgent` run): its agent, span and children. */
  showRun(node: TraceNode, graph: TraceGraph): void {
    this.#gen++;
    clearTimeout(this.#poll);
    const children = graph.nodes.filter((n) => n.parent === node.index);
    const panel = byId('detail');
    panel.replaceChildren(
      this.#head(`run of ${node.agent}`, node.span.spanId ?? ''),
      dl([
        ['agent', node.agent],
        ['spanId', h('span', { class: 'mono' }, node.span.spanId ?? '—')],
        ['started', timeCell(new Date(node.startMs).toISOString())],
        ['duration', formatDuration(node.endMs !== undefined ? node.endMs - node.startMs : undefined) || '—'],
        ['children', String(children.length)],
      ]),
      note('A span that no entry of this trace owns: the run of an agent (runAsAgent) whose entries name it as their parent.'),
    );
    panel.hidden = false;
  }

  /** Shows `entry` (re-entrant: a newer call wins). */
  async show(ctx: DashboardContext, entry: LogEntry, span: SpanFacts, node?: TraceNode): Promise<void> {
    const gen = ++this.#gen;
    clearTimeout(this.#poll);
    const panel = byId('detail');
    const payloadBox = h('div', { id: 'detail-payload' }, h('p', { class: 'muted' }, 'Decrypting…'));
    const proofBox = h('div', { id: 'detail-proof' }, h('p', { class: 'muted' }, entry.requestProof ? 'Loading the proof…' : ''));
    const verifyBox = h('div', { id: 'verification-log' });
    panel.replaceChildren(
      this.#head(entry.action, entry.id),
      h('h3', {}, 'Proof receipt'),
      proofBox,
      h('h3', {}, 'Verification log'),
      verifyBox,
      h('h3', {}, 'Decrypted content'),
      payloadBox,
      h('h3', {}, 'Entry'),
      fields(entry, span, node),
    );
    panel.hidden = false;

    const opened = await ctx.opener.open(entry.id, entry.payload);
    if (gen !== this.#gen) return;
    if (opened.state === 'open') payloadBox.replaceChildren(...payloadView(opened.payload));
    else if (opened.state === 'no_key')
      payloadBox.replaceChildren(
        note('Encrypted. Enter the decryption key (top right) to read it here; the key stays in this page.'),
        jsonBlock(entry.payload),
      );
    else payloadBox.replaceChildren(h('div', { class: 'error' }, h('span', { class: 'code' }, opened.code), opened.message));

    if (!entry.requestProof) {
      proofBox.replaceChildren(note('This log did not ask for a proof (requestProof was false).'));
      verifyBox.replaceChildren(note('Nothing to verify.'));
      return;
    }
    await this.#loadProof(ctx, entry, gen, proofBox, verifyBox, opened.state === 'open' ? opened.payload : undefined);
  }

  async #loadProof(
    ctx: DashboardContext,
    entry: LogEntry,
    gen: number,
    proofBox: HTMLElement,
    verifyBox: HTMLElement,
    payload: Record<string, unknown> | undefined,
  ): Promise<void> {
    let answer;
    try {
      answer = await ctx.api.getProof(entry.id);
    } catch (err) {
      if (gen === this.#gen) proofBox.replaceChildren(h('div', { class: 'error' }, errorView(err)));
      return;
    }
    if (gen !== this.#gen) return;
    if (answer.status === 'pending') {
      const wait = Math.min(Math.max(answer.retryAfterMs, 500), 10_000);
      proofBox.replaceChildren(
        h(
          'div',
          { class: 'note warn', 'data-proof-status': 'pending' },
          `Pending (${answer.stage.replace(/_/g, ' ')}): the batch `,
          answer.windowEnd ? h('span', {}, 'closes at ', timeCell(answer.windowEnd)) : 'is not sealed yet',
          `. Checking again in ${Math.ceil(wait / 1000)} s.`,
        ),
      );
      verifyBox.replaceChildren(note('Verification runs once the receipt is sealed.'));
      this.#poll = setTimeout(() => void this.#loadProof(ctx, entry, gen, proofBox, verifyBox, payload), wait);
      return;
    }
    if (answer.status === 'unavailable') {
      proofBox.replaceChildren(h('div', { class: 'note warn', 'data-proof-status': 'unavailable' }, `No receipt: ${answer.reason}.`));
      verifyBox.replaceChildren(note('Nothing to verify.'));
      return;
    }
    proofBox.replaceChildren(receiptView(answer.receipt));
    if (!payload) {
      verifyBox.replaceChildren(note('Enter the decryption key to verify: the first step hashes the decrypted payload.'));
      return;
    }
    await this.#verify(ctx, answer.receipt, payload, gen, verifyBox);
  }

  async #verify(
    ctx: DashboardContext,
    receipt: ProofReceipt,
    payload: Record<string, unknown>,
    gen: number,
    box: HTMLElement,
  ): Promise<void> {
    box.replaceChildren(h('p', { class: 'muted' }, 'Verifying in this browser…'));
    let trust: TrustInput;
    try {
      trust = await this.#trustOf(ctx);
    } catch (err) {
      if (gen === this.#gen) box.replaceChildren(h('div', { class: 'error' }, errorView(err)));
      return;
    }
    // The verifier (pkijs, asn1js) is most of the page's code: it loads when first needed.
    const { verifyInBrowser } = await import('./verify.js');
    const { report, notes } = await verifyInBrowser(payload, receipt, trust, window.location.origin);
    if (gen !== this.#gen) return;
    const failed = report.steps.filter((s) => s.status === 'fail').length;
    const passed = report.steps.filter((s) => s.status === 'pass').length;
    const again = h('button', { type: 'button' }, 'Verify again');
    again.addEventListener('click', () => void this.#verify(ctx, receipt, payload, ++this.#gen, box));
    box.replaceChildren(
      h(
        'div',
        { class: `verify-summary ${report.ok ? 'ok' : 'fail'}`, 'data-ok': String(report.ok) },
        report.ok
          ? `Verified: ${passed} of ${report.steps.length} steps passed${passed < report.steps.length ? ', the rest skipped' : ''}.`
          : `NOT verified: ${failed} of ${report.steps.length} steps failed.`,
      ),
      h(
        'table',
        { class: 'steps' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Result'), h('th', {}, 'Step'), h('th', {}, 'Detail'))),
        h(
          'tbody',
          {},
          ...report.steps.map((s) =>
            h(
              'tr',
              { 'data-step': s.id, 'data-status': s.status },
              h('td', { class: 'status' }, s.status.toUpperCase()),
              h('td', { class: 'step-id' }, s.id),
              h('td', {}, s.detail),
            ),
          ),
        ),
      ),
      h('ul', { class: 'notes' }, ...notes.map((n) => h('li', {}, n))),
      again,
      this.#pinForm(ctx, () => void this.#verify(ctx, receipt, payload, ++this.#gen, box)),
    );
  }

  /** Pinned trust when the user gave some, else the server's published copy (fetched once). */
  async #trustOf(ctx: DashboardContext): Promise<TrustInput> {
    const pin = ctx.pinnedTrust;
    if (pin.tsaRootsPem) {
      return {
        tsaRootsPem: pin.tsaRootsPem,
        ...(pin.ledgerPublicKeyPem ? { ledgerPublicKeyPem: pin.ledgerPublicKeyPem } : {}),
        origin: 'pinned in this page',
      };
    }
    if (this.#trustFor !== ctx || !this.#trust) {
      this.#trustFor = ctx;
      this.#trust = ctx.api.getTrust();
      this.#trust.catch(() => (this.#trust = undefined));
    }
    const t = await this.#trust;
    const ledgerPublicKeyPem = pin.ledgerPublicKeyPem ?? t.ledgerPublicKeyPem;
    return {
      tsaRootsPem: t.tsaRootsPem,
      ledgerPublicKeyPem,
      origin: 'published by this server at /v1/proofs/trust (a convenience: pin your own copy for an independent check)',
    };
  }

  #pinForm(ctx: DashboardContext, rerun: () => void): HTMLElement {
    const roots = h('textarea', { rows: 3, placeholder: '-----BEGIN CERTIFICATE----- (TSA trust roots)', spellcheck: 'false' });
    const ledger = h('textarea', { rows: 3, placeholder: '-----BEGIN PUBLIC KEY----- (ledger public key)', spellcheck: 'false' });
    roots.value = ctx.pinnedTrust.tsaRootsPem ?? '';
    ledger.value = ctx.pinnedTrust.ledgerPublicKeyPem ?? '';
    const save = h('button', { type: 'button' }, 'Use pinned trust and verify');
    save.addEventListener('click', () => {
      ctx.pinnedTrust = {
        ...(roots.value.trim() ? { tsaRootsPem: roots.value.trim() } : {}),
        ...(ledger.value.trim() ? { ledgerPublicKeyPem: ledger.value.trim() } : {}),
      };
      rerun();
    });
    return h(
      'details',
      { class: 'trust' },
      h('summary', { class: 'small' }, 'Pin trust material (kept in this page only)'),
      roots,
      ledger,
      save,
    );
  }
}

function note(text: string): HTMLElement {
  return h('div', { class: 'note' }, text);
}

function dl(rows: Array<[string, Child]>): HTMLElement {
  return h('dl', { class: 'fields' }, ...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-field': k }, v)]));
}

/** The decrypted payload: the LLM call and the request/response halves when it is a proxy record, then the whole JSON. */
function payloadView(payload: Record<string, unknown>): HTMLElement[] {
  const out: HTMLElement[] = [];
  const llm = llmView(payload);
  if (llm) {
    const usage = llm.usage
      ? Object.entries(llm.usage)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')
      : '—';
    out.push(
      h(
        'div',
        { class: 'llm', id: 'detail-llm' },
        dl([
          ['model', h('strong', { 'data-llm': 'model' }, llm.model ?? '—')],
          ['provider', [llm.provider, llm.api].filter(Boolean).join(' · ') || '—'],
          ['tokens', h('span', { 'data-llm': 'tokens' }, usage)],
          ['finish', llm.finishReason ?? '—'],
          ...(llm.timeToFirstTokenMs !== undefined ? ([['first token', `${llm.timeToFirstTokenMs} ms`]] as Array<[string, Child]>) : []),
        ]),
        h(
          'ol',
          { class: 'messages' },
          ...llm.messages.map((m) => h('li', { class: `msg ${m.role}` }, h('span', { class: 'role' }, m.role), h('pre', {}, m.text))),
          llm.answer ? h('li', { class: 'msg answer' }, h('span', { class: 'role' }, 'answer'), h('pre', {}, llm.answer)) : null,
        ),
      ),
    );
  }
  for (const half of ['request', 'response'] as const) {
    const v = payload[half];
    if (typeof v !== 'object' || v === null) continue;
    const o = v as Record<string, unknown>;
    const title = half === 'request' ? `Request ${String(o.method ?? '')} ${String(o.target ?? '')}` : `Response ${String(o.status ?? '')}`;
    const body = recordedBody(o);
    out.push(
      h(
        'details',
        { class: `half ${half}`, open: true },
        h('summary', {}, title),
        body !== undefined ? jsonBlock(body) : h('p', { class: 'muted small' }, 'no body recorded'),
        o.headers ? h('details', {}, h('summary', { class: 'small' }, 'headers'), jsonBlock(o.headers)) : null,
      ),
    );
  }
  out.push(h('details', { class: 'raw', open: out.length === 0 }, h('summary', {}, 'Whole decrypted payload'), jsonBlock(payload)));
  return out;
}

function fields(e: LogEntry, span: SpanFacts, node?: TraceNode): HTMLElement {
  const rows: Array<[string, Child]> = [
    ['id', h('span', { class: 'mono' }, e.id)],
    ['receivedAt', timeCell(e.receivedAt)],
    ['actor', e.actor],
    ['actorType', h('span', { class: `badge ${e.actorType}` }, e.actorType)],
    ['action', e.action],
    ['traceId', e.traceId ?? '—'],
    ['source', e.source],
    ['status', e.status],
    ['requestProof', String(e.requestProof)],
    ['credentialHandoverDetected', e.credentialHandoverDetected ? h('span', { class: 'flag' }, 'true') : 'false'],
    ['payloadHash', h('span', { class: 'mono' }, e.payloadHash ?? '—')],
    ['envelope key id', h('span', { class: 'mono' }, e.payload.kid)],
  ];
  if (e.occurredAt) rows.splice(2, 0, ['occurredAt', timeCell(e.occurredAt)]);
  if (span.spanId) rows.push(['spanId', h('span', { class: 'mono' }, span.spanId)]);
  if (span.parentSpanId) rows.push(['parent span', h('span', { class: 'mono' }, `${span.parentSpanId} (from ${span.parentFrom})`)]);
  if (node) {
    rows.push(['started', timeCell(new Date(node.startMs).toISOString())]);
    if (node.endMs !== undefined) rows.push(['duration', h('span', { 'data-duration': '' }, formatDuration(node.endMs - node.startMs))]);
  }
  const out = dl(rows);
  return e.metadata ? h('div', {}, out, h('h3', {}, 'Metadata (stored in the clear)'), jsonBlock(e.metadata)) : out;
}

function receiptView(r: ProofReceipt): HTMLElement {
  return h(
    'div',
    { 'data-proof-status': 'sealed' },
    dl([
      ['status', h('strong', {}, 'sealed')],
      ['payloadHash', h('span', { class: 'mono' }, r.payloadHash)],
      ['merkleRoot', h('span', { class: 'mono' }, r.merkleRoot)],
      ['leaf', `${r.leafIndex} of ${r.treeSize} (path of ${r.merklePathJson.length})`],
      ['batch', h('span', { class: 'mono' }, r.batchId)],
      ['window', h('span', {}, timeCell(r.windowStart), ' – ', timeCell(r.windowEnd))],
      ['tsaResponse', `${Math.round((r.tsaResponse.length * 3) / 4)} bytes (RFC 3161)`],
      ['rekorLogIndex', String(r.rekorLogIndex)],
      ['ledger', h('span', { class: 'mono' }, r.ledgerUrl)],
      ['ledgerEntryUuid', h('span', { class: 'mono' }, r.ledgerEntryUuid)],
    ]),
  );
}
