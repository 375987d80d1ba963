/**
 * What the hosted checkout page tells a buyer before paying a subscription, and what the page after
 * a trial's start says (the new-user walk, issues 38 and 39): the usage charges of a metered price
 * (one line per component: per unit, package, graduated tiers); after a trial, what the first
 * periods charge with the coupon's end and the tax the amounts include — the amounts equal to the
 * renewal orders that then charge them; a €0 trial start says the trial started, when and how much
 * the first charge is (not "Payment received").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let tokensMeter: string;
let minutesMeter: string;
let meteredTrial: string;
let n = 0;

const text = (html: string) => html.replace(/<[^>]+>/g, ' ').replace(/&#39;|&#x27;/g, "'").replace(/&amp;/g, '&').replace(/\s+/g, ' ');
const createSession = (body: object) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `terms-${++n}`).send({ customerEmail: `terms${n}@example.com`, ...body });

beforeAll(async () => {
  ctx = await createTestContext();
  ctx.clock.set('2026-12-01T10:00:00.000Z');
  const meter = async (name: string, eventName: string) => {
    const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name, source: 'EVENTS', filter: { eventName }, aggregation: 'sum', property: 'value' });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.data.id as string;
  };
  tokensMeter = await meter('tokens', 'llm_tokens');
  minutesMeter = await meter('transcription minutes', 'minutes');
  await ctx.services.modules.tax.tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team' });
  const price = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
    amount: 4000,
    currency: 'EUR',
    pricingType: 'SUBSCRIPTION',
    billingInterval: 'MONTH',
    trialDays: 14,
    meteredComponents: [
      { meterId: tokensMeter, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } },
      {
        meterId: minutesMeter,
        pricing: { model: 'GRADUATED', tiers: [{ upTo: 100, unitAmountDecimal: '0' }, { upTo: 1000, unitAmountDecimal: '5' }, { upTo: null, unitAmountDecimal: '2.5' }] },
      },
    ],
  });
  expect(price.status, JSON.stringify(price.body)).toBe(201);
  meteredTrial = price.body.data.pricingId;
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

describe('the hosted checkout page of a metered subscription with a trial, a 3-month coupon and VAT', () => {
  let path: string;
  let sessionId: string;

  it('states the usage charges, the coupon’s end and the VAT before paying', async () => {
    const coupon = await ctx.merchant.post('/v1/coupons').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Launch', percentOff: '20', duration: 'REPEATING', durationInPeriods: 3 });
    expect(coupon.status, JSON.stringify(coupon.body)).toBe(201);
    const created = await createSession({ pricingId: meteredTrial, customerTax: { country: 'DE' }, discounts: [{ coupon: coupon.body.data.id }] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // The usage terms are the page's: the API's session pricing is unchanged.
    expect(created.body.data.pricing).not.toHaveProperty('usage');
    path = new URL(created.body.data.url).pathname;
    sessionId = created.body.data.id;
    const page = text((await ctx.merchant.get(path)).text);
    // Before: "14 days free, then €38.08/month" and no word of usage.
    expect(page).toContain('Plus usage of tokens: €0.04 per 1,000 after 10,000 included each month');
    expect(page).toContain('Plus usage of transcription minutes: free up to 100, then €50.00 per 1,000 up to 1,000, then €25.00 per 1,000, billed each month');
    // 4000 − 20 % = 3200, + 19 % = 3808; after the coupon's 3 months 4000 + 19 % = 4760.
    expect(page).toContain('14 days free, then €38.08/month for 3 months, then €47.60/month plus usage (VAT 19% included)');
  });

  it('the trial’s start says the trial started, its end and its first charge (not "Payment received"); the renewals charge what the page said', async () => {
    const paid = await ctx.merchant.post(`${path}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
    expect(paid.status).toBe(303);
    const done = await ctx.merchant.get(`${path}/complete`);
    expect(done.status).toBe(200);
    const page = text(done.text);
    expect(page).not.toContain('Payment received');
    expect(page).toContain('Your free trial has started. Your first charge, on 15 December 2026, is €38.08 (VAT 19% included) plus usage. Nothing was charged today.');
    expect(page).toContain('Trial started');

    const db = ctx.testDb.database.db;
    const sub = await db('subscriptions').where({ checkout_session_id: sessionId }).first();
    const amounts: number[] = [];
    for (let period = 1; period <= 4; period++) {
      const row = await db('subscriptions').where({ id: sub.id }).first();
      ctx.clock.set(new Date(new Date(row.current_period_end).getTime() + 2 * 3_600_000).toISOString());
      await ctx.services.subscriptions.processDue();
      const order = await db('orders').where({ subscription_id: sub.id, billing_period: period }).first();
      expect(order, `the order of period ${period}`).toBeTruthy();
      amounts.push(Number(order.amount_cents));
    }
    // No usage: the fee alone — the coupon's 3 months at €38.08, then €47.60.
    expect(amounts).toEqual([3808, 3808, 3808, 4760]);
  });
});

describe('a subscription without a trial whose coupon ends', () => {
  it('says what the renewals charge once the coupon ends', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic' });
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' });
    const coupon = await ctx.merchant.post('/v1/coupons').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'First month', percentOff: '50', duration: 'ONCE' });
    const created = await createSession({ pricingId: price.id, customerTax: { country: 'DE' }, discounts: [{ coupon: coupon.body.data.id }] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const page = text((await ctx.merchant.get(new URL(created.body.data.url).pathname)).text);
    expect(page).toContain('The discount covers the first month; then €11.90/month (VAT 19% included).');
    expect(page).not.toContain('Plus usage');
  });
});
