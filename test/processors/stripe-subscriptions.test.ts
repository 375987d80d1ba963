/**
 * Subscriptions on the Stripe card processor, end to end over HTTP: Kassa's merchant and admin
 * APIs and pages in-process, its Stripe SDK client talking to the local Stripe-shaped server
 * (./stripe-server.ts, which plays Stripe Billing), and Stripe's signed events posted to Kassa's
 * event endpoint. Stripe Billing owns the renewal schedule; Kassa follows its events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { FakeStripe, stripePeriodEnd } from './stripe-server.js';
import { receiveOrderWebhooks, type OrderWebhooks } from './order-webhooks.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';
const onPostgres = process.env.TEST_DATABASE_URL !== undefined;

let ctx: TestContext;
let stripe: FakeStripe;
let productId: string;
let monthlyPriceId: string;
let webhooks: OrderWebhooks;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({
    env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '500', WEBHOOK_ALLOW_LOOPBACK: 'true' },
  });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan', description: 'Everything' });
  productId = product.id;
  monthlyPriceId = (await ctx.services.catalog.createPrice(product.id, { amount: 500, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  webhooks = await receiveOrderWebhooks(ctx);
});
afterAll(async () => {
  await webhooks?.close();
  await stripe?.stop();
  await ctx?.close();
});

let keys = 0;
const create = (body: object = {}, key = `stripe-sub-${++keys}`) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', key).send({ pricingId: monthlyPriceId, ...body });
const db = () => ctx.testDb.database.db;
const sessionRow = (id: string) => db()('checkout_sessions').where({ id }).first();
const deliver = (event: Stripe.Event) => {
  const signed = stripe.signed(event);
  return ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
};
const readOrder = async (id: string) => (await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
/** The PaymentIntent that paid (else last tried to pay) an invoice, as Stripe has it. */
const intentOf = (invoice: Stripe.Invoice) => {
  const payments = stripe.invoices.get(invoice.id)!.payments!.data;
  return ((payments.find((p) => p.status === 'paid') ?? payments[payments.length - 1])!.payment.payment_intent) as string;
};
const readSubscription = async (id: string) => (await ctx.merchant.get(`/v1/subscriptions/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
const ordersOf = async (subscriptionId: string) =>
  (await ctx.merchant.get(`/v1/orders?subscription_id=${subscriptionId}&size=100`).set('X-API-Key', ctx.orgA.apiKey)).body.data.records as Array<{
    id: string;
    status: string;
    amountCents: number;
    originalOrderId?: string;
  }>;
const orderRows = (subscriptionId: string) => db()('orders').where({ subscription_id: subscriptionId }).orderBy('billing_period');
/** Kassa's webhook events about these ids, in the order they were queued. */
const eventsAbout = async (...ids: string[]) =>
  (await db()('webhook_events').orderBy('seq'))
    .filter((e: { payload: unknown }) => ids.some((id) => JSON.stringify(e.payload).includes(id)))
    .map((e: { type: string }) => e.type);
/** Events about a subscription and its orders (order payloads name Stripe's subscription, not Kassa's). */
const subscriptionEvents = async (subscriptionId: string) => eventsAbout(subscriptionId, ...(await orderRows(subscriptionId)).map((o: { id: string }) => o.id));
const entitled = async (email: string) =>
  (await ctx.merchant.get(`/v1/entitlements/check?email=${encodeURIComponent(email)}&product_id=${productId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.entitled as boolean;

/** A subscription bought through Stripe Checkout: Kassa's session, Stripe's subscription and Kassa's subscription id. */
async function subscribe(email: string, body: object = {}) {
  const res = await create(body);
  expect(res.status).toBe(201);
  const session = res.body.data as { id: string };
  const stripeSessionId = (await sessionRow(session.id)).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const subscriptionId = (await db()('subscriptions').where({ checkout_session_id: session.id }).first()).id as string;
  return { sessionId: session.id, stripeSessionId, stripeSub: stripe.subscriptionOf(stripeSessionId), subscriptionId };
}

describe('subscription checkout on Stripe', () => {
  it('opens a Checkout Session in subscription mode: recurring price_data from the snapshot, quantity, subscription metadata naming Kassa ids', async () => {
    const before = stripe.requests.length;
    const res = await create({ quantity: 3, customerEmail: 'params@example.com' });
    expect(res.status).toBe(201);
    const id = res.body.data.id as string;
    const [request] = stripe.requests.slice(before);
    expect(request).toMatchObject({ method: 'POST', path: '/v1/checkout/sessions', idempotencyKey: `kassa_checkout_${ctx.orgA.orgId}_${id}` });
    expect(request!.body).toMatchObject({
      mode: 'subscription',
      line_items: [{ quantity: '3', price_data: { currency: 'eur', unit_amount: '500', product_data: { name: 'Pro plan' }, recurring: { interval: 'month', interval_count: '1' } } }],
      subscription_data: { metadata: { kassa_checkout_session_id: id, kassa_org_id: ctx.orgA.orgId } },
      client_reference_id: id,
      customer_email: 'params@example.com',
    });
    expect(request!.body).not.toHaveProperty('payment_intent_data');
  });

  it('passes Kassa interval counts through, and refuses with 400 (nothing stored) a period Stripe cannot bill (over three years)', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Odd periods' });
    const every2Weeks = (await ctx.services.catalog.createPrice(product.id, { amount: 300, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'DAY', billingIntervalCount: 14 })).id;
    const before = stripe.requests.length;
    expect((await create({ pricingId: every2Weeks })).status).toBe(201);
    expect(stripe.requests[before]!.body).toMatchObject({ line_items: [{ price_data: { recurring: { interval: 'day', interval_count: '14' } } }] });

    const every40Months = (await ctx.services.catalog.createPrice(product.id, { amount: 300, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 40 })).id;
    const requests = stripe.requests.length;
    const res = await create({ pricingId: every40Months }, 'too-long');
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/at most every three years/);
    expect(stripe.requests.length).toBe(requests);
    expect(await db()('idempotency_keys').where({ key: 'too-long' }).first()).toBeUndefined();
  });
});

describe('subscription lifecycle on Stripe', () => {
  it('checkout → ACTIVE + first order → invoice.paid × 3 → 3 renewal orders → cancel at period end → deleted → ENDED', async () => {
    const email = 'lifecycle@example.com';
    const { sessionId, stripeSub, subscriptionId } = await subscribe(email, { quantity: 2, merchantReference: 'ref-42' });
    const start = await readSubscription(subscriptionId);
    const item = stripeSub.items.data[0]!;
    expect(start).toMatchObject({ status: 'ACTIVE', amountCents: 1000, billingInterval: 'MONTH', cancelAtPeriodEnd: false, currentPeriodEnd: new Date(item.current_period_end * 1000).toISOString() });
    const row = await db()('subscriptions').where({ id: subscriptionId }).first();
    expect(row.processor_subscription_id).toBe(stripeSub.id);
    const [first] = await orderRows(subscriptionId);
    expect(first).toMatchObject({ status: 'PAID', checkout_session_id: sessionId, billing_period: 0 });
    // The first invoice's PaymentIntent: refunds of this order go through Stripe.
    expect(first.processor_payment_id).toMatch(/^pi_/);
    expect(await entitled(email)).toBe(true);
    expect(await subscriptionEvents(subscriptionId)).toEqual(['subscription.created', 'order.paid']);
    const created = await db()('webhook_events').where({ type: 'subscription.created' }).orderBy('seq', 'desc').first();
    expect(created.payload.subscription).toMatchObject({ subscriptionId, provider: 'STRIPE', providerSubscriptionId: stripeSub.id });

    const invoices: Stripe.Invoice[] = [];
    for (let n = 0; n < 3; n++) {
      const invoice = stripe.renew(stripeSub.id, 'paid');
      invoices.push(invoice);
      expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).body).toEqual({ received: true, outcome: 'applied' });
    }
    const orders = await orderRows(subscriptionId);
    expect(orders.map((o: { billing_period: number; status: string }) => [o.billing_period, o.status])).toEqual([
      [0, 'PAID'],
      [1, 'PAID'],
      [2, 'PAID'],
      [3, 'PAID'],
    ]);
    const renewals = orders.slice(1);
    expect(renewals.every((o: { original_order_id: string; merchant_reference: string; checkout_session_id: string | null; amount_cents: number | string }) =>
      o.original_order_id === first.id && o.merchant_reference === 'ref-42' && o.checkout_session_id === null && Number(o.amount_cents) === 1000,
    )).toBe(true);
    const renewed = await readSubscription(subscriptionId);
    const lastLine = invoices[2]!.lines.data[0]!;
    expect(renewed).toMatchObject({ status: 'ACTIVE', latestOrderId: renewals[2].id, currentPeriodEnd: new Date(lastLine.period.end * 1000).toISOString() });
    expect((await ordersOf(subscriptionId)).length).toBe(4);

    // Cancel at period end from the admin API: made in Stripe first, with an idempotency key.
    const before = stripe.requests.length;
    const cancel = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: true });
    expect(cancel.status).toBe(200);
    expect(cancel.body.data).toMatchObject({ status: 'ACTIVE', cancelAtPeriodEnd: true });
    const [call] = stripe.requests.slice(before);
    expect(call).toMatchObject({ method: 'POST', path: `/v1/subscriptions/${stripeSub.id}`, body: { cancel_at_period_end: 'true' } });
    expect(call!.idempotencyKey).toMatch(new RegExp(`^kassa_subscription_cancel_at_period_end_${subscriptionId}_\\d+$`));
    expect(stripe.subscriptions.get(stripeSub.id)!.cancel_at_period_end).toBe(true);
    // Stripe's own event about the change confirms it and changes nothing more.
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get(stripeSub.id)!))).status).toBe(200);
    expect(await entitled(email)).toBe(true);

    // Kassa's renewal job does not end it at the period end; Stripe does.
    ctx.clock.set(new Date(lastLine.period.end * 1000 + 3600_000));
    await ctx.services.subscriptions.processDue();
    expect((await readSubscription(subscriptionId)).status).toBe('ACTIVE');
    const ended = stripe.endAtPeriodEnd(stripeSub.id);
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.deleted', ended))).body.outcome).toBe('applied');
    expect(await readSubscription(subscriptionId)).toMatchObject({ status: 'ENDED', cancelAtPeriodEnd: true, endedAt: new Date(lastLine.period.end * 1000).toISOString() });
    expect(await entitled(email)).toBe(false);
    expect(await subscriptionEvents(subscriptionId)).toEqual([
      'subscription.created',
      'order.paid',
      'order.paid',
      'subscription.updated',
      'order.paid',
      'subscription.updated',
      'order.paid',
      'subscription.updated',
      'subscription.updated',
      'subscription.ended',
    ]);
  });

  it('a renewal order paid through Stripe is refunded through Stripe (its invoice PaymentIntent)', async () => {
    const { stripeSub, subscriptionId } = await subscribe('refund-renewal@example.com');
    await deliver(stripe.invoiceEvent('invoice.paid', stripe.renew(stripeSub.id, 'paid')));
    const renewal = (await orderRows(subscriptionId))[1];
    const res = await ctx.admin.post(`/v1/orders/${renewal.id}/refund`).send({});
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'REFUNDED' });
    expect([...stripe.refunds.values()].some((r) => r.payment_intent === renewal.processor_payment_id && r.amount === 500)).toBe(true);
  });

  it("Kassa's renewal job never charges a due Stripe subscription (Stripe Billing owns the schedule)", async () => {
    const { subscriptionId } = await subscribe('due@example.com');
    const before = { orders: (await orderRows(subscriptionId)).length, requests: stripe.requests.length, sub: await readSubscription(subscriptionId) };
    ctx.clock.set(new Date(Date.parse(before.sub.currentPeriodEnd) + 10 * 24 * 3600_000));
    const due = await db()('subscriptions').where({ id: subscriptionId }).andWhere('next_action_at', '<=', ctx.clock.now()).first();
    expect(due).toBeDefined();
    await ctx.services.subscriptions.processDue();
    expect((await orderRows(subscriptionId)).length).toBe(before.orders);
    expect(stripe.requests.length).toBe(before.requests);
    expect(await readSubscription(subscriptionId)).toEqual(before.sub);
  });
});

