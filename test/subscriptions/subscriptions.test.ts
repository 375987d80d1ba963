/** Subscriptions on a fake clock: start, renewals, dunning, cancellation, pause/resume, events, manage page. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let priceId: string;
let productId: string;
beforeAll(async () => {
  ctx = await createTestContext();
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  productId = product.id;
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })).id;
});
afterAll(async () => {
  await ctx?.close();
});

let n = 0;
async function subscribe(card = '4242424242424242', extra: object = {}) {
  const created = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `sub-${++n}`)
    .send({ pricingId: priceId, customerEmail: `sub${n}@example.com`, merchantReference: `ref-${n}`, metadata: { plan: 'pro' }, ...extra });
  expect(created.status).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: card, expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  return { session, order, subscriptionId: order.subscriptionId as string };
}
const getSub = async (id: string, apiKey = ctx.orgA.apiKey) => ctx.merchant.get(`/v1/subscriptions/${id}`).set('X-API-Key', apiKey);
const ordersOf = async (subscriptionId: string) =>
  (await ctx.merchant.get(`/v1/orders?subscription_id=${subscriptionId}&size=100`).set('X-API-Key', ctx.orgA.apiKey)).body.data.records as Array<Record<string, unknown>>;
/** Events about the subscription or any of its orders, in order. */
const eventTypes = async (subscriptionId: string) => {
  const ids = [subscriptionId, ...(await ordersOf(subscriptionId)).map((o) => o.orderId as string)];
  return (await ctx.testDb.database.db('webhook_events').orderBy('seq'))
    .filter((e: { payload: unknown }) => ids.some((id) => JSON.stringify(e.payload).includes(id)))
    .map((e: { type: string }) => e.type);
};
const lastSubscriptionEvent = async (subscriptionId: string) => {
  const events = (await ctx.testDb.database.db('webhook_events').orderBy('seq')).filter((e: { type: string; payload: unknown }) => e.type.startsWith('subscription.') && JSON.stringify(e.payload).includes(subscriptionId));
  return events[events.length - 1];
};
const runScheduler = () => ctx.services.subscriptions.processDue();
const at = (iso: string) => ctx.clock.set(iso);

