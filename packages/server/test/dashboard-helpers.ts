/**
 * Helpers of the dashboard suites: where Chromium is (and what to do when it is not), and a
 * fresh build of the dashboard, so the browser test always drives the current sources.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Debian's Chromium (`apt-get install chromium`). */
export const CHROMIUM = '/usr/bin/chromium';

/** Flags for a headless Chromium in a container or CI (no sandbox user namespace, no GPU, no phoning home). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Whether the browser suite can run: `skip` is a message when Chromium is missing and not
 * required; `fail` is a message when it is missing but COUNTERSIGN_REQUIRE_CHROMIUM=1 (CI).
 */
export function chromiumMissing(): { skip: string | false; fail?: string } {
  if (fs.existsSync(CHROMIUM)) return { skip: false };
  if (process.env.COUNTERSIGN_REQUIRE_CHROMIUM === '1') {
    return { skip: false, fail: `COUNTERSIGN_REQUIRE_CHROMIUM=1 but ${CHROMIUM} is missing: apt-get install -y chromium` };
  }
  const why = `${CHROMIUM} is missing, so the dashboard browser test is skipped (apt-get install -y chromium; CI sets COUNTERSIGN_REQUIRE_CHROMIUM=1)`;
  if (!process.env.COUNTERSIGN_QUIET_SKIP) process.stderr.write(`note: ${why}\n`);
  return { skip: why };
}

/** The dashboard package folder. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../dashboard/', import.meta.url));

function newestMtime(p: string): number {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...fs.readdirSync(p).map((n) => newestMtime(path.join(p, n))));
}

let building: Promise<string> | undefined;

/**
 * Builds the dashboard (Vite, the same config as `npm run build`) into its `dist/` when the
 * build is missing or older than its sources or core's, and returns the `dist` path.
 */
export function ensureDashboardBuilt(): Promise<string> {
  building ??= (async () => {
    const dist = path.join(DASHBOARD_DIR, 'dist');
    const index = path.join(dist, 'index.html');
    const sources = [
      path.join(DASHBOARD_DIR, 'index.html'),
      path.join(DASHBOARD_DIR, 'src'),
      path.join(DASHBOARD_DIR, 'vite.config.ts'),
      path.join(DASHBOARD_DIR, '..', 'core', 'src'),
    ];
    if (!fs.existsSync(index) || fs.statSync(index).mtimeMs < Math.max(...sources.map(newestMtime))) {
      // Built aside, then moved in: assets first (content-hashed names), index.html last by an
      // atomic rename, so a server started meanwhile (another test file) never sees no build.
      const aside = fs.mkdtempSync(path.join(DASHBOARD_DIR, '.build-'));
      try {
        const { build } = await import('vite');
        await build({
          configFile: path.join(DASHBOARD_DIR, 'vite.config.ts'),
          logLevel: 'warn',
          build: { outDir: aside, emptyOutDir: true },
        });
        fs.mkdirSync(path.join(dist, 'assets'), { recursive: true });
        for (const name of fs.readdirSync(path.join(aside, 'assets'))) {
          fs.renameSync(path.join(aside, 'assets', name), path.join(dist, 'assets', name));
        }
        fs.renameSync(path.join(aside, 'index.html'), index);
      } finally {
        fs.rmSync(aside, { recursive: true, force: true });
      }
    }
    return dist;
  })();
  return building;
}