describe('providerPaymentId, providerStatus and providerSubscriptionId of subscription orders on Stripe', () => {
  it("the first order carries the first invoice's PaymentIntent, each renewal its invoice's; failed and retried renewals follow its status — in the API and the signed webhooks, which name Stripe's subscription", async () => {
    const { stripeSessionId, stripeSub, subscriptionId } = await subscribe('provider-ids@example.com');
    const [first] = await orderRows(subscriptionId);
    const firstIntent = intentOf(stripe.invoices.get(stripe.sessions.get(stripeSessionId)!.invoice as string)!);
    expect(firstIntent).toMatch(/^pi_/);
    expect(await readOrder(first.id)).toMatchObject({ status: 'PAID', providerPaymentId: firstIntent, providerStatus: 'succeeded' });
    expect(await webhooks.received(first.id)).toEqual([
      { type: 'order.paid', order: expect.objectContaining({ providerPaymentId: firstIntent, providerStatus: 'succeeded', providerSubscriptionId: stripeSub.id }) },
    ]);

    const paid = stripe.renew(stripeSub.id, 'paid');
    await deliver(stripe.invoiceEvent('invoice.paid', paid));
    const renewal = (await orderRows(subscriptionId))[1];
    expect(intentOf(paid)).not.toBe(firstIntent);
    expect(await readOrder(renewal.id)).toMatchObject({ status: 'PAID', originalOrderId: first.id, providerPaymentId: intentOf(paid), providerStatus: 'succeeded' });
    expect((await webhooks.received(renewal.id)).map((w) => [w.type, w.order.providerPaymentId, w.order.providerStatus, w.order.providerSubscriptionId])).toEqual([
      ['order.paid', intentOf(paid), 'succeeded', stripeSub.id],
    ]);

    const failed = stripe.renew(stripeSub.id, 'failed');
    await deliver(stripe.invoiceEvent('invoice.payment_failed', failed));
    const dunned = (await orderRows(subscriptionId))[2];
    const failedIntent = intentOf(failed);
    expect(await readOrder(dunned.id)).toMatchObject({ status: 'FAILED', providerPaymentId: failedIntent, providerStatus: 'requires_payment_method' });
    const retried = stripe.retryInvoice(failed.id, 'paid');
    await deliver(stripe.invoiceEvent('invoice.paid', retried));
    // The retry is a new PaymentIntent in this fake (Stripe may reuse the invoice's): the order names the one that paid.
    expect(await readOrder(dunned.id)).toMatchObject({ status: 'PAID', providerPaymentId: intentOf(retried), providerStatus: 'succeeded' });
    expect((await webhooks.received(dunned.id)).map((w) => [w.type, w.order.providerPaymentId, w.order.providerStatus, w.order.providerSubscriptionId])).toEqual([
      ['order.failed', failedIntent, 'requires_payment_method', stripeSub.id],
      ['order.paid', intentOf(retried), 'succeeded', stripeSub.id],
    ]);
  });
});

