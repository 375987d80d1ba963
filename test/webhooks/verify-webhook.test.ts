/**
 * The receiver-side verifier. Signatures here are made with node:crypto directly (not with the
 * server's signer), so the verifier is checked against the spec, not against our own code.
 */
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { verifyWebhook, WebhookVerificationError, WebhookVerifier, type SigningKeyResponse } from '../../src/client/verify-webhook.js';

function keyPair(kid: string) {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const x = publicKey.export({ format: 'jwk' }).x!;
  return { kid, privateKey, jwk: { kty: 'OKP', use: 'sig', crv: 'Ed25519', kid, x, alg: 'EdDSA' } as const, raw: Buffer.from(x, 'base64url') };
}

const oldKey = keyPair('WSK_old');
const newKey = keyPair('WSK_new');

const document = (...keys: Array<ReturnType<typeof keyPair>>): SigningKeyResponse => ({
  success: true,
  data: { keyId: keys[0]!.kid, algorithm: 'ed25519', publicKey: `whpk_${keys[0]!.raw.toString('base64')}`, keys: keys.map((k) => k.jwk) },
});

const NOW = new Date('2026-11-22T09:00:00.000Z');
const TS = String(NOW.getTime() / 1000);
const BODY = Buffer.from('{"type":"order.paid","timestamp":"2026-11-22T08:59:59.000Z","apiVersion":"2026-11-01","endpoint":{"id":"WHE_e0Ft7WAFj7YvhTG7oN5xCPTG","name":"x"},"data":{"order":{"orderId":"ORD_1"}}}');

const entry = (key: KeyObject, id = 'EVT_1', ts = TS, body: Buffer = BODY) =>
  `v1a,${sign(null, Buffer.concat([Buffer.from(`${id}.${ts}.`), body]), key).toString('base64')}`;

const headers = (signature: string, ts = TS, id = 'EVT_1') => ({ 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': signature });

function expectCode(fn: () => unknown, code: string) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WebhookVerificationError);
    expect((err as WebhookVerificationError).code).toBe(code);
    return;
  }
  throw new Error(`expected a WebhookVerificationError ${code}`);
}

