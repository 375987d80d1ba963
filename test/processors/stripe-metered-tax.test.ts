/**
 * Exclusive tax and coupons on Stripe usage invoices (issue 38 §7, issue 39 §2 and §4), end to end
 * with the official `stripe` SDK against the Stripe-shaped server. Stripe taxes each invoice line
 * on its discounted amount, each rate rounded on its line (half up), and reports the sum per rate
 * (`total_taxes`). Kassa's usage invoice items carry the subscription's tax rates (the item's,
 * else the subscription's `default_tax_rates`), and the order of a usage invoice — a renewal, a
 * cancel-now's final invoice, a make-up — is the fee line, every USAGE line, the DISCOUNT Stripe
 * took and one TAX line per rate of what Stripe collected for it, adding up to `amount_paid`.
 * Before: the renewal fell back to one line, Stripe did not tax the usage items opened on
 * Kassa's own invoices, and those invoices carried no discount.
 */
import type Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerJobs } from '../../src/jobs.js';
import { setExternalId } from '../usage/helpers.js';
import { createStripeContext, type StripeContext } from './stripe-context.js';

let s: StripeContext;
const meters: string[] = [];
const db = () => s.ctx.testDb.database.db;
const usageJob = () => workerJobs({ services: s.ctx.services }).find((j) => j.name === 'stripe-usage-invoices')!;
const DAY = 24 * 3600_000;
const NAMES = ['alpha', 'beta', 'gamma'];

beforeAll(async () => {
  s = await createStripeContext();
  for (const name of NAMES) {
    const res = await s.ctx.merchant
      .post('/v1/meters')
      .set('X-API-Key', s.ctx.orgA.apiKey)
      .send({ name: `Taxed ${name}`, source: 'EVENTS', filter: { eventName: `taxed_${name}` }, aggregation: 'sum', property: 'n' });
    expect(res.status).toBe(201);
    meters.push(res.body.data.id as string);
  }
  const tax = s.ctx.services.modules.tax.tax;
  await tax.create(s.ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
  await tax.create(s.ctx.orgA.orgId, { displayName: 'GST', percentage: '5', country: 'CA' });
  await tax.create(s.ctx.orgA.orgId, { displayName: 'QST', percentage: '9.975', country: 'CA', region: 'CA-QC' });
});
afterAll(async () => {
  await s?.close();
});

type Where = 'DE' | 'QC';
const customerTax = (where: Where) => (where === 'DE' ? { country: 'DE' } : { country: 'CA', region: 'QC' });

async function meteredPrice(fee: number, unitAmounts: readonly string[]) {
  const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: 'Taxed metered plan' });
  const price = await s.ctx.admin.post(`/v1/products/${product.id}/prices`).send({
    amount: fee,
    currency: 'USD',
    pricingType: 'SUBSCRIPTION',
    billingInterval: 'MONTH',
    meteredComponents: unitAmounts.map((u, i) => ({ meterId: meters[i], pricing: { model: 'PER_UNIT', unitAmountDecimal: u } })),
  });
  expect(price.status, JSON.stringify(price.body)).toBe(201);
  return price.body.data.pricingId as string;
}

type Sub = { subscriptionId: string; stripeSub: Stripe.Subscription; externalId: string; n: number };
let buyers = 0;
async function subscribe(pricingId: string, where: Where, couponId?: string): Promise<Sub> {
  const n = ++buyers;
  const email = `usage-tax-${n}@example.com`;
  const res = await s.create({ pricingId, customerEmail: email, customerTax: customerTax(where), ...(couponId && { discounts: [{ coupon: couponId }] }) }, `usage-tax-${n}`);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const stripeSessionId = await s.stripeIdOf(res.body.data.id);
  s.stripe.complete(stripeSessionId, { email });
  expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
  const session = await s.readSession(res.body.data.id);
  const order = await s.readOrder(session.orderId);
  const externalId = `usage-tax-user-${n}`;
  expect((await setExternalId(s.ctx, order.customerId as string, externalId, s.ctx.orgA.apiKey)).status).toBe(200);
  const subscriptionId = (await db()('subscriptions').where({ checkout_session_id: res.body.data.id }).first()).id as string;
  return { subscriptionId, stripeSub: s.stripe.subscriptionOf(stripeSessionId), externalId, n };
}

