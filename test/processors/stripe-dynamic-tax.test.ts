/**
 * Tax on the Stripe rail when the merchant does not know the buyer's location (issue 39, item 4):
 * Kassa sends the organization's rates as Stripe's `dynamic_tax_rates` with a required billing
 * address, Stripe (./stripe-server.ts) applies the rate of the address the buyer enters on its
 * page, and Kassa writes the order from the rate Stripe chose: its lines equal what Stripe
 * collected, the session records the buyer's country. A subscription's renewals carry the same
 * rate (Stripe's subscription item tax rate). Rates Stripe cannot choose by address are a 400.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';
import { dynamicTaxRefusal } from '../../src/processors/stripe-processor.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
let priceId: string;
let planId: string;
let deRate: string;
let frRate: string;
let caRate: string;
let base: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  base = await stripe.start();
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
  caRate = (await tax.create(ctx.orgA.orgId, { displayName: 'Sales tax', percentage: '7.25', country: 'US', region: 'CA' })).id;
});
afterAll(async () => {
  await stripe?.stop();
  await ctx?.close();
});

let keys = 0;
const create = (body: object, apiKey = ctx.orgA.apiKey) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', apiKey).set('Idempotency-Key', `stripe-dyntax-${++keys}`).send({ pricingId: priceId, ...body });
const db = () => ctx.testDb.database.db;
const deliver = (event: Stripe.Event) => {
  const signed = stripe.signed(event);
  return ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
};
const readSession = async (id: string) => (await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
const order = async (id: string) => (await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
type Line = { kind: string; amountCents: number; tax?: Record<string, unknown> };
const sum = (lines: Line[]) => lines.reduce((s, l) => s + l.amountCents, 0);
const stripeRateOf = async (rateId: string) => (await db()('tax_rates').where({ id: rateId }).first()).stripe_tax_rate_id as string;

/** The buyer pays on Stripe's page with this billing address; the completed event is delivered. */
async function paidWithAddress(sessionId: string, address: { country: string; state?: string }) {
  const stripeSessionId = (await db()('checkout_sessions').where({ id: sessionId }).first()).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email: `${address.country.toLowerCase()}@example.com`, address });
  const event = stripe.event('checkout.session.completed', paid);
  expect((await deliver(event)).body.outcome).toBe('applied');
  const session = await readSession(sessionId);
  return { stripeSessionId, paid, event, session, order: await order(session.orderId) };
}

