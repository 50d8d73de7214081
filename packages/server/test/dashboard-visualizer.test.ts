/**
 * The dashboard of issue 11 in Debian's Chromium over a real server and the real client
 * library: a nested `runAsAgent` run (log() and proxy() to a fake OpenAI upstream) drawn as a
 * linked graph in agent lanes with zoom and fit, its waterfall, the side panel with the
 * decrypted LLM call and the verified proof; a 500-entry trace; the live SSE stream with pause;
 * server-side search and a deep link that reopens it; export downloads; and `/embed` framed by
 * an allowed origin and refused by another.
 *
 * Needs /usr/bin/chromium (skips without it unless COUNTERSIGN_REQUIRE_CHROMIUM=1).
 * COUNTERSIGN_SCREENSHOT_DIR=<dir> saves 1440×900 screenshots of each view.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ServiceClient } from '@countersign/client';
import { startApp } from './helpers/server.js';
import { fullProject, postLog } from './foundation-helpers.js';
import { waitForReceipt } from './proofs-helpers.js';
import { CHROMIUM, CHROMIUM_ARGS, chromiumMissing, ensureDashboardBuilt } from './dashboard-helpers.js';

const KEY = 'visualizer test key';
const TRACE = 'run-visualizer';
const BULK = 'run-bulk-500';

async function shot(page: Page, name: string): Promise<void> {
  const dir = process.env.COUNTERSIGN_SCREENSHOT_DIR;
  if (dir) await page.screenshot({ path: path.join(dir, `${name}.png`) });
}

/** A loopback HTTP server answering `handler`; resolves with its base URL and a closer. */
async function serve(handler: http.RequestListener): Promise<{ url: string; hostPort: string; close: () => Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hostPort: `127.0.0.1:${port}`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** A fake OpenAI chat endpoint. */
const fakeOpenAi: http.RequestListener = (req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    const asked = JSON.parse(body || '{}') as { model?: string };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        model: asked.model ?? 'gpt-test',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Paris is the capital.' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 21, completion_tokens: 5, total_tokens: 26 },
      }),
    );
  });
};

const missing = chromiumMissing();