describe('invoices outside the billing cycle (made in the Stripe Dashboard)', () => {
  it('a paid proration (subscription_update) becomes a PAID order for its amount, linked to the subscription; the period and the renewals are unchanged', async () => {
    const { stripeSub, subscriptionId } = await subscribe('proration@example.com');
    const before = await readSubscription(subscriptionId);
    const [first] = await orderRows(subscriptionId);
    const proration = stripe.invoiceOutsideCycle(stripeSub.id, 'subscription_update', 250);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', proration))).body.outcome).toBe('applied');
    const orders = await ordersOf(subscriptionId);
    expect(orders).toHaveLength(2);
    const extra = orders.find((o) => o.id !== first.id)!;
    expect(await readOrder(extra.id)).toMatchObject({
      status: 'PAID',
      amountCents: 250,
      currency: 'EUR',
      subscriptionId,
      originalOrderId: first.id,
      customerEmail: 'proration@example.com',
      productName: 'Pro plan',
      providerPaymentId: intentOf(proration),
      providerStatus: 'succeeded',
      fundsSettled: false,
    });
    expect(await webhooks.received(extra.id)).toEqual([
      { type: 'order.paid', order: expect.objectContaining({ amountCents: 250, providerPaymentId: intentOf(proration), providerSubscriptionId: stripeSub.id }) },
    ]);
    expect(await readSubscription(subscriptionId)).toMatchObject({ currentPeriodEnd: before.currentPeriodEnd, latestOrderId: before.latestOrderId, amountCents: 500 });

    // Replayed (another event id) and repeated: still one order for the invoice.
    expect((await deliver(stripe.invoiceEvent('invoice.paid', proration))).body.outcome).toBe('applied');
    expect(await ordersOf(subscriptionId)).toHaveLength(2);
    // The next cycle is still period 1, and refunds of the proration go through its PaymentIntent.
    await deliver(stripe.invoiceEvent('invoice.paid', stripe.renew(stripeSub.id, 'paid')));
    expect((await orderRows(subscriptionId)).map((o: { billing_period: number | null }) => o.billing_period)).toEqual([0, 1, null]);
    expect((await ctx.admin.post(`/v1/orders/${extra.id}/refund`).send({})).status).toBe(200);
    expect([...stripe.refunds.values()].some((r) => r.payment_intent === intentOf(proration) && r.amount === 250)).toBe(true);
  });

  it('a paid manual invoice of the subscription is an order too; unpaid and zero-amount ones are not (their later invoice.paid is)', async () => {
    const { stripeSub, subscriptionId } = await subscribe('manual-invoice@example.com');
    const manual = stripe.invoiceOutsideCycle(stripeSub.id, 'manual', 900);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', manual))).body.outcome).toBe('applied');
    const unpaid = stripe.invoiceOutsideCycle(stripeSub.id, 'subscription_update', 300, 'failed');
    expect((await deliver(stripe.invoiceEvent('invoice.payment_failed', unpaid))).body.outcome).toBe('ignored');
    const credit = stripe.invoiceOutsideCycle(stripeSub.id, 'subscription_update', 0);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', credit))).body.outcome).toBe('ignored');
    expect((await ordersOf(subscriptionId)).map((o) => o.amountCents).sort((a, b) => a - b)).toEqual([500, 900]);
    // Stripe's retry collects the unpaid proration: now it is revenue, and an order.
    const collected = stripe.retryInvoice(unpaid.id, 'paid');
    expect((await deliver(stripe.invoiceEvent('invoice.paid', collected))).body.outcome).toBe('applied');
    expect((await ordersOf(subscriptionId)).map((o) => o.amountCents).sort((a, b) => a - b)).toEqual([300, 500, 900]);
  });

  it('an invoice marked paid out of band (no PaymentIntent paid it) is an order named by the invoice, with its status', async () => {
    const { stripeSub, subscriptionId } = await subscribe('out-of-band@example.com');
    const invoice = stripe.invoicePaidOutOfBand(stripeSub.id, 'manual', 1200);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).body.outcome).toBe('applied');
    const extra = (await ordersOf(subscriptionId)).find((o) => o.amountCents === 1200)!;
    // Not the failed card attempt's PaymentIntent: the invoice itself, as Stripe has it paid.
    expect(await readOrder(extra.id)).toMatchObject({ status: 'PAID', providerPaymentId: invoice.id, providerStatus: 'paid' });
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).body.outcome).toBe('applied');
    expect((await ordersOf(subscriptionId)).filter((o) => o.amountCents === 1200)).toHaveLength(1);
    // No card payment to refund through Stripe: refused, and no refund is recorded that Stripe never made.
    const refund = await ctx.admin.post(`/v1/orders/${extra.id}/refund`).send({});
    expect(refund.status).toBe(409);
    expect(refund.body.error.message).toContain(invoice.id);
    expect(await readOrder(extra.id)).toMatchObject({ status: 'PAID', amountRefundedCents: 0 });
  });
});

