/**
 * Usage renewals with a coupon on Stripe (issue 38 §7, issue 39 §2), end to end with the official
 * `stripe` SDK against the Stripe-shaped server. Stripe spreads the subscription's coupon over the
 * renewal invoice's discountable lines — the fee line and Kassa's usage invoice items — and rounds
 * each line's share (`discount_amounts`), so its discount can differ from Kassa's once-rounded one
 * by a cent per line. The renewal order carries every line (fee, each USAGE line with its
 * quantity, the DISCOUNT Stripe took) and adds up to Stripe's `amount_paid` exactly, whatever
 * rounding model the server plays (`discountAllocation`: per line, or once on the invoice).
 * A coupon limited to products takes nothing off usage (Kassa's rule): the usage items are sent
 * `discountable: false`.
 */
import fc from 'fast-check';
import type Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerJobs } from '../../src/jobs.js';
import type { DiscountService } from '../../src/discounts/discount.service.js';
import { setExternalId } from '../usage/helpers.js';
import { createStripeContext, type StripeContext } from './stripe-context.js';

let s: StripeContext;
let discounts: DiscountService;
const meters: string[] = [];
const db = () => s.ctx.testDb.database.db;
const usageJob = () => workerJobs({ services: s.ctx.services }).find((j) => j.name === 'stripe-usage-invoices')!;
const DAY = 24 * 3600_000;

beforeAll(async () => {
  s = await createStripeContext();
  discounts = s.ctx.services.modules.discounts.discounts;
  for (const name of ['alpha', 'beta', 'gamma']) {
    const res = await s.ctx.merchant
      .post('/v1/meters')
      .set('X-API-Key', s.ctx.orgA.apiKey)
      .send({ name: `Units ${name}`, source: 'EVENTS', filter: { eventName: `units_${name}` }, aggregation: 'sum', property: 'n' });
    expect(res.status).toBe(201);
    meters.push(res.body.data.id as string);
  }
});
afterAll(async () => {
  await s?.close();
});

/** A metered monthly price: `fee` cents plus one PER_UNIT component per meter at `unitAmounts[i]` cents (decimal text). */
async function meteredPrice(fee: number, unitAmounts: readonly string[]) {
  const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: 'Metered plan' });
  const price = await s.ctx.admin.post(`/v1/products/${product.id}/prices`).send({
    amount: fee,
    currency: 'USD',
    pricingType: 'SUBSCRIPTION',
    billingInterval: 'MONTH',
    meteredComponents: unitAmounts.map((u, i) => ({ meterId: meters[i], pricing: { model: 'PER_UNIT', unitAmountDecimal: u } })),
  });
  expect(price.status, JSON.stringify(price.body)).toBe(201);
  return { productId: product.id, pricingId: price.body.data.pricingId as string };
}

let buyers = 0;
/** A subscription to `pricingId` with `couponId`, bought through Stripe Checkout now; its customer has an externalId. */
async function subscribe(pricingId: string, couponId: string) {
  const n = ++buyers;
  const email = `usage-coupon-${n}@example.com`;
  const res = await s.create({ pricingId, customerEmail: email, discounts: [{ coupon: couponId }] }, `usage-coupon-${n}`);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const stripeSessionId = await s.stripeIdOf(res.body.data.id);
  s.stripe.complete(stripeSessionId, { email });
  expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
  const session = await s.readSession(res.body.data.id);
  const order = await s.readOrder(session.orderId);
  const externalId = `usage-coupon-user-${n}`;
  expect((await setExternalId(s.ctx, order.customerId as string, externalId, s.ctx.orgA.apiKey)).status).toBe(200);
  const subscriptionId = (await db()('subscriptions').where({ checkout_session_id: res.body.data.id }).first()).id as string;
  return { subscriptionId, stripeSub: s.stripe.subscriptionOf(stripeSessionId), externalId, n };
}

