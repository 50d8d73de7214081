/**
 * `countersign keygen master`: prints a new master key (`key_master_…`) on stdout and nothing
 * else, for a master key kept in configuration (`COUNTERSIGN_MASTER_KEY`, a secret store)
 * rather than in the data dir: `export COUNTERSIGN_MASTER_KEY=$(countersign keygen master)`.
 * It touches no file and no server; the key is worth only what its keeper makes of it.
 */
import type { Command } from 'commander';
import { generateApiKey } from '@countersign/core';

/** Kinds of key `keygen` makes. */
const KINDS = ['master'] as const;

/** Registers the `keygen` command. */
export function registerKeygen(program: Command): void {
  program
    .command('keygen <kind>')
    .description('print a new key: `keygen master` makes a master key for COUNTERSIGN_MASTER_KEY')
    .addHelpText('after', '\nExample:\n  export COUNTERSIGN_MASTER_KEY=$(countersign keygen master)\n')
    .action((kind: string) => {
      if (!(KINDS as readonly string[]).includes(kind)) {
        process.stderr.write(`countersign keygen: unknown kind "${kind}"; kinds: ${KINDS.join(', ')}\n`);
        process.exit(2);
      }
      process.stdout.write(generateApiKey('master') + '\n');
    });
}
