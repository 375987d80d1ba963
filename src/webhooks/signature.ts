/**
 * Standard Webhooks signing with Ed25519 (`v1a`): the signed message is
 * `webhook-id + "." + webhook-timestamp + "." + body`, byte for byte what is sent.
 */
import { sign } from 'node:crypto';
import type { Signer } from './signing-key.service.js';

export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

export function signedMessage(id: string, timestamp: string, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), body]);
}

/** One `v1a,<base64>` entry per signer (two during a key rotation), space-separated. */
export function signWebhook(signers: Signer[], id: string, timestampSeconds: number, body: Buffer): SignedHeaders {
  const timestamp = String(timestampSeconds);
  const message = signedMessage(id, timestamp, body);
  const entries = signers.map((s) => `v1a,${sign(null, message, s.privateKey).toString('base64')}`);
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': entries.join(' ') };
}
