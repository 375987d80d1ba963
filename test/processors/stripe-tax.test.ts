/**
 * Tax rates on the Stripe rail (issue 39, item 4), end to end: Kassa's SDK client against the
 * Stripe-shaped server (./stripe-server.ts models `POST /v1/tax_rates`, `line_items[].tax_rates`,
 * `subscription_data.default_tax_rates` and Stripe's tax on the session and on each invoice).
 * Each Kassa rate becomes one Stripe tax rate (made once); the amount Stripe collects equals the
 * Kassa order's lines, for a payment, a subscription's first order and its renewal.
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
let priceId: string;
let planId: string;
let deRate: string;
let frRate: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({
    env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '500', WEBHOOK_ALLOW_LOOPBACK: 'true' },
  });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 1999, currency: 'EUR' })).id;
  const plan = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  planId = (await ctx.services.catalog.createPrice(plan.id, { amount: 1250, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  const tax = ctx.services.modules.tax.tax;
  deRate = (await tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' })).id;
  frRate = (await tax.create(ctx.orgA.orgId, { displayName: 'TVA', percentage: '20', country: 'FR', inclusive: true })).id;
});
afterAll(async () => {
  await stripe?.stop();
  await ctx?.close();
});

let keys = 0;
const create = (body: object) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `stripe-tax-${++keys}`).send({ pricingId: priceId, ...body });
const db = () => ctx.testDb.database.db;
const deliver = (event: Stripe.Event) => {
  const signed = stripe.signed(event);
  return ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
};
const order = async (id: string) => (await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
type Line = { kind: string; amountCents: number };
const sum = (lines: Line[]) => lines.reduce((s, l) => s + l.amountCents, 0);

async function completed(sessionId: string, email: string) {
  const stripeSessionId = (await db()('checkout_sessions').where({ id: sessionId }).first()).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  return { stripeSessionId, paid };
}

describe('tax rates on Stripe', () => {
  it('a payment: tax_rates on the line item; Stripe collects exactly the Kassa order (exclusive, made once)', async () => {
    ctx.clock.set('2026-12-01T10:00:00.000Z');
    const before = stripe.requests.length;
    const res = await create({ quantity: 3, customerTax: { country: 'DE' } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    // 3 × 19.99 = 59.97; 19 % = 11.3943 → 11.39
    expect(res.body.data.amount).toBe(5997 + 1139);
    const sent = stripe.requests.slice(before);
    const rateRequest = sent.find((r) => r.path === '/v1/tax_rates')!;
    expect(rateRequest.body).toMatchObject({ display_name: 'VAT', percentage: '19', inclusive: 'false', country: 'DE' });
    const stripeRateId = (await db()('tax_rates').where({ id: deRate }).first()).stripe_tax_rate_id as string;
    expect(stripeRateId).toMatch(/^txr_/);
    expect(sent.find((r) => r.path === '/v1/checkout/sessions')!.body).toMatchObject({ line_items: [{ tax_rates: [stripeRateId] }] });

    const { paid } = await completed(res.body.data.id, 'de@example.com');
    expect(paid.amount_total).toBe(7136);
    const session = (await ctx.merchant.get(`/v1/checkout-sessions/${res.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const o = await order(session.orderId);
    expect(o.amountCents).toBe(paid.amount_total);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 5997], ['TAX', 1139]]);
    expect(sum(o.lines)).toBe(paid.amount_total);

    // The next session reuses the Stripe tax rate.
    const again = stripe.requests.length;
    expect((await create({ customerTax: { country: 'DE' } })).status).toBe(201);
    expect(stripe.requests.slice(again).filter((r) => r.path === '/v1/tax_rates')).toEqual([]);
  });

  it('inclusive: Stripe collects the price, its amount_tax equals the TAX line’s included tax', async () => {
    const res = await create({ customerTax: { country: 'FR' } });
    expect(res.body.data.amount).toBe(1999);
    const { paid } = await completed(res.body.data.id, 'fr@example.com');
    expect(paid.amount_total).toBe(1999);
    const session = (await ctx.merchant.get(`/v1/checkout-sessions/${res.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const o = await order(session.orderId);
    expect(o.lines[1]).toMatchObject({ kind: 'TAX', amountCents: 0, tax: { rateId: frRate, inclusive: true, taxAmountCents: paid.total_details!.amount_tax } });
  });

  it('a subscription: default_tax_rates; the first order and the renewal equal what Stripe collects', async () => {
    ctx.clock.set('2026-12-01T10:00:00.000Z');
    const before = stripe.requests.length;
    const res = await create({ pricingId: planId, customerTax: { country: 'DE' } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.amount).toBe(1250 + 238); // 237.5 → 238
    const stripeRateId = (await db()('tax_rates').where({ id: deRate }).first()).stripe_tax_rate_id as string;
    expect(stripe.requests.slice(before).find((r) => r.path === '/v1/checkout/sessions')!.body).toMatchObject({ subscription_data: { default_tax_rates: [stripeRateId] } });
    const { stripeSessionId, paid } = await completed(res.body.data.id, 'sub@example.com');
    expect(paid.amount_total).toBe(1488);
    const row = await db()('subscriptions').where({ checkout_session_id: res.body.data.id }).first();
    const first = await order(row.initial_order_id);
    expect(first.amountCents).toBe(1488);

    const stripeSub = stripe.subscriptionOf(stripeSessionId);
    ctx.clock.set('2027-01-01T10:00:00.000Z');
    const invoice = stripe.renew(stripeSub.id);
    expect(invoice).toMatchObject({ status: 'paid', amount_paid: 1488 });
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    const renewal = await db()('orders').where({ subscription_id: row.id, billing_period: 1 }).first();
    const o = await order(renewal.id);
    expect(o.amountCents).toBe(invoice.amount_paid);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1250], ['TAX', 238]]);

    // A seat change of this exclusively taxed Stripe subscription (it was refused, 409, before
    // Stripe's per-line tax was held equal to the preview): preview = Stripe's invoice = order.
    ctx.clock.set('2027-01-10T10:00:00.000Z');
    const p = await ctx.merchant.post(`/v1/subscriptions/${row.id}/change/preview`).set('X-API-Key', ctx.orgA.apiKey).send({ quantity: 2 });
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    // 22 of 31 days remain: −1250 × 22/31 = −887, +2500 × 22/31 = 1774; 19 % per line: −169 + 337.
    expect(p.body.data.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRORATION', -887], ['PRORATION', 1774], ['TAX', 168]]);
    const c = await ctx.merchant.post(`/v1/subscriptions/${row.id}/change`).set('X-API-Key', ctx.orgA.apiKey).send({ quantity: 2, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    const prorationInvoice = stripe.invoices.get(stripe.subscriptions.get(stripeSub.id)!.latest_invoice as string)!;
    expect(prorationInvoice.amount_paid).toBe(887 * -1 + 1774 + 168);
    expect(prorationInvoice.lines.data.map((l) => l.taxes![0]!.amount)).toEqual([-169, 337]);
    const changeOrder = await order(c.body.data.orderId);
    expect(changeOrder.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual(p.body.data.lines.map((l: Line) => [l.kind, l.amountCents]));
    expect(changeOrder.amountCents).toBe(prorationInvoice.amount_paid);
  });
});
