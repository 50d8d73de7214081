/**
 * `countersign serve`: build the app, listen, print the URLs, and shut down gracefully on
 * SIGINT/SIGTERM: stop accepting, drain requests, flush writes.
 *
 * A master key made on this start is printed as soon as it exists, before the app is built and
 * the port taken, so a first start that then fails (port in use, bad setting) still shows it;
 * the banner of that start repeats it. Later starts name the file that holds it, never the key.
 * A start that cannot happen for a reason the operator can fix (a setting, the port, the data
 * dir) ends with one line on stderr and exit code 2, never a stack trace.
 */
import path from 'node:path';
import type { Command } from 'commander';
import { ConfigError, loadConfig, type ConfigFlags, type ServerConfig } from '../config.js';

/** Exit code of a start refused for a reason the operator can fix. */
const EXIT_REFUSED = 2;

function refuse(message: string): never {
  process.stderr.write(`countersign: ${message}\n`);
  process.exit(EXIT_REFUSED);
}

/**
 * The one line for a listen error an operator can fix (port taken, port not allowed, address not
 * on this machine); undefined for anything else.
 */
export function listenErrorMessage(e: unknown, host: string, port: number): string | undefined {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const other = port === 8080 ? 8081 : port + 1;
  const change = `choose another with --port <port> or COUNTERSIGN_PORT (with npm start: npm start -- --port ${other})`;
  if (code === 'EADDRINUSE') return `port ${port} on ${host} is already in use (another Countersign, or another program): ${change}`;
  if (code === 'EACCES') return `not allowed to listen on port ${port} on ${host} (ports below 1024 need privileges): ${change}`;
  if (code === 'EADDRNOTAVAIL')
    return `cannot listen on ${host}: no such address on this machine; choose another with --host <host> or COUNTERSIGN_HOST`;
  return undefined;
}

/**
 * Makes the data dir ready and the master key file, when the key is not configured, before the
 * app starts; prints a key made now at once. Returns that key, if one was made.
 */
async function prepareMasterKey(config: ServerConfig): Promise<string | undefined> {
  if (config.masterKey) return undefined;
  const { describePreparedDataDir, prepareDataDir } = await import('../data-dir.js');
  const { ensureMasterKeyFile } = await import('../master-key.js');
  const note = describePreparedDataDir(config.dataDir, prepareDataDir(config.dataDir, config.allowSharedDataDir));
  if (note) process.stderr.write(`countersign: note: ${note}\n`);
  const made = ensureMasterKeyFile(config.dataDir);
  if (!made.generated) return undefined;
  process.stdout.write(
    `A master key was generated into ${keyFile(config)} (owner-only). Keep it safe; it is printed only on this first start:\n` +
      `  ${made.key}\n`,
  );
  return made.key;
}

const keyFile = (config: ServerConfig): string => path.join(config.dataDir, 'master.key');

function masterKeyLines(config: ServerConfig, base: string, generated: string | undefined): string[] {
  if (config.masterKey) return ['  master key from COUNTERSIGN_MASTER_KEY'];
  const file = keyFile(config);
  const lines = [`  master key ${generated ? `${generated} (made now, in ${file})` : `in ${file}  (export MASTER_KEY=$(cat ${file}))`}`];
  if (generated) {
    lines.push(
      '',
      'Next: put the master key in a variable and create a project:',
      `  export MASTER_KEY=$(cat ${file})`,
      `  curl -s ${base}/v1/projects -H "Authorization: Bearer $MASTER_KEY" -H 'Content-Type: application/json' -d '{"name":"demo","credentialClass":"agent"}'`,
    );
  }
  return lines;
}

/** Registers the `serve` command. */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the service (all roles on embedded defaults unless told otherwise)')
    .option('--port <port>', 'listen port (COUNTERSIGN_PORT, default 8080; with npm start: npm start -- --port 8081)')
    .option('--host <host>', 'listen host (COUNTERSIGN_HOST, default 127.0.0.1)')
    .option('--data-dir <dir>', 'data directory, made 0700 (COUNTERSIGN_DATA_DIR, default ./.countersign)')
    .option('--allow-shared-data-dir', 'start even if group or others can reach the data dir (COUNTERSIGN_ALLOW_SHARED_DATA_DIR=1)')
    .option('--database-url <url>', 'PostgreSQL URL (DATABASE_URL); SQLite in the data dir when absent')
    .option('--roles <roles>', 'comma list of ingest,management,proofs,tsa,ledger,dashboard (default all)')
    .option('--tsa-url <url>', 'external RFC 3161 TSA (default: embedded)')
    .option('--tsa-roots <pem>', 'PEM file of the external TSA trust roots (required with --tsa-url)')
    .option('--ledger-url <url>', 'external Rekor v1 ledger (default: embedded)')
    .option('--allow-targets <list>', 'host:port list admitted past the SSRF filter')
    .option('--upstreams <list>', 'forward-mode names, name=https://base,… (COUNTERSIGN_UPSTREAMS; presets built in)')
    .option('--public-url <url>', 'public base URL used in receipts and printed URLs')
    .option('--log-level <level>', 'pino level or silent (default info)')
    .action(async (options: Omit<ConfigFlags, 'allowSharedDataDir'> & { allowSharedDataDir?: boolean }) => {
      const flags: ConfigFlags = { ...options, allowSharedDataDir: options.allowSharedDataDir ? '1' : undefined };
      let config: ServerConfig;
      let generated: string | undefined;
      try {
        config = loadConfig(flags);
        generated = await prepareMasterKey(config);
      } catch (e) {
        if (e instanceof ConfigError) refuse(e.message);
        throw e;
      }
      // Loaded here, not at the top, so `countersign verify` and friends start without the app.
      const { tuneGarbageCollectionForServing } = await import('../serving-gc.js');
      tuneGarbageCollectionForServing();
      const { buildApp } = await import('../app.js');
      const { DataDirInUseError } = await import('../store/data-dir-lock.js');
      let app;
      try {
        app = await buildApp(config);
      } catch (e) {
        if (e instanceof DataDirInUseError || e instanceof ConfigError) refuse(e.message);
        throw e;
      }
      let address: string;
      try {
        address = await app.listen({ port: config.port, host: config.host });
      } catch (e) {
        const message = listenErrorMessage(e, config.host, config.port);
        if (!message) throw e;
        await app.close().catch(() => undefined);
        refuse(message);
      }
      const base = config.publicUrl ?? address;
      const lines = [`Countersign is listening on ${address} (store: ${app.ctx.store.dialect}, roles: ${[...config.roles].join(',')})`];
      lines.push(
        `  dashboard  ${base}/`,
        `  API docs   ${base}/docs`,
        `  forward    ${base}/v1/forward/openai  (base URL for an OpenAI SDK; X-Service-Key carries your key)`,
        `  proxy      POST ${base}/v1/proxy`,
        `  ingest     POST ${base}/v1/log`,
        ...masterKeyLines(config, base, generated),
      );
      process.stdout.write(lines.join('\n') + '\n');
      let closing = false;
      const shutdown = (signal: string) => {
        if (closing) return;
        closing = true;
        app.log.info({ signal }, 'shutting down: draining requests and flushing writes');
        const force = setTimeout(() => process.exit(1), 15_000);
        force.unref();
        app.close().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      };
      process.on('SIGINT', () => shutdown('SIGINT'));
      process.on('SIGTERM', () => shutdown('SIGTERM'));
    });
}