describe('dunning on Stripe', () => {
  it('invoice.payment_failed → a FAILED renewal order once, attempts counted, still ACTIVE; a retry paid → that order PAID and the period moves on', async () => {
    const email = 'dunning@example.com';
    const { stripeSub, subscriptionId } = await subscribe(email);
    const periodEnd = (await readSubscription(subscriptionId)).currentPeriodEnd;
    const failed = stripe.renew(stripeSub.id, 'failed');
    expect((await deliver(stripe.invoiceEvent('invoice.payment_failed', failed))).body.outcome).toBe('applied');
    // Stripe marks the subscription past_due: Kassa keeps it ACTIVE while Stripe retries.
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get(stripeSub.id)!))).status).toBe(200);
    let orders = await orderRows(subscriptionId);
    expect(orders.map((o: { status: string }) => o.status)).toEqual(['PAID', 'FAILED']);
    expect(await readSubscription(subscriptionId)).toMatchObject({ status: 'ACTIVE', currentPeriodEnd: periodEnd });
    expect((await db()('subscriptions').where({ id: subscriptionId }).first()).failed_attempts).toBe(1);
    expect(await entitled(email)).toBe(true);

    const again = stripe.retryInvoice(failed.id, 'failed');
    await deliver(stripe.invoiceEvent('invoice.payment_failed', again));
    expect((await orderRows(subscriptionId)).length).toBe(2);
    expect((await db()('subscriptions').where({ id: subscriptionId }).first()).failed_attempts).toBe(2);

    const paid = stripe.retryInvoice(failed.id, 'paid');
    await deliver(stripe.invoiceEvent('invoice.paid', paid));
    orders = await orderRows(subscriptionId);
    expect(orders.map((o: { status: string }) => o.status)).toEqual(['PAID', 'PAID']);
    expect(await readSubscription(subscriptionId)).toMatchObject({ status: 'ACTIVE', latestOrderId: orders[1].id, currentPeriodEnd: new Date(paid.lines.data[0]!.period.end * 1000).toISOString() });
    expect((await db()('subscriptions').where({ id: subscriptionId }).first()).failed_attempts).toBe(0);
    expect((await eventsAbout(orders[1].id))).toEqual(['order.failed', 'order.paid']);
  });

  it('Stripe gives up (canceled for payment_failed) → EXPIRED with subscription.expired; access stops', async () => {
    const email = 'gaveup@example.com';
    const { stripeSub, subscriptionId } = await subscribe(email);
    await deliver(stripe.invoiceEvent('invoice.payment_failed', stripe.renew(stripeSub.id, 'failed')));
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.deleted', stripe.giveUp(stripeSub.id)))).body.outcome).toBe('applied');
    expect((await readSubscription(subscriptionId)).status).toBe('EXPIRED');
    expect((await eventsAbout(subscriptionId)).at(-1)).toBe('subscription.expired');
    expect(await entitled(email)).toBe(false);
  });
});

