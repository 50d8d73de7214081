/**
 * The README's quick start is runnable: its code block is extracted and run as a separate Node
 * process against a REAL server, with the environment the README tells you to set.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startServer, type ClientTestServer } from './helpers/server.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const readme = fs.readFileSync(path.join(here, '..', 'README.md'), 'utf8');

describe('README', () => {
  let srv: ClientTestServer;
  before(async () => {
    srv = await startServer();
  });
  after(async () => srv.close());

  it('the quick start runs as written and prints the decrypted payload', async () => {
    const block = /Then, in `quickstart\.mjs`:\n\n```js\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(block, 'the quick start block is in the README');
    const file = path.join(here, `.quickstart-${process.pid}.mjs`);
    fs.writeFileSync(file, block.replace("'http://127.0.0.1:8080'", JSON.stringify(srv.url)));
    try {
      const r = await promisify(execFile)(process.execPath, ['--conditions=development', '--import', 'tsx', file], {
        env: {
          ...process.env,
          COUNTERSIGN_API_KEY: srv.project.keys.service,
          COUNTERSIGN_ENCRYPTION_KEY: 'correct horse battery staple',
          COUNTERSIGN_PROJECT_ID: srv.project.id,
          COUNTERSIGN_LIVE_KEY: srv.project.keys.live,
        },
        encoding: 'utf8',
      });
      assert.match(r.stdout, /^service \{ approvedBy: 'rules-engine', reasons: \[ 'under limit' \] \}/);
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  it('names every ServiceClient config field of spec 2.5', () => {
    for (const f of [
      'apiKey',
      'encryptionKey',
      'activeEncryptionKeyId',
      'keyring',
      'endpoint',
      'projectId',
      'clientSecret',
      'telemetry',
      'redactKeys',
      'referenceKeys',
    ])
      assert.match(readme, new RegExp('\\| `' + f + '` +\\|'), f);
  });
});
