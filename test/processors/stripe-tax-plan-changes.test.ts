/**
 * Plan and seat changes of Stripe-billed subscriptions with exclusive tax (issue 39, items 3 and 4,
 * Stripe rail), end to end against the Stripe-shaped server (./stripe-server.ts): Stripe taxes the
 * proration invoice line by line (each rate on each line, rounded per line, a credit's tax negative)
 * and reflects the subscription's discount in the proration lines' own amounts. Kassa's preview
 * (PRORATION, DISCOUNT, TAX per rate) = Stripe's invoice (`amount_paid`, `total_taxes`) = Kassa's
 * order, to the minor unit: seats up with one rate, an upgrade with two stacked rates (5 % +
 * 9.975 %), each with and without a percent coupon, a downgrade at period end billed by Stripe's
 * renewal with its tax, the amount-off and ending coupons that used to be refused (now prorated by
 * Kassa itself: stripe-amount-off-plan-changes.test.ts), and a property run of random amounts, seats, rates, coupons and seconds checked
 * against an independent recomputation and Stripe's invoice.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
let basic: string;
let pro: string;
let planProduct: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({ env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '2000' } });
  planProduct = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team plan' })).id;
  basic = (await ctx.services.catalog.createPrice(planProduct, { amount: 1250, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  pro = (await ctx.services.catalog.createPrice(planProduct, { amount: 3333, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  const tax = ctx.services.modules.tax.tax;
  await tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
  await tax.create(ctx.orgA.orgId, { displayName: 'GST', percentage: '5', country: 'CA' });
  await tax.create(ctx.orgA.orgId, { displayName: 'QST', percentage: '9.975', country: 'CA', region: 'CA-QC' });
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
const coupons = () => ctx.services.modules.discounts.discounts;
type Line = { kind: string; amountCents: number; description: string; tax?: { taxAmountCents: number; percentage: string } };
const kinds = (lines: Line[]) => lines.map((l) => [l.kind, l.amountCents]);

type Where = 'DE' | 'QC' | 'none';
const RATES: Record<Where, string[]> = { DE: ['19'], QC: ['5', '9.975'], none: [] };
const customerTax = (where: Where) => (where === 'DE' ? { country: 'DE' } : where === 'QC' ? { country: 'CA', region: 'QC' } : { country: 'JP' });

/** A subscription bought through Stripe Checkout with the buyer's tax location and an optional coupon. */
async function subscribe(pricingId: string, opts: { quantity?: number; where: Where; couponId?: string }) {
  const created = await api('post', '/v1/checkout-sessions')
    .set('Idempotency-Key', `stripe-tax-plan-${++n}`)
    .send({ pricingId, customerEmail: `taxplan${n}@example.com`, quantity: opts.quantity ?? 1, customerTax: customerTax(opts.where), ...(opts.couponId && { discounts: [{ coupon: opts.couponId }] }) });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const stripeSessionId = (await db()('checkout_sessions').where({ id: created.body.data.id }).first()).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email: `taxplan${n}@example.com` });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const row = await db()('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
  return { id: row.id as string, stripeSub: stripe.subscriptionOf(stripeSessionId) };
}

// ---- an independent recomputation of Stripe's proration invoice (BigInt, its own rounding) ----

/** p as an integer over 10^4 ("9.975" → 99750). */
const scaled = (p: string) => {
  const [w, f = ''] = p.split('.');
  return BigInt(w!) * 10000n + BigInt((f + '0000').slice(0, 4));
};
/** n / d to the nearest integer, halves away from zero. */
const nearest = (n: bigint, d: bigint) => (n < 0n ? -((-2n * n + d) / (2n * d)) : (2n * n + d) / (2n * d));
/** The period amount after a percent coupon (two decimals), as Stripe discounts a line. */
const afterCoupon = (amount: bigint, percent: string | null) => (percent === null ? amount : amount - nearest(amount * scaled(percent), 1000000n));

function expected(input: { oldAmount: number; newAmount: number; remaining: number; length: number; percent: string | null; rates: string[] }) {
  const prorate = (amount: bigint) => Number(nearest(amount * BigInt(input.remaining), BigInt(input.length)));
  const gross = [prorate(-BigInt(input.oldAmount)), prorate(BigInt(input.newAmount))];
  const net = [prorate(-afterCoupon(BigInt(input.oldAmount), input.percent)), prorate(afterCoupon(BigInt(input.newAmount), input.percent))];
  const discount = gross[0]! + gross[1]! - (net[0]! + net[1]!);
  const taxes = input.rates.map((p) => net.reduce((s, a) => s + Number(nearest(BigInt(a) * scaled(p), 1000000n)), 0));
  return { gross, net, discount, taxes, total: net[0]! + net[1]! + taxes.reduce((s, t) => s + t, 0) };
}

