/**
 * Export from the page: the API's `GET …/logs/export` with the filters in force, as CSV or
 * JSONL (envelopes as stored), and a decrypted JSONL made here in the browser when decryption
 * keys are loaded, with core's envelope code (through {@link PayloadOpener}); the keys and the
 * decrypted data never leave the page. The credential travels in the Authorization header, so
 * the download is fetched and handed to the browser as a file, not a link carrying a token.
 */
import type { LogEntry, LogFilters } from './api.js';
import type { DashboardContext } from './context.js';
import { byId } from './dom.js';
import { showError } from './errors.js';

/** Hands `blob` to the browser as a download named `name`. */
function save(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function fileName(ctx: DashboardContext, kind: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  return `countersign-${ctx.api.credential.projectId}-${stamp}.${kind}`;
}

/** Lines of a streamed text body, as they arrive. */
async function* lines(body: ReadableStream): AsyncGenerator<string> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    rest += value;
    let i: number;
    while ((i = rest.indexOf('\n')) >= 0) {
      yield rest.slice(0, i);
      rest = rest.slice(i + 1);
    }
  }
  if (rest.trim()) yield rest;
}

/**
 * The export as the API gives it (CSV or JSONL), saved as a file.
 * @returns the number of bytes saved.
 */
export async function exportRaw(ctx: DashboardContext, format: 'csv' | 'jsonl', filters: LogFilters): Promise<number> {
  const res = await ctx.api.exportLogs(format, filters);
  const blob = await res.blob();
  save(new Blob([blob], { type: format === 'csv' ? 'text/csv' : 'application/x-ndjson' }), fileName(ctx, format));
  return blob.size;
}

/**
 * The JSONL export with each payload decrypted in this page: one entry per line, `payload`
 * replaced by the decrypted object (or null with `decryptionError` when no key opens it).
 * @returns how many entries were written and how many opened.
 */
export async function exportDecrypted(ctx: DashboardContext, filters: LogFilters): Promise<{ entries: number; opened: number }> {
  const res = await ctx.api.exportLogs('jsonl', filters);
  const out: string[] = [];
  let opened = 0;
  for await (const line of lines(res.body as ReadableStream)) {
    if (!line.trim()) continue;
    const entry = JSON.parse(line) as LogEntry;
    const r = await ctx.opener.open(entry.id, entry.payload, false);
    const plain: Record<string, unknown> = { ...entry, payload: r.state === 'open' ? r.payload : null };
    if (r.state === 'open') opened++;
    else plain.decryptionError = r.state === 'no_key' ? 'no_key' : r.code;
    out.push(JSON.stringify(plain) + '\n');
  }
  save(new Blob(out, { type: 'application/x-ndjson' }), fileName(ctx, 'decrypted.jsonl'));
  return { entries: out.length, opened };
}

/** Wires the export buttons of the audit stream to the current filters. */
export function bindExport(getCtx: () => DashboardContext | undefined, getFilters: () => LogFilters): void {
  const status = byId('export-state');
  const run = (what: string, job: (ctx: DashboardContext) => Promise<string>) => {
    const ctx = getCtx();
    if (!ctx) return;
    status.textContent = `Exporting ${what}…`;
    showError(byId('logs-error'), undefined);
    job(ctx).then(
      (done) => (status.textContent = done),
      (err: unknown) => {
        status.textContent = '';
        showError(byId('logs-error'), err);
      },
    );
  };
  byId('export-csv').addEventListener('click', () =>
    run('CSV', async (ctx) => `CSV saved (${await exportRaw(ctx, 'csv', getFilters())} bytes).`),
  );
  byId('export-jsonl').addEventListener('click', () =>
    run('JSONL', async (ctx) => `JSONL saved (${await exportRaw(ctx, 'jsonl', getFilters())} bytes).`),
  );
  byId('export-decrypted').addEventListener('click', () =>
    run('decrypted JSONL', async (ctx) => {
      if (ctx.opener.size === 0) throw new Error('enter a decryption key first (top right): decryption happens in this page');
      const r = await exportDecrypted(ctx, getFilters());
      return `Decrypted JSONL saved: ${r.entries} entries, ${r.opened} decrypted in this page.`;
    }),
  );
}
