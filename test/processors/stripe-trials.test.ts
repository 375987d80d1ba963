/**
 * Free trials on the Stripe rail (issue 39, item 1), end to end: Kassa's SDK client against the
 * Stripe-shaped server (./stripe-server.ts, which models `subscription_data.trial_period_days`, a
 * `trialing` subscription, Stripe's $0 first invoice and the first paid invoice at trial end),
 * Stripe's signed events posted to Kassa's endpoint. Kassa keeps ACTIVE + trialEnd; the first
 * invoice after the trial equals Kassa's order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
let trialPriceId: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({
    env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '500', WEBHOOK_ALLOW_LOOPBACK: 'true' },
  });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  trialPriceId = (await ctx.services.catalog.createPrice(product.id, { amount: 500, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', trialDays: 14 })).id;
});
afterAll(async () => {
  await stripe?.stop();
  await ctx?.close();
});

let keys = 0;
const create = (body: object = {}) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `stripe-trial-${++keys}`).send({ pricingId: trialPriceId, ...body });
const db = () => ctx.testDb.database.db;
const deliver = (event: Stripe.Event) => {
  const signed = stripe.signed(event);
  return ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
};

describe('a free trial on Stripe', () => {
  it('opens Checkout with trial_period_days; the $0 first invoice is a $0 order; ACTIVE + trialEnd; the first invoice after the trial equals the Kassa order', async () => {
    ctx.clock.set('2026-12-01T10:00:00.000Z');
    const before = stripe.requests.length;
    const res = await create({ quantity: 2, customerEmail: 'trial@example.com' });
    expect(res.status).toBe(201);
    const [request] = stripe.requests.slice(before);
    expect(request!.body).toMatchObject({ mode: 'subscription', subscription_data: { trial_period_days: '14' } });
    expect(request!.body).not.toHaveProperty('payment_method_collection');
    const sessionId = res.body.data.id as string;
    const stripeSessionId = (await db()('checkout_sessions').where({ id: sessionId }).first()).processor_session_id as string;
    const paid = stripe.complete(stripeSessionId, { email: 'trial@example.com' });
    expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
    const stripeSub = stripe.subscriptionOf(stripeSessionId);
    expect(stripeSub).toMatchObject({ status: 'trialing', trial_end: Date.parse('2026-12-15T10:00:00.000Z') / 1000 });

    const row = await db()('subscriptions').where({ checkout_session_id: sessionId }).first();
    const subscription = (await ctx.merchant.get(`/v1/subscriptions/${row.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(subscription).toMatchObject({ status: 'ACTIVE', amountCents: 1000, trialEnd: '2026-12-15T10:00:00.000Z', currentPeriodEnd: '2026-12-15T10:00:00.000Z' });
    const first = (await ctx.merchant.get(`/v1/orders/${subscription.initialOrderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(first).toMatchObject({ status: 'PAID', amountCents: 0 });
    expect(first.lines).toEqual([expect.objectContaining({ kind: 'PRICE', description: 'Free trial of Pro plan (14 days)', quantity: '2', amountCents: 0 })]);

    // A Stripe-billed trial gets Kassa's reminder too (Stripe's own trial_will_end is not relayed).
    ctx.clock.set('2026-12-12T10:00:00.000Z');
    expect(await ctx.services.subscriptions.remindTrialsEnding()).toBe(1);

    ctx.clock.set('2026-12-15T10:00:00.000Z');
    const invoice = stripe.renew(stripeSub.id);
    expect(invoice).toMatchObject({ billing_reason: 'subscription_cycle', status: 'paid', amount_paid: 1000 });
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    const orders = await db()('orders').where({ subscription_id: row.id }).orderBy('billing_period');
    expect(orders.map((o: { billing_period: number; amount_cents: number | string; status: string }) => [o.billing_period, Number(o.amount_cents), o.status])).toEqual([
      [0, 0, 'PAID'],
      [1, invoice.amount_paid, 'PAID'],
    ]);
    const after = (await ctx.merchant.get(`/v1/subscriptions/${row.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(after).toMatchObject({ status: 'ACTIVE', currentPeriodEnd: '2027-01-15T10:00:00.000Z', trialEnd: '2026-12-15T10:00:00.000Z' });
  });

  it('IF_REQUIRED: payment_method_collection if_required, and Stripe cancels at the trial end without a card', async () => {
    const before = stripe.requests.length;
    const res = await create({ trialPaymentMethodCollection: 'IF_REQUIRED' });
    expect(res.status).toBe(201);
    expect(stripe.requests[before]!.body).toMatchObject({
      payment_method_collection: 'if_required',
      subscription_data: { trial_period_days: '14', trial_settings: { end_behavior: { missing_payment_method: 'cancel' } } },
    });
  });
});