/** The change made from its preview; Stripe's invoice, Kassa's order; all three equal. */
async function changeAndCompare(id: string, stripeSubId: string, body: object) {
  const p = await preview(id, body);
  expect(p.status, JSON.stringify(p.body)).toBe(200);
  const c = await change(id, { ...body, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
  expect(c.status, JSON.stringify(c.body)).toBe(200);
  const invoice = stripe.invoices.get(stripe.subscriptions.get(stripeSubId)!.latest_invoice as string)!;
  expect(invoice).toMatchObject({ billing_reason: 'subscription_update', status: 'paid', amount_paid: p.body.data.amountDueCents });
  const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
  expect(order.amountCents).toBe(invoice.amount_paid);
  expect(kinds(order.lines)).toEqual(kinds(p.body.data.lines));
  // Each TAX line is Stripe's invoice tax for that rate (the sum of its per-line amounts).
  const taxLines = (order.lines as Line[]).filter((l) => l.kind === 'TAX');
  expect(taxLines.map((l) => l.amountCents)).toEqual(invoice.total_taxes!.map((t) => t.amount));
  return { preview: p.body.data as { lines: Line[]; amountDueCents: number; nextRenewalAmountCents: number }, invoice, order };
}

/**
 * The expected TAX lines in the order the preview lists its rates (the tax settings' order for a
 * location is not the same on both databases; each TAX line names its rate).
 */
const taxKinds = (lines: Line[], rates: string[], taxes: number[]) => lines.filter((l) => l.kind === 'TAX').map((l) => ['TAX', taxes[rates.indexOf(l.tax!.percentage)]]);

const remainingOf = (periodEnd: string, now: string) => (Date.parse(periodEnd) - Date.parse(now)) / 1000;

describe('plan and seat changes of Stripe-billed subscriptions with exclusive tax', () => {
  it('seats 1 → 3 with 19 % VAT: TAX per line as Stripe rounds it; preview = Stripe’s invoice = order; the renewal bills 3 seats with their tax', async () => {
    at('2027-01-01T10:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, { where: 'DE' });
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data.amountCents).toBe(1250 + 238);
    at('2027-01-10T07:23:11.000Z');
    const { preview: p, invoice } = await changeAndCompare(id, stripeSub.id, { quantity: 3 });
    const want = expected({ oldAmount: 1250, newAmount: 3750, remaining: remainingOf('2027-02-01T10:00:00.000Z', '2027-01-10T07:23:11.000Z'), length: 31 * 86400, percent: null, rates: ['19'] });
    expect(kinds(p.lines)).toEqual([['PRORATION', want.gross[0]], ['PRORATION', want.gross[1]], ['TAX', want.taxes[0]]]);
    expect(p.amountDueCents).toBe(want.total);
    // Stripe's lines: the two prorations, each with its own 19 % (the credit's negative).
    expect(invoice.lines.data.map((l) => [l.amount, l.taxes![0]!.amount])).toEqual(want.net.map((a) => [a, Number(nearest(BigInt(a) * 190000n, 1000000n))]));
    expect(p.nextRenewalAmountCents).toBe(3750 + 713);

    at('2027-02-01T10:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect(renewal.amount_paid).toBe(3750 + 713);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    const row = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    const o = (await api('get', `/v1/orders/${row.id}`)).body.data;
    expect(kinds(o.lines)).toEqual([['PRICE', 3750], ['TAX', 713]]);
    expect(o.amountCents).toBe(renewal.amount_paid);
  });

  it('an upgrade with GST 5 % + QST 9.975 % side by side: one TAX line per rate, each the sum of Stripe’s per-line roundings', async () => {
    at('2027-03-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, { where: 'QC', quantity: 2 });
    at('2027-03-12T13:14:15.000Z');
    const { preview: p } = await changeAndCompare(id, stripeSub.id, { priceId: pro });
    const want = expected({ oldAmount: 2500, newAmount: 6666, remaining: remainingOf('2027-04-01T00:00:00.000Z', '2027-03-12T13:14:15.000Z'), length: 31 * 86400, percent: null, rates: ['5', '9.975'] });
    expect(p.lines.filter((l) => l.kind === 'TAX').map((l) => l.tax!.percentage).sort()).toEqual(['5', '9.975']);
    expect(kinds(p.lines)).toEqual([['PRORATION', want.gross[0]], ['PRORATION', want.gross[1]], ...taxKinds(p.lines, ['5', '9.975'], want.taxes)]);
    expect(p.amountDueCents).toBe(want.total);
  });

  it('with a 20 % FOREVER coupon and 19 %: Stripe’s proration lines hold the discount; the order shows PRORATION, DISCOUNT, TAX and adds up to what Stripe collected', async () => {
    const coupon = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Partner', percentOff: '20', duration: 'FOREVER' });
    at('2027-05-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, { where: 'DE', couponId: coupon.id });
    at('2027-05-20T19:00:01.000Z');
    const { preview: p, invoice } = await changeAndCompare(id, stripeSub.id, { priceId: pro, quantity: 2 });
    const want = expected({ oldAmount: 1250, newAmount: 6666, remaining: remainingOf('2027-06-01T00:00:00.000Z', '2027-05-20T19:00:01.000Z'), length: 31 * 86400, percent: '20', rates: ['19'] });
    expect(kinds(p.lines)).toEqual([['PRORATION', want.gross[0]], ['PRORATION', want.gross[1]], ['DISCOUNT', -want.discount], ['TAX', want.taxes[0]]]);
    expect(p.lines.find((l) => l.kind === 'DISCOUNT')!.description).toContain('Partner');
    expect(invoice.lines.data.map((l) => l.amount)).toEqual(want.net);
    expect(invoice.lines.data.every((l) => l.discountable === false && l.discount_amounts!.length === 0)).toBe(true);
    expect(p.amountDueCents).toBe(want.total);
  });

  it('with a 12.5 % REPEATING 3 coupon and 5 % + 9.975 %, seats up in the second period (still covered): discounted, taxed per line', async () => {
    const coupon = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Spring', percentOff: '12.5', duration: 'REPEATING', durationInPeriods: 3 });
    at('2027-06-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro, { where: 'QC', couponId: coupon.id });
    at('2027-07-01T00:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    at('2027-07-09T09:09:09.000Z');
    const { preview: p } = await changeAndCompare(id, stripeSub.id, { quantity: 4 });
    const want = expected({ oldAmount: 3333, newAmount: 13332, remaining: remainingOf('2027-08-01T00:00:00.000Z', '2027-07-09T09:09:09.000Z'), length: 31 * 86400, percent: '12.5', rates: ['5', '9.975'] });
    expect(kinds(p.lines)).toEqual([['PRORATION', want.gross[0]], ['PRORATION', want.gross[1]], ['DISCOUNT', -want.discount], ...taxKinds(p.lines, ['5', '9.975'], want.taxes)]);
    expect(p.amountDueCents).toBe(want.total);
  });

  it('a ONCE coupon (Stripe’s `once`, spent on the first invoice): a later change is not discounted, on Stripe nor in the preview', async () => {
    const coupon = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Welcome', percentOff: '50', duration: 'ONCE' });
    at('2027-08-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, { where: 'DE', couponId: coupon.id });
    at('2027-08-15T00:00:00.000Z');
    const { preview: p } = await changeAndCompare(id, stripeSub.id, { priceId: pro });
    expect(p.lines.map((l) => l.kind)).toEqual(['PRORATION', 'PRORATION', 'TAX']);
  });

  it('a downgrade at period end with 19 %: Stripe’s item changes unprorated; its renewal bills the new plan with its tax, equal to Kassa’s renewal order', async () => {
    at('2027-09-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro, { where: 'DE', quantity: 2 });
    at('2027-09-10T00:00:00.000Z');
    const invoicesBefore = stripe.invoices.size;
    const p = await preview(id, { priceId: basic });
    expect(p.body.data).toMatchObject({ effective: 'PERIOD_END', amountDueCents: 0, nextRenewalAmountCents: 2500 + 475 });
    const c = await change(id, { priceId: basic, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: 0 });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    expect(c.body.data.orderId).toBeNull();
    expect(stripe.invoices.size).toBe(invoicesBefore);
    expect(stripe.itemUpdates.at(-1)).toMatchObject({ subscriptionId: stripeSub.id, prorationBehavior: 'none' });
    at('2027-10-01T00:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect(renewal.amount_paid).toBe(2975);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic, quantity: 2, amountCents: 2975, scheduledChange: null });
    const row = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    const o = (await api('get', `/v1/orders/${row.id}`)).body.data;
    expect(kinds(o.lines)).toEqual([['PRICE', 2500], ['TAX', 475]]);
    expect(o.amountCents).toBe(renewal.amount_paid);
  });

  it('no longer refused (was 409): an amount-off coupon and a coupon that ends inside the period are previewed without calling Stripe, prorated by Kassa (stripe-amount-off-plan-changes.test.ts); a change at period end is accepted', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Five off', amountOff: 500, currency: 'EUR', duration: 'FOREVER' });
    at('2027-11-01T00:00:00.000Z');
    const a = await subscribe(basic, { where: 'DE', couponId: off.id });
    const yearlyPrice = (await ctx.services.catalog.createPrice(planProduct, { amount: 12000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'YEAR' })).id;
    const yearlyPro = (await ctx.services.catalog.createPrice(planProduct, { amount: 24000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'YEAR' })).id;
    // REPEATING 1 on a yearly price is Stripe's `repeating` 1 month: it ends a month into the year.
    const oneYear = await coupons().createCoupon(ctx.orgA.orgId, { name: 'First year', percentOff: '10', duration: 'REPEATING', durationInPeriods: 1 });
    const b = await subscribe(yearlyPrice, { where: 'DE', couponId: oneYear.id });
    at('2027-11-05T00:00:00.000Z');
    const calls = stripe.requests.length;
    for (const [id, body] of [
      [a.id, { priceId: pro }],
      [b.id, { priceId: yearlyPro }],
    ] as const) {
      const r = await preview(id, body);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect((r.body.data.lines as Line[]).map((l) => l.kind)).toEqual(['PRORATION', 'PRORATION', 'DISCOUNT', 'TAX']);
    }
    expect(stripe.requests.length).toBe(calls);
    // Scheduled for the period end, nothing is prorated: accepted.
    const later = await change(a.id, { priceId: pro, effective: 'PERIOD_END' });
    expect(later.status, JSON.stringify(later.body)).toBe(200);
    expect(later.body.data.subscription.scheduledChange).toMatchObject({ priceId: pro });
  });

  it('money check: random amounts, seats, rates, percent coupons and seconds — preview = recomputation = Stripe’s invoice = order (15 runs)', async () => {
    const product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Scale' })).id;
    let month = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 100, max: 250_000 }),
        fc.integer({ min: 100, max: 250_000 }),
        fc.constantFrom<Where>('DE', 'QC', 'none'),
        fc.option(fc.integer({ min: 1, max: 9999 }), { nil: null }),
        fc.integer({ min: 1, max: 2_678_399 }),
        async (q1, extra, unitFrom, unitTo, where, percentHundredths, offset) => {
          const from = (await ctx.services.catalog.createPrice(product, { amount: unitFrom, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
          const to = (await ctx.services.catalog.createPrice(product, { amount: Math.max(unitFrom, unitTo), currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
          const percent = percentHundredths === null ? null : (percentHundredths / 100).toFixed(2).replace(/\.?0+$/, '');
          const coupon = percent === null ? undefined : await coupons().createCoupon(ctx.orgA.orgId, { name: `P${percent}`, percentOff: percent, duration: 'FOREVER' });
          // A new month each run (the clock only moves forward); its length as Stripe and Kassa count it.
          const start = new Date(Date.UTC(2028, month, 1));
          const end = new Date(Date.UTC(2028, ++month, 1));
          const length = (end.getTime() - start.getTime()) / 1000;
          at(start.toISOString());
          const { id, stripeSub } = await subscribe(from, { where, quantity: q1, ...(coupon && { couponId: coupon.id }) });
          const now = new Date(start.getTime() + (offset % length) * 1000).toISOString();
          at(now);
          const want = expected({ oldAmount: unitFrom * q1, newAmount: Math.max(unitFrom, unitTo) * (q1 + extra), remaining: remainingOf(end.toISOString(), now), length, percent, rates: RATES[where] });
          const p = await preview(id, { priceId: to, quantity: q1 + extra });
          expect(p.status, JSON.stringify(p.body)).toBe(200);
          if (want.gross[0]! + want.gross[1]! <= 0) {
            expect(p.body.data.amountDueCents).toBe(0);
            return;
          }
          expect(p.body.data.amountDueCents).toBe(want.total);
          if (want.total === 0) return;
          const { order } = await changeAndCompare(id, stripeSub.id, { priceId: to, quantity: q1 + extra });
          expect(order.amountCents).toBe(want.total);
        },
      ),
      { numRuns: 15 },
    );
  });
});
