/**
 * The dashboard in a real browser (Debian's Chromium driven by playwright-core) against a real
 * listening server: sign in (a wrong key first, shown with its error code), see the audit
 * stream, watch a credential handover arrive live over SSE, open a trace as a canvas, select a
 * node, read its payload decrypted in the browser and see core's verifier pass every step.
 *
 * Needs /usr/bin/chromium (`apt-get install chromium`). Without it the test skips with a
 * message, unless COUNTERSIGN_REQUIRE_CHROMIUM=1 (CI), where it fails.
 * COUNTERSIGN_SCREENSHOT_DIR=<dir> saves screenshots of the views.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { SignJWT } from 'jose';
import { STORES, startApp } from './helpers/server.js';
import { fullProject, postLog } from './foundation-helpers.js';
import { waitForReceipt } from './proofs-helpers.js';
import { CHROMIUM, CHROMIUM_ARGS, chromiumMissing, ensureDashboardBuilt } from './dashboard-helpers.js';

const KEY = 'dashboard browser key';
const TRACE = 'run-dashboard-browser';
const ROOT_SPAN = 'a1b2c3d4e5f60718';
const W3C_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

async function shot(page: Page, name: string): Promise<void> {
  const dir = process.env.COUNTERSIGN_SCREENSHOT_DIR;
  if (dir) await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: true });
}

const missing = chromiumMissing();

test(
  'dashboard in Chromium: sign in, live stream, trace canvas, decrypted payload, verification log',
  { skip: missing.skip },
  async (t) => {
    assert.equal(missing.fail, undefined, missing.fail);
    await ensureDashboardBuilt();
    const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    try {
      for (const store of STORES) {
        await t.test(store, async () => {
          const app = await startApp({ store, listen: true, config: { proofWindowMs: 1000 } });
          const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
          const pageErrors: string[] = [];
          page.on('pageerror', (e) => pageErrors.push(e.message));
          try {
            const p = await fullProject({ ...app }, 'dash');
            // Three steps of one run: the first owns span ROOT_SPAN; the second names it in its
            // plain metadata; the third only inside its encrypted payload (a W3C traceparent).
            const t0 = Date.now() - 3000;
            const logs = [
              { action: 'plan', actor: 'planner', metadata: { spanId: ROOT_SPAN }, payload: { thought: 'plan the trip' } },
              {
                action: 'search',
                actor: 'searcher',
                metadata: { parentSpanId: ROOT_SPAN },
                payload: { results: 'search results: 3 flights' },
              },
              {
                action: 'answer',
                actor: 'writer',
                payload: { answer: 'book flight 2', agent: { traceparent: `00-${W3C_TRACE}-${ROOT_SPAN}-01` } },
              },
            ].map((l, i) => ({ ...l, traceId: TRACE, requestProof: true, occurredAt: new Date(t0 + i * 1000).toISOString() }));
            const posted = await postLog(app.app, p.agent, { logs }, { 'x-service-encryption-key': KEY });
            assert.equal(posted.statusCode, 201, posted.body);
            const ids: string[] = posted.json().ids;
            assert.equal(ids.length, 3);
            const other = await postLog(
              app.app,
              p.service,
              { action: 'cron.cleanup', actor: 'cron', payload: { n: 1 } },
              { 'x-service-encryption-key': KEY },
            );
            assert.equal(other.statusCode, 201, other.body);
            for (const id of ids) await waitForReceipt(app.app, p.live, p.projectId, id);

            await page.goto(app.url + '/');
            // A wrong key: the API's error code and message are shown, and the page stays on sign-in.
            await page.fill('#signin-project', p.projectId);
            await page.fill('#signin-token', 'key_live_' + 'x'.repeat(40));
            await page.click('#signin-form button[type=submit]');
            const err = page.locator('#signin-error [data-code]');
            await err.waitFor();
            assert.match((await err.getAttribute('data-code')) ?? '', /^(invalid_api_key|unknown_api_key)$/);
            assert.match(await page.locator('#signin-error').innerText(), /key/i);
            await shot(page, `signin-${store}`);

            await page.fill('#signin-token', p.live);
            await page.fill('#signin-keys', KEY);
            await page.click('#signin-form button[type=submit]');
            for (const id of ids) await page.locator(`#logs tr[data-log-id="${id}"]`).waitFor();
            assert.equal(await page.locator('#logs tr').count(), 4);
            assert.equal(
              await page.evaluate(() => sessionStorage.getItem('countersign.dashboard.session')?.includes('dashboard browser key')),
              false,
            );
            await page.locator('#stream-state[data-state="live"]').waitFor();

            // Filters narrow the listing through the API.
            await page.selectOption('#filters select[name="actorMatch"]', 'exact');
            await page.fill('#filters input[name="actor"]', 'searcher');
            await page.click('#filters button[type=submit]');
            await page.waitForFunction(() => document.querySelectorAll('#logs tr').length === 1);
            assert.equal(await page.locator(`#logs tr[data-log-id="${ids[1]}"]`).count(), 1);
            await page.click('#filters button[type=reset]');
            await page.waitForFunction(() => document.querySelectorAll('#logs tr').length === 4);

            // A human-class key with agent context: the event arrives live, its log is highlighted.
            const handover = await postLog(
              app.app,
              p.human,
              { action: 'wire.transfer', actor: 'alice', payload: { amount: 10 } },
              { 'x-service-encryption-key': KEY, 'x-agent-rationale': 'the user asked', 'x-service-agent-id': 'helper-bot' },
            );
            assert.equal(handover.statusCode, 201, handover.body);
            const handoverId: string = handover.json().id;
            const live = page.locator(`#events li.fresh[data-log-id="${handoverId}"]`);
            await live.waitFor();
            assert.match(await live.innerText(), /Credential handover/);
            await page.locator(`#logs tr.handover[data-log-id="${handoverId}"]`).waitFor();
            await shot(page, `stream-${store}`);

            // The trace graph: three nodes in time order, both steps under plan's span (answer's parent
            // is known only after decryption).
            await page.click(`#logs tr[data-log-id="${ids[0]}"] a.trace-link`);
            await page.locator('.trace-node').nth(2).waitFor();
            const order = await page.locator('.trace-node').evaluateAll((els) => els.map((e) => e.getAttribute('data-log-id')));
            assert.deepEqual(order, ids);
            // plan owns ROOT_SPAN: it points to its first step (search), which leads to the next (answer).
            await page.locator('path.edge.sequence[data-from="1"][data-to="2"]').waitFor({ state: 'attached' });
            assert.equal(await page.locator('path.edge.parent[data-from="0"][data-to="1"]').count(), 1);
            assert.equal(await page.locator('path.edge').count(), 2);

            await page.click(`.trace-node[data-log-id="${ids[1]}"]`);
            await page.locator('#detail-payload pre').waitFor();
            assert.match(await page.locator('#detail-payload pre').innerText(), /search results: 3 flights/);
            const summary = page.locator('#verification-log .verify-summary');
            await summary.waitFor();
            const steps = await page
              .locator('#verification-log tr[data-step]')
              .evaluateAll((rows) => rows.map((r) => [r.getAttribute('data-step'), r.getAttribute('data-status')]));
            assert.equal(await summary.getAttribute('data-ok'), 'true', JSON.stringify(steps));
            const expected = ['receipt_format', 'payload_hash', 'merkle_path', 'timestamp_token', 'timestamp_signature', 'timestamp_chain'];
            for (const id of [
              ...expected,
              'timestamp_imprint',
              'timestamp_time',
              'ledger_entry',
              'ledger_inclusion',
              'ledger_root_match',
            ]) {
              assert.ok(
                steps.some(([s]) => s === id),
                `step ${id} is in the log: ${JSON.stringify(steps)}`,
              );
            }
            assert.ok(steps.length >= 11);
            assert.ok(
              steps.every(([, status]) => status === 'pass'),
              `every step passed: ${JSON.stringify(steps)}`,
            );
            assert.equal(await page.locator('#detail-proof [data-proof-status="sealed"]').count(), 1);
            await shot(page, `story-${store}`);

            // Another key: the payload does not open and says so with its code.
            await page.fill('#key-input-bar', 'not the key');
            await page.click('#key-form button[type=submit]');
            await page.locator('#detail-payload .error .code').waitFor();
            assert.equal(await page.locator('#detail-payload .error .code').innerText(), 'decryption_failed');

            // An embed token scoped to the trace: only its logs, and no events panel (embed tokens cannot read events).
            const token = await new SignJWT({ projectId: p.projectId, scope: { traceId: TRACE } })
              .setProtectedHeader({ alg: 'HS256' })
              .setAudience('countersign:embed')
              .setIssuedAt()
              .setExpirationTime('10m')
              .sign(new TextEncoder().encode(p.clientSecret));
            await page.click('#sign-out');
            await page.locator('#signin').waitFor();
            assert.equal(await page.evaluate(() => sessionStorage.getItem('countersign.dashboard.session')), null);
            await page.fill('#signin-project', p.projectId);
            await page.fill('#signin-token', token);
            await page.click('#signin-form button[type=submit]');
            await page.waitForFunction(() => document.querySelectorAll('#logs tr').length === 3);
            assert.equal(await page.locator('#events-card').isVisible(), false);
            assert.equal(await page.locator('[data-code="wrong_credential_class"]').count(), 0);
            for (const id of ids) assert.equal(await page.locator(`#logs tr[data-log-id="${id}"]`).count(), 1);
            // A reload keeps the project and token of this tab, not the decryption key.
            await page.reload();
            await page.waitForFunction(() => document.querySelectorAll('#logs tr').length === 3);
            assert.match(await page.locator('#key-state').innerText(), /no decryption key/);
            assert.deepEqual(pageErrors, []);
          } finally {
            await page.close();
            await app.close();
          }
        });
      }
    } finally {
      await browser.close();
    }
  },
);