test(
  'dashboard (issue 11) in Chromium: visualizer, waterfall, side panel, stream, search, deep links, export, embed',
  { skip: missing.skip },
  async (t) => {
    assert.equal(missing.fail, undefined, missing.fail);
    await ensureDashboardBuilt();
    const upstream = await serve(fakeOpenAi);
    const app = await startApp({ listen: true, config: { proofWindowMs: 1000, allowTargets: [upstream.hostPort] } });
    const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    const downloads = fs.mkdtempSync(path.join(app.config.dataDir, 'dl-'));
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    // The page's CSP keeps fetch() off blob: URLs, so the blob is kept as it is made.
    await page.addInitScript(() => {
      const w = window as unknown as { __saved: { name: string; text: string }[] };
      w.__saved = [];
      const blobs = new Map<string, Blob>();
      const make = URL.createObjectURL.bind(URL);
      URL.createObjectURL = (obj: Blob | MediaSource) => {
        const url = make(obj);
        if (obj instanceof Blob) blobs.set(url, obj);
        return url;
      };
      const click = HTMLAnchorElement.prototype.click;
      HTMLAnchorElement.prototype.click = function (this: HTMLAnchorElement) {
        const blob = blobs.get(this.href);
        if (!this.download || !blob) return click.call(this);
        const name = this.download;
        void blob.text().then((text) => w.__saved.push({ name, text }));
      };
    });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    try {
      const p = await fullProject({ ...app }, 'visual');
      const client = new ServiceClient({
        apiKey: p.agent,
        encryptionKey: KEY,
        endpoint: app.url,
        projectId: p.projectId,
        clientSecret: p.clientSecret,
      });
      // First (so the run below is the newest page): 500 entries of one trace, a binary span tree (span ids in plain metadata).
      const span = (i: number) => (i + 1).toString(16).padStart(16, '0');
      const bulk = Array.from({ length: 500 }, (_, i) => ({
        action: `step.${i}`,
        actor: `worker-${i % 5}`,
        traceId: BULK,
        metadata: { spanId: span(i), ...(i > 0 ? { parentSpanId: span((i - 1) >> 1) } : {}) },
        payload: { i },
      }));
      const seeded = await postLog(app.app, p.agent, { logs: bulk }, { 'x-service-encryption-key': KEY });
      assert.equal(seeded.statusCode, 201, seeded.body);

      // The nested run: a planner plans, asks an LLM, hands a search to a tool runner (which logs
      // and calls the LLM too), then answers.
      const chat = (q: string) => ({
        target: `${upstream.url}/v1/chat/completions`,
        payload: { model: 'gpt-test', messages: [{ role: 'user', content: q }] },
        action: 'llm.chat',
      });
      await client.runAsAgent({ runId: TRACE, agentId: 'planner' }, async () => {
        await client.log({ action: 'plan', payload: { thought: 'find the capital' }, requestProof: true });
        await client.proxy(chat('What is the capital of France?'));
        await client.runAsAgent({ agentId: 'tool-runner' }, async () => {
          await client.log({ action: 'tool.search', payload: { query: 'capital of France' } });
          await client.proxy(chat('Summarise the search results'));
        });
        await client.log({ action: 'answer', payload: { answer: 'Paris' } });
      });
      await client.flush();
      const trace = await app.app.inject({
        method: 'GET',
        url: `/v1/projects/${p.projectId}/traces/${TRACE}`,
        headers: { authorization: `Bearer ${p.live}` },
      });
      assert.equal(trace.statusCode, 200, trace.body);
      const entries = trace.json().logs as Array<{ id: string; action: string; actor: string; spanId?: string; parentSpanId?: string }>;
      // Five steps and the two runs (each run is an `agent.run` entry), one span tree in the clear.
      assert.equal(entries.length, 7, trace.body);
      const spans = new Set(entries.map((e) => e.spanId));
      assert.equal(spans.size, 7, 'every entry has a span of its own');
      assert.equal(entries.filter((e) => e.parentSpanId === undefined).length, 1, 'one root: the planner run');
      for (const e of entries) if (e.parentSpanId !== undefined) assert.ok(spans.has(e.parentSpanId), `${e.action} links inside the trace`);
      const planId = entries.find((e) => e.action === 'plan')!.id;
      const llmId =
        entries.find((e) => e.action === 'llm.chat' && e.actor === 'planner')?.id ?? entries.find((e) => e.action === 'llm.chat')!.id;
      await waitForReceipt(app.app, p.live, p.projectId, planId);

      // Sign in; the stream lists pages without payloads.
      await page.goto(app.url + '/');
      await page.fill('#signin-project', p.projectId);
      await page.fill('#signin-token', p.live);
      await page.fill('#signin-keys', KEY);
      await page.click('#signin-form button[type=submit]');
      await page.locator(`#logs tr[data-log-id="${planId}"]`).waitFor();
      await shot(page, 'stream');

      await t.test('the nested run: linked nodes in agent lanes, all visible after fit, zoom works', async () => {
        await page.click(`#logs tr[data-log-id="${planId}"] a.trace-link`);
        await page.waitForFunction(() => document.querySelectorAll('#canvas-wrap .trace-node').length >= 7);
        assert.match(page.url(), new RegExp(`#view=trace&trace=${TRACE}`));
        const lanes = await page.locator('.lane-label').evaluateAll((els) => els.map((e) => e.getAttribute('data-agent')));
        assert.ok(lanes.includes('planner') && lanes.includes('tool-runner'), JSON.stringify(lanes));
        // One connected story: every node but the first has exactly one incoming edge.
        const nodes = await page.locator('#canvas-wrap .trace-node').count();
        const targets = await page.locator('path.edge').evaluateAll((els) => els.map((e) => e.getAttribute('data-to')));
        assert.equal(targets.length, nodes - 1);
        assert.equal(new Set(targets).size, nodes - 1);
        assert.ok((await page.locator('path.edge.parent').count()) >= 2, 'runs point to their steps');
        await page.click('.graph-controls .zoom-fit');
        const box = (await page.locator('#canvas-wrap').boundingBox())!;
        for (const node of await page.locator('#canvas-wrap .trace-node').all()) {
          const b = (await node.boundingBox())!;
          assert.ok(
            b.x >= box.x - 1 && b.y >= box.y - 1 && b.x + b.width <= box.x + box.width + 1 && b.y + b.height <= box.y + box.height + 1,
            'node inside the canvas after fit',
          );
        }
        const before = (await page.locator(`.trace-node[data-log-id="${planId}"]`).boundingBox())!.width;
        await page.click('.graph-controls .zoom-in');
        await page.waitForFunction((w) => {
          const r = document.querySelector(`.trace-node[data-log-id]`)!.getBoundingClientRect();
          return r.width > w * 1.2;
        }, before);
        // Zoomed in, part of the graph is out of view: the minimap shows where the view is.
        await page.locator('.minimap-box:not([hidden])').waitFor();
        assert.equal(await page.locator('.minimap .mini-node').count(), await page.locator('#canvas-wrap .trace-node').count());
        await page.click('.graph-controls .zoom-fit');
        await page.locator('.minimap-box[hidden]').waitFor({ state: 'attached' });
      });

      await t.test('the waterfall shows durations; selecting opens the side panel with the decrypted LLM call', async () => {
        const row = page.locator(`.wf-row[data-log-id="${llmId}"]`);
        await row.waitFor();
        assert.match(await row.locator('.wf-dur').innerText(), /\d+(\.\d+)? (ms|s)/);
        await row.click();
        await page.locator('#detail-llm').waitFor();
        assert.equal(await page.locator('#detail-llm [data-llm="model"]').innerText(), 'gpt-test');
        assert.match(await page.locator('#detail-llm [data-llm="tokens"]').innerText(), /21/);
        assert.match(await page.locator('#detail-llm .messages').innerText(), /capital of France|search results/);
        assert.match(await page.locator('#detail-llm .messages').innerText(), /Paris is the capital/);
        assert.ok(await page.locator(`.trace-node.selected[data-log-id="${llmId}"]`).count(), 'the same node is selected on the canvas');
        assert.match(page.url(), new RegExp(`entry=${llmId}`));
        // The side panel sits beside the canvas, inside the viewport.
        const panel = (await page.locator('#detail').boundingBox())!;
        const canvas = (await page.locator('#canvas-wrap').boundingBox())!;
        assert.ok(panel.x >= canvas.x + canvas.width - 1 && panel.y < 900, JSON.stringify({ panel, canvas }));
        await shot(page, 'story-llm');

        await page.click(`.trace-node[data-log-id="${planId}"]`);
        const summary = page.locator('#verification-log .verify-summary');
        await summary.waitFor();
        assert.equal(await summary.getAttribute('data-ok'), 'true');
        assert.match(await page.locator('#detail-payload').innerText(), /find the capital/);
        await shot(page, 'story-proof');
      });

      await t.test('a deep link reopens the trace with its node selected', async () => {
        const url = page.url();
        const other = await browser.newPage({ viewport: { width: 1440, height: 900 } });
        try {
          // Same tab session: sign in there, then open the link.
          await other.goto(app.url + '/');
          await other.fill('#signin-project', p.projectId);
          await other.fill('#signin-token', p.live);
          await other.click('#signin-form button[type=submit]');
          await other.locator('#logs tr').first().waitFor();
          await other.goto(url);
          await other.locator(`.trace-node.selected[data-log-id="${planId}"]`).waitFor();
          assert.equal(await other.locator('#detail').isVisible(), true);
        } finally {
          await other.close();
        }
      });

      await t.test('500 entries render as 500 nodes', async () => {
        await page.goto(`${app.url}/#view=trace&trace=${BULK}`);
        await page.waitForFunction(() => document.querySelector('#canvas-wrap')?.getAttribute('data-nodes') === '500', undefined, {
          timeout: 60_000,
        });
        assert.equal(await page.locator('#canvas-wrap .trace-node').count(), 500);
        assert.equal(await page.locator('path.edge').count(), 499);
        assert.equal(await page.locator('.wf-row').count(), 500);
        await page.click('.graph-controls .zoom-fit');
        await shot(page, 'story-500');
      });

      await t.test('the stream shows a new entry live over SSE, holds it while paused', async () => {
        await page.goto(`${app.url}/#view=stream`);
        await page.locator('#logs-state[data-state="live"]').waitFor();
        const live = await postLog(
          app.app,
          p.agent,
          { action: 'live.one', actor: 'streamer', payload: { n: 1 } },
          { 'x-service-encryption-key': KEY },
        );
        assert.equal(live.statusCode, 201, live.body);
        await page.locator(`#logs tr.fresh[data-log-id="${live.json().id}"]`).waitFor();
        await page.click('#live-toggle');
        const held = await postLog(
          app.app,
          p.agent,
          { action: 'live.two', actor: 'streamer', payload: { n: 2 } },
          { 'x-service-encryption-key': KEY },
        );
        await page.waitForFunction(() => /1 new entry held/.test(document.querySelector('#logs-held')?.textContent ?? ''));
        assert.equal(await page.locator(`#logs tr[data-log-id="${held.json().id}"]`).count(), 0);
        await page.click('#live-toggle');
        await page.locator(`#logs tr[data-log-id="${held.json().id}"]`).waitFor();
      });

      await t.test('search by actor prefix and time range; the URL reopens the filtered view', async () => {
        await page.goto(`${app.url}/#view=stream`);
        await page.locator('#logs tr').first().waitFor();
        await page.selectOption('#filters select[name="actorMatch"]', 'prefix');
        await page.fill('#filters input[name="actor"]', 'tool-');
        await page.click('#filters button[type=submit]');
        await page.waitForFunction(() => {
          const cells = Array.from(document.querySelectorAll('#logs tr td:nth-child(2)'));
          return cells.length === 3 && cells.every((td) => td.textContent === 'tool-runner');
        });
        assert.match(page.url(), /actorPrefix=tool-/);
        // A time range in the future finds nothing; the URL keeps both.
        const future = new Date(Date.now() + 86_400_000);
        const local = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
        await page.fill('#filters input[name="from"]', local(future));
        await page.click('#filters button[type=submit]');
        await page.locator('#logs-empty:not([hidden])').waitFor();
        assert.match(page.url(), /from=/);
        await page.fill('#filters input[name="from"]', '');
        await page.click('#filters button[type=submit]');
        await page.waitForFunction(() => document.querySelectorAll('#logs tr').length === 3);
        const link = page.url();
        await page.goto('about:blank');
        await page.goto(link);
        await page.waitForFunction(() => document.querySelectorAll('#logs tr').length === 3);
        assert.equal(await page.inputValue('#filters input[name="actor"]'), 'tool-');
        await shot(page, 'stream-search');
      });

      await t.test('export downloads CSV and JSONL that match the API, and a decrypted JSONL', async () => {
        const api = (format: string) =>
          app.app.inject({
            method: 'GET',
            url: `/v1/projects/${p.projectId}/logs/export?format=${format}&actorPrefix=tool-`,
            headers: { authorization: `Bearer ${p.live}` },
          });
        // Debian Chromium under Playwright emits no `download` event here (a bare blob download
        // times out too), so the page's own hand-over is captured instead: the init script below
        // records every `<a download>` click with the blob's text, i.e. the file the browser saves.
        const saved = async (button: string): Promise<{ name: string; text: string }> => {
          await page.evaluate(() => ((window as unknown as { __saved: unknown[] }).__saved = []));
          await page.click(button);
          // Polled with evaluate: waitForFunction compiles its predicate in the page, which the CSP forbids.
          for (let i = 0; i < 150; i++) {
            const got = await page.evaluate(() => (window as unknown as { __saved: { name: string; text: string }[] }).__saved[0]);
            if (got) return got;
            await new Promise((r) => setTimeout(r, 100));
          }
          throw new Error(
            `${button}: nothing was saved within 15 s (${await page.locator('#export-state').innerText()} ${await page.locator('#logs-error').innerText()})`,
          );
        };
        for (const [button, format] of [
          ['#export-csv', 'csv'],
          ['#export-jsonl', 'jsonl'],
        ] as const) {
          const file = await saved(button);
          assert.match(file.name, new RegExp(`^countersign-${p.projectId}-.*\\.${format}$`));
          fs.writeFileSync(path.join(downloads, `${format}.out`), file.text);
          const expected = await api(format);
          assert.equal(expected.statusCode, 200, expected.body);
          assert.equal(file.text, expected.body, `${format} export matches the API`);
        }
        // The deep links above reloaded the page, and keys live in memory only: enter it again.
        await page.fill('#key-input-bar', KEY);
        await page.press('#key-input-bar', 'Enter');
        const decrypted = await saved('#export-decrypted');
        assert.match(decrypted.name, /\.decrypted\.jsonl$/);
        const lines = decrypted.text
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { payload: unknown });
        assert.equal(lines.length, 3, 'the tool run: its search, its LLM call, the run itself');
        assert.match(JSON.stringify(lines), /capital of France/);
      });

      await t.test('/embed: the read-only viewer on its own, framed by an allowed origin, refused by another', async () => {
        const host = (name: string) =>
          serve((_req, res) => {
            res.writeHead(200, { 'content-type': 'text/html' });
            res.end(`<!doctype html><title>${name}</title><iframe id="f" width="1200" height="800"></iframe>`);
          });
        const allowed = await host('allowed');
        const other = await host('other');
        const token = await client.generateEmbedToken({ traceId: TRACE });
        const src = `${app.url}/embed?project=${encodeURIComponent(p.projectId)}#token=${token}`;
        const framePage = await browser.newPage({ viewport: { width: 1440, height: 900 } });
        const frameIn = async (hostUrl: string) => {
          await framePage.goto(hostUrl);
          const loaded = framePage.waitForEvent('framenavigated', (f) => f !== framePage.mainFrame());
          await framePage.evaluate((s) => ((document.getElementById('f') as HTMLIFrameElement).src = s), src);
          return loaded;
        };
        try {
          // On its own: the trace of the token's scope, no sign-in form, no events panel, no error box.
          await framePage.goto(src);
          await framePage.locator('#canvas-wrap .trace-node').nth(4).waitFor();
          assert.equal(await framePage.locator('#signin').isVisible(), false, 'no sign-in form');
          assert.equal(await framePage.locator('#events-card').isVisible(), false, 'no events panel for an embed token');
          assert.equal(await framePage.locator('[data-code="wrong_credential_class"]').count(), 0, 'no wrong_credential_class box');
          {
            const boxes = await framePage.locator('.error:not([hidden])').evaluateAll((els) => els.map((e) => `${e.id}: ${e.textContent}`));
            assert.deepEqual(boxes, [], 'no error box');
          }

          // Without allowed origins, nobody may frame it.
          const refusedNone = await frameIn(other.url);
          assert.equal(await refusedNone.locator('#canvas-wrap').count(), 0, 'not rendered in a frame');

          const patched = await app.app.inject({
            method: 'PATCH',
            url: `/v1/projects/${p.projectId}`,
            headers: { authorization: `Bearer ${app.masterKey}`, 'content-type': 'application/json' },
            payload: { embedOrigins: [allowed.url] },
          });
          assert.equal(patched.statusCode, 200, patched.body);
          const csp = String(
            (await app.app.inject({ method: 'GET', url: `/embed?project=${p.projectId}` })).headers['content-security-policy'],
          );
          assert.match(csp, new RegExp(`frame-ancestors ${allowed.url.replace(/\./g, '\\.')}(;|$)`));
          assert.match(
            String((await app.app.inject({ method: 'GET', url: '/' })).headers['content-security-policy']),
            /frame-ancestors 'none'/,
          );

          await frameIn(allowed.url);
          const frame = framePage.frameLocator('#f');
          await frame.locator('#canvas-wrap .trace-node').nth(4).waitFor();
          assert.equal(await frame.locator('#signin').isVisible(), false);
          await shot(framePage, 'embed');

          const refused = await frameIn(other.url);
          assert.equal(await refused.locator('#canvas-wrap').count(), 0, 'another origin cannot frame it');
        } finally {
          await framePage.close();
          await allowed.close();
          await other.close();
        }
      });
      assert.deepEqual(pageErrors, []);
    } finally {
      await page.close();
      await browser.close();
      await app.close();
      await upstream.close();
    }
  },
);