/** `quantities[i]` units of meter i in the current period, then the period's renewal: draft, grace, items, finalize, invoice.paid. */
async function renewWithUsage(sub: { subscriptionId: string; stripeSub: Stripe.Subscription; externalId: string; n: number }, period: number, quantities: readonly number[]) {
  const current = s.stripe.subscriptions.get(sub.stripeSub.id)!.items.data[0]!;
  const periodEnd = current.current_period_end * 1000;
  s.ctx.clock.set(new Date(current.current_period_start * 1000 + DAY).toISOString());
  const events = quantities.flatMap((q, i) => (q > 0 ? [{ id: `uc-${sub.n}-${period}-${i}`, customer: { externalId: sub.externalId }, name: `units_${['alpha', 'beta', 'gamma'][i]}`, timestamp: new Date(current.current_period_start * 1000 + 3600_000).toISOString(), properties: { n: q } }] : []));
  if (events.length > 0) {
    const res = await s.ctx.merchant.post('/v1/usage-events').set('X-API-Key', s.ctx.orgA.apiKey).send({ events });
    expect(res.status).toBe(200);
    expect(res.body.data.results.map((r: { status: string }) => r.status)).not.toContain('REJECTED');
  }
  s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
  const draft = s.stripe.renewDraft(sub.stripeSub.id);
  expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
  s.ctx.clock.set(new Date(periodEnd + 3600_000 + 1000).toISOString());
  expect(await usageJob().run()).toBe(true);
  const invoice = s.stripe.invoices.get(draft.id)!;
  expect(invoice.status).toBe('paid');
  expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
  const row = await db()('orders').where({ subscription_id: sub.subscriptionId, billing_period: period }).first();
  const order = await s.readOrder(row.id);
  return { invoice, order: order as { amountCents: number; lines: Line[] } };
}

type Line = { kind: string; amountCents: number; quantity: string | null; usage?: { meterId: string }; description: string };
const kinds = (lines: Line[]) => lines.map((l) => [l.kind, l.amountCents]);
const sum = (lines: Line[]) => lines.reduce((t, l) => t + l.amountCents, 0);
const usageItems = (invoice: Stripe.Invoice) => invoice.lines.data.filter((l) => l.parent?.invoice_item_details);
const lineDiscount = (l: Stripe.InvoiceLineItem) => (l.discount_amounts ?? []).reduce((t, d) => t + d.amount, 0);