async function ingestUsage(sub: Sub, tag: string, quantities: readonly number[], at: number) {
  const events = quantities.flatMap((q, i) => (q > 0 ? [{ id: `ut-${sub.n}-${tag}-${i}`, customer: { externalId: sub.externalId }, name: `taxed_${NAMES[i]}`, timestamp: new Date(at).toISOString(), properties: { n: q } }] : []));
  if (events.length === 0) return;
  const res = await s.ctx.merchant.post('/v1/usage-events').set('X-API-Key', s.ctx.orgA.apiKey).send({ events });
  expect(res.status).toBe(200);
  expect(res.body.data.results.map((r: { status: string }) => r.status)).not.toContain('REJECTED');
}

async function renewWithUsage(sub: Sub, period: number, quantities: readonly number[]) {
  const current = s.stripe.subscriptions.get(sub.stripeSub.id)!.items.data[0]!;
  const periodEnd = current.current_period_end * 1000;
  s.ctx.clock.set(new Date(current.current_period_start * 1000 + DAY).toISOString());
  await ingestUsage(sub, `p${period}`, quantities, current.current_period_start * 1000 + 3600_000);
  s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
  const draft = s.stripe.renewDraft(sub.stripeSub.id);
  expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
  s.ctx.clock.set(new Date(periodEnd + 3600_000 + 1000).toISOString());
  expect(await usageJob().run()).toBe(true);
  const invoice = s.stripe.invoices.get(draft.id)!;
  expect(invoice.status).toBe('paid');
  expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
  const row = await db()('orders').where({ subscription_id: sub.subscriptionId, billing_period: period }).first();
  return { invoice, order: (await s.readOrder(row.id)) as Order };
}

type Line = { kind: string; amountCents: number; description: string; tax?: { taxAmountCents: number; percentage: string } | null };
type Order = { amountCents: number; lines: Line[] };
const kinds = (lines: Line[]) => lines.map((l) => [l.kind, l.amountCents]);
const sum = (lines: Line[]) => lines.reduce((t, l) => t + l.amountCents, 0);
const usageItems = (invoice: Stripe.Invoice) => invoice.lines.data.filter((l) => l.parent?.invoice_item_details);
const lineTax = (l: Stripe.InvoiceLineItem) => (l.taxes ?? []).reduce((t, x) => t + x.amount, 0);
/** Each TAX line as [percentage, amount], by rate (the rates of one location come back in either order on the two databases). */
const taxByRate = (lines: Line[]) => Object.fromEntries(lines.filter((l) => l.kind === 'TAX').map((l) => [l.tax!.percentage, l.amountCents]));
const stripeTaxByRate = (invoice: Stripe.Invoice) => Object.fromEntries((invoice.total_taxes ?? []).map((t) => [s.stripe.taxRates.get(t.tax_rate_details!.tax_rate as string)!.percentage, t.amount]));

/** 19 % of `a`, half up (independent arithmetic). */
const vat19 = (a: number) => Math.floor((a * 19 + 50) / 100);

