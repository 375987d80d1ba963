/**
 * Plan and seat changes of Stripe-billed subscriptions that Kassa prorates itself (issue 39, item 3,
 * Stripe rail): an amount-off coupon (Stripe does not document how it spreads an amount off over
 * proration lines) and a coupon whose Stripe discount ends inside the current period used to be
 * `409`. Kassa now quotes the change by its own rule — the two PRORATION lines, the coupon's
 * DISCOUNT on their net while it covers the period, TAX per invoice item — and tells Stripe the
 * exact amounts: an invoice of two invoice items (`discountable: false`, the subscription's tax
 * rates), finalized and paid, then the item changed with `proration_behavior: none`. Checked end to
 * end on the Stripe-shaped server: preview = an independent recomputation = Stripe's `amount_paid`
 * and `total_taxes` = Kassa's order lines, to the minor unit; the invoice's `invoice.paid` writes no
 * second order; a declined card changes nothing and voids the invoice; a property run.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import StripeSdk from 'stripe';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
let stripeBase: string;
let planProduct: string;
let basic: string;
let pro: string;
let basicYear: string;
let proYear: string;
let trialBasic: string;
let trialPro: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  stripeBase = base;
  ctx = await createTestContext({ env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '2000' } });
  planProduct = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team plan' })).id;
  const price = async (amount: number, billingInterval: 'MONTH' | 'YEAR', trialDays?: number) =>
    (await ctx.services.catalog.createPrice(planProduct, { amount, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval, ...(trialDays && { trialDays }) })).id;
  basic = await price(1250, 'MONTH');
  pro = await price(3333, 'MONTH');
  basicYear = await price(12000, 'YEAR');
  proYear = await price(24000, 'YEAR');
  trialBasic = await price(1000, 'MONTH', 14);
  trialPro = await price(2500, 'MONTH', 14);
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

async function subscribe(pricingId: string, opts: { quantity?: number; where: Where; couponId?: string }) {
  const created = await api('post', '/v1/checkout-sessions')
    .set('Idempotency-Key', `stripe-amount-off-${++n}`)
    .send({ pricingId, customerEmail: `amountoff${n}@example.com`, quantity: opts.quantity ?? 1, customerTax: customerTax(opts.where), ...(opts.couponId && { discounts: [{ coupon: opts.couponId }] }) });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const stripeSessionId = (await db()('checkout_sessions').where({ id: created.body.data.id }).first()).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email: `amountoff${n}@example.com` });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const row = await db()('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
  return { id: row.id as string, stripeSub: stripe.subscriptionOf(stripeSessionId) };
}

// ---- an independent recomputation (BigInt, its own rounding) of Kassa's rule for these changes ----

const scaled = (p: string) => {
  const [w, f = ''] = p.split('.');
  return BigInt(w!) * 10000n + BigInt((f + '0000').slice(0, 4));
};
/** n / d to the nearest integer, halves away from zero. */
const nearest = (n: bigint, d: bigint) => (n < 0n ? -((-2n * n + d) / (2n * d)) : (2n * n + d) / (2n * d));

type Off = { percent: string } | { amount: number } | null;
function expected(input: { oldAmount: number; newAmount: number; remaining: number; length: number; off: Off; rates: string[] }) {
  const credit = nearest(-BigInt(input.oldAmount) * BigInt(input.remaining), BigInt(input.length));
  const charge = nearest(BigInt(input.newAmount) * BigInt(input.remaining), BigInt(input.length));
  const net = credit + charge;
  const discount = input.off === null || net <= 0n ? 0n : 'percent' in input.off ? nearest(net * scaled(input.off.percent), 1000000n) : BigInt(Math.min(input.off.amount, Number(net)));
  const items = [credit, charge - discount];
  const taxes = input.rates.map((p) => items.reduce((s, a) => s + nearest(a * scaled(p), 1000000n), 0n));
  const total = net - discount + taxes.reduce((s, t) => s + t, 0n);
  return { credit: Number(credit), charge: Number(charge), discount: Number(discount), items: items.map(Number), taxes: taxes.map(Number), total: Number(total) };
}
const remainingOf = (periodEnd: string, now: string) => (Date.parse(periodEnd) - Date.parse(now)) / 1000;

