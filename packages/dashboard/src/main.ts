/**
 * The dashboard's entry: sign-in (project id + live key or embed token in sessionStorage; the
 * decryption key in memory only), the two views, and navigation between them.
 */
import './style.css';
import { ApiCallError, DashboardApi, isEmbedToken, type Credential } from './api.js';
import type { DashboardContext } from './context.js';
import { PayloadOpener, parseKeyStrings } from './decrypt.js';
import { DetailView } from './detail.js';
import { byId } from './dom.js';
import { showError } from './errors.js';
import { StoryView } from './story.js';
import { StreamView } from './stream.js';

const SESSION_KEY = 'countersign.dashboard.session';

const stream = new StreamView();
const detail = new DetailView();
const story = new StoryView(detail);
let ctx: DashboardContext | undefined;

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
}

function setKeyState(): void {
  const n = ctx?.opener.size ?? 0;
  byId('key-state').textContent = n === 0 ? 'no decryption key' : `${n} decryption key${n === 1 ? '' : 's'} in memory`;
}

/** Checks the credential with one real read, then opens the views. */
async function signIn(credential: Credential, keyStrings: string[]): Promise<void> {
  const api = new DashboardApi(credential);
  await api.listLogs({}, 1);
  ctx = {
    api,
    opener: new PayloadOpener(keyStrings),
    pinnedTrust: {},
    openTrace: (traceId, selectLogId) => {
      showTab('story');
      void story.open(traceId, selectLogId);
    },
    openLog: (logId) => void openLog(logId),
  };
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(credential));
  byId('signin').hidden = true;
  byId('tabs').hidden = false;
  byId('session-bar').hidden = false;
  byId('session-project').textContent = `${credential.projectId}${isEmbedToken(credential.token) ? ' (embed token)' : ''}`;
  setKeyState();
  story.bind(ctx);
  stream.onTraces = () => story.setTraceOptions(stream.traceIds);
  stream.start(ctx);
  showTab('stream');
}

async function openLog(logId: string): Promise<void> {
  if (!ctx) return;
  try {
    const entry = await ctx.api.getLog(logId);
    showTab('story');
    if (entry.traceId) await story.open(entry.traceId, entry.id);
    else await story.openSingle(entry);
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
  signIn(credential, keys).then(
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
  b.addEventListener('click', () => showTab(b.dataset.tab === 'story' ? 'story' : 'stream'));
}

// A reload keeps the project and key of this tab (sessionStorage), not the decryption key.
const saved = savedCredential();
if (saved) {
  byId<HTMLInputElement>('signin-project').value = saved.projectId;
  signIn(saved, []).catch((err: unknown) => {
    if (err instanceof ApiCallError && (err.status === 401 || err.status === 403)) sessionStorage.removeItem(SESSION_KEY);
    showError(byId('signin-error'), err);
  });
}
