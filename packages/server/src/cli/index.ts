#!/usr/bin/env node
/**
 * The `countersign` command. Each subcommand lives in its own module and registers itself here.
 */
import { Command } from 'commander';
import { registerServe } from './serve.js';
import { registerProjects } from './projects.js';
import { registerVerify } from './verify.js';
import { registerMasterKey } from './master-key.js';
import { registerKeygen } from './keygen.js';
import { registerWebhooks } from './webhooks.js';

const program = new Command('countersign').description('Countersign: certifying proxy and audit log').showHelpAfterError();
registerServe(program);
registerProjects(program);
registerVerify(program);
registerMasterKey(program);
registerKeygen(program);
registerWebhooks(program);
await program.parseAsync(process.argv);
