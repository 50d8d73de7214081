/**
 * The search form of the audit stream ↔ the API's filter parameters (DESIGN §4), both ways,
 * so the form, the page URL, the listing, the stream and the export all use one set.
 */
import type { LogFilters } from './api.js';

/** Match modes of a text field and the parameter each maps to. */
const TEXT_FIELDS = {
  actor: { exact: 'actor', prefix: 'actorPrefix', contains: 'actorContains' },
  action: { exact: 'action', prefix: 'actionPrefix', contains: 'actionContains' },
  traceId: { exact: 'traceId', prefix: 'traceIdPrefix', contains: undefined },
} as const;

type Field = keyof typeof TEXT_FIELDS;
type Mode = 'exact' | 'prefix' | 'contains';
const SIMPLE = ['status', 'source', 'actorType', 'handover'] as const;

/** `2026-01-02T03:04` (a datetime-local value, local time) → ISO, or undefined. */
function localToIso(v: string): string | undefined {
  if (!v) return undefined;
  const t = new Date(v).getTime();
  return Number.isNaN(t) ? undefined : new Date(t).toISOString();
}

/** ISO → a datetime-local value in local time (seconds kept when not zero). */
function isoToLocal(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const p = (n: number) => String(n).padStart(2, '0');
  const s = d.getSeconds() ? `:${p(d.getSeconds())}` : '';
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}${s}`;
}

/** Reads the form into API parameters. */
export function filtersFromForm(form: HTMLFormElement): LogFilters {
  const data = new FormData(form);
  const text = (k: string) => String(data.get(k) ?? '').trim();
  const q = new URLSearchParams();
  for (const f of Object.keys(TEXT_FIELDS) as Field[]) {
    const v = text(f);
    const mode = (text(`${f}Match`) || 'exact') as Mode;
    const param = TEXT_FIELDS[f][mode] ?? TEXT_FIELDS[f].exact;
    if (v) q.set(param, v);
  }
  for (const k of SIMPLE) if (text(k)) q.set(k, text(k));
  for (const k of ['from', 'to'] as const) {
    const iso = localToIso(text(k));
    if (iso) q.set(k, iso);
  }
  for (const pair of text('meta').split(/[,\n]/)) {
    const m = pair.trim();
    if (/^[^=]+=.*$/.test(m)) q.append('meta', m);
  }
  return q;
}

/** Fills the form from API parameters (the inverse of {@link filtersFromForm}). */
export function fillForm(form: HTMLFormElement, q: LogFilters): void {
  // Every field is set (not form.reset(), whose reset event the page treats as the user's Clear).
  const set = (name: string, v: string) => {
    const el = form.elements.namedItem(name) as HTMLInputElement | HTMLSelectElement | null;
    if (el) el.value = v;
  };
  for (const f of Object.keys(TEXT_FIELDS) as Field[]) {
    set(f, '');
    set(`${f}Match`, f === 'traceId' ? 'exact' : 'prefix');
  }
  for (const f of Object.keys(TEXT_FIELDS) as Field[]) {
    for (const mode of ['exact', 'prefix', 'contains'] as const) {
      const param = TEXT_FIELDS[f][mode];
      const v = param ? q.get(param) : null;
      if (v !== null) {
        set(f, v);
        set(`${f}Match`, mode);
      }
    }
  }
  for (const k of SIMPLE) set(k, q.get(k) ?? '');
  for (const k of ['from', 'to'] as const) set(k, q.get(k) ? isoToLocal(q.get(k)!) : '');
  set('meta', q.getAll('meta').join(', '));
}

/** A short description of active filters, e.g. for the export button's title. */
export function describeFilters(q: LogFilters): string {
  const parts = [...q].map(([k, v]) => `${k}=${v}`);
  return parts.length ? parts.join(' & ') : 'no filters (everything)';
}
