/**
 * Plan and seat changes of Stripe-billed subscriptions (issue 39, item 3, Stripe rail), end to end
 * against the Stripe-shaped server (./stripe-server.ts: subscription updates of the item, with
 * `always_invoice` prorations to the second, one rounding per line, and `error_if_incomplete`):
 * the preview (Kassa's proration) equals Stripe's proration invoice, and Kassa's order is that
 * invoice's lines (what Stripe collects = the order's total); `invoice.paid` of it writes nothing
 * more; a downgrade is Stripe's unprorated item change, applied by Kassa at the renewal Stripe
 * bills; seats; a declined card changes nothing; the portal's plan change; on PostgreSQL, rounds
 * of four concurrent identical changes on two pools (one Stripe update, one charge); a property
 * run of random prices, seats and seconds (preview = Stripe invoice = order); a trial; 503.
 */
import fc from 'fast-check';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { onSecondPool } from '../harness/second-pool.js';
import { FakeStripe } from './stripe-server.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';
const ORIGIN = 'http://merchant.test';

let ctx: TestContext;
let stripe: FakeStripe;
let basic: string;
let pro: string;
let team: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({ env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '2000' } });
  const basicProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic' });
  const proProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' });
  basic = (await ctx.services.catalog.createPrice(basicProduct.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  pro = (await ctx.services.catalog.createPrice(proProduct.id, { amount: 3000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  team = (await ctx.services.catalog.createPrice(proProduct.id, { amount: 1234, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
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
const preview = (id: string, body: object) => api('post', `/v1/subscriptions/${id}/change/preview`).send(body);
const change = (id: string, body: object) => api('post', `/v1/subscriptions/${id}/change`).send(body);
const events = async (type: string) =>
  (await db()('webhook_events').where({ type }).orderBy('seq')).map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>);
const changeOrders = (subscriptionId: string) => db()('orders').where({ subscription_id: subscriptionId }).whereNull('billing_period');
const lastRequest = (path: string) => [...stripe.requests].reverse().find((r) => r.method === 'POST' && r.path === path)!;

/** A subscription bought through Stripe Checkout: Kassa's id and Stripe's subscription. */
async function subscribe(pricingId: string, quantity = 1) {
  const created = await api('post', '/v1/checkout-sessions').set('Idempotency-Key', `stripe-plan-${++n}`).send({ pricingId, customerEmail: `stripeplan${n}@example.com`, quantity });
  expect(created.status).toBe(201);
  const stripeSessionId = (await db()('checkout_sessions').where({ id: created.body.data.id }).first()).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email: `stripeplan${n}@example.com` });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const row = await db()('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
  return { id: row.id as string, customerId: row.customer_id as string, stripeSub: stripe.subscriptionOf(stripeSessionId) };
}

describe('plan changes of Stripe-billed subscriptions', () => {
  it('an upgrade half way: Stripe prorates at the preview’s second with always_invoice; the order is Stripe’s invoice lines, equal to the preview', async () => {
    at('2026-04-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    at('2026-04-16T00:00:00.000Z');
    const p = await preview(id, { priceId: pro });
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({ effective: 'IMMEDIATE', prorationDate: '2026-04-16T00:00:00.000Z', amountDueCents: 1000, nextRenewalAmountCents: 3000 });
    expect(p.body.data.lines.map((l: any) => l.amountCents)).toEqual([-500, 1500]);

    at('2026-04-16T00:00:07.000Z');
    const c = await change(id, { priceId: pro, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
    expect(c.status).toBe(200);
    expect(c.body.data.subscription).toMatchObject({ priceId: pro, quantity: 1, amountCents: 3000, productName: 'Pro', scheduledChange: null, currentPeriodEnd: '2026-05-01T00:00:00.000Z' });
    // Stripe's request: the one item, a price of a new Stripe product named Pro, proration at the preview's second.
    const update = lastRequest(`/v1/subscriptions/${stripeSub.id}`);
    expect(update.body).toMatchObject({
      items: [{ id: stripeSub.items.data[0]!.id, quantity: '1', price_data: { currency: 'usd', unit_amount: '3000', recurring: { interval: 'month', interval_count: '1' } } }],
      proration_behavior: 'always_invoice',
      proration_date: String(Date.parse('2026-04-16T00:00:00.000Z') / 1000),
      payment_behavior: 'error_if_incomplete',
    });
    expect(update.idempotencyKey).toMatch(new RegExp(`^kassa_subscription_plan_${id}_\\d+_${Date.parse('2026-04-16T00:00:00.000Z') / 1000}$`));
    const product = stripe.products.get((update.body.items as any)[0].price_data.product)!;
    expect(product.name).toBe('Pro');
    const live = stripe.subscriptions.get(stripeSub.id)!;
    expect(live.items.data[0]).toMatchObject({ quantity: 1, price: { unit_amount: 3000, product: product.id } });

    // Stripe's invoice: the two proration lines; what Stripe collected is Kassa's order.
    const invoice = stripe.invoices.get(live.latest_invoice as string)!;
    expect(invoice).toMatchObject({ billing_reason: 'subscription_update', status: 'paid', amount_paid: 1000 });
    expect(invoice.lines.data.map((l) => [l.description, l.amount])).toEqual([
      ['Unused time on Basic after 16 Apr 2026', -500],
      ['Remaining time on Pro after 16 Apr 2026', 1500],
    ]);
    const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
    expect(order).toMatchObject({ status: 'PAID', amountCents: invoice.amount_paid, subscriptionId: id, productName: 'Pro' });
    expect(order.lines.map((l: any) => [l.kind, l.description, l.amountCents])).toEqual(invoice.lines.data.map((l) => ['PRORATION', l.description, l.amount]));
    expect(order.lines.map((l: any) => l.amountCents)).toEqual(p.body.data.lines.map((l: any) => l.amountCents));
    const updated = (await events('subscription.updated')).filter((e) => e.subscription.subscriptionId === id);
    expect(updated.at(-1)!.subscription).toMatchObject({ priceId: pro, quantity: 1, amountCents: 3000, product: { name: 'Pro' } });

    // Stripe's events for the same change write nothing more: one order, no second subscription.updated.
    const updatesBefore = updated.length;
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', live))).status).toBe(200);
    expect(await changeOrders(id)).toHaveLength(1);
    expect((await events('subscription.updated')).filter((e) => e.subscription.subscriptionId === id)).toHaveLength(updatesBefore);

    // The renewal Stripe bills is the new price; Kassa's renewal order is that invoice.
    at('2026-05-01T00:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect(renewal.amount_paid).toBe(3000);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    const period1 = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(Number(period1.amount_cents)).toBe(3000);
  });

  it('an order from invoice.paid alone (Kassa’s answer lost) carries the same PRORATION lines', async () => {
    at('2026-06-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    at('2026-06-11T08:00:00.000Z');
    // The same change made on Stripe (as Kassa would), Kassa never hearing the answer: the webhook writes the order.
    const invoice = (() => {
      const s = stripe.subscriptions.get(stripeSub.id)!;
      stripe.changeInDashboard(stripeSub.id, { items: { ...s.items, data: [{ ...s.items.data[0]!, quantity: 2 }] } });
      return stripe.invoiceOutsideCycle(stripeSub.id, 'subscription_update', 700);
    })();
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    const [row] = await changeOrders(id);
    const order = (await api('get', `/v1/orders/${row.id}`)).body.data;
    expect(order.amountCents).toBe(700);
    expect(order.lines.map((l: any) => [l.kind, l.amountCents])).toEqual([['PRORATION', 700]]);
  });

  it('seats 3 → 5 at an odd second: Stripe’s lines equal the preview and an independent recomputation; renewals bill 5 × unit', async () => {
    at('2026-01-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(team, 3);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ quantity: 3, amountCents: 3702 });
    at('2026-01-21T13:17:42.000Z');
    const p = (await preview(id, { quantity: 5 })).body.data;
    const remaining = 902_538;
    const half = (x: number) => Math.sign(x) * Math.floor(Math.abs(x) + 0.5);
    const expected = [half((-3702 * remaining) / 2_678_400), half((6170 * remaining) / 2_678_400)];
    expect(p.lines.map((l: any) => l.amountCents)).toEqual(expected);
    const c = await change(id, { quantity: 5, prorationDate: p.prorationDate, expectedAmountDueCents: p.amountDueCents });
    expect(c.status).toBe(200);
    // A seat change keeps Stripe's price: only the quantity is sent.
    const update = lastRequest(`/v1/subscriptions/${stripeSub.id}`);
    expect((update.body.items as any)[0]).toEqual({ id: stripeSub.items.data[0]!.id, quantity: '5' });
    const invoice = stripe.invoices.get(stripe.subscriptions.get(stripeSub.id)!.latest_invoice as string)!;
    expect(invoice.lines.data.map((l) => l.amount)).toEqual(expected);
    expect(invoice.lines.data.map((l) => l.description)).toEqual(['Unused time on 3 × Pro after 21 Jan 2026', 'Remaining time on 5 × Pro after 21 Jan 2026']);
    const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(order.amountCents).toBe(p.amountDueCents);
    at('2026-02-01T00:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect(renewal.amount_paid).toBe(6170);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    const period1 = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(period1.lines ?? null).not.toBeUndefined();
    expect((await api('get', `/v1/orders/${period1.id}`)).body.data.lines).toEqual([expect.objectContaining({ kind: 'PRICE', quantity: '5', amountCents: 6170 })]);
  });

  it('a downgrade is Stripe’s unprorated item change; Kassa schedules it and applies it at the renewal Stripe bills', async () => {
    at('2026-03-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro);
    at('2026-03-10T00:00:00.000Z');
    const p = (await preview(id, { priceId: basic })).body.data;
    expect(p).toMatchObject({ effective: 'PERIOD_END', amountDueCents: 0, lines: [] });
    // (An immediate downgrade, a credit in Stripe's customer balance: stripe-credit-balance.test.ts.)
    const c = await change(id, { priceId: basic });
    expect(c.status).toBe(200);
    expect(c.body.data.orderId).toBeNull();
    expect(c.body.data.subscription).toMatchObject({ priceId: pro, amountCents: 3000, scheduledChange: { priceId: basic, amountCents: 1000 } });
    const update = lastRequest(`/v1/subscriptions/${stripeSub.id}`);
    expect(update.body).toMatchObject({ proration_behavior: 'none' });
    expect(update.body).not.toHaveProperty('proration_date');
    expect(stripe.subscriptions.get(stripeSub.id)!.items.data[0]!.price.unit_amount).toBe(1000);
    expect(stripe.itemUpdates.filter((u) => u.subscriptionId === stripeSub.id)).toEqual([expect.objectContaining({ prorationBehavior: 'none', invoiceId: null })]);
    expect(await changeOrders(id)).toHaveLength(0);
    // An upgrade on top of the scheduled downgrade is refused: Stripe would prorate from the scheduled plan.
    expect((await preview(id, { quantity: 2 })).status).toBe(409);
    expect((await change(id, { quantity: 2 })).status).toBe(409);

    at('2026-04-01T00:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect(renewal.amount_paid).toBe(1000);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    const s = (await api('get', `/v1/subscriptions/${id}`)).body.data;
    expect(s).toMatchObject({ priceId: basic, amountCents: 1000, productName: 'Basic', scheduledChange: null, currentPeriodEnd: '2026-05-01T00:00:00.000Z' });
    const period1 = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(Number(period1.amount_cents)).toBe(1000);
    expect(period1.product_name).toBe('Basic');
  });

  it('a scheduled downgrade dropped (a change back to the current plan) puts Stripe’s item back, unprorated', async () => {
    at('2026-03-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro, 2);
    at('2026-03-05T00:00:00.000Z');
    expect((await change(id, { quantity: 1 })).status).toBe(200);
    expect(stripe.subscriptions.get(stripeSub.id)!.items.data[0]!.quantity).toBe(1);
    const back = await change(id, { quantity: 2 });
    expect(back.status).toBe(200);
    expect(back.body.data.subscription).toMatchObject({ quantity: 2, amountCents: 6000, scheduledChange: null });
    expect(stripe.subscriptions.get(stripeSub.id)!.items.data[0]).toMatchObject({ quantity: 2, price: { unit_amount: 3000 } });
    expect(stripe.itemUpdates.filter((u) => u.subscriptionId === stripeSub.id).map((u) => [u.prorationBehavior, u.invoiceId])).toEqual([
      ['none', null],
      ['none', null],
    ]);
    expect(await changeOrders(id)).toHaveLength(0);
  });

  it('during a trial: Stripe’s item changes without proration, nothing charged; the first invoice after the trial is the new plan', async () => {
    const trialProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Trial plan' });
    const trialPrice = (await ctx.services.catalog.createPrice(trialProduct.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', trialDays: 14 })).id;
    at('2026-07-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(trialPrice);
    expect(stripe.subscriptions.get(stripeSub.id)!.status).toBe('trialing');
    at('2026-07-05T00:00:00.000Z');
    const c = await change(id, { priceId: pro, quantity: 2 });
    expect(c.status).toBe(200);
    expect(c.body.data.orderId).toBeNull();
    expect(c.body.data.subscription).toMatchObject({ priceId: pro, quantity: 2, amountCents: 6000, scheduledChange: null });
    expect(lastRequest(`/v1/subscriptions/${stripeSub.id}`).body).toMatchObject({ proration_behavior: 'none' });
    at('2026-07-15T00:00:00.000Z');
    const first = stripe.renew(stripeSub.id);
    expect(first.amount_paid).toBe(6000);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', first))).status).toBe(200);
    const period1 = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(Number(period1.amount_cents)).toBe(6000);
  });

  it('Stripe renewed but its invoice.paid has not reached Kassa: the change is refused (409), nothing changed; once the renewal is recorded it prorates in the new period', async () => {
    at('2026-05-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    at('2026-06-01T00:00:05.000Z');
    const renewal = stripe.renew(stripeSub.id);
    const r = await change(id, { priceId: pro });
    expect(r.status).toBe(409);
    expect(r.body.error.message).toContain('renewing');
    expect(stripe.itemUpdates.filter((u) => u.subscriptionId === stripeSub.id)).toHaveLength(0);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    at('2026-06-16T00:00:00.000Z');
    const p = (await preview(id, { priceId: pro })).body.data;
    expect(p).toMatchObject({ currentPeriodEnd: '2026-07-01T00:00:00.000Z', amountDueCents: 1000 });
    const c = await change(id, { priceId: pro, prorationDate: p.prorationDate, expectedAmountDueCents: p.amountDueCents });
    expect(c.status).toBe(200);
    expect((await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data.amountCents).toBe(1000);
  });

  it('a declined card: Stripe answers 402 (error_if_incomplete), nothing changes in Stripe or Kassa (409)', async () => {
    at('2026-08-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    at('2026-08-10T00:00:00.000Z');
    stripe.finalizeOutcome = 'failed';
    try {
      const r = await change(id, { priceId: pro });
      expect(r.status).toBe(409);
      expect(r.body.error.message).toContain('declined');
    } finally {
      stripe.finalizeOutcome = 'paid';
    }
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic, amountCents: 1000 });
    expect(stripe.subscriptions.get(stripeSub.id)!.items.data[0]!.price.unit_amount).toBe(1000);
    expect(await changeOrders(id)).toHaveLength(0);
    expect((await events('subscription.updated')).filter((e) => e.subscription.subscriptionId === id)).toHaveLength(0);
  });

  it('money check: for random prices, seats and seconds, Kassa’s preview = Stripe’s proration invoice = Kassa’s order, to the minor unit (15 runs)', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Scale' });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 1000, max: 250_000 }),
        fc.integer({ min: 1, max: 2_678_399 }),
        async (q1, extra, unitAmount, offset) => {
          const price = (await ctx.services.catalog.createPrice(product.id, { amount: unitAmount, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
          at('2026-10-01T00:00:00.000Z');
          const { id, stripeSub } = await subscribe(basic, q1);
          ctx.clock.set(new Date(Date.parse('2026-10-01T00:00:00.000Z') + offset * 1000).toISOString());
          const p = (await preview(id, { priceId: price, quantity: q1 + extra })).body.data;
          const c = await change(id, { priceId: price, quantity: q1 + extra, prorationDate: p.prorationDate, expectedAmountDueCents: p.amountDueCents });
          expect(c.status).toBe(200);
          const invoice = stripe.invoices.get(stripe.subscriptions.get(stripeSub.id)!.latest_invoice as string)!;
          if (p.amountDueCents === 0) {
            // The same amount (another price of equal cost): nothing to invoice, on either side.
            expect(c.body.data.orderId).toBeNull();
            expect(invoice.billing_reason).toBe('subscription_create');
            return;
          }
          expect(invoice.billing_reason).toBe('subscription_update');
          expect(invoice.lines.data.map((l) => l.amount)).toEqual(p.lines.map((l: any) => l.amountCents));
          expect(invoice.amount_paid).toBe(p.amountDueCents);
          const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
          expect(order.amountCents).toBe(invoice.amount_paid);
        },
      ),
      { numRuns: 15 },
    );
  });

  it('Stripe unreachable (its key refused): 503, nothing changed in Stripe or Kassa', async () => {
    at('2026-08-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    at('2026-08-12T00:00:00.000Z');
    stripe.failNext('unauthorized', 1, `/v1/subscriptions/${stripeSub.id}`);
    const r = await change(id, { priceId: pro });
    expect(r.status).toBe(503);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic, amountCents: 1000 });
    expect(stripe.itemUpdates.filter((u) => u.subscriptionId === stripeSub.id)).toHaveLength(0);
    expect(await changeOrders(id)).toHaveLength(0);
  });

  it('the portal’s plan change works for a Stripe-billed subscription: the preview shown is what Stripe charges', async () => {
    const http = () => supertest(ctx.apps.merchant);
    at('2026-11-22T09:00:00.000Z');
    const { id, customerId } = await subscribe(basic);
    const link = await api('post', '/v1/customer-portal-sessions').send({ customerId, planChangePriceIds: [pro], allowQuantityChange: true });
    expect(link.status).toBe(201);
    const path = new URL(link.body.data.url).pathname;
    const entered = await http().post(path).set('Origin', ORIGIN).type('form').send({});
    expect(entered.status).toBe(303);
    const cookie = [entered.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!;
    const csrfOf = (html: string) => /name="csrf" value="([0-9a-f]{64})"/.exec(html)![1]!;
    const page = await http().get(`/portal/subscriptions/${id}/change`).set('Cookie', cookie);
    expect(page.status).toBe(200);
    at('2026-11-22T09:20:00.000Z');
    const shown = await http().post(`/portal/subscriptions/${id}/change`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ csrf: csrfOf(page.text), priceId: pro, quantity: '2', step: 'preview' });
    expect(shown.status).toBe(200);
    const hiddenOf = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(shown.text)![1]!;
    at('2026-11-22T09:20:04.000Z');
    const confirmed = await http()
      .post(`/portal/subscriptions/${id}/change`)
      .set('Cookie', cookie)
      .set('Origin', ORIGIN)
      .type('form')
      .send({ csrf: csrfOf(shown.text), priceId: pro, quantity: '2', prorationDate: hiddenOf('prorationDate'), expected: hiddenOf('expected'), step: 'confirm' });
    expect(confirmed.status).toBe(200);
    expect(confirmed.text).toContain('2 × Pro');
    const [row] = await changeOrders(id);
    expect(Number(row.amount_cents)).toBe(Number(hiddenOf('expected')));
    const stripeInvoice = [...stripe.invoices.values()].find((i) => i.billing_reason === 'subscription_update' && i.status === 'paid' && i.amount_paid === Number(row.amount_cents));
    expect(stripeInvoice).toBeDefined();
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: pro, quantity: 2, amountCents: 6000 });
  });
});

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
describe.skipIf(!onPostgres)('races on PostgreSQL (separate pools)', () => {
  const second = onSecondPool(() => ctx);

  it('four concurrent identical changes from one preview: one Stripe update, one charge, one order (15 rounds)', async () => {
    const ROUNDS = 15;
    const failed: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      at('2026-09-01T00:00:00.000Z');
      const { id, stripeSub } = await subscribe(basic);
      at('2026-09-11T00:00:00.000Z');
      const q = await ctx.services.subscriptions.previewChange(id, { quantity: 2 }, { orgId: ctx.orgA.orgId });
      const request = { quantity: 2, prorationDate: q.prorationDate, expectedAmountDueCents: q.amountDue };
      const results = await Promise.allSettled([0, 1, 2, 3].map((i) => (i % 2 ? second.services : ctx.services).subscriptions.changePlan(id, request)));
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      const updates = stripe.itemUpdates.filter((u) => u.subscriptionId === stripeSub.id);
      const charges = [...stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'subscription_update' && i.status === 'paid');
      const orders = await changeOrders(id);
      const s = await db()('subscriptions').where({ id }).first();
      if (ok !== 1 || updates.length !== 1 || charges.length !== 1 || orders.length !== 1 || Number(orders[0].amount_cents) !== charges[0]!.amount_paid || Number(s.amount_cents) !== 2000) {
        failed.push(`round ${round}: ok ${ok}, Stripe updates ${updates.length}, charges ${charges.length}, orders ${orders.length}`);
      }
    }
    expect(failed).toEqual([]);
  });
});