describe('pause, resume and cancel now on Stripe', () => {
  it('admin pause → Stripe pause_collection (void) → PAUSED; resume → pause_collection cleared → ACTIVE', async () => {
    const email = 'pause@example.com';
    const { stripeSub, subscriptionId } = await subscribe(email);
    const before = stripe.requests.length;
    const paused = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/pause`).send();
    expect(paused.status).toBe(200);
    expect(paused.body.data.status).toBe('PAUSED');
    expect(stripe.requests[before]).toMatchObject({ method: 'POST', path: `/v1/subscriptions/${stripeSub.id}`, body: { pause_collection: { behavior: 'void' } } });
    expect(stripe.subscriptions.get(stripeSub.id)!.pause_collection).toMatchObject({ behavior: 'void' });
    expect(await entitled(email)).toBe(false);
    // Pausing again is a no-op in Kassa and makes no Stripe call.
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/pause`).send()).status).toBe(200);
    expect(stripe.requests.length).toBe(before + 1);

    const resumed = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/resume`).send();
    expect(resumed.body.data.status).toBe('ACTIVE');
    expect(stripe.requests[before + 1]).toMatchObject({ path: `/v1/subscriptions/${stripeSub.id}`, body: { pause_collection: '' } });
    expect(stripe.subscriptions.get(stripeSub.id)!.pause_collection).toBeNull();
    expect(await entitled(email)).toBe(true);
    expect((await eventsAbout(subscriptionId)).slice(-2)).toEqual(['subscription.updated', 'subscription.updated']);
  });

  it('a pause made in the Stripe Dashboard arrives as customer.subscription.updated → PAUSED', async () => {
    const { stripeSub, subscriptionId } = await subscribe('dashboard-pause@example.com');
    const changed = stripe.changeInDashboard(stripeSub.id, { pause_collection: { behavior: 'mark_uncollectible', resumes_at: null } });
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', changed))).body.outcome).toBe('applied');
    expect((await readSubscription(subscriptionId)).status).toBe('PAUSED');
  });

  it('cancel now → Stripe cancels (DELETE) → CANCELED with subscription.ended; the deleted event then changes nothing', async () => {
    const { stripeSub, subscriptionId } = await subscribe('cancel-now@example.com');
    const res = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'CANCELED' });
    expect(stripe.subscriptions.get(stripeSub.id)!.status).toBe('canceled');
    await deliver(stripe.subscriptionEvent('customer.subscription.deleted', stripe.subscriptions.get(stripeSub.id)!));
    expect((await eventsAbout(subscriptionId)).filter((t) => t === 'subscription.ended')).toHaveLength(1);
  });

  it('cancel now of a subscription already set to cancel at period end is CANCELED (not ENDED)', async () => {
    const { stripeSub, subscriptionId } = await subscribe('cancel-twice@example.com');
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: true })).status).toBe(200);
    const now = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(now.body.data).toMatchObject({ status: 'CANCELED' });
    await deliver(stripe.subscriptionEvent('customer.subscription.deleted', stripe.subscriptions.get(stripeSub.id)!));
    expect((await readSubscription(subscriptionId)).status).toBe('CANCELED');
  });

  it('cancel now whose answer was lost: the retry finds the subscription already canceled (Stripe ignores idempotency keys on DELETE) and that is success', async () => {
    const { stripeSub, subscriptionId } = await subscribe('cancel-lost-answer@example.com');
    // Stripe cancels, the answer never arrives; the SDK's retry DELETE gets Stripe's answer for a canceled subscription.
    stripe.failNext('answerThenHang', 1, `/v1/subscriptions/${stripeSub.id}`);
    const res = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'CANCELED' });
    expect(stripe.requests.filter((r) => r.method === 'DELETE' && r.path === `/v1/subscriptions/${stripeSub.id}`)).toHaveLength(2);
    expect((await eventsAbout(subscriptionId)).filter((t) => t === 'subscription.ended')).toHaveLength(1);
  });

  it('cancel now answered 503 after Stripe canceled (every answer lost): the merchant\'s retry is a success, not a 409', async () => {
    const { stripeSub, subscriptionId } = await subscribe('cancel-retry-after-503@example.com');
    stripe.failNext('answerThenHang', 1, `/v1/subscriptions/${stripeSub.id}`);
    stripe.failNext('hang', 2, `/v1/subscriptions/${stripeSub.id}`);
    const lost = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(lost.status).toBe(503);
    expect(stripe.subscriptions.get(stripeSub.id)!.status).toBe('canceled');
    expect((await readSubscription(subscriptionId)).status).toBe('ACTIVE');
    const retry = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(retry.status).toBe(200);
    expect(retry.body.data).toMatchObject({ status: 'CANCELED' });
    await deliver(stripe.subscriptionEvent('customer.subscription.deleted', stripe.subscriptions.get(stripeSub.id)!));
    expect((await eventsAbout(subscriptionId)).filter((t) => t === 'subscription.ended')).toHaveLength(1);
  });

  it('cancel now of a subscription Stripe does not have at all is still refused (409), nothing changed', async () => {
    const { stripeSub, subscriptionId } = await subscribe('cancel-missing@example.com');
    stripe.subscriptions.delete(stripeSub.id);
    const res = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(res.status).toBe(409);
    expect((await readSubscription(subscriptionId)).status).toBe('ACTIVE');
  });

  it("the buyer's manage page cancels at period end through Stripe", async () => {
    const { stripeSub, subscriptionId } = await subscribe('manage@example.com');
    const token = (await db()('subscriptions').where({ id: subscriptionId }).first()).manage_token as string;
    const res = await ctx.merchant.post(`/subscriptions/manage/${token}/cancel`).type('form').send({ confirm: 'yes' });
    expect(res.status).toBe(200);
    expect(res.text).toContain('will end at the end of the paid period');
    expect(stripe.subscriptions.get(stripeSub.id)!.cancel_at_period_end).toBe(true);
    expect((await readSubscription(subscriptionId)).cancelAtPeriodEnd).toBe(true);
  });
});

describe('Stripe unreachable on a subscription change', () => {
  it.each([
    ['cancel at period end', { path: 'cancel', body: { atPeriodEnd: true } }],
    ['cancel now', { path: 'cancel', body: { atPeriodEnd: false } }],
    ['pause', { path: 'pause', body: undefined }],
  ])('%s answers 503 and changes nothing in Kassa (nor in Stripe); the retry goes through', async (_name, change) => {
    const { stripeSub, subscriptionId } = await subscribe(`down-${change.path}-${String(change.body?.atPeriodEnd)}@example.com`);
    const before = { sub: await readSubscription(subscriptionId), events: await eventsAbout(subscriptionId), stripe: stripe.subscriptions.get(stripeSub.id) };
    stripe.failNext('error500', 3); // the first attempt and the SDK's two retries
    const res = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/${change.path}`).send(change.body);
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
    expect(await readSubscription(subscriptionId)).toEqual(before.sub);
    expect(await eventsAbout(subscriptionId)).toEqual(before.events);
    expect(stripe.subscriptions.get(stripeSub.id)).toEqual(before.stripe);
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/${change.path}`).send(change.body)).status).toBe(200);
  });

  it("Stripe's 429 on a change and on a read-back is retried after its Retry-After, with the same idempotency key", async () => {
    const { stripeSub, subscriptionId } = await subscribe('rate-limited@example.com');
    stripe.failNext('rateLimit:0', 2, `/v1/subscriptions/${stripeSub.id}`);
    const res = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/pause`).send();
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('PAUSED');
    const attempts = stripe.requests.filter((r) => r.method === 'POST' && r.path === `/v1/subscriptions/${stripeSub.id}`);
    expect(attempts.length).toBe(3);
    expect(new Set(attempts.map((r) => r.idempotencyKey)).size).toBe(1);
    const event = stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get(stripeSub.id)!);
    stripe.failNext('rateLimit:0', 1, `/v1/subscriptions/${stripeSub.id}`);
    expect((await deliver(event)).status).toBe(200);
  });

  it("the buyer's manage page answers a 503 page and changes nothing", async () => {
    const { subscriptionId } = await subscribe('manage-down@example.com');
    const token = (await db()('subscriptions').where({ id: subscriptionId }).first()).manage_token as string;
    stripe.failNext('hang', 3);
    const res = await ctx.merchant.post(`/subscriptions/manage/${token}/cancel`).type('form').send({ confirm: 'yes' });
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect((await readSubscription(subscriptionId)).cancelAtPeriodEnd).toBe(false);
  });

  it('an invoice event whose invoice cannot be read back answers 503 and is not remembered (Stripe redelivers it)', async () => {
    const { stripeSub, subscriptionId } = await subscribe('event-down@example.com');
    const event = stripe.invoiceEvent('invoice.paid', stripe.renew(stripeSub.id, 'paid'));
    stripe.failNext('error500', 3);
    expect((await deliver(event)).status).toBe(503);
    expect((await orderRows(subscriptionId)).length).toBe(1);
    expect((await deliver(event)).body.outcome).toBe('applied');
    expect((await orderRows(subscriptionId)).length).toBe(2);
  });
});

