/**
 * `countersign serve`: build the app, listen, print the URLs (and a new master key once), and
 * shut down gracefully on SIGINT/SIGTERM: stop accepting, drain requests, flush writes.
 */
import type { Command } from 'commander';
import { ConfigError, loadConfig, type ConfigFlags } from '../config.js';

/** Registers the `serve` command. */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the service (all roles on embedded defaults unless told otherwise)')
    .option('--port <port>', 'listen port (COUNTERSIGN_PORT, default 8080)')
    .option('--host <host>', 'listen host (COUNTERSIGN_HOST, default 127.0.0.1)')
    .option('--data-dir <dir>', 'data directory (COUNTERSIGN_DATA_DIR, default ./.countersign)')
    .option('--database-url <url>', 'PostgreSQL URL (DATABASE_URL); SQLite in the data dir when absent')
    .option('--roles <roles>', 'comma list of ingest,management,proofs,tsa,ledger,dashboard (default all)')
    .option('--tsa-url <url>', 'external RFC 3161 TSA (default: embedded)')
    .option('--tsa-roots <pem>', 'PEM file of the external TSA trust roots (required with --tsa-url)')
    .option('--ledger-url <url>', 'external Rekor v1 ledger (default: embedded)')
    .option('--allow-targets <list>', 'host:port list admitted past the SSRF filter')
    .option('--public-url <url>', 'public base URL used in receipts and printed URLs')
    .option('--log-level <level>', 'pino level or silent (default info)')
    .action(async (flags: ConfigFlags) => {
      let config;
      try {
        config = loadConfig(flags);
      } catch (e) {
        if (e instanceof ConfigError) {
          process.stderr.write(`countersign: ${e.message}\n`);
          process.exit(2);
        }
        throw e;
      }
      // Loaded here, not at the top, so `countersign verify` and friends start without the app.
      const { buildApp } = await import('../app.js');
      const { DataDirInUseError } = await import('../store/data-dir-lock.js');
      let app;
      try {
        app = await buildApp(config);
      } catch (e) {
        if (e instanceof DataDirInUseError) {
          process.stderr.write(`countersign: ${e.message}\n`);
          process.exit(2);
        }
        throw e;
      }
      const address = await app.listen({ port: config.port, host: config.host });
      const base = config.publicUrl ?? address;
      const lines = [`Countersign is listening on ${address} (store: ${app.ctx.store.dialect}, roles: ${[...config.roles].join(',')})`];
      lines.push(
        `  dashboard  ${base}/`,
        `  API docs   ${base}/docs`,
        `  proxy      POST ${base}/v1/proxy`,
        `  ingest     POST ${base}/v1/log`,
      );
      if (app.ctx.masterKeyGenerated) {
        lines.push('', `A master key was generated into ${config.dataDir}/master.key. It is shown once:`, `  ${app.ctx.masterKey}`);
        lines.push(
          `Create a project:  curl -s ${base}/v1/projects -H "Authorization: Bearer $MASTER_KEY" -H 'Content-Type: application/json' -d '{"name":"demo","credentialClass":"agent"}'`,
        );
      }
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
