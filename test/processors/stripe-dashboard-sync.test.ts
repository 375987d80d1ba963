/**
 * Plan and seat changes made in the Stripe Dashboard (issue 39, "Changes made in Stripe's
 * Dashboard"), against the Stripe-shaped server (./stripe-server.ts): the Dashboard is Stripe's
 * API called without Kassa (an SDK client of its own). Stripe then sends
 * `customer.subscription.updated` (with `previous_attributes`) and, for a prorated change,
 * `invoice.paid` of a `subscription_update` invoice.
 * - seats changed on Kassa's own Stripe price: Kassa's quantity and amount follow, once
 *   (`subscription.updated`), and the proration invoice is one order of Stripe's lines;
 * - events out of order and twice: the subscription is read back, so an older event changes nothing;
 * - a price made in the Dashboard: Kassa keeps its plan, flags `processorMismatch` (one event),
 *   refuses a prorated change (409), and a PERIOD_END change sets Stripe's item back and clears it;
 * - Stripe refuses Kassa's archived inline prices in the Dashboard's price picker.
 */
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
/** The merchant in the Stripe Dashboard: Stripe's API, called without Kassa. */
let dashboard: Stripe;
let basic: string;
let pro: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = new URL(await stripe.start());
  ctx = await createTestContext({ env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base.toString(), STRIPE_TIMEOUT_MS: '2000' } });
  dashboard = new Stripe(SECRET_KEY, { host: base.hostname, port: Number(base.port), protocol: 'http', maxNetworkRetries: 0 });
  const basicProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic' });
  const proProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' });
  basic = (await ctx.services.catalog.createPrice(basicProduct.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  pro = (await ctx.services.catalog.createPrice(proProduct.id, { amount: 3000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
});
afterAll(async () => {
  await stripe?.stop();
  await ctx?.close();
});

let n = 0;
const db = () => ctx.testDb.database.db;
const at = (iso: string) => ctx.clock.set(iso);
const api = (method: 'get' | 'post', path: string) => ctx.merchant[method](path).set('X-API-Key', ctx.orgA.apiKey);
const deliver = (event: Stripe.Event) => {
  const signed = stripe.signed(event);
  return ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
};
const events = async (type: string, subscriptionId: string) =>
  (await db()('webhook_events').where({ type }).orderBy('seq'))
    .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>)
    .filter((e) => e.subscription?.subscriptionId === subscriptionId);
const subscription = async (id: string) => (await api('get', `/v1/subscriptions/${id}`)).body.data;
const changeOrders = (subscriptionId: string) => db()('orders').where({ subscription_id: subscriptionId }).whereNull('billing_period');

async function subscribe(pricingId: string, quantity = 1) {
  const created = await api('post', '/v1/checkout-sessions').set('Idempotency-Key', `stripe-dash-${++n}`).send({ pricingId, customerEmail: `stripedash${n}@example.com`, quantity });
  expect(created.status).toBe(201);
  const stripeSessionId = (await db()('checkout_sessions').where({ id: created.body.data.id }).first()).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email: `stripedash${n}@example.com` });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const row = await db()('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
  return { id: row.id as string, stripeSub: stripe.subscriptionOf(stripeSessionId) };
}

/** The Dashboard's item update: the price picked (or the item's own) and the seats. */
function dashboardUpdate(sub: Stripe.Subscription, item: { price?: string; quantity?: number }, proration: 'none' | 'always_invoice') {
  const current = stripe.subscriptions.get(sub.id)!;
  return dashboard.subscriptions.update(sub.id, { items: [{ id: current.items.data[0]!.id, price: item.price ?? current.items.data[0]!.price.id, ...(item.quantity !== undefined && { quantity: item.quantity }) }], proration_behavior: proration });
}

describe('changes made in the Stripe Dashboard', () => {
  it('seats changed on Kassa’s price: quantity and amount follow once; the proration invoice is one order of Stripe’s lines', async () => {
    at('2026-04-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    at('2026-04-16T00:00:00.000Z');
    const updated = await dashboardUpdate(stripeSub, { quantity: 3 }, 'always_invoice');
    const event = stripe.lastEvent('customer.subscription.updated', stripeSub.id);
    // Stripe's event shape: the object now, and what it was (`previous_attributes.items`).
    expect((event.data as any).previous_attributes.items.data[0].quantity).toBe(1);
    expect((await deliver(event)).body.outcome).toBe('applied');
    expect(await subscription(id)).toMatchObject({ priceId: basic, quantity: 3, amountCents: 3000, productName: 'Basic' });
    expect((await subscription(id)).processorMismatch).toBeUndefined();
    const sent = await events('subscription.updated', id);
    expect(sent.at(-1)!.subscription).toMatchObject({ quantity: 3, amountCents: 3000 });
    const count = sent.length;

    // The same event again, and a later copy of it: nothing more.
    expect((await deliver(event)).body.outcome).toBe('duplicate');
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', updated))).status).toBe(200);
    expect(await events('subscription.updated', id)).toHaveLength(count);

    // The money: Stripe's proration invoice (paid now) is one order of its lines, delivered twice.
    const invoiceId = updated.latest_invoice as string;
    const invoice = stripe.invoices.get(invoiceId)!;
    expect(invoice).toMatchObject({ billing_reason: 'subscription_update', status: 'paid', amount_paid: 1000 });
    const paid = stripe.lastEvent('invoice.paid', invoiceId);
    expect((await deliver(paid)).body.outcome).toBe('applied');
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    const orders = await changeOrders(id);
    expect(orders).toHaveLength(1);
    const order = (await api('get', `/v1/orders/${orders[0].id}`)).body.data;
    expect(order).toMatchObject({ status: 'PAID', amountCents: 1000, subscriptionId: id });
    expect(order.lines.map((l: any) => [l.kind, l.description, l.amountCents])).toEqual(invoice.lines.data.map((l) => ['PRORATION', l.description, l.amount]));
  });

  it('events out of order: an older customer.subscription.updated applies nothing over a newer one', async () => {
    at('2026-05-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, 2);
    at('2026-05-03T00:00:00.000Z');
    await dashboardUpdate(stripeSub, { quantity: 5 }, 'none');
    const older = stripe.lastEvent('customer.subscription.updated', stripeSub.id);
    at('2026-05-03T00:01:00.000Z');
    await dashboardUpdate(stripeSub, { quantity: 4 }, 'none');
    const newer = stripe.lastEvent('customer.subscription.updated', stripeSub.id);
    expect(newer.created).toBeGreaterThan(older.created);
    expect((await deliver(newer)).body.outcome).toBe('applied');
    expect(await subscription(id)).toMatchObject({ quantity: 4, amountCents: 4000 });
    const count = (await events('subscription.updated', id)).length;
    // The older event arrives late: its copy says 5 seats, but Stripe's subscription says 4.
    expect((older.data.object as Stripe.Subscription).items.data[0]!.quantity).toBe(5);
    expect((await deliver(older)).status).toBe(200);
    expect(await subscription(id)).toMatchObject({ quantity: 4, amountCents: 4000 });
    expect(await events('subscription.updated', id)).toHaveLength(count);
    // No invoice was made (proration none): no order but the first.
    expect(await changeOrders(id)).toHaveLength(0);
  });

  it('Kassa’s own change is not applied twice when Stripe’s event for it arrives', async () => {
    at('2026-06-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    at('2026-06-11T00:00:00.000Z');
    const c = await api('post', `/v1/subscriptions/${id}/change`).send({ priceId: pro, quantity: 2 });
    expect(c.status).toBe(200);
    const count = (await events('subscription.updated', id)).length;
    expect((await deliver(stripe.lastEvent('customer.subscription.updated', stripeSub.id))).status).toBe(200);
    expect(await subscription(id)).toMatchObject({ priceId: pro, quantity: 2, amountCents: 6000 });
    expect((await subscription(id)).processorMismatch).toBeUndefined();
    expect(await events('subscription.updated', id)).toHaveLength(count);
    expect(await changeOrders(id)).toHaveLength(1);
  });

  it('a price made in the Dashboard: Kassa keeps its plan and flags the subscription; a PERIOD_END change sets Stripe back', async () => {
    at('2026-07-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    const item = stripe.subscriptions.get(stripeSub.id)!.items.data[0]!;
    // Kassa's inline price is archived: the Dashboard cannot pick it for another subscription's item either.
    await expect(dashboard.subscriptions.update(stripeSub.id, { items: [{ id: item.id, price: (await subscribe(pro)).stripeSub.items.data[0]!.price.id }], proration_behavior: 'none' })).rejects.toThrow(/inactive/);

    at('2026-07-05T00:00:00.000Z');
    const dashboardPrice = await dashboard.prices.create({ product: item.price.product as string, currency: 'usd', unit_amount: 1500, recurring: { interval: 'month' } });
    await dashboardUpdate(stripeSub, { price: dashboardPrice.id, quantity: 2 }, 'none');
    const event = stripe.lastEvent('customer.subscription.updated', stripeSub.id);
    expect((await deliver(event)).body.outcome).toBe('applied');
    const flagged = await subscription(id);
    expect(flagged).toMatchObject({ priceId: basic, quantity: 1, amountCents: 1000, processorMismatch: { reason: 'UNKNOWN_PROCESSOR_PRICE', processorPriceId: dashboardPrice.id, quantity: 2, detectedAt: '2026-07-05T00:00:00.000Z' } });
    const sent = await events('subscription.updated', id);
    expect(sent.at(-1)!.subscription.processorMismatch).toMatchObject({ processorPriceId: dashboardPrice.id });
    // Read again (a redelivery with a new id): flagged once.
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get(stripeSub.id)!))).status).toBe(200);
    expect(await events('subscription.updated', id)).toHaveLength(sent.length);

    // Kassa cannot quote a proration from Stripe's unknown price: 409, and Stripe is not called.
    const updatesBefore = stripe.itemUpdates.length;
    const refused = await api('post', `/v1/subscriptions/${id}/change/preview`).send({ priceId: pro });
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/PERIOD_END/);
    expect((await api('post', `/v1/subscriptions/${id}/change`).send({ priceId: pro })).status).toBe(409);
    expect(stripe.itemUpdates).toHaveLength(updatesBefore);

    // A change at the period's end sends Kassa's price again (unprorated): the flag clears.
    const back = await api('post', `/v1/subscriptions/${id}/change`).send({ priceId: pro, effective: 'PERIOD_END' });
    expect(back.status).toBe(200);
    expect(back.body.data.subscription.processorMismatch).toBeUndefined();
    const live = stripe.subscriptions.get(stripeSub.id)!.items.data[0]!;
    expect(live).toMatchObject({ quantity: 1, price: { unit_amount: 3000, active: false } });
    const count = (await events('subscription.updated', id)).length;
    expect((await deliver(stripe.lastEvent('customer.subscription.updated', stripeSub.id))).status).toBe(200);
    expect(await subscription(id)).toMatchObject({ priceId: basic, scheduledChange: { priceId: pro } });
    expect((await subscription(id)).processorMismatch).toBeUndefined();
    expect(await events('subscription.updated', id)).toHaveLength(count);
  });
});