describe('duplicate, replayed and out-of-order Billing events', () => {
  it('a duplicated invoice.paid (same event id) and a replay under another event id make one renewal order', async () => {
    const { stripeSub, subscriptionId } = await subscribe('dup-invoice@example.com');
    const invoice = stripe.renew(stripeSub.id, 'paid');
    const event = stripe.invoiceEvent('invoice.paid', invoice);
    expect((await deliver(event)).body.outcome).toBe('applied');
    expect((await deliver(event)).body.outcome).toBe('duplicate');
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    // A late payment_failed of the same invoice: Stripe has it paid now, nothing changes.
    expect((await deliver(stripe.invoiceEvent('invoice.payment_failed', { ...invoice, status: 'open' }))).status).toBe(200);
    const orders = await orderRows(subscriptionId);
    expect(orders.map((o: { status: string }) => o.status)).toEqual(['PAID', 'PAID']);
    expect((await eventsAbout(orders[1].id))).toEqual(['order.paid']);
  });

  it('renewal invoices arriving in reverse order map to their own periods; the period only moves forward', async () => {
    const { stripeSub, subscriptionId } = await subscribe('reverse@example.com');
    const first = stripe.renew(stripeSub.id, 'paid');
    const second = stripe.renew(stripeSub.id, 'paid');
    await deliver(stripe.invoiceEvent('invoice.paid', second));
    await deliver(stripe.invoiceEvent('invoice.paid', first));
    const orders = await orderRows(subscriptionId);
    expect(orders.map((o: { billing_period: number; status: string }) => [o.billing_period, o.status])).toEqual([
      [0, 'PAID'],
      [1, 'PAID'],
      [2, 'PAID'],
    ]);
    expect(await readSubscription(subscriptionId)).toMatchObject({ latestOrderId: orders[2].id, currentPeriodEnd: new Date(second.lines.data[0]!.period.end * 1000).toISOString() });
  });

  it('a stale customer.subscription.updated (still active) after deleted leaves it ended', async () => {
    const { stripeSub, subscriptionId } = await subscribe('stale-update@example.com');
    const activeCopy = stripe.subscriptions.get(stripeSub.id)!;
    await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', activeCopy))).status).toBe(200);
    expect((await readSubscription(subscriptionId)).status).toBe('CANCELED');
  });

  it('subscription events that arrive before checkout.session.completed start the subscription from the checkout first', async () => {
    const res = await create({}, 'early-events');
    const stripeSessionId = (await sessionRow(res.body.data.id)).processor_session_id as string;
    const paid = stripe.complete(stripeSessionId, { email: 'early@example.com' });
    const sub = stripe.subscriptionOf(stripeSessionId);
    const invoice = stripe.renew(sub.id, 'paid');
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).body.outcome).toBe('applied');
    const subscriptionId = (await db()('subscriptions').where({ processor_subscription_id: sub.id }).first()).id as string;
    expect((await orderRows(subscriptionId)).map((o: { billing_period: number }) => o.billing_period)).toEqual([0, 1]);
    // The late checkout event changes nothing.
    await deliver(stripe.event('checkout.session.completed', paid));
    expect((await orderRows(subscriptionId)).length).toBe(2);
    expect((await eventsAbout(subscriptionId)).filter((t) => t === 'subscription.created')).toHaveLength(1);
  });

  it('a billing cycle moved in the Stripe Dashboard: the next cycle invoice is the next period, and periods count from the new anchor', async () => {
    const { stripeSub, subscriptionId } = await subscribe('anchor@example.com');
    const item = stripeSub.items.data[0]!;
    const anchor = item.current_period_start + 5 * 86400;
    const end = stripePeriodEnd(anchor, 'month', 1, 1);
    stripe.changeInDashboard(stripeSub.id, { billing_cycle_anchor: anchor, items: { ...stripeSub.items, data: [{ ...item, current_period_start: anchor, current_period_end: end }] } });
    const first = stripe.renew(stripeSub.id, 'paid');
    const second = stripe.renew(stripeSub.id, 'paid');
    await deliver(stripe.invoiceEvent('invoice.paid', first));
    await deliver(stripe.invoiceEvent('invoice.paid', second));
    await deliver(stripe.invoiceEvent('invoice.paid', first));
    const orders = await orderRows(subscriptionId);
    expect(orders.map((o: { billing_period: number }) => o.billing_period)).toEqual([0, 1, 2]);
    expect((await readSubscription(subscriptionId)).currentPeriodEnd).toBe(new Date(second.lines.data[0]!.period.end * 1000).toISOString());
  });

  it('the first invoice (subscription_create) is the checkout order, not a renewal', async () => {
    const { stripeSessionId, subscriptionId } = await subscribe('first-invoice@example.com');
    const firstInvoice = stripe.invoices.get(stripe.sessions.get(stripeSessionId)!.invoice as string)!;
    expect((await deliver(stripe.invoiceEvent('invoice.paid', firstInvoice))).body.outcome).toBe('ignored');
    expect((await orderRows(subscriptionId)).length).toBe(1);
  });

  it("ignores Billing events of subscriptions Kassa did not create (another integration's)", async () => {
    const { stripeSub } = await subscribe('foreign@example.com');
    const foreign = stripe.changeInDashboard(stripeSub.id, { metadata: {} });
    stripe.subscriptions.set('sub_foreign', { ...foreign, id: 'sub_foreign' });
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get('sub_foreign')!))).body.outcome).toBe('ignored');
  });
});