describe('exclusive tax on Stripe usage invoices', () => {
  it('renewal with 19 %: usage items carry the subscription’s rate; TAX is Stripe’s per-line sum (196), not Kassa’s once-rounded 197; every line kept, total = amount_paid', async () => {
    // Fee 1000 and usage 13 + 13 + 13: per line 190 + 2.47→2 ×3 = 196; on the sum, 19 % of 1039 = 197.41 → 197.
    // Before: the usage items were untaxed on Kassa's request and the order was one line.
    s.ctx.clock.set('2029-01-03T10:00:00.000Z');
    const price = await meteredPrice(1000, ['13', '13', '13']);
    const sub = await subscribe(price, 'DE');
    const { invoice, order } = await renewWithUsage(sub, 1, [1, 1, 1]);
    const rate = (s.stripe.subscriptions.get(sub.stripeSub.id)!.default_tax_rates ?? []).map((r) => (typeof r === 'string' ? r : r.id));
    // One request per item key (a retry under load repeats its key).
    const sent = new Map(s.stripe.requests.filter((r) => r.path === '/v1/invoiceitems' && r.body.invoice === invoice.id).map((r) => [r.idempotencyKey, r.body.tax_rates]));
    expect([...sent.values()]).toEqual([rate, rate, rate]);
    expect(usageItems(invoice).map(lineTax)).toEqual([2, 2, 2]);
    expect(invoice.total_taxes!.map((t) => t.amount)).toEqual([196]);
    expect(invoice.amount_paid).toBe(1039 + 196);
    expect(kinds(order.lines)).toEqual([
      ['PRICE', 1000],
      ['USAGE', 13],
      ['USAGE', 13],
      ['USAGE', 13],
      ['TAX', 196],
    ]);
    expect(order.lines.at(-1)!.tax).toMatchObject({ percentage: '19', taxAmountCents: 196 });
    expect(order.amountCents).toBe(invoice.amount_paid);
  });

  it('GST 5 % + QST 9.975 % with a 10 % coupon: DISCOUNT is what Stripe took, one TAX per rate on the discounted lines, each Stripe’s sum', async () => {
    s.stripe.discountAllocation = 'per-line';
    s.ctx.clock.set('2029-03-03T10:00:00.000Z');
    const price = await meteredPrice(1005, ['7', '11', '0.5']);
    const coupon = await s.ctx.services.modules.discounts.discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Ten taxed', percentOff: '10', duration: 'FOREVER' });
    const sub = await subscribe(price, 'QC', coupon.id);
    const { invoice, order } = await renewWithUsage(sub, 1, [3, 5, 9]);
    // Lines 1005, 21, 55, 5 (4.5 → 5); 10 % per line: 101, 2, 6, 1 (0.5 → 1) = 110; after: 904, 19, 49, 4.
    expect(invoice.total_discount_amounts!.map((d) => d.amount)).toEqual([110]);
    const net = [904, 19, 49, 4];
    const per = (p: bigint) => net.reduce((t, a) => t + Number((BigInt(a) * p * 2n + 1000000n) / 2000000n), 0);
    const expectedTax = { '5': per(50000n), '9.975': per(99750n) };
    expect(stripeTaxByRate(invoice)).toEqual(expectedTax);
    expect(kinds(order.lines.filter((l) => l.kind !== 'TAX'))).toEqual([
      ['PRICE', 1005],
      ['USAGE', 21],
      ['USAGE', 55],
      ['USAGE', 5],
      ['DISCOUNT', -110],
    ]);
    expect(taxByRate(order.lines)).toEqual(expectedTax);
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(sum(order.lines)).toBe(invoice.amount_paid);
    expect(invoice.amount_paid).toBe(976 + expectedTax['5'] + expectedTax['9.975']);
  });

  it('cancel now with 19 % and a 10 % coupon: the final usage invoice carries the subscription’s discount and rate; its order is USAGE, DISCOUNT, TAX = amount_paid', async () => {
    s.stripe.discountAllocation = 'per-line';
    s.ctx.clock.set('2029-05-03T10:00:00.000Z');
    const price = await meteredPrice(1005, ['5', '5', '5']);
    const coupon = await s.ctx.services.modules.discounts.discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Ten final', percentOff: '10', duration: 'FOREVER' });
    const sub = await subscribe(price, 'DE', coupon.id);
    s.ctx.clock.set('2029-05-05T10:00:00.000Z');
    await ingestUsage(sub, 'cancel', [1, 3, 5], Date.parse('2029-05-04T00:00:00Z'));
    expect((await s.ctx.admin.post(`/v1/subscriptions/${sub.subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
    const final = [...s.stripe.invoices.values()].find((i) => i.parent?.subscription_details?.subscription === sub.stripeSub.id && i.billing_reason === 'manual')!;
    // 5, 15, 25 less 1, 2, 3 → 4, 13, 22; 19 % per line: 0.76→1, 2.47→2, 4.18→4 = 7.
    expect(final.total_discount_amounts!.map((d) => d.amount)).toEqual([6]);
    expect(usageItems(final).map(lineTax)).toEqual([vat19(4), vat19(13), vat19(22)]);
    expect(final.amount_paid).toBe(39 + 7);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', final.id))).body.outcome).toBe('applied');
    const row = await db()('orders').where({ subscription_id: sub.subscriptionId, processor_payment_id: final.payments!.data[0]!.payment.payment_intent as string }).first();
    const order = (await s.readOrder(row.id)) as Order;
    expect(kinds(order.lines)).toEqual([
      ['USAGE', 5],
      ['USAGE', 15],
      ['USAGE', 25],
      ['DISCOUNT', -6],
      ['TAX', 7],
    ]);
    expect(order.amountCents).toBe(46);
  });

  it('a make-up invoice (renewal draft finalized without Kassa’s items) with 19 % and a 10 % coupon: discounted and taxed as the subscription’s invoices; its order adds up', async () => {
    s.stripe.discountAllocation = 'per-line';
    s.ctx.clock.set('2029-07-03T10:00:00.000Z');
    const price = await meteredPrice(1000, ['13', '13', '13']);
    const coupon = await s.ctx.services.modules.discounts.discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Ten makeup', percentOff: '10', duration: 'FOREVER' });
    const sub = await subscribe(price, 'DE', coupon.id);
    const current = s.stripe.subscriptions.get(sub.stripeSub.id)!.items.data[0]!;
    const periodEnd = current.current_period_end * 1000;
    s.ctx.clock.set(new Date(periodEnd - DAY).toISOString());
    await ingestUsage(sub, 'makeup', [1, 2, 3], periodEnd - 2 * DAY);
    s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
    const draft = s.stripe.renewDraft(sub.stripeSub.id);
    s.ctx.clock.set(new Date(periodEnd + 3600_000 + 2000).toISOString());
    expect(s.stripe.finalizeDue().map((i) => i.id)).toContain(draft.id);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
    const makeup = [...s.stripe.invoices.values()].find((i) => i.parent?.subscription_details?.subscription === sub.stripeSub.id && i.billing_reason === 'manual')!;
    expect(makeup.status).toBe('paid');
    // 13, 26, 39 less 1, 3, 4 (1.3→1, 2.6→3, 3.9→4) → 12, 23, 35; 19 %: 2.28→2, 4.37→4, 6.65→7 = 13.
    expect(makeup.total_discount_amounts!.map((d) => d.amount)).toEqual([8]);
    expect(makeup.total_taxes!.map((t) => t.amount)).toEqual([13]);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', makeup.id))).body.outcome).toBe('applied');
    const row = await db()('orders').where({ subscription_id: sub.subscriptionId, processor_payment_id: makeup.payments!.data[0]!.payment.payment_intent as string }).first();
    const order = (await s.readOrder(row.id)) as Order;
    expect(kinds(order.lines)).toEqual([
      ['USAGE', 13],
      ['USAGE', 26],
      ['USAGE', 39],
      ['DISCOUNT', -8],
      ['TAX', 13],
    ]);
    expect(order.amountCents).toBe(makeup.amount_paid);
  });

  it('a rate Kassa did not make (added to the invoice in Stripe’s Dashboard) keeps the order at one line of amount_paid', async () => {
    s.ctx.clock.set('2029-09-03T10:00:00.000Z');
    const price = await meteredPrice(1000, ['13', '13', '13']);
    const sub = await subscribe(price, 'DE');
    // The subscription's default rate swapped in Stripe for one without Kassa's metadata.
    const stored = s.stripe.subscriptions.get(sub.stripeSub.id)!;
    const own = s.stripe.taxRates.get((stored.default_tax_rates![0] as Stripe.TaxRate).id)!;
    const foreign = { ...own.rate, id: 'txr_dashboard_other', metadata: {} };
    s.stripe.taxRates.set(foreign.id, { rate: foreign, percentage: own.percentage });
    s.stripe.subscriptions.set(sub.stripeSub.id, { ...stored, default_tax_rates: [foreign] });
    const { invoice, order } = await renewWithUsage(sub, 1, [1, 1, 1]);
    expect(invoice.total_taxes!.map((t) => t.amount)).toEqual([196]);
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(sum(order.lines)).toBe(invoice.amount_paid);
    expect(order.lines.filter((l) => l.kind === 'USAGE')).toHaveLength(0);
  });
});
