/**
 * Issue 27, item 9: one signing key serves every organization, so a signature alone does not say
 * whom a delivery is for. Real deliveries of two organizations (same merchantReference) reach one
 * receiver; the SDK's verifier bound to organization A and its endpoint refuses B's (and the
 * other endpoint's), and an x402 paywall receipt, signed with the same key, never verifies as a
 * webhook delivery, nor a delivery as a receipt.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/kernel/logger.js';
import { newId } from '../../src/kernel/ids.js';
import { DeliveryWorker } from '../../src/webhooks/delivery.worker.js';
import { enqueueWebhookEvent } from '../../src/webhooks/outbox.repository.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { UrlGuard } from '../../src/webhooks/url-guard.js';
import type { WebhookOrder } from '../../src/webhooks/webhook.model.js';
import type { ReceiptSigner } from '../../src/crypto-payments/x402-paywall.service.js';
import * as sdk from '../../src/client/verify-webhook.js';
import { verifyWebhook, WebhookVerificationError, type SigningKeyResponse } from '../../src/client/verify-webhook.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { RECEIVER_CERT, startReceiver, type Received, type Receiver } from './receiver.js';

let ctx: TestContext;
let receiver: Receiver;
let keys: SigningKeyResponse;

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  receiver = await startReceiver();
  receiver.respond = () => ({ status: 204 });
  keys = (await ctx.platform.get('/v1/webhooks/signing-key')).body;
});
afterAll(async () => {
  await receiver?.close();
  await ctx?.close();
});

const order = (orgId: string): WebhookOrder => ({
  orderId: newId('ORD'),
  orgId,
  merchantReference: 'order-1001',
  merchantMetadata: null,
  status: 'PAID',
  provider: 'STRIPE',
  amountCents: 1500,
  customerId: 'CUS_hk60G7KOFpB5lxQ84MRIHi9l',
  customerExternalId: null,
  lines: [{ kind: 'PRICE', description: 'Pro plan', quantity: '1', unitAmountDecimal: String(1500), exactAmountDecimal: String(1500), amountCents: 1500 }],
  amountRefundedCents: 0,
  currency: 'usd',
  product: { id: newId('PRD'), name: 'T-shirt' },
  paymentLinkId: null,
  originalOrderId: null,
  providerSubscriptionId: null,
  providerPaymentId: null,
  providerStatus: null,
  createdAt: '2026-11-22T09:00:00.000Z',
  updatedAt: '2026-11-22T09:00:01.000Z',
});

async function endpoint(apiKey: string, name: string): Promise<string> {
  const res = await ctx.merchant.post('/v1/webhook').set('X-API-Key', apiKey).send({ name, url: receiver.url(), events: [] });
  expect(res.status).toBe(201);
  return res.body.data.id;
}

async function deliverAll(): Promise<void> {
  const guard = new UrlGuard({ allowLoopback: true });
  const worker = new DeliveryWorker(new KnexWebhookDeliveryRepository(ctx.testDb.database.db), ctx.services.signingKeys, guard, ctx.clock, createLogger({ level: 'silent' }), {
    timeoutMs: 2000,
    ca: RECEIVER_CERT,
    random: () => 0.5,
  });
  while ((await worker.runOnce()) > 0);
}

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WebhookVerificationError);
    return (err as WebhookVerificationError).code;
  }
  return 'verified';
}

describe('binding a delivery to the receiving organization and endpoint', () => {
  let aShop: string;
  let aOther: string;
  let bShop: string;
  const byEndpoint = (id: string): Received => receiver.received.find((r) => r.json.endpoint.id === id)!;

  beforeAll(async () => {
    aShop = await endpoint(ctx.orgA.apiKey, 'A shop');
    aOther = await endpoint(ctx.orgA.apiKey, 'A analytics');
    bShop = await endpoint(ctx.orgB.apiKey, 'B shop');
    await ctx.testDb.database.db.transaction(async (trx) => {
      await enqueueWebhookEvent(trx, { orgId: ctx.orgA.orgId, type: 'order.paid', data: { order: order(ctx.orgA.orgId) } }, ctx.clock.now());
      await enqueueWebhookEvent(trx, { orgId: ctx.orgB.orgId, type: 'order.paid', data: { order: order(ctx.orgB.orgId) } }, ctx.clock.now());
    });
    await deliverAll();
    expect(receiver.received).toHaveLength(3);
  });

  it("each envelope names its endpoint's organization (endpoint.orgId)", () => {
    expect(byEndpoint(aShop).json.endpoint).toEqual({ id: aShop, name: 'A shop', orgId: ctx.orgA.orgId });
    expect(byEndpoint(bShop).json.endpoint).toEqual({ id: bShop, name: 'B shop', orgId: ctx.orgB.orgId });
  });

  it("A's receiver accepts A's delivery and refuses B's signed order.paid with the same merchantReference", () => {
    const now = ctx.clock.now();
    const bound = { now, expectedOrganizationId: ctx.orgA.orgId, expectedEndpointId: aShop };
    const a = byEndpoint(aShop);
    expect(verifyWebhook(a.rawBody, a.headers, keys, bound)).toMatchObject({ type: 'order.paid', data: { order: { orgId: ctx.orgA.orgId } } });
    const b = byEndpoint(bShop);
    // The signature itself is valid: without binding it verifies (the review's finding).
    expect(code(() => verifyWebhook(b.rawBody, b.headers, keys, { now }))).toBe('verified');
    expect(code(() => verifyWebhook(b.rawBody, b.headers, keys, bound))).toBe('wrong_organization');
    expect(code(() => verifyWebhook(b.rawBody, b.headers, keys, { now, expectedOrganizationId: ctx.orgA.orgId }))).toBe('wrong_organization');
    expect(() => verifyWebhook(b.rawBody, b.headers, keys, bound)).toThrow(new RegExp(`for organization ${ctx.orgB.orgId}, not ${ctx.orgA.orgId}`));
  });

  it("refuses a delivery of the receiver's organization made to another of its endpoints", () => {
    const other = byEndpoint(aOther);
    const now = ctx.clock.now();
    expect(code(() => verifyWebhook(other.rawBody, other.headers, keys, { now, expectedOrganizationId: ctx.orgA.orgId }))).toBe('verified');
    expect(code(() => verifyWebhook(other.rawBody, other.headers, keys, { now, expectedOrganizationId: ctx.orgA.orgId, expectedEndpointId: aShop }))).toBe('wrong_endpoint');
  });

  it('WebhookVerifier takes the same binding', async () => {
    const fetch = async () => new Response(JSON.stringify(keys), { status: 200 });
    const verifier = new sdk.WebhookVerifier({ signingKeyUrl: 'http://api.test/v1/webhooks/signing-key', fetch: fetch as never, now: () => ctx.clock.now().getTime(), expectedOrganizationId: ctx.orgA.orgId, expectedEndpointId: aShop });
    const a = byEndpoint(aShop);
    await expect(verifier.verify(a.rawBody, a.headers)).resolves.toMatchObject({ type: 'order.paid' });
    const b = byEndpoint(bShop);
    await expect(verifier.verify(b.rawBody, b.headers)).rejects.toMatchObject({ code: 'wrong_organization' });
  });
});

describe('x402 paywall receipts and webhook deliveries are signed for different purposes', () => {
  // The receipt signer exactly as the paywall gets it from src/services.ts.
  const signReceipt = () => (ctx.services.modules.cryptoPayments.x402Paywalls as unknown as { signReceipt: ReceiptSigner }).signReceipt;
  const receiptBody = () =>
    Buffer.from(JSON.stringify({ type: 'x402.receipt', timestamp: ctx.clock.now().toISOString(), data: { orderId: 'ORD_1', pricingId: 'PRC_1', productId: 'PRD_1', payer: '0x00000000000000000000000000000000000000aa' } }));

  it('a receipt never verifies as a webhook delivery', async () => {
    const body = receiptBody();
    const headers = await signReceipt()('rcpt_ORD_1', Math.floor(ctx.clock.now().getTime() / 1000), body);
    const now = ctx.clock.now();
    expect(code(() => verifyWebhook(body, headers, keys, { now }))).toBe('not_a_webhook');
    // Relabelled as a webhook signature, or with the domain tag moved into webhook-id, it still fails.
    const relabelled = { ...headers, 'webhook-signature': String(headers['webhook-signature']).replace(/^[^,]+,/, 'v1a,') };
    expect(code(() => verifyWebhook(body, relabelled, keys, { now }))).toBe('invalid_signature');
    // …and it is a valid receipt.
    expect(sdk.verifyX402Receipt(body, headers, keys, { now })).toMatchObject({ type: 'x402.receipt', data: { orderId: 'ORD_1' } });
  });

  it('a webhook delivery never verifies as a receipt', async () => {
    const aShop = await endpoint(ctx.orgA.apiKey, 'receipt check');
    receiver.reset();
    receiver.respond = () => ({ status: 204 });
    await ctx.testDb.database.db.transaction((trx) => enqueueWebhookEvent(trx, { orgId: ctx.orgA.orgId, type: 'order.paid', data: { order: order(ctx.orgA.orgId) } }, ctx.clock.now()));
    await deliverAll();
    const delivery = receiver.received.find((r) => r.json.endpoint.id === aShop)!;
    const now = ctx.clock.now();
    expect(code(() => sdk.verifyX402Receipt(delivery.rawBody, delivery.headers, keys, { now }))).toBe('unsupported_signature_version');
    const relabelled = { ...delivery.headers, 'webhook-signature': String(delivery.headers['webhook-signature']).replace(/^v1a,/, 'x402r1,') };
    expect(code(() => sdk.verifyX402Receipt(delivery.rawBody, relabelled, keys, { now }))).toBe('invalid_signature');
  });
});