/** The invoice Kassa made in Stripe for its latest change of this subscription. */
const kassaInvoice = (stripeSubId: string) =>
  [...stripe.invoices.values()].filter((i) => i.metadata?.kassa_plan_change !== undefined && i.parent?.subscription_details?.subscription === stripeSubId).at(-1);

/** Preview, change from it; Stripe's invoice, Kassa's order; all equal. `invoice.paid` then writes nothing more. */
async function changeAndCompare(id: string, stripeSubId: string, body: object) {
  const p = await preview(id, body);
  expect(p.status, JSON.stringify(p.body)).toBe(200);
  const updatesBefore = stripe.itemUpdates.length;
  const c = await change(id, { ...body, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
  expect(c.status, JSON.stringify(c.body)).toBe(200);
  const invoice = kassaInvoice(stripeSubId)!;
  expect(invoice).toMatchObject({ billing_reason: 'manual', status: 'paid', amount_paid: p.body.data.amountDueCents, total: p.body.data.amountDueCents, discounts: [] });
  expect(invoice.lines.data.every((l) => l.discountable === false && (l.discount_amounts ?? []).length === 0)).toBe(true);
  // The item changed after the payment, without Stripe's own proration.
  expect(stripe.itemUpdates.slice(updatesBefore)).toEqual([expect.objectContaining({ subscriptionId: stripeSubId, prorationBehavior: 'none', invoiceId: null })]);
  const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
  expect(order.amountCents).toBe(invoice.amount_paid);
  expect(kinds(order.lines)).toEqual(kinds(p.body.data.lines));
  const taxLines = (order.lines as Line[]).filter((l) => l.kind === 'TAX');
  expect(taxLines.map((l) => l.amountCents).sort()).toEqual(invoice.total_taxes!.filter((t) => t.tax_behavior === 'exclusive').map((t) => t.amount).sort());
  // Stripe's invoice.paid of this invoice finds the order: one order per payment.
  const orders = await db()('orders').where({ subscription_id: id }).count<{ count: string | number }[]>('* as count');
  if (invoice.amount_paid > 0) expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
  expect(await db()('orders').where({ subscription_id: id }).count<{ count: string | number }[]>('* as count')).toEqual(orders);
  return { preview: p.body.data as { lines: Line[]; amountDueCents: number; nextRenewalAmountCents: number }, invoice, order, changed: c.body.data };
}

const taxKinds = (lines: Line[], rates: string[], taxes: number[]) => lines.filter((l) => l.kind === 'TAX').map((l) => ['TAX', taxes[rates.indexOf(l.tax!.percentage)]]);

describe('plan and seat changes on Stripe that Kassa prorates itself (amount-off coupons, coupons ending inside the period)', () => {
  it('an upgrade with a 5.00 EUR FOREVER amount-off coupon and 19 %: two invoice items, TAX per item; preview = recomputation = Stripe = order', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Five off', amountOff: 500, currency: 'EUR', duration: 'FOREVER' });
    at('2027-11-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, { where: 'DE', couponId: off.id });
    at('2027-11-05T00:00:00.000Z');
    const { preview: p, invoice, changed } = await changeAndCompare(id, stripeSub.id, { priceId: pro });
    const want = expected({ oldAmount: 1250, newAmount: 3333, remaining: remainingOf('2027-12-01T00:00:00.000Z', '2027-11-05T00:00:00.000Z'), length: 30 * 86400, off: { amount: 500 }, rates: ['19'] });
    // −1083 + 2889 − 500; tax 19 % on −1083 and on 2389, each rounded: −206 + 454 = 248.
    expect(kinds(p.lines)).toEqual([['PRORATION', want.credit], ['PRORATION', want.charge], ['DISCOUNT', -500], ['TAX', want.taxes[0]]]);
    expect([want.credit, want.charge, want.taxes[0], want.total]).toEqual([-1083, 2889, 248, 1554]);
    expect(p.amountDueCents).toBe(want.total);
    expect(p.lines.find((l) => l.kind === 'DISCOUNT')!.description).toContain('Five off');
    expect(invoice.lines.data.map((l) => [l.amount, l.taxes![0]!.amount])).toEqual([[-1083, -206], [2389, 454]]);
    expect(invoice.lines.data[1]!.description).toContain('less Five off');
    expect(changed.subscription).toMatchObject({ priceId: pro, quantity: 1, amountCents: 3333 + 633 });
    const item = stripe.subscriptions.get(stripeSub.id)!.items.data[0]!;
    expect([item.price.unit_amount, item.quantity]).toEqual([3333, 1]);

    // Stripe's renewal still takes the amount off its own invoice; Kassa's renewal order is it.
    at('2027-12-01T00:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect(renewal.amount_paid).toBe(3333 - 500 + Math.round(2833 * 0.19));
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    const row = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(Number(row.amount_cents)).toBe(renewal.amount_paid);
  });

  it('seats 2 → 3 with an amount off larger than the proration, no tax: DISCOUNT = the net, an invoice of 0 paid without a charge, an order of 0', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Big off', amountOff: 5000, currency: 'EUR', duration: 'FOREVER' });
    at('2028-01-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, { where: 'none', quantity: 2, couponId: off.id });
    at('2028-01-20T12:00:00.000Z');
    const charges = stripe.charges.size;
    const { preview: p, invoice, order } = await changeAndCompare(id, stripeSub.id, { quantity: 3 });
    const want = expected({ oldAmount: 2500, newAmount: 3750, remaining: remainingOf('2028-02-01T00:00:00.000Z', '2028-01-20T12:00:00.000Z'), length: 31 * 86400, off: { amount: 5000 }, rates: [] });
    expect(kinds(p.lines)).toEqual([['PRORATION', want.credit], ['PRORATION', want.charge], ['DISCOUNT', -(want.credit + want.charge)]]);
    expect(p.amountDueCents).toBe(0);
    expect(invoice.amount_paid).toBe(0);
    expect(stripe.charges.size).toBe(charges);
    expect(order).toMatchObject({ status: 'PAID', amountCents: 0 });
  });

  it('seats with 5 % + 9.975 % and an amount-off coupon: one TAX line per rate, each the sum of its per-item roundings', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Seven off', amountOff: 777, currency: 'EUR', duration: 'FOREVER' });
    at('2028-02-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro, { where: 'QC', couponId: off.id });
    at('2028-02-11T13:14:15.000Z');
    const { preview: p } = await changeAndCompare(id, stripeSub.id, { quantity: 4 });
    const want = expected({ oldAmount: 3333, newAmount: 13332, remaining: remainingOf('2028-03-01T00:00:00.000Z', '2028-02-11T13:14:15.000Z'), length: 29 * 86400, off: { amount: 777 }, rates: ['5', '9.975'] });
    expect(kinds(p.lines)).toEqual([['PRORATION', want.credit], ['PRORATION', want.charge], ['DISCOUNT', -777], ...taxKinds(p.lines, ['5', '9.975'], want.taxes)]);
    expect(p.amountDueCents).toBe(want.total);
  });

  it('a downgrade with an amount-off coupon: at the period end, unprorated (no invoice); Stripe’s renewal bills the new plan less the amount off', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Three off', amountOff: 300, currency: 'EUR', duration: 'FOREVER' });
    at('2028-03-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro, { where: 'DE', couponId: off.id });
    at('2028-03-10T00:00:00.000Z');
    // An immediate downgrade with an amount-off coupon has no credit rule on Stripe yet: 409, nothing sent.
    const immediate = await preview(id, { priceId: basic, effective: 'IMMEDIATE' });
    expect(immediate.status).toBe(409);
    expect(immediate.body.error.message).toMatch(/immediate downgrade .* amount-off coupon/);
    const invoices = stripe.invoices.size;
    const p = await preview(id, { priceId: basic });
    expect(p.body.data).toMatchObject({ effective: 'PERIOD_END', amountDueCents: 0, lines: [] });
    const c = await change(id, { priceId: basic, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: 0 });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    expect(c.body.data.orderId).toBeNull();
    expect(stripe.invoices.size).toBe(invoices);
    expect(stripe.itemUpdates.at(-1)).toMatchObject({ subscriptionId: stripeSub.id, prorationBehavior: 'none' });
    at('2028-04-01T00:00:00.000Z');
    const renewal = stripe.renew(stripeSub.id);
    expect(renewal.amount_paid).toBe(950 + 181);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', renewal))).status).toBe(200);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic, scheduledChange: null });
  });

  it('a coupon ending inside the period (REPEATING 1 on a yearly price: Stripe’s 1 month), percent and amount off, with 19 %: Kassa’s DISCOUNT while the coupon covers the period', async () => {
    const tenPercent = await coupons().createCoupon(ctx.orgA.orgId, { name: 'First year', percentOff: '10', duration: 'REPEATING', durationInPeriods: 1 });
    const twentyOff = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Twenty off', amountOff: 2000, currency: 'EUR', duration: 'REPEATING', durationInPeriods: 1 });
    at('2028-05-01T00:00:00.000Z');
    const a = await subscribe(basicYear, { where: 'DE', couponId: tenPercent.id });
    const b = await subscribe(basicYear, { where: 'DE', quantity: 2, couponId: twentyOff.id });
    const length = remainingOf('2029-05-01T00:00:00.000Z', '2028-05-01T00:00:00.000Z');
    // Two months in: Stripe's discount (1 month) has ended; Kassa's coupon covers the first year.
    at('2028-07-03T08:00:00.000Z');
    const remaining = remainingOf('2029-05-01T00:00:00.000Z', '2028-07-03T08:00:00.000Z');
    const pa = (await changeAndCompare(a.id, a.stripeSub.id, { priceId: proYear })).preview;
    const wa = expected({ oldAmount: 12000, newAmount: 24000, remaining, length, off: { percent: '10' }, rates: ['19'] });
    expect(kinds(pa.lines)).toEqual([['PRORATION', wa.credit], ['PRORATION', wa.charge], ['DISCOUNT', -wa.discount], ['TAX', wa.taxes[0]]]);
    expect(pa.amountDueCents).toBe(wa.total);
    const pb = (await changeAndCompare(b.id, b.stripeSub.id, { quantity: 3 })).preview;
    const wb = expected({ oldAmount: 24000, newAmount: 36000, remaining, length, off: { amount: 2000 }, rates: ['19'] });
    expect(kinds(pb.lines)).toEqual([['PRORATION', wb.credit], ['PRORATION', wb.charge], ['DISCOUNT', -2000], ['TAX', wb.taxes[0]]]);
    expect(pb.amountDueCents).toBe(wb.total);
  });

  it('a ONCE coupon after a free trial (Stripe’s repeating 1 month from the trial’s start, ending inside the first paid period): discounted by Kassa’s rule; a ONCE coupon already used (no trial) takes nothing off, through Stripe’s own proration', async () => {
    const once = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Welcome off', amountOff: 400, currency: 'EUR', duration: 'ONCE' });
    at('2028-06-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(trialBasic, { where: 'DE', couponId: once.id });
    at('2028-06-15T00:00:00.000Z');
    const first = stripe.renew(stripeSub.id);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', first))).status).toBe(200);
    at('2028-06-20T00:00:00.000Z');
    const { preview: p } = await changeAndCompare(id, stripeSub.id, { priceId: trialPro });
    const want = expected({ oldAmount: 1000, newAmount: 2500, remaining: remainingOf('2028-07-15T00:00:00.000Z', '2028-06-20T00:00:00.000Z'), length: 30 * 86400, off: { amount: 400 }, rates: ['19'] });
    expect(kinds(p.lines)).toEqual([['PRORATION', want.credit], ['PRORATION', want.charge], ['DISCOUNT', -400], ['TAX', want.taxes[0]]]);
    expect(p.amountDueCents).toBe(want.total);

    // Without a trial the ONCE coupon is Stripe's `once`, spent on the first invoice: Stripe's own proration, no DISCOUNT.
    at('2028-08-01T00:00:00.000Z');
    const used = await subscribe(basic, { where: 'DE', couponId: once.id });
    at('2028-08-11T00:00:00.000Z');
    const q = await preview(used.id, { priceId: pro });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    expect(q.body.data.lines.map((l: Line) => l.kind)).toEqual(['PRORATION', 'PRORATION', 'TAX']);
    const c = await change(used.id, { priceId: pro, prorationDate: q.body.data.prorationDate, expectedAmountDueCents: q.body.data.amountDueCents });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    expect(stripe.itemUpdates.at(-1)).toMatchObject({ subscriptionId: used.stripeSub.id, prorationBehavior: 'always_invoice' });
    const invoice = stripe.invoices.get(stripe.subscriptions.get(used.stripeSub.id)!.latest_invoice as string)!;
    expect(invoice.amount_paid).toBe(q.body.data.amountDueCents);
  });

  it('a declined card: Stripe’s 402 on pay; the invoice is voided, Stripe’s item and Kassa’s subscription unchanged, no order (409)', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Two off', amountOff: 200, currency: 'EUR', duration: 'FOREVER' });
    at('2028-09-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, { where: 'DE', couponId: off.id });
    at('2028-09-10T00:00:00.000Z');
    const p = await preview(id, { priceId: pro });
    const updates = stripe.itemUpdates.length;
    stripe.finalizeOutcome = 'failed';
    try {
      const c = await change(id, { priceId: pro, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
      expect(c.status, JSON.stringify(c.body)).toBe(409);
      expect(c.body.error.message).toMatch(/declined/);
    } finally {
      stripe.finalizeOutcome = 'paid';
    }
    expect(kassaInvoice(stripeSub.id)).toMatchObject({ status: 'void', amount_paid: 0 });
    expect(stripe.itemUpdates.length).toBe(updates);
    expect(stripe.subscriptions.get(stripeSub.id)!.items.data[0]!.price.unit_amount).toBe(1250);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic });
    expect(await db()('orders').where({ subscription_id: id }).count<{ count: string | number }[]>('* as count')).toEqual([{ count: expect.anything() }]);
    expect((await db()('orders').where({ subscription_id: id })).length).toBe(1);
  });

  it('invoice.paid alone (Kassa’s answer lost): the order is the invoice’s two items with their per-item TAX, adding up to what Stripe collected', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Four off', amountOff: 400, currency: 'EUR', duration: 'FOREVER' });
    at('2028-10-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, { where: 'DE', couponId: off.id });
    at('2028-10-07T00:00:00.000Z');
    // The Stripe calls Kassa makes for such a change, made through the SDK, Kassa never hearing the answers.
    const sdk = new StripeSdk(SECRET_KEY, { host: new URL(stripeBase).hostname, port: Number(new URL(stripeBase).port), protocol: 'http' });
    const sub = stripe.subscriptions.get(stripeSub.id)!;
    const customer = sub.customer as string;
    const rates = (sub.default_tax_rates ?? []).map((r) => (typeof r === 'string' ? r : r.id));
    const draft = await sdk.invoices.create({ customer, subscription: sub.id, auto_advance: false, pending_invoice_items_behavior: 'exclude', discounts: '', metadata: { kassa_plan_change: 'lost' } });
    for (const [i, amount] of [-1000, 1600].entries()) {
      await sdk.invoiceItems.create({ customer, invoice: draft.id, amount, currency: 'eur', description: `item ${i}`, discountable: false, tax_rates: rates, metadata: { kassa_plan_change_line: String(i) } });
    }
    await sdk.invoices.finalizeInvoice(draft.id, { auto_advance: false });
    await sdk.invoices.pay(draft.id);
    const invoice = stripe.invoices.get(draft.id)!;
    expect(invoice).toMatchObject({ status: 'paid', amount_paid: 600 + (-190 + 304) });
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    const row = await db()('orders').where({ subscription_id: id }).whereNull('billing_period').first();
    const o = (await api('get', `/v1/orders/${row.id}`)).body.data;
    expect(o.amountCents).toBe(invoice.amount_paid);
    expect(kinds(o.lines)).toEqual([['PRORATION', -1000], ['PRORATION', 1600], ['TAX', 114]]);
  });

  it('money check: random amounts, seats, rates, amount-off and ending coupons, seconds — preview = recomputation = Stripe’s amount_paid = order (15 runs)', async () => {
    const product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Scale' })).id;
    let month = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 100, max: 250_000 }),
        fc.integer({ min: 100, max: 250_000 }),
        fc.constantFrom<Where>('DE', 'QC', 'none'),
        fc.oneof(fc.integer({ min: 1, max: 500_000 }).map((a) => ({ amount: a, yearly: false })), fc.integer({ min: 1, max: 9999 }).map((h) => ({ percent: (h / 100).toFixed(2).replace(/\.?0+$/, ''), yearly: true })), fc.integer({ min: 1, max: 500_000 }).map((a) => ({ amount: a, yearly: true }))),
        fc.integer({ min: 1, max: 400 * 86400 }),
        async (q1, extra, unitFrom, unitTo, where, coupon, offset) => {
          const interval = coupon.yearly ? 'YEAR' : 'MONTH';
          const from = (await ctx.services.catalog.createPrice(product, { amount: unitFrom, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: interval })).id;
          const to = (await ctx.services.catalog.createPrice(product, { amount: Math.max(unitFrom, unitTo), currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: interval })).id;
          const made = await coupons().createCoupon(ctx.orgA.orgId, {
            name: `C${month}`,
            ...('percent' in coupon ? { percentOff: coupon.percent } : { amountOff: coupon.amount, currency: 'EUR' }),
            ...(coupon.yearly ? { duration: 'REPEATING' as const, durationInPeriods: 1 } : { duration: 'FOREVER' as const }),
          });
          // A new stretch of time each run (the clock only moves forward).
          const start = new Date(Date.UTC(2030 + 2 * month, 0, 1));
          const end = new Date(Date.UTC(2030 + 2 * month + (coupon.yearly ? 1 : 0), coupon.yearly ? 0 : 1, 1));
          month++;
          const length = (end.getTime() - start.getTime()) / 1000;
          at(start.toISOString());
          const { id, stripeSub } = await subscribe(from, { where, quantity: q1, couponId: made.id });
          const now = new Date(start.getTime() + (offset % length) * 1000).toISOString();
          at(now);
          const off: Off = 'percent' in coupon ? { percent: coupon.percent } : { amount: coupon.amount };
          const want = expected({ oldAmount: unitFrom * q1, newAmount: Math.max(unitFrom, unitTo) * (q1 + extra), remaining: remainingOf(end.toISOString(), now), length, off, rates: RATES[where] });
          const body = { priceId: to, quantity: q1 + extra };
          const p = await preview(id, body);
          expect(p.status, JSON.stringify(p.body)).toBe(200);
          if (want.credit + want.charge <= 0) {
            expect(p.body.data.amountDueCents).toBe(0);
            return;
          }
          expect(p.body.data.amountDueCents).toBe(want.total);
          const { order, invoice } = await changeAndCompare(id, stripeSub.id, body);
          expect(order.amountCents).toBe(want.total);
          expect(invoice.lines.data.map((l) => l.amount)).toEqual(want.items);
        },
      ),
      { numRuns: 15 },
    );
  });
});