describe('usage renewals with a coupon on Stripe: the order equals Stripe’s invoice', () => {
  it('percent off, rounded per line by Stripe (107) where Kassa rounds once (105): every line is kept, DISCOUNT is what Stripe took, the total is amount_paid', async () => {
    // Fee 1005 and usage 5 + 15 + 25: 10 % per line is 100.5 + 0.5 + 1.5 + 2.5 → 101 + 1 + 2 + 3 = 107;
    // on the sum, 10 % of 1050 is 105. Before the fix the order fell back to one line of 943.
    s.stripe.discountAllocation = 'per-line';
    s.ctx.clock.set('2027-01-03T10:00:00.000Z');
    const price = await meteredPrice(1005, ['5', '5', '5']);
    const coupon = await discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Ten percent', percentOff: '10', duration: 'FOREVER' });
    const sub = await subscribe(price.pricingId, coupon.id);
    const { invoice, order } = await renewWithUsage(sub, 1, [1, 3, 5]);

    expect(usageItems(invoice).map((l) => [l.amount, l.discountable, lineDiscount(l)])).toEqual([
      [5, true, 1],
      [15, true, 2],
      [25, true, 3],
    ]);
    expect(invoice.total_discount_amounts!.map((d) => d.amount)).toEqual([107]);
    expect(invoice.amount_paid).toBe(1050 - 107);
    expect(kinds(order.lines)).toEqual([
      ['PRICE', 1005],
      ['USAGE', 5],
      ['USAGE', 15],
      ['USAGE', 25],
      ['DISCOUNT', -107],
    ]);
    expect(order.lines.filter((l) => l.kind === 'USAGE').map((l) => [l.usage?.meterId, l.quantity])).toEqual(meters.map((m, i) => [m, String([1, 3, 5][i])]));
    expect(order.lines.at(-1)!.description).toBe('Ten percent (10% off)');
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(sum(order.lines)).toBe(invoice.amount_paid);
  });

  it('amount off spread over the lines (each share whole cents): DISCOUNT = the shares’ sum; the order equals amount_paid', async () => {
    s.stripe.discountAllocation = 'per-line';
    s.ctx.clock.set('2027-03-03T10:00:00.000Z');
    const price = await meteredPrice(1000, ['7', '11', '13']);
    const coupon = await discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Three off', amountOff: 300, currency: 'USD', duration: 'FOREVER' });
    const sub = await subscribe(price.pricingId, coupon.id);
    const { invoice, order } = await renewWithUsage(sub, 1, [3, 5, 7]);
    // 1000 + 21 + 55 + 91 = 1167; 300 in proportion: 257.069… + 5.398… + 14.138… + 23.393… → 257 + 6 + 14 + 23
    // (floors, the cent left to the largest remainder).
    expect(invoice.lines.data.map(lineDiscount)).toEqual([257, 6, 14, 23]);
    expect(kinds(order.lines)).toEqual([
      ['PRICE', 1000],
      ['USAGE', 21],
      ['USAGE', 55],
      ['USAGE', 91],
      ['DISCOUNT', -300],
    ]);
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(invoice.amount_paid).toBe(867);
  });

  it('a coupon limited to the product takes nothing off usage: items are sent discountable: false, so Stripe discounts the fee only, as Kassa', async () => {
    // Amount off 1200 on the product: Kassa takes min(1200, fee 1005) = 1005. Had the items been
    // discountable, Stripe would have taken 1050 (fee + usage) and billed 0.
    s.stripe.discountAllocation = 'per-line';
    s.ctx.clock.set('2027-05-03T10:00:00.000Z');
    const price = await meteredPrice(1005, ['5', '5', '5']);
    const coupon = await discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Plan only', amountOff: 1200, currency: 'USD', duration: 'FOREVER', productIds: [price.productId] });
    const sub = await subscribe(price.pricingId, coupon.id);
    const { invoice, order } = await renewWithUsage(sub, 1, [1, 3, 5]);
    expect(usageItems(invoice).map((l) => [l.amount, l.discountable, lineDiscount(l)])).toEqual([
      [5, false, 0],
      [15, false, 0],
      [25, false, 0],
    ]);
    expect(s.stripe.requests.filter((r) => r.path === '/v1/invoiceitems' && r.body.invoice === invoice.id).map((r) => r.body.discountable)).toEqual(['false', 'false', 'false']);
    expect(invoice.amount_paid).toBe(45);
    expect(kinds(order.lines)).toEqual([
      ['PRICE', 1005],
      ['USAGE', 5],
      ['USAGE', 15],
      ['USAGE', 25],
      ['DISCOUNT', -1005],
    ]);
    expect(order.amountCents).toBe(45);
  });

  it('a REPEATING 2 coupon ends mid-way: renewal 1 discounted (per line), renewal 2 undiscounted with every line; discount_ended once', async () => {
    s.stripe.discountAllocation = 'per-line';
    s.ctx.clock.set('2027-07-03T10:00:00.000Z');
    const price = await meteredPrice(1005, ['5', '5', '5']);
    const coupon = await discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Two months', percentOff: '10', duration: 'REPEATING', durationInPeriods: 2 });
    const sub = await subscribe(price.pricingId, coupon.id);
    const one = await renewWithUsage(sub, 1, [1, 3, 5]);
    expect(one.invoice.amount_paid).toBe(943);
    expect(kinds(one.order.lines)).toEqual([
      ['PRICE', 1005],
      ['USAGE', 5],
      ['USAGE', 15],
      ['USAGE', 25],
      ['DISCOUNT', -107],
    ]);
    expect(one.order.amountCents).toBe(943);

    const two = await renewWithUsage(sub, 2, [3, 0, 1]);
    expect(two.invoice.total_discount_amounts).toEqual([]);
    expect(two.invoice.amount_paid).toBe(1005 + 15 + 0 + 5);
    expect(kinds(two.order.lines)).toEqual([
      ['PRICE', 1005],
      ['USAGE', 15],
      ['USAGE', 0],
      ['USAGE', 5],
    ]);
    expect(two.order.amountCents).toBe(two.invoice.amount_paid);
    const ended = (await db()('webhook_events').where({ type: 'subscription.discount_ended' })).filter((e: { payload: unknown }) => JSON.stringify(e.payload).includes(sub.subscriptionId));
    expect(ended).toHaveLength(1);
  });

  it('cancel now: the usage invoice reuses the subscription’s discount, as Stripe discounts the subscription’s own invoices; the order is its USAGE lines and the DISCOUNT Stripe took, equal to amount_paid', async () => {
    // Before: Kassa opened the invoice without the subscription's discount and the buyer paid 45 undiscounted.
    s.stripe.discountAllocation = 'per-line';
    s.ctx.clock.set('2027-10-03T10:00:00.000Z');
    const price = await meteredPrice(1005, ['5', '5', '5']);
    const coupon = await discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Always ten', percentOff: '10', duration: 'FOREVER' });
    const sub = await subscribe(price.pricingId, coupon.id);
    s.ctx.clock.set('2027-10-05T10:00:00.000Z');
    const res = await s.ctx.merchant
      .post('/v1/usage-events')
      .set('X-API-Key', s.ctx.orgA.apiKey)
      .send({ events: [1, 3, 5].map((n, i) => ({ id: `uc-cancel-${i}`, customer: { externalId: sub.externalId }, name: `units_${['alpha', 'beta', 'gamma'][i]}`, timestamp: '2027-10-04T00:00:00Z', properties: { n } })) });
    expect(res.status).toBe(200);
    expect((await s.ctx.admin.post(`/v1/subscriptions/${sub.subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
    const final = [...s.stripe.invoices.values()].find((i) => i.parent?.subscription_details?.subscription === sub.stripeSub.id && i.billing_reason === 'manual')!;
    // 10 % of each line, rounded on its line: 0.5 + 1.5 + 2.5 → 1 + 2 + 3 = 6.
    expect(s.stripe.requests.find((r) => r.path === '/v1/invoices' && r.body.subscription === sub.stripeSub.id)!.body.discounts).toEqual([{ discount: s.stripe.subscriptions.get(sub.stripeSub.id)!.discounts[0] }]);
    expect(final.lines.data.map(lineDiscount)).toEqual([1, 2, 3]);
    expect(final.amount_paid).toBe(39);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', final.id))).body.outcome).toBe('applied');
    const row = await db()('orders').where({ subscription_id: sub.subscriptionId, processor_payment_id: final.payments!.data[0]!.payment.payment_intent as string }).first();
    const order = (await s.readOrder(row.id)) as { amountCents: number; lines: Line[] };
    expect(kinds(order.lines)).toEqual([
      ['USAGE', 5],
      ['USAGE', 15],
      ['USAGE', 25],
      ['DISCOUNT', -6],
    ]);
    expect(order.lines.at(-1)!.description).toBe('Always ten (10% off)');
    expect(order.amountCents).toBe(39);
  });

  // Each run is a whole sale and renewal through the API and the Stripe-shaped server (about 1.5 s on a quiet machine, up to 8 s at load 30).
  const runs = Number(process.env.KASSA_USAGE_COUPON_RUNS ?? 12);
  it('property: random fees, unit prices, quantities and coupons, either rounding model — no line lost, the order’s lines add up to amount_paid', async () => {
    const unit = fc.constantFrom('0.5', '1', '3', '5', '7', '9.99', '13', '0.125');
    const couponArb = fc.oneof(
      fc.record({ percentOff: fc.tuple(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 0, max: 99 })).map(([w, f]) => (w === 100 ? '100' : `${w}.${String(f).padStart(2, '0')}`)) }),
      fc.record({ amountOff: fc.integer({ min: 1, max: 5000 }) }),
    );
    const runArb = fc.record({
      fee: fc.integer({ min: 100, max: 5000 }),
      units: fc.tuple(unit, unit, unit),
      quantities: fc.tuple(fc.integer({ min: 0, max: 500 }), fc.integer({ min: 0, max: 500 }), fc.integer({ min: 0, max: 500 })),
      coupon: couponArb,
      allocation: fc.constantFrom('per-line' as const, 'invoice' as const),
    });
    let done = 0;
    await fc.assert(
      fc.asyncProperty(runArb, async (run) => {
        s.stripe.discountAllocation = run.allocation;
        // Each run on its own months, after the tests above.
        s.ctx.clock.set(new Date(Date.parse('2028-01-03T10:00:00.000Z') + done++ * 70 * DAY).toISOString());
        const price = await meteredPrice(run.fee, run.units);
        const coupon = await discounts.createCoupon(s.ctx.orgA.orgId, {
          name: `Run ${done}`,
          duration: 'FOREVER',
          ...('percentOff' in run.coupon ? { percentOff: run.coupon.percentOff } : { amountOff: run.coupon.amountOff, currency: 'USD' }),
        });
        const sub = await subscribe(price.pricingId, coupon.id);
        const { invoice, order } = await renewWithUsage(sub, 1, run.quantities);
        const discount = invoice.lines.data.reduce((t, l) => t + lineDiscount(l), 0);
        expect(order.amountCents).toBe(invoice.amount_paid);
        expect(sum(order.lines)).toBe(invoice.amount_paid);
        // No line lost: the fee (when not 0), one USAGE line per component with its quantity and Stripe's item amount, the DISCOUNT Stripe took.
        expect(kinds(order.lines)).toEqual([
          ...(run.fee > 0 ? [['PRICE', run.fee]] : []),
          ...usageItems(invoice).map((l) => ['USAGE', l.amount]),
          ...(discount > 0 ? [['DISCOUNT', -discount]] : []),
        ]);
        expect(order.lines.filter((l) => l.kind === 'USAGE').map((l) => l.quantity)).toEqual(run.quantities.map(String));
      }),
      { numRuns: runs, endOnFailure: true, ...(process.env.KASSA_USAGE_COUPON_SEED ? { seed: Number(process.env.KASSA_USAGE_COUPON_SEED) } : {}) },
    );
  }, Math.max(240_000, runs * 10_000));
});
