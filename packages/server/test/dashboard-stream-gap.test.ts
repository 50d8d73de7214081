/**
 * The audit stream in a real browser misses no entry between its first page and its live stream.
 * The page used to load the first page, then connect the stream, which starts after the newest
 * entry at the moment it connects: an entry written in between was in neither, and stayed
 * missing until a reload. Here the entry is written exactly then (the browser's stream request is
 * held until it is stored), and it must be shown, once. The security events panel likewise: an
 * event stored between its list and its stream is replayed, not lost.
 *
 * Needs /usr/bin/chromium; see dashboard-browser.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chromium, type Browser } from 'playwright-core';
import { startApp } from './helpers/server.js';
import { fullProject, postLog } from './foundation-helpers.js';
import { CHROMIUM, CHROMIUM_ARGS, chromiumMissing, ensureDashboardBuilt } from './dashboard-helpers.js';

const KEY = 'dashboard stream gap key';
const missing = chromiumMissing();

test('dashboard in Chromium: an entry or event written while the live streams connect is shown, once', { skip: missing.skip }, async () => {
  assert.equal(missing.fail, undefined, missing.fail);
  await ensureDashboardBuilt();
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  const app = await startApp({ store: 'sqlite', listen: true });
  try {
    const p = await fullProject({ ...app }, 'gap');
    const write = async (action: string): Promise<string> => {
      const r = await postLog(app.app, p.agent, { action, actor: 'agent', payload: { action } }, { 'x-service-encryption-key': KEY });
      assert.equal(r.statusCode, 201, r.body);
      return r.json().id as string;
    };
    const before = await write('before');
    const page = await browser.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    // The first stream request is held until an entry has been written: what a write that lands
    // while the browser connects looks like.
    let during: Promise<string> | undefined;
    await page.route('**/logs/stream**', async (route) => {
      during ??= write('during');
      await during;
      await route.continue();
    });
    // The same for the security events panel: a credential handover (a human-class key with agent
    // context) is stored after the panel listed the stored events (none) and before its stream.
    let handover: Promise<string> | undefined;
    await page.route('**/events/stream**', async (route) => {
      handover ??= postLog(
        app.app,
        p.human,
        { action: 'wire.transfer', actor: 'alice', payload: { amount: 10 } },
        { 'x-service-encryption-key': KEY, 'x-agent-rationale': 'the user asked', 'x-service-agent-id': 'helper-bot' },
      ).then((r) => {
        assert.equal(r.statusCode, 201, r.body);
        return r.json().id as string;
      });
      await handover;
      await route.continue();
    });

    await page.goto(app.url + '/');
    await page.fill('#signin-project', p.projectId);
    await page.fill('#signin-token', p.live);
    await page.fill('#signin-keys', KEY);
    await page.click('#signin-form button[type=submit]');
    await page.locator('#logs-state[data-state="live"]').waitFor();
    assert.ok(during, 'the page opened the live stream');
    const duringId = await during;
    for (const id of [before, duringId]) await page.locator(`#logs tr[data-log-id="${id}"]`).waitFor({ timeout: 10_000 });
    assert.ok(handover, 'the page opened the events stream');
    await page.locator(`#events li[data-log-id="${await handover}"]`).waitFor({ timeout: 10_000 });
    // And an entry written once the stream is live arrives on it.
    const after = await write('after');
    await page.locator(`#logs tr[data-log-id="${after}"]`).waitFor({ timeout: 10_000 });
    for (const id of [before, duringId, after]) assert.equal(await page.locator(`#logs tr[data-log-id="${id}"]`).count(), 1, id);
    assert.deepEqual(pageErrors, []);
  } finally {
    await app.close();
    await browser.close();
  }
});
