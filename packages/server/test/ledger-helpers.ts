/**
 * Helpers of the ledger suites: hashedrekord entries signed by a throwaway key, and the
 * shorthands for fetching JSON from a listening app.
 */
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { verifyLedgerEntry, type LedgerVerification } from '@countersign/core';

/** A submitter with its own ECDSA P-256 key. */
export interface Submitter {
  publicKeyPem: string;
  privateKey: KeyObject;
  /** A hashedrekord proposed entry for `artifact` (signature over SHA-256(artifact), i.e. over the digest). */
  entry(artifact: string): { apiVersion: string; kind: string; spec: Record<string, unknown> };
}

/** A fresh submitter (`curve` 'P-256' by default; 'ed25519' for the refusal test). */
export function newSubmitter(curve: 'P-256' | 'ed25519' = 'P-256'): Submitter {
  const { privateKey, publicKey } =
    curve === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  return {
    publicKeyPem,
    privateKey,
    entry(artifact) {
      const digest = createHash('sha256').update(artifact).digest('hex');
      const signature =
        curve === 'ed25519' ? sign(null, Buffer.from(artifact), privateKey) : sign('sha256', Buffer.from(artifact), privateKey);
      return {
        apiVersion: '0.0.1',
        kind: 'hashedrekord',
        spec: {
          data: { hash: { algorithm: 'sha256', value: digest } },
          signature: { content: signature.toString('base64'), publicKey: { content: Buffer.from(publicKeyPem).toString('base64') } },
        },
      };
    },
  };
}

/** GET/POST JSON, returning status, headers and parsed body. */
export async function json(
  url: string,
  init?: { method?: string; body?: unknown; raw?: string },
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> & Array<Record<string, unknown>> }> {
  const res = await fetch(url, {
    method: init?.method ?? (init?.body !== undefined || init?.raw !== undefined ? 'POST' : 'GET'),
    ...(init?.body !== undefined || init?.raw !== undefined
      ? { headers: { 'content-type': 'application/json' }, body: init.raw ?? JSON.stringify(init.body) }
      : {}),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : {}) as never };
}

/** Core's verdict on an entry; fails the test with every failing step when not ok. */
export async function assertEntryVerifies(entry: unknown, options: Parameters<typeof verifyLedgerEntry>[1]): Promise<LedgerVerification> {
  const report = await verifyLedgerEntry(entry, options);
  const failed = report.steps.filter((s) => s.status === 'fail');
  if (!report.ok) throw new Error(`ledger entry does not verify: ${failed.map((s) => `${s.id}: ${s.detail}`).join('; ')}`);
  return report;
}
