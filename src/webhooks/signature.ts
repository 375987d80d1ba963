/**
 * Standard Webhooks signing with Ed25519 (`v1a`): the signed message is
 * `webhook-id + "." + webhook-timestamp + "." + body`, byte for byte what is sent.
 *
 * The same key signs x402 paywall receipts, over a domain-separated message: RECEIPT_SIGNING_DOMAIN
 * (which ends in a newline, a byte no `webhook-id` header can hold) before the same three parts,
 * labelled `x402r1`. A receipt signature can then never verify as a delivery, nor a delivery's as
 * a receipt, whatever a presenter puts in the headers (src/client/verify-webhook.ts checks both).
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

/** Prefixed to what a receipt signature covers; the SDK's verifyX402Receipt holds the same text. */
export const RECEIPT_SIGNING_DOMAIN = 'kassa/x402-receipt/v1\n';
export const RECEIPT_SIGNATURE_VERSION = 'x402r1';

export function receiptSignedMessage(id: string, timestamp: string, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(RECEIPT_SIGNING_DOMAIN, 'utf8'), signedMessage(id, timestamp, body)]);
}

/** An x402 paywall receipt's headers: the delivery's names, `x402r1,<base64>` entries over the receipt's domain. */
export function signX402Receipt(signers: Signer[], id: string, timestampSeconds: number, body: Buffer): SignedHeaders {
  const timestamp = String(timestampSeconds);
  const message = receiptSignedMessage(id, timestamp, body);
  const entries = signers.map((s) => `${RECEIPT_SIGNATURE_VERSION},${sign(null, message, s.privateKey).toString('base64')}`);
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': entries.join(' ') };
}

/** One `v1a,<base64>` entry per signer (two during a key rotation), space-separated. */
export function signWebhook(signers: Signer[], id: string, timestampSeconds: number, body: Buffer): SignedHeaders {
  const timestamp = String(timestampSeconds);
  const message = signedMessage(id, timestamp, body);
  const entries = signers.map((s) => `v1a,${sign(null, message, s.privateKey).toString('base64')}`);
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': entries.join(' ') };
}