describe('a whole subscription life', () => {
  it('starts on payment, renews twice, is canceled at period end, then ends', async () => {
    at('2026-01-31T10:00:00.000Z');
    const { order: first, subscriptionId } = await subscribe();
    expect(subscriptionId).toMatch(/^SUB_[0-9A-Za-z]{24}$/);
    expect(first).toMatchObject({ status: 'PAID', subscriptionId });
    expect(first).not.toHaveProperty('originalOrderId');
    const started = (await getSub(subscriptionId)).body.data;
    expect(started).toMatchObject({
      subscriptionId,
      id: subscriptionId,
      status: 'ACTIVE',
      amountCents: 900,
      currency: 'USD',
      billingInterval: 'MONTH',
      billingIntervalCount: 1,
      // Jan 31 + 1 month clamps to the end of February.
      currentPeriodEnd: '2026-02-28T10:00:00.000Z',
      cancelAtPeriodEnd: false,
      canceledAt: null,
      endedAt: null,
      initialOrderId: first.orderId,
      latestOrderId: first.orderId,
      productId,
      productName: 'Pro plan',
      customerId: first.customerId,
    });

    expect(await runScheduler()).toBe(0); // nothing due yet
    at('2026-02-28T10:00:00.000Z');
    expect(await runScheduler()).toBe(1);
    at('2026-03-31T10:00:00.000Z'); // anchored on Jan 31, not chained from Feb 28
    expect(await runScheduler()).toBe(1);

    const orders = await ordersOf(subscriptionId);
    expect(orders).toHaveLength(3);
    const [third, second] = orders; // newest first
    for (const renewal of [second!, third!]) {
      expect(renewal).toMatchObject({ status: 'PAID', subscriptionId, originalOrderId: first.orderId, merchantReference: first.merchantReference, merchantMetadata: { plan: 'pro' }, amountCents: 900 });
      expect(renewal).not.toHaveProperty('checkoutSessionId');
      // The sandbox's charge of the saved card: its own payment id, its status in Stripe's words.
      expect(renewal).toMatchObject({ providerPaymentId: expect.stringMatching(/^sbx_pay_/), providerStatus: 'succeeded' });
    }
    expect(second!.providerPaymentId).not.toBe(third!.providerPaymentId);
    const renewed = (await getSub(subscriptionId)).body.data;
    expect(renewed).toMatchObject({ status: 'ACTIVE', currentPeriodEnd: '2026-04-30T10:00:00.000Z', latestOrderId: third!.orderId });

    at('2026-04-10T00:00:00.000Z');
    const cancel = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({});
    expect(cancel.body.data).toMatchObject({ status: 'ACTIVE', cancelAtPeriodEnd: true, canceledAt: '2026-04-10T00:00:00.000Z', endedAt: null });
    const updateEvent = await lastSubscriptionEvent(subscriptionId);
    expect(updateEvent.type).toBe('subscription.updated');
    expect(updateEvent.payload.subscription).toMatchObject({ cancelAtPeriodEnd: true, currentPeriodEnd: '2026-04-30T10:00:00.000Z', status: 'ACTIVE' });

    at('2026-04-30T10:00:00.000Z');
    expect(await runScheduler()).toBe(1);
    const ended = (await getSub(subscriptionId)).body.data;
    expect(ended).toMatchObject({ status: 'ENDED', endedAt: '2026-04-30T10:00:00.000Z', cancelAtPeriodEnd: true });
    expect(await ordersOf(subscriptionId)).toHaveLength(3); // no renewal after the end
    expect(await eventTypes(subscriptionId)).toEqual([
      'subscription.created',
      'order.paid',
      'order.paid', // renewal 1
      'subscription.updated',
      'order.paid', // renewal 2
      'subscription.updated',
      'subscription.updated', // cancel at period end scheduled
      'subscription.ended',
    ]);
    // Kassa renews sandbox subscriptions itself: its order payloads name no processor subscription.
    const orderIds = new Set([first.orderId, second!.orderId, third!.orderId]);
    const orderPayloads = (await ctx.testDb.database.db('webhook_events').orderBy('seq'))
      .filter((e: { type: string; payload: { order?: { orderId: string } } }) => e.type.startsWith('order.') && orderIds.has(e.payload.order!.orderId))
      .map((e: { payload: { order: unknown } }) => e.payload.order);
    expect(orderPayloads).toHaveLength(3);
    for (const payload of orderPayloads) expect(payload).toMatchObject({ providerSubscriptionId: null });
  });
});

describe('failed renewals', () => {
  it('retries on the dunning schedule (1, 3, 5 days) and ends EXPIRED, with one FAILED order for the period', async () => {
    at('2026-05-01T00:00:00.000Z');
    const { subscriptionId } = await subscribe('4000000000000341');
    at('2026-06-01T00:00:00.000Z');
    expect(await runScheduler()).toBe(1);
    let orders = await ordersOf(subscriptionId);
    expect(orders.map((o) => o.status)).toEqual(['FAILED', 'PAID']);
    // A declined sandbox charge made no payment: no id, and the status that says why.
    expect(orders[0]).toMatchObject({ providerPaymentId: null, providerStatus: 'requires_payment_method' });
    expect((await getSub(subscriptionId)).body.data.status).toBe('ACTIVE');
    for (const day of ['2026-06-02', '2026-06-04']) {
      at(`${day}T00:00:00.000Z`);
      expect(await runScheduler()).toBe(1);
      expect((await getSub(subscriptionId)).body.data.status).toBe('ACTIVE');
    }
    at('2026-06-05T00:00:00.000Z');
    expect(await runScheduler()).toBe(0); // not due between retries
    at('2026-06-06T00:00:00.000Z');
    expect(await runScheduler()).toBe(1);
    const expired = (await getSub(subscriptionId)).body.data;
    expect(expired).toMatchObject({ status: 'EXPIRED', endedAt: '2026-06-06T00:00:00.000Z' });
    orders = await ordersOf(subscriptionId);
    expect(orders.map((o) => o.status)).toEqual(['FAILED', 'PAID']);
    const types = await eventTypes(subscriptionId);
    expect(types.filter((t) => t === 'order.failed')).toHaveLength(1);
    expect(types[types.length - 1]).toBe('subscription.expired');
    at('2026-08-01T00:00:00.000Z');
    expect(await runScheduler()).toBe(0);
  });
});

