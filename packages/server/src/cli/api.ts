/**
 * What the administration commands share: the flags that say which server and master key to
 * use, one JSON call to the HTTP API, and printing its answer (lines, or `--json`). Commands go
 * through the API, never the database, so they work against any instance, local or remote.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';

/** Flags every administration subcommand takes. */
export interface Connection {
  url?: string;
  masterKey?: string;
  dataDir?: string;
  json?: boolean;
}

function masterKeyOf(c: Connection): string {
  const key = c.masterKey ?? process.env.COUNTERSIGN_MASTER_KEY;
  if (key) return key;
  const file = path.join(path.resolve(c.dataDir ?? process.env.COUNTERSIGN_DATA_DIR ?? '.countersign'), 'master.key');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    throw new Error(`no master key: pass --master-key, set COUNTERSIGN_MASTER_KEY, or run where ${file} exists`);
  }
}

/** One API call with the master key; throws `code: message` on an error answer. */
export async function call(c: Connection, method: string, urlPath: string, body?: unknown): Promise<Record<string, unknown>> {
  const base = (c.url ?? process.env.COUNTERSIGN_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  const headers: Record<string, string> = { authorization: `Bearer ${masterKeyOf(c)}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let r: Response;
  try {
    r = await fetch(base + urlPath, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new Error(unreachable(base, c.url !== undefined, e));
  }
  const answer = (await r.json().catch(() => ({}))) as Record<string, unknown> & { error?: { code: string; message: string } };
  if (!r.ok) throw new Error(answer.error ? `${answer.error.code}: ${answer.error.message}` : `HTTP ${r.status}`);
  return answer;
}

/**
 * What to say when the server cannot be reached: undici says only "fetch failed", so name the
 * URL tried, where it came from, the network reason, and how to point elsewhere.
 */
function unreachable(base: string, fromFlag: boolean, e: unknown): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  const reason = cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
  const source = fromFlag ? 'from --url' : process.env.COUNTERSIGN_URL ? 'from COUNTERSIGN_URL' : 'the default';
  return (
    `cannot reach the Countersign server at ${base} (${source}): ${reason}. ` +
    'Start it (`npm start` or `countersign serve`), or point at the right one with --url <url> or COUNTERSIGN_URL'
  );
}

/** Prints the answer as `lines()`, or as JSON with `--json`. */
export function print(c: Connection, answer: Record<string, unknown>, lines: () => string[]): void {
  process.stdout.write((c.json ? JSON.stringify(answer, null, 2) : lines().join('\n')) + '\n');
}

/** Adds the connection flags to a subcommand. */
export function withConnection(cmd: Command): Command {
  return cmd
    .option('--url <url>', 'server base URL (COUNTERSIGN_URL, default http://127.0.0.1:8080)')
    .option('--master-key <key>', 'master key (COUNTERSIGN_MASTER_KEY, else <data-dir>/master.key)')
    .option('--data-dir <dir>', 'data dir holding master.key (default ./.countersign)')
    .option('--json', 'print the API answer as JSON');
}

/** Runs a command's action; a failure prints `countersign: <message>` and exits 1. */
export function run(action: () => Promise<void>): Promise<void> {
  return action().catch((e: unknown) => {
    process.stderr.write(`countersign: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  });
}
