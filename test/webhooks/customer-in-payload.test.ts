/**
 * Issue 37 §26: README step 6 and docs/customer-portal.md tell the merchant to take the customer
 * from any `order.*`/`subscription.*` webhook. A real checkout's `order.paid` (and
 * `subscription.created`), delivered over HTTPS to a receiver, carries what the documented
 * example shows, field by field for the customer: `customerId` and the customer's
 * `customerExternalId` (null when the customer has none; the current value after a change).
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/kernel/logger.js';
import { DeliveryWorker } from '../../src/webhooks/delivery.worker.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { UrlGuard } from '../../src/webhooks/url-guard.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { RECEIVER_CERT, startReceiver, type Receiver } from './receiver.js';

let ctx: TestContext;
let receiver: Receiver;
let oneTimePrice: string;
let monthlyPrice: string;
let n = 0;

const spec = parse(readFileSync('openapi/merchant.yaml', 'utf8')) as { webhooks: Record<string, any>; components: { schemas: Record<string, any> } };
const exampleOf = (type: string) => spec.webhooks[type].post.requestBody.content['application/json'].example;

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  receiver = await startReceiver();
  receiver.respond = () => ({ status: 204 });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  oneTimePrice = (await ctx.services.catalog.createPrice(product.id, { amount: 5800, currency: 'USD' })).id;
  monthlyPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })).id;
  const endpoint = await ctx.merchant.post('/v1/webhook').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Receiver', url: receiver.url(), events: [] });
  expect(endpoint.status).toBe(201);
}, 120_000);
afterAll(async () => {
  await receiver?.close();
  await ctx?.close();
});

async function pay(body: object): Promise<{ orderId: string; customerId: string; subscriptionId?: string }> {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `cust-${++n}`).send(body);
  expect(created.status, created.text).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  return { orderId: order.orderId, customerId: order.customerId, subscriptionId: order.subscriptionId };
}

/** Runs the delivery worker until the queue is empty; the bodies the receiver got, by event type. */
async function delivered(): Promise<Array<{ type: string; data: Record<string, any> }>> {
  const worker = new DeliveryWorker(new KnexWebhookDeliveryRepository(ctx.testDb.database.db), ctx.services.signingKeys, new UrlGuard({ allowLoopback: true }), ctx.clock, createLogger({ level: 'silent' }), {
    timeoutMs: 2000,
    ca: RECEIVER_CERT,
    random: () => 0.5,
  });
  while ((await worker.runOnce()) > 0);
  return receiver.received.map((r) => r.json);
}

describe('the customer in order.* and subscription.* deliveries (issue 37 §26)', () => {
  it('a real order.paid carries customerId and customerExternalId exactly as the documented example does; keys agree with the example', async () => {
    const bought = await pay({ pricingId: oneTimePrice, customerEmail: 'ada@example.com', customerExternalId: 'user_42', merchantReference: 'invoice-10042' });
    const event = (await delivered()).find((e) => e.type === 'order.paid' && e.data.order.orderId === bought.orderId);
    expect(event).toBeDefined();
    const sent = event!.data.order as Record<string, unknown>;
    const documented = exampleOf('order.paid').data.order as Record<string, unknown>;

    // Field by field for the customer: the documented example's value for the documented customer.
    expect(documented.customerExternalId).toBe('user_42');
    expect(sent.customerExternalId).toBe(documented.customerExternalId);
    expect(sent.customerId).toBe(bought.customerId);
    expect(String(sent.customerId)).toMatch(/^CUS_[0-9A-Za-z]{24}$/);
    expect(String(documented.customerId)).toMatch(/^CUS_[0-9A-Za-z]{24}$/);
    // And the same fields as the example (a card order with a product; nothing else optional applies).
    expect(Object.keys(sent).sort()).toEqual(Object.keys(documented).sort());
    // The customer named is the one the customer API returns.
    const customer = await ctx.merchant.get(`/v1/customers/${bought.customerId}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(customer.body.data).toMatchObject({ customerId: sent.customerId, externalId: sent.customerExternalId });
  });

  it('a customer without an externalId: null; after PATCH /v1/customers/{id}, the next events carry the new one (order and subscription alike)', async () => {
    const first = await pay({ pricingId: monthlyPrice, customerEmail: 'grace@example.com' });
    let events = await delivered();
    const paid = events.find((e) => e.type === 'order.paid' && e.data.order.orderId === first.orderId)!;
    const created = events.find((e) => e.type === 'subscription.created' && e.data.subscription.subscriptionId === first.subscriptionId)!;
    expect(paid.data.order).toMatchObject({ customerId: first.customerId, customerExternalId: null });
    expect(created.data.subscription).toMatchObject({ customerId: first.customerId, customerExternalId: null });
    expect(Object.keys(created.data.subscription).sort()).toEqual(Object.keys(exampleOf('subscription.created').data.subscription).sort());

    const patched = await ctx.merchant.patch(`/v1/customers/${first.customerId}`).set('X-API-Key', ctx.orgA.apiKey).send({ externalId: 'user_77' });
    expect(patched.status, patched.text).toBe(200);
    receiver.reset();
    receiver.respond = () => ({ status: 204 });
    const canceled = await ctx.admin.post(`/v1/subscriptions/${first.subscriptionId}/cancel`).send({ atPeriodEnd: true });
    expect(canceled.status, canceled.text).toBe(200);
    events = await delivered();
    const updated = events.find((e) => e.type === 'subscription.updated' && e.data.subscription.subscriptionId === first.subscriptionId)!;
    expect(updated.data.subscription).toMatchObject({ customerId: first.customerId, customerExternalId: 'user_77' });
  });

  it('every documented order.* and subscription.* example carries customerExternalId, and the schemas require it', () => {
    for (const type of Object.keys(spec.webhooks).filter((t) => t.startsWith('order.') || t.startsWith('subscription.'))) {
      const example = exampleOf(type);
      const subject = example.data.order ?? example.data.subscription;
      expect(subject.customerExternalId, type).toBe('user_42');
    }
    expect(spec.components.schemas.WebhookOrder.required).toContain('customerExternalId');
    expect(spec.components.schemas.WebhookSubscription.required).toContain('customerExternalId');
  });
});
