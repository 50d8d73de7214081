/**
 * The dashboard's entry: sign-in (project id + live key or embed token in sessionStorage; the
 * decryption key in memory only), or at `/embed?project=<id>#token=<embed token>` the read-only
 * embedded viewer (no sign-in form, no events panel); the two views; and the URL of each view
 * (route.ts), so a link or a reload reopens it.
 */
import './style.css';
import { ApiCallError, DashboardApi, isEmbedToken, type Credential } from './api.js';
import type { DashboardContext } from './context.js';
import { PayloadOpener, parseKeyStrings } from './decrypt.js';
import { DetailView } from './detail.js';
import { byId } from './dom.js';
import { embedLaunch, embedScope } from './embed.js';
import { showError } from './errors.js';
import { bindExport } from './export.js';
import { readRoute, routeHash, writeRoute, type Route } from './route.js';
import { StoryView } from './story.js';
import { StreamView } from './stream.js';

const SESSION_KEY = 'countersign.dashboard.session';

const stream = new StreamView();
const detail = new DetailView();
const story = new StoryView(detail);
let ctx: DashboardContext | undefined;
const embed = embedLaunch(location);

function savedCredential(): Credential | undefined {
  try {
    const c = JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? 'null') as Credential | null;
    return c && typeof c.projectId === 'string' && typeof c.token === 'string' ? c : undefined;
  } catch {
    return undefined;
  }
}

function showTab(tab: 'stream' | 'story'): void {
  byId('view-stream').hidden = tab !== 'stream';
  byId('view-story').hidden = tab !== 'story';
  for (const b of document.querySelectorAll<HTMLButtonElement>('#tabs .tab')) b.classList.toggle('active', b.dataset.tab === tab);
  if (tab === 'story') story.shown();
}

function setKeyState(): void {
  const n = ctx?.opener.size ?? 0;
  byId('key-state').textContent = n === 0 ? 'no decryption key' : `${n} decryption key${n === 1 ? '' : 's'} in memory`;
}

/** Goes to a view: a new history entry whose hash the router then follows. */
function navigate(r: Route): void {
  const hash = routeHash(r);
  if (hash === location.hash) void route();
  else location.hash = hash;
}

/** Shows the view the URL names. */
async function route(): Promise<void> {
  if (!ctx) return;
  const r = readRoute();
  if (r.view === 'trace') {
    showTab('story');
    if (r.trace) await story.open(r.trace, r.entry);
  } else if (r.view === 'entry' && r.entry) {
    await openLog(r.entry);
  } else {
    showTab('stream');
    stream.apply(r.filters);
  }
}

/** Checks the credential with one real read, then opens the views. */
async function signIn(credential: Credential, keyStrings: string[], remember: boolean): Promise<void> {
  const api = new DashboardApi(credential);
  await api.listLogs(new URLSearchParams(), 1);
  ctx = {
    api,
    opener: new PayloadOpener(keyStrings),
    pinnedTrust: {},
    openTrace: (trace, entry) => navigate({ view: 'trace', trace, ...(entry ? { entry } : {}), filters: new URLSearchParams() }),
    openLog: (entry) => navigate({ view: 'entry', entry, filters: new URLSearchParams() }),
  };
  if (remember) sessionStorage.setItem(SESSION_KEY, JSON.stringify(credential));
  const embedToken = isEmbedToken(credential.token);
  byId('signin').hidden = true;
  byId('tabs').hidden = false;
  byId('session-bar').hidden = false;
  byId('session-project').textContent = `${credential.projectId}${embedToken ? ' (embed token)' : ''}`;
  setKeyState();
  story.bind(ctx);
  stream.onTraces = () => story.setTraceOptions(stream.traceIds);
  const first = readRoute();
  // Embed tokens cannot read security events: no panel rather than an error box.
  stream.start(ctx, first.view === 'stream' ? first.filters : new URLSearchParams(), !embedToken);
  await route();
}