describe('Stripe dynamic tax rates: the buyer enters the address on Stripe’s page', () => {
  it('a payment without a country: every rate is a candidate; Stripe applies the address’s rate and the order equals what it collected', async () => {
    ctx.clock.set('2026-12-01T10:00:00.000Z');
    const before = stripe.requests.length;
    const res = await create({ quantity: 3 });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    // No location yet: the amount is before tax, and the session has no tax.
    expect(res.body.data.amount).toBe(5997);
    expect(res.body.data.tax ?? null).toBeNull();
    const sent = stripe.requests.slice(before).find((r) => r.path === '/v1/checkout/sessions')!.body as Record<string, unknown>;
    const candidates = [await stripeRateOf(deRate), await stripeRateOf(frRate), await stripeRateOf(caRate)];
    expect(candidates.every((id) => /^txr_/.test(id))).toBe(true);
    expect(sent).toMatchObject({ billing_address_collection: 'required' });
    expect([...((sent.line_items as Record<string, string[]>[])[0]!.dynamic_tax_rates ?? [])].sort()).toEqual([...candidates].sort());
    expect((sent.line_items as Record<string, unknown>[])[0]!.tax_rates).toBeUndefined();
    // The US rate was made with its state, as Stripe needs to match it.
    expect(stripe.taxRates.get(candidates[2]!)!.rate).toMatchObject({ country: 'US', state: 'CA' });

    const { paid, event, session, order: o } = await paidWithAddress(res.body.data.id, { country: 'DE' });
    // 3 × 19.99 = 59.97; 19 % = 11.3943 → 11.39
    expect(paid.amount_total).toBe(7136);
    expect(o.amountCents).toBe(paid.amount_total);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 5997], ['TAX', 1139]]);
    expect(o.lines[1].tax).toMatchObject({ rateId: deRate, country: 'DE', region: null, percentage: '19', taxAmountCents: 1139, reverseCharge: false });
    expect(sum(o.lines)).toBe(paid.amount_total);
    // The session now shows the buyer's country, the rate and the amount Stripe collected.
    expect(session).toMatchObject({ status: 'COMPLETE', amount: 7136, tax: { country: 'DE', region: null, reverseCharge: false, rates: [{ rateId: deRate, percentage: '19' }] } });

    // The same event again changes nothing.
    expect((await deliver(event)).body.outcome).toBe('duplicate');
    expect((await order(o.id)).lines).toHaveLength(2);
  });

  it('a US address: the rate of its state; another state: no tax', async () => {
    const ca = await create({});
    expect(ca.status).toBe(201);
    const paidCa = await paidWithAddress(ca.body.data.id, { country: 'US', state: 'CA' });
    // 19.99 × 7.25 % = 1.449275 → 1.45
    expect(paidCa.paid.amount_total).toBe(1999 + 145);
    expect(paidCa.order.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1999], ['TAX', 145]]);
    expect(paidCa.order.lines[1].tax).toMatchObject({ rateId: caRate, country: 'US', region: 'CA' });

    const ny = await create({});
    const paidNy = await paidWithAddress(ny.body.data.id, { country: 'US', state: 'NY' });
    expect(paidNy.paid.amount_total).toBe(1999);
    expect(paidNy.order.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1999]]);
    expect(paidNy.session).toMatchObject({ amount: 1999, tax: { country: 'US', region: 'NY', rates: [] } });
  });

  it('an address with no matching rate: no tax, the buyer’s country recorded', async () => {
    const res = await create({ quantity: 2 });
    const { paid, session, order: o } = await paidWithAddress(res.body.data.id, { country: 'CH' });
    expect(paid.amount_total).toBe(3998);
    expect(paid.total_details!.amount_tax).toBe(0);
    expect(o.amountCents).toBe(3998);
    expect(o.lines.map((l: Line) => l.kind)).toEqual(['PRICE']);
    expect(session.tax).toMatchObject({ country: 'CH', rates: [] });
  });

  it('an inclusive rate: Stripe collects the price; the TAX line shows the tax Stripe counted in it', async () => {
    const res = await create({});
    const { paid, order: o } = await paidWithAddress(res.body.data.id, { country: 'FR' });
    expect(paid.amount_total).toBe(1999);
    // 1999 × 20 / 120 = 333.17 → 333
    expect(o.lines[1]).toMatchObject({ kind: 'TAX', amountCents: 0, tax: { rateId: frRate, inclusive: true, taxAmountCents: paid.total_details!.amount_tax } });
    expect(paid.total_details!.amount_tax).toBe(333);
    expect(o.amountCents).toBe(1999);
  });

  it('a subscription without a country: the first order and the renewal carry the rate Stripe chose', async () => {
    ctx.clock.set('2026-12-01T10:00:00.000Z');
    const res = await create({ pricingId: planId });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.amount).toBe(1250);
    const sent = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)!.body as Record<string, Record<string, unknown>>;
    expect(sent.subscription_data!.default_tax_rates).toBeUndefined();
    expect(sent).toMatchObject({ billing_address_collection: 'required' });
    const dynamic = (sent.line_items as unknown as Record<string, string[]>[])[0]!.dynamic_tax_rates ?? [];
    expect([...dynamic].sort()).toEqual([await stripeRateOf(deRate), await stripeRateOf(frRate), await stripeRateOf(caRate)].sort());

    const { stripeSessionId, paid } = await paidWithAddress(res.body.data.id, { country: 'DE' });
    expect(paid.amount_total).toBe(1488); // 1250 + 237.5 → 238
    const row = await db()('subscriptions').where({ checkout_session_id: res.body.data.id }).first();
    const first = await order(row.initial_order_id);
    expect(first.amountCents).toBe(1488);
    expect(first.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1250], ['TAX', 238]]);
    expect(row.amount_cents).toBe(1488);

    // Stripe's subscription item carries the chosen rate: every invoice applies it.
    const stripeSub = stripe.subscriptionOf(stripeSessionId);
    expect(stripeSub.items.data[0]!.tax_rates!.map((r) => r.id)).toEqual([await stripeRateOf(deRate)]);
    ctx.clock.set('2027-01-01T10:00:00.000Z');
    const invoice = stripe.renew(stripeSub.id);
    expect(invoice).toMatchObject({ status: 'paid', amount_paid: 1488 });
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    const renewal = await db()('orders').where({ subscription_id: row.id, billing_period: 1 }).first();
    const o = await order(renewal.id);
    expect(o.amountCents).toBe(invoice.amount_paid);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1250], ['TAX', 238]]);
    expect(o.lines[1].tax).toMatchObject({ rateId: deRate, country: 'DE' });
  });

  it('a subscription whose buyer’s address has no rate: untaxed first order and renewal', async () => {
    ctx.clock.set('2026-12-01T10:00:00.000Z');
    const res = await create({ pricingId: planId });
    const { stripeSessionId, paid } = await paidWithAddress(res.body.data.id, { country: 'CH' });
    expect(paid.amount_total).toBe(1250);
    const row = await db()('subscriptions').where({ checkout_session_id: res.body.data.id }).first();
    expect((await order(row.initial_order_id)).lines.map((l: Line) => l.kind)).toEqual(['PRICE']);
    ctx.clock.set('2027-01-01T10:00:00.000Z');
    const invoice = stripe.renew(stripe.subscriptionOf(stripeSessionId).id);
    expect(invoice.amount_paid).toBe(1250);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    const renewal = await db()('orders').where({ subscription_id: row.id, billing_period: 1 }).first();
    expect((await order(renewal.id)).lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1250]]);
  });

  it('with customerTax the rates are fixed as before (no dynamic rates, no address asked)', async () => {
    const before = stripe.requests.length;
    const res = await create({ customerTax: { country: 'DE' } });
    expect(res.status).toBe(201);
    expect(res.body.data.amount).toBe(1999 + 380);
    const sent = stripe.requests.slice(before).find((r) => r.path === '/v1/checkout/sessions')!.body as Record<string, Record<string, unknown>[]>;
    expect(sent.line_items![0]!.dynamic_tax_rates).toBeUndefined();
    expect(sent.line_items![0]!.tax_rates).toEqual([await stripeRateOf(deRate)]);
    expect(sent.billing_address_collection).toBeUndefined();
  });
});

