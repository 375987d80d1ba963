/**
 * Stripe's minimum charge (docs/plan-changes.md "Stripe's minimum charge"), end to end with the
 * official `stripe` SDK against the Stripe-shaped server (./stripe-server.ts): an invoice whose
 * amount due is below the currency's minimum (0.50 USD) is marked paid with nothing charged and
 * its amount due becomes a debit on the customer (`invoice_too_small`), which the next invoice
 * collects (`starting_balance` > 0, `amount_due` = total + debit). Kassa's orders keep their lines
 * and add up to Stripe's `amount_paid`: the small invoice's order ends with a CREDIT line carrying
 * the amount to the next invoice (total 0), the next order with a BALANCE line of the debit. The
 * mirror of Stripe's customer balance (credits only) does not move.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
let sdk: Stripe;
let basic: string;
let plus: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  stripe.minimumCharge = true;
  const base = await stripe.start();
  const url = new URL(base);
  sdk = new Stripe(SECRET_KEY, { host: url.hostname, port: Number(url.port), protocol: 'http' });
  ctx = await createTestContext({ env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '2000' } });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic' });
  const plusProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic plus' });
  basic = (await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  plus = (await ctx.services.catalog.createPrice(plusProduct.id, { amount: 1100, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
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
const orderOf = async (orderId: string) => (await api('get', `/v1/orders/${orderId}`)).body.data;
const sum = (lines: Array<{ amountCents: number }>) => lines.reduce((s, l) => s + l.amountCents, 0);

async function subscribe(pricingId: string) {
  const email = `minimum${++n}@example.com`;
  const created = await api('post', '/v1/checkout-sessions').set('Idempotency-Key', `stripe-minimum-${n}-${randomBytes(4).toString('hex')}`).send({ pricingId, customerEmail: email });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const stripeSessionId = (await db()('checkout_sessions').where({ id: created.body.data.id }).first()).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const row = await db()('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
  return { id: row.id as string, stripeSub: stripe.subscriptionOf(stripeSessionId) };
}

describe('Stripe’s minimum charge: a small invoice marked paid, its amount carried to the next invoice', () => {
  it('an upgrade prorating to 0.34 USD: Stripe charges nothing and debits the customer; the renewal collects it; Kassa’s orders add up to amount_paid', async () => {
    at('2026-04-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic);
    // 10 of 30 days left: −1000 × 10/30 + 1100 × 10/30 = −333 + 367 = 34, below Stripe's 50.
    at('2026-04-21T00:00:00.000Z');
    const p = await api('post', `/v1/subscriptions/${id}/change/preview`).send({ priceId: plus });
    expect(p.status).toBe(200);
    expect(p.body.data.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([['PRORATION', -333], ['PRORATION', 367]]);
    expect(p.body.data.amountDueCents).toBe(34);
    const c = await api('post', `/v1/subscriptions/${id}/change`).send({ priceId: plus, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: 34 });
    expect(c.status, JSON.stringify(c.body)).toBe(200);

    // Stripe, read through the official SDK: the proration invoice is paid with nothing charged, the customer owes 34.
    const live = await sdk.subscriptions.retrieve(stripeSub.id);
    const small = await sdk.invoices.retrieve(live.latest_invoice as string);
    expect(small).toMatchObject({ billing_reason: 'subscription_update', status: 'paid', total: 34, amount_due: 34, amount_paid: 0, amount_remaining: 0 });
    const customer = live.customer as string;
    expect((await sdk.customers.retrieve(customer)) as Stripe.Customer).toMatchObject({ balance: 34 });
    const transactions = await sdk.customers.listBalanceTransactions(customer);
    expect(transactions.data.map((t) => [t.type, t.amount, t.invoice])).toEqual([['invoice_too_small', 34, small.id]]);

    // Kassa's order: the proration lines, then the amount carried to the next invoice; total = amount_paid (0).
    const order = await orderOf(c.body.data.orderId);
    expect(order.lines.map((l: { kind: string; description: string; amountCents: number }) => [l.kind, l.description, l.amountCents])).toEqual([
      ['PRORATION', expect.stringContaining('Unused time'), -333],
      ['PRORATION', expect.stringContaining('Remaining time'), 367],
      ['CREDIT', 'Carried to the next invoice (below Stripe’s minimum charge)', -34],
    ]);
    expect(order).toMatchObject({ status: 'PAID', amountCents: 0 });
    expect(sum(order.lines)).toBe(small.amount_paid);
    // Its invoice.paid (twice) writes no second order.
    const smallStored = stripe.invoices.get(small.id)!;
    expect((await deliver(stripe.invoiceEvent('invoice.paid', smallStored))).status).toBe(200);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', smallStored))).status).toBe(200);
    expect(await db()('orders').where({ subscription_id: id }).whereNull('billing_period')).toHaveLength(1);

    // The renewal: Stripe bills 1100 + the 34 owed; Kassa's order shows the debit drawn, total = amount_paid.
    at('2026-05-01T00:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect(renewal).toMatchObject({ total: 1100, starting_balance: 34, ending_balance: 0, amount_due: 1134, amount_paid: 1134, status: 'paid' });
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    const row = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    const period1 = await orderOf(row.id);
    expect(period1.lines.map((l: { kind: string; description: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([['PRICE', 1100], ['BALANCE', 34]]);
    expect(period1.lines[1].description).toBe('Balance from an earlier invoice (below Stripe’s minimum charge)');
    expect(period1.amountCents).toBe(renewal.amount_paid);
    expect((await sdk.customers.retrieve(customer)) as Stripe.Customer).toMatchObject({ balance: 0 });
    // Stripe collected 1134 in all; Kassa's orders of the subscription add up to the same (the checkout's 1000 aside).
    const orders = await db()('orders').where({ subscription_id: id });
    expect(orders.reduce((t: number, o: { amount_cents: string | number }) => t + Number(o.amount_cents), 0)).toBe(1000 + 0 + 1134);
    // The mirror (credits only) never moved: no credit was added or drawn.
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data.customerBalanceCents).toBe(0);
  });
});