async function openLog(logId: string): Promise<void> {
  if (!ctx) return;
  try {
    const entry = await ctx.api.getLog(logId);
    showTab('story');
    if (entry.traceId) {
      writeRoute({ view: 'trace', trace: entry.traceId, entry: entry.id, filters: new URLSearchParams() }, true);
      await story.open(entry.traceId, entry.id);
    } else await story.openSingle(entry);
  } catch (err) {
    showTab('story');
    showError(byId('trace-error'), err);
  }
}

function signOut(): void {
  sessionStorage.removeItem(SESSION_KEY);
  stream.stop();
  story.bind(undefined);
  ctx = undefined;
  byId('tabs').hidden = true;
  byId('session-bar').hidden = true;
  byId('view-stream').hidden = true;
  byId('view-story').hidden = true;
  byId('signin').hidden = false;
  byId<HTMLTextAreaElement>('signin-keys').value = '';
  history.replaceState(null, '', location.pathname + location.search);
}

byId<HTMLFormElement>('signin-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const credential = {
    projectId: byId<HTMLInputElement>('signin-project').value.trim(),
    token: byId<HTMLInputElement>('signin-token').value.trim(),
  };
  const keys = parseKeyStrings(byId<HTMLTextAreaElement>('signin-keys').value);
  const box = byId('signin-error');
  showError(box, undefined);
  signIn(credential, keys, true).then(
    () => {
      byId<HTMLInputElement>('signin-token').value = '';
      byId<HTMLTextAreaElement>('signin-keys').value = '';
    },
    (err: unknown) => showError(box, err),
  );
});

byId<HTMLFormElement>('key-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  if (!ctx) return;
  const input = byId<HTMLInputElement>('key-input-bar');
  ctx.opener = new PayloadOpener(parseKeyStrings(input.value));
  input.value = '';
  setKeyState();
  void story.redraw();
});

byId('sign-out').addEventListener('click', signOut);
for (const b of document.querySelectorAll<HTMLButtonElement>('#tabs .tab')) {
  b.addEventListener('click', () =>
    b.dataset.tab === 'story'
      ? navigate({ view: 'trace', ...(story.traceId ? { trace: story.traceId } : {}), filters: new URLSearchParams() })
      : navigate({ view: 'stream', filters: stream.filters }),
  );
}
stream.onFilters = (filters) => navigate({ view: 'stream', filters });
story.onSelect = (trace, entry) => {
  if (trace) writeRoute({ view: 'trace', trace, ...(entry ? { entry } : {}), filters: new URLSearchParams() }, true);
};
detail.onClose = () => story.onSelect(story.traceId, undefined);
window.addEventListener('hashchange', () => void route());
bindExport(
  () => ctx,
  () => stream.filters,
);

if (embed) {
  // The embedded viewer: the token and project come from the URL; nothing is stored.
  document.body.classList.add('embed');
  byId('signin').hidden = true;
  const box = byId('embed-error');
  if ('error' in embed) showError(box, new ApiCallError('invalid_request', embed.error, 0));
  else {
    const scope = embedScope(embed.token);
    if (scope.traceId && readRoute().view === 'stream' && !readRoute().filters.toString()) {
      history.replaceState(null, '', routeHash({ view: 'trace', trace: scope.traceId, filters: new URLSearchParams() }, embed.token));
    }
    signIn({ projectId: embed.projectId, token: embed.token }, [], false).catch((err: unknown) => showError(box, err));
  }
} else {
  // A reload keeps the project and key of this tab (sessionStorage), not the decryption key.
  const saved = savedCredential();
  if (saved) {
    byId<HTMLInputElement>('signin-project').value = saved.projectId;
    signIn(saved, [], true).catch((err: unknown) => {
      if (err instanceof ApiCallError && (err.status === 401 || err.status === 403)) sessionStorage.removeItem(SESSION_KEY);
      showError(byId('signin-error'), err);
    });
  }
}