describe.skipIf(!onPostgres)(skippedUnless('races of Billing events and subscription changes', 'postgresOnly'), () => {
  it('concurrent deliveries of one invoice.paid (and of replays and a subscription update) make one renewal order — 10 rounds', async () => {
    const { stripeSub, subscriptionId } = await subscribe('race-invoice@example.com');
    for (let round = 1; round <= 10; round++) {
      const invoice = stripe.renew(stripeSub.id, 'paid');
      const event = stripe.invoiceEvent('invoice.paid', invoice);
      const replay = stripe.invoiceEvent('invoice.paid', invoice);
      const update = stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get(stripeSub.id)!);
      const answers = await Promise.all([deliver(event), deliver(replay), deliver(event), deliver(update), deliver(replay)]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      const orders = await orderRows(subscriptionId);
      expect(orders.length).toBe(round + 1);
      expect((await eventsAbout(orders[round].id))).toEqual(['order.paid']);
    }
  });

  it('concurrent deliveries of one proration invoice.paid (and of replays) make one order — 10 rounds', async () => {
    const { stripeSub, subscriptionId } = await subscribe('race-proration@example.com');
    for (let round = 1; round <= 10; round++) {
      const invoice = stripe.invoiceOutsideCycle(stripeSub.id, 'subscription_update', 100 + round);
      const event = stripe.invoiceEvent('invoice.paid', invoice);
      const replay = stripe.invoiceEvent('invoice.paid', invoice);
      const answers = await Promise.all([deliver(event), deliver(replay), deliver(event), deliver(replay)]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      const orders = await db()('orders').where({ subscription_id: subscriptionId, amount_cents: 100 + round });
      expect(orders.length).toBe(1);
      expect(await eventsAbout(orders[0].id)).toEqual(['order.paid']);
    }
  });

  it('an admin pause racing a Stripe event ends in the state Stripe has — 10 rounds', async () => {
    const { stripeSub, subscriptionId } = await subscribe('race-pause@example.com');
    for (let round = 0; round < 10; round++) {
      const pause = round % 2 === 0;
      const [answer] = await Promise.all([
        ctx.admin.post(`/v1/subscriptions/${subscriptionId}/${pause ? 'pause' : 'resume'}`).send(),
        deliver(stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get(stripeSub.id)!)),
      ]);
      expect(answer.status).toBe(200);
      await deliver(stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get(stripeSub.id)!));
      const stripePaused = stripe.subscriptions.get(stripeSub.id)!.pause_collection !== null;
      expect((await readSubscription(subscriptionId)).status).toBe(stripePaused ? 'PAUSED' : 'ACTIVE');
    }
  });
});