describe('pause, resume and immediate cancellation', () => {
  it('does not renew while paused, and renews at once on a resume after the period lapsed', async () => {
    at('2026-07-01T00:00:00.000Z');
    const { subscriptionId } = await subscribe();
    const paused = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/pause`);
    expect(paused.body.data.status).toBe('PAUSED');
    at('2026-08-15T00:00:00.000Z');
    expect(await runScheduler()).toBe(0);
    expect(await ordersOf(subscriptionId)).toHaveLength(1);
    const resumed = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/resume`);
    expect(resumed.body.data.status).toBe('ACTIVE');
    expect(await runScheduler()).toBe(1);
    expect(await ordersOf(subscriptionId)).toHaveLength(2);
    expect((await getSub(subscriptionId)).body.data.currentPeriodEnd).toBe('2026-09-15T00:00:00.000Z');
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).body.data).toMatchObject({ status: 'CANCELED', endedAt: '2026-08-15T00:00:00.000Z' });
    expect((await lastSubscriptionEvent(subscriptionId)).type).toBe('subscription.ended');
    const again = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({});
    expect(again.status).toBe(409);
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/resume`)).status).toBe(409);
    expect((await ctx.admin.post('/v1/subscriptions/SUB_000000000000000000000000/pause')).status).toBe(404);
  });
});

describe('reads and filters', () => {
  it('lists by status and customer, scoped to the organization; orders filter by subscription', async () => {
    at('2026-10-01T00:00:00.000Z');
    const { subscriptionId, order } = await subscribe();
    const list = (q: string, apiKey = ctx.orgA.apiKey) => ctx.merchant.get(`/v1/subscriptions?${q}`).set('X-API-Key', apiKey);
    const active = (await list('status=ACTIVE&size=100')).body.data.records.map((s: { subscriptionId: string }) => s.subscriptionId);
    expect(active).toContain(subscriptionId);
    expect((await list('status=ENDED&size=100')).body.data.records.map((s: { subscriptionId: string }) => s.subscriptionId)).not.toContain(subscriptionId);
    expect((await list(`customer_id=${order.customerId}`)).body.data.records.map((s: { subscriptionId: string }) => s.subscriptionId)).toEqual([subscriptionId]);
    expect((await list('status=LAPSED')).status).toBe(400);
    expect((await list('')).body.data.total).toBeGreaterThan(0);
    expect((await list('', ctx.orgB.apiKey)).body.data.total).toBe(0);
    expect((await getSub(subscriptionId, ctx.orgB.apiKey)).status).toBe(404);
    expect((await ordersOf(subscriptionId)).map((o) => o.orderId)).toEqual([order.orderId]);
  });

  it('refuses crypto subscriptions', async () => {
    const res = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'crypto-sub')
      .send({ provider: 'CRYPTO', pricingData: { amount: 1000000, currency: 'USDC', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', productData: { name: 'x' } } });
    expect(res.status).toBe(400);
  });
});

describe('the buyer manage page', () => {
  it('is linked from the confirmation page and cancels at period end', async () => {
    at('2026-11-01T00:00:00.000Z');
    const { session, subscriptionId } = await subscribe();
    const row = await ctx.testDb.database.db('checkout_sessions').where({ id: session.id }).first();
    const complete = await ctx.merchant.get(`/checkout/${row.page_token}/complete`);
    const link = /href="(\/subscriptions\/manage\/[0-9A-Za-z]{32})"/.exec(complete.text)?.[1];
    expect(link).toBeDefined();
    const page = await ctx.merchant.get(link!);
    expect(page.text).toContain('Active: renews on 1 December 2026');
    const canceled = await ctx.merchant.post(`${link}/cancel`).type('form').send({ confirm: 'yes' });
    expect(canceled.status).toBe(200);
    expect(canceled.text).toContain('access ends on 1 December 2026');
    expect((await getSub(subscriptionId)).body.data).toMatchObject({ status: 'ACTIVE', cancelAtPeriodEnd: true });
    expect((await ctx.merchant.get('/subscriptions/manage/unknown')).status).toBe(404);
  });
});
