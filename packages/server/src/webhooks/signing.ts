/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): a secret is `whsec_` + base64 of
 * random bytes; each attempt sends `webhook-id` (the delivery's id, the same on every attempt, so
 * a receiver can drop duplicates), `webhook-timestamp` (seconds, the attempt's time, so a
 * receiver can refuse replays) and `webhook-signature: v1,<base64 HMAC-SHA256 of
 * "{id}.{timestamp}.{body}" keyed with the secret's decoded bytes>`.
 */
import { createHmac, randomBytes } from 'node:crypto';

/** Prefix of a webhook secret. */
export const SECRET_PREFIX = 'whsec_';

/** A fresh secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The `webhook-signature` value of one attempt. */
export function webhookSignature(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
}

/** The three Standard Webhooks headers of one attempt, plus the content type. */
export function webhookHeaders(secret: string, id: string, timestampSeconds: number, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': webhookSignature(secret, id, timestampSeconds, body),
  };
}