describe('Stripe dynamic tax rates: refusals', () => {
  it('rates Stripe cannot choose by address: 400 naming body.customerTax, Stripe’s checkout not called; with customerTax: 201', async () => {
    const tax = ctx.services.modules.tax.tax;
    const product = await ctx.services.catalog.createProduct(ctx.orgB.orgId, { name: 'Course' });
    const priceB = (await ctx.services.catalog.createPrice(product.id, { amount: 5000, currency: 'EUR' })).id;
    await tax.create(ctx.orgB.orgId, { displayName: 'MWST', percentage: '8.1', country: 'CH' });
    const sessions = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').length;
    const refused = await create({ pricingId: priceB }, ctx.orgB.apiKey);
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.error.message).toMatch(/body\.customerTax is required/);
    expect(refused.body.error.message).toMatch(/CH/);
    expect(stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').length).toBe(sessions);
    const given = await create({ pricingId: priceB, customerTax: { country: 'CH' } }, ctx.orgB.apiKey);
    expect(given.status, JSON.stringify(given.body)).toBe(201);
    expect(given.body.data.amount).toBe(5000 + 405);
  });

  it('an account Stripe refuses dynamic tax rates for: 400 naming body.customerTax, not a 503', async () => {
    stripe.dynamicTaxRatesAvailable = false;
    try {
      const res = await create({});
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.error.message).toMatch(/body\.customerTax is required.*unknown parameter/);
    } finally {
      stripe.dynamicTaxRatesAvailable = true;
    }
  });

  it('bad input is still a 400 naming the field', async () => {
    for (const [customerTax, field] of [
      [{ country: 'XX' }, 'body.customerTax.country'],
      [{ country: 'US', region: 'C@' }, 'body.customerTax.region'],
      [{ country: 'DE', taxId: 'DE123' }, 'body.customerTax.taxId'],
    ] as const) {
      const res = await create({ customerTax });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.error.message).toContain(field);
    }
  });

  it('the Stripe-shaped server refuses tax_rates with dynamic_tax_rates, and a US rate without a state', async () => {
    const rate = await stripeRateOf(deRate);
    const stateless = stripe.taxRates.size;
    const client = new (await import('stripe')).default(SECRET_KEY, { host: '127.0.0.1', port: Number(new URL(base).port), protocol: 'http' });
    const usRate = await client.taxRates.create({ display_name: 'US', percentage: 5, inclusive: false, country: 'US' });
    expect(stripe.taxRates.size).toBe(stateless + 1);
    const params = (extra: object) => ({
      mode: 'payment',
      line_items: [{ quantity: 1, price_data: { currency: 'eur', unit_amount: 1000, product_data: { name: 'x' } }, ...extra }],
      success_url: 'https://example.com/ok',
    }) as Stripe.Checkout.SessionCreateParams;
    await expect(client.checkout.sessions.create(params({ tax_rates: [rate], dynamic_tax_rates: [rate] }))).rejects.toMatchObject({ param: 'line_items[0][dynamic_tax_rates]' });
    await expect(client.checkout.sessions.create(params({ dynamic_tax_rates: [usRate.id] }))).rejects.toMatchObject({ param: 'line_items[0][dynamic_tax_rates][0]' });
  });

  it('dynamicTaxRefusal: the rate sets Stripe cannot choose from by address', () => {
    const r = (id: string, country: string, region: string | null = null) => ({ id, country, region });
    expect(dynamicTaxRefusal([r('a', 'DE'), r('b', 'FR'), r('c', 'US', 'CA'), r('d', 'US', 'NY'), r('e', 'GB'), r('f', 'AU')])).toBeUndefined();
    expect(dynamicTaxRefusal([r('a', 'CA', 'QC')])).toMatch(/only in the US, GB, AU and the EU/);
    expect(dynamicTaxRefusal([r('a', 'US')])).toMatch(/needs a state/);
    expect(dynamicTaxRefusal([r('a', 'ES', 'CN')])).toMatch(/by country only/);
    expect(dynamicTaxRefusal([r('a', 'DE'), r('b', 'DE')])).toMatch(/both apply in DE/);
    expect(dynamicTaxRefusal([r('a', 'US', 'CA'), r('b', 'US', 'CA')])).toMatch(/both apply in US-CA/);
  });
});
