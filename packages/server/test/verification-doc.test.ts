/**
 * docs/verification.md section 4 runs as written: its ```sh blocks, joined in order, are one
 * bash script (curl, node, openssl, jq, xxd, sha256sum) run against a REAL listening server
 * with a sealed receipt. A log written through the plain path passes every check; a log whose
 * client declared a hash that is not its payload's is stopped at `payload_hash`, so the checks
 * are real; a wrong encryption key stops the decryption.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { deriveEnvelopeKey, payloadHashHex, randomNonce, sealPayload } from '@countersign/core';
import { tempDir } from './helpers/server.js';
import { startWitnessApp, type WitnessApp } from './tsa-helpers.js';
import { fullProject, postLog } from './foundation-helpers.js';
import { waitForReceipt } from './proofs-helpers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const doc = fs.readFileSync(path.join(here, '..', '..', '..', 'docs', 'verification.md'), 'utf8');

/** The ```sh blocks of section 4, in order, as one script. */
function sectionFourScript(): string {
  const start = doc.indexOf('## 4. Doing it by hand');
  const end = doc.indexOf('\n## 5.', start);
  assert.ok(start >= 0 && end > start, 'docs/verification.md has a section 4 followed by a section 5');
  const blocks = [...doc.slice(start, end).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  assert.ok(blocks.length >= 5, `section 4 has its sh blocks (found ${blocks.length})`);
  return blocks.join('\n');
}

/** Runs the script in a fresh folder the way the doc says: `bash -eu -o pipefail verify.sh`. */
function runScript(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const dir = tempDir('countersign-verify-doc-');
  fs.writeFileSync(path.join(dir, 'verify.sh'), sectionFourScript());
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/bash', ['-eu', '-o', 'pipefail', 'verify.sh'], {
      cwd: dir,
      // node of this test first on PATH: the doc's `node -e` runs with it.
      env: { PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? '/usr/bin:/bin'}`, LC_ALL: 'C.UTF-8', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      fs.rmSync(dir, { recursive: true, force: true });
      resolve({ code, stdout, stderr });
    });
  });
}

describe('docs/verification.md, section 4, run as written', () => {
  const ENC_KEY = 'doc reader key: correct horse battery staple';
  let w: WitnessApp;
  let project: Awaited<ReturnType<typeof fullProject>>;
  let goodId: string;
  let liedId: string;
  before(async () => {
    w = await startWitnessApp({ store: 'sqlite', config: { proofWindowMs: 1000 } });
    project = await fullProject({ ...w, masterKey: w.app.ctx.masterKey, config: w.app.ctx.config }, 'doc');
    // The plain path: the server seals the JCS bytes with the caller's key and hashes them.
    const good = await postLog(
      w.app,
      project.agent,
      { action: 'contract.sign', requestProof: true, payload: { contract: 'C-17', amount: 1200, note: 'héllo ✓' } },
      { 'x-service-encryption-key': ENC_KEY },
    );
    assert.equal(good.statusCode, 201, good.body);
    goodId = good.json().id as string;
    // A client envelope whose declared hash is another payload's: sealed as declared.
    liedId = 'doc-lied-' + randomNonce();
    const sealed = { contract: 'C-17', amount: 1200, nonce: randomNonce() };
    const declared = payloadHashHex({ ...sealed, amount: 9200 });
    const lied = await postLog(w.app, project.agent, {
      id: liedId,
      requestProof: true,
      payloadHash: declared,
      payload: await sealPayload(sealed, await deriveEnvelopeKey(ENC_KEY), liedId),
    });
    assert.equal(lied.statusCode, 201, lied.body);
    await waitForReceipt(w.app, project.live, project.projectId, goodId);
    await waitForReceipt(w.app, project.live, project.projectId, liedId);
  });
  after(() => w.close());

  const envFor = (logId: string, encKey = ENC_KEY) => ({
    BASE: w.url,
    PROJECT: project.projectId,
    LOG_ID: logId,
    LIVE_KEY: project.live,
    ENC_KEY: encKey,
  });

  it('every check passes for a genuine receipt', async () => {
    const r = await runScript(envFor(goodId));
    assert.equal(r.code, 0, `script failed:\n${r.stdout}\n${r.stderr}`);
    for (const step of [
      'receipt sealed',
      'payload_hash',
      'merkle_path',
      'ledger_root_match',
      'ledger_entry (log ID)',
      'entry signer',
      'ledger_entry (UUID)',
      'ledger_inclusion',
      'checkpoint size',
      'checkpoint root',
      'checkpoint key hint',
    ]) {
      assert.ok(r.stdout.includes(`ok   ${step}`), `step "${step}" reported ok:\n${r.stdout}`);
    }
    assert.match(r.stdout, /ok {3}checkpoint name 127\.0\.0\.1:\d+ is in http:\/\/127\.0\.0\.1:\d+/);
    // openssl's own verdicts: the token, the SET, the entry signature and the checkpoint.
    assert.match(r.stdout + r.stderr, /Verification: OK/);
    assert.equal((r.stdout + r.stderr).match(/Verified OK/g)?.length, 2, 'SET and checkpoint verify with openssl dgst');
    assert.match(r.stdout + r.stderr, /Signature Verified Successfully/);
    assert.doesNotMatch(r.stderr, /FAIL/);
  });

  it('stops at payload_hash when the sealed hash is not the payload', async () => {
    const r = await runScript(envFor(liedId));
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /FAIL payload_hash/);
    assert.doesNotMatch(r.stdout, /ok {3}merkle_path/);
  });

  it('a wrong encryption key stops the decryption', async () => {
    const r = await runScript(envFor(goodId, 'not the key'));
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /unable to authenticate data/);
    assert.doesNotMatch(r.stdout, /ok {3}payload_hash/);
  });
});