describe('verifyWebhook', () => {
  it('returns the parsed event of a valid delivery (Buffer, Uint8Array or string body)', () => {
    const event = verifyWebhook(BODY, headers(entry(newKey.privateKey)), document(newKey), { now: NOW });
    expect(event).toMatchObject({ type: 'order.paid', data: { order: { orderId: 'ORD_1' } } });
    expect(verifyWebhook(new Uint8Array(BODY), headers(entry(newKey.privateKey)), document(newKey), { now: NOW })).toEqual(event);
    expect(verifyWebhook(BODY.toString(), headers(entry(newKey.privateKey)), document(newKey), { now: NOW })).toEqual(event);
  });

  it('accepts the envelope or its data, and fetch Headers or mixed-case names', () => {
    const doc = document(newKey) as { data: never };
    const h = new Headers(headers(entry(newKey.privateKey)));
    expect(verifyWebhook(BODY, h, doc.data, { now: NOW })).toBeTruthy();
    const mixed = { 'Webhook-Id': 'EVT_1', 'WEBHOOK-TIMESTAMP': TS, 'webhook-signature': [entry(newKey.privateKey)] };
    expect(verifyWebhook(BODY, mixed, doc, { now: NOW })).toBeTruthy();
  });

  it('checks every entry against every published key (rotation)', () => {
    const both = `${entry(newKey.privateKey)} ${entry(oldKey.privateKey)}`;
    // A receiver that only knows the old key, one that knows only the new one, and one that knows both.
    expect(verifyWebhook(BODY, headers(both), document(oldKey), { now: NOW })).toBeTruthy();
    expect(verifyWebhook(BODY, headers(both), document(newKey), { now: NOW })).toBeTruthy();
    expect(verifyWebhook(BODY, headers(entry(oldKey.privateKey)), document(newKey, oldKey), { now: NOW })).toBeTruthy();
  });

  it('ignores entries of other versions when a v1a entry verifies', () => {
    const sig = `v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= ${entry(newKey.privateKey)} v2a,zzz`;
    expect(verifyWebhook(BODY, headers(sig), document(newKey), { now: NOW })).toBeTruthy();
  });

  it.each(['webhook-id', 'webhook-timestamp', 'webhook-signature'])('rejects a delivery without %s', (name) => {
    const h: Record<string, string> = headers(entry(newKey.privateKey));
    delete h[name];
    expectCode(() => verifyWebhook(BODY, h, document(newKey), { now: NOW }), 'missing_header');
    expectCode(() => verifyWebhook(BODY, { ...h, [name]: '  ' }, document(newKey), { now: NOW }), 'missing_header');
  });

  it('rejects unknown signature versions only', () => {
    expectCode(() => verifyWebhook(BODY, headers('v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='), document(newKey), { now: NOW }), 'unsupported_signature_version');
    expectCode(() => verifyWebhook(BODY, headers(entry(newKey.privateKey).replace('v1a,', 'v1b,')), document(newKey), { now: NOW }), 'unsupported_signature_version');
    expectCode(() => verifyWebhook(BODY, headers('garbage'), document(newKey), { now: NOW }), 'unsupported_signature_version');
  });

  it('rejects bad signatures: other key, tampered body, other id, other timestamp, truncated', () => {
    const stranger = keyPair('WSK_x');
    expectCode(() => verifyWebhook(BODY, headers(entry(stranger.privateKey)), document(newKey), { now: NOW }), 'invalid_signature');
    const tampered = Buffer.from(BODY.toString().replace('ORD_1', 'ORD_2'));
    expectCode(() => verifyWebhook(tampered, headers(entry(newKey.privateKey)), document(newKey), { now: NOW }), 'invalid_signature');
    expectCode(() => verifyWebhook(BODY, headers(entry(newKey.privateKey), TS, 'EVT_2'), document(newKey), { now: NOW }), 'invalid_signature');
    expectCode(() => verifyWebhook(BODY, headers(entry(newKey.privateKey), String(Number(TS) + 1)), document(newKey), { now: NOW }), 'invalid_signature');
    expectCode(() => verifyWebhook(BODY, headers(entry(newKey.privateKey).slice(0, 40)), document(newKey), { now: NOW }), 'invalid_signature');
    // Re-serialized JSON is not the signed bytes.
    const reformatted = JSON.stringify(JSON.parse(BODY.toString()), null, 2);
    expectCode(() => verifyWebhook(reformatted, headers(entry(newKey.privateKey)), document(newKey), { now: NOW }), 'invalid_signature');
  });

  it('rejects timestamps more than 300 s away, in either direction, and malformed ones', () => {
    const at = (seconds: number) => String(Number(TS) + seconds);
    for (const ok of [-300, 300, 0]) {
      expect(verifyWebhook(BODY, headers(entry(newKey.privateKey, 'EVT_1', at(ok)), at(ok)), document(newKey), { now: NOW })).toBeTruthy();
    }
    for (const bad of [-301, 301, -86400]) {
      expectCode(() => verifyWebhook(BODY, headers(entry(newKey.privateKey, 'EVT_1', at(bad)), at(bad)), document(newKey), { now: NOW }), 'timestamp_out_of_tolerance');
    }
    expectCode(() => verifyWebhook(BODY, headers(entry(newKey.privateKey), '2026-11-22T09:00:00Z'), document(newKey), { now: NOW }), 'invalid_timestamp');
    expectCode(() => verifyWebhook(BODY, headers(entry(newKey.privateKey), '-5'), document(newKey), { now: NOW }), 'invalid_timestamp');
    // The tolerance is configurable.
    expect(verifyWebhook(BODY, headers(entry(newKey.privateKey, 'EVT_1', at(-600)), at(-600)), document(newKey), { now: NOW, toleranceSeconds: 600 })).toBeTruthy();
  });

  it('rejects a parsed body and a key document without keys', () => {
    expectCode(() => verifyWebhook(JSON.parse(BODY.toString()), headers(entry(newKey.privateKey)), document(newKey), { now: NOW }), 'invalid_body');
    expectCode(() => verifyWebhook(BODY, headers(entry(newKey.privateKey)), { keys: [] } as never, { now: NOW }), 'invalid_signing_keys');
  });
});

describe('WebhookVerifier', () => {
  it('caches the key document and refetches once when a rotation makes verification fail', async () => {
    let current = document(oldKey);
    const fetcher = vi.fn(async () => new Response(JSON.stringify(current), { status: 200 }));
    let clock = NOW.getTime();
    const verifier = new WebhookVerifier({ signingKeyUrl: 'https://api.kassa.test/v1/webhooks/signing-key', fetch: fetcher as never, now: () => clock });
    await verifier.verify(BODY, headers(entry(oldKey.privateKey)));
    await verifier.verify(BODY, headers(entry(oldKey.privateKey)));
    expect(fetcher).toHaveBeenCalledTimes(1);
    // The server rotated and the grace period is over: only the new key signs now.
    current = document(newKey);
    clock += 60_000;
    const ts = String(clock / 1000);
    await expect(verifier.verify(BODY, headers(entry(newKey.privateKey, 'EVT_1', ts), ts))).resolves.toBeTruthy();
    expect(fetcher).toHaveBeenCalledTimes(2);
    // Forged requests do not make it refetch again and again.
    await expect(verifier.verify(BODY, headers(entry(keyPair('x').privateKey, 'EVT_1', ts), ts))).rejects.toMatchObject({ code: 'invalid_signature' });
    expect(fetcher).toHaveBeenCalledTimes(2);
  });
});
