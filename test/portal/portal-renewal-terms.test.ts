/**
 * What the portal's confirm pages say about money (the new-user walk, issue 39): a plan or seat
 * change's "Then … at each renewal" priced by the renewal's own pricing (renewalOrder: the seats,
 * the checkout's coupon while it lasts, the first order's tax), equal to the renewal orders that
 * then charge it; cancelling during a free trial says nothing was and nothing will be charged,
 * never "you will not be charged again".
 */
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let team: string;
let trialPrice: string;
let n = 0;
const ORIGIN = 'http://merchant.test';
const http = () => supertest(ctx.apps.merchant);
const csrfOf = (html: string) => /name="csrf" value="([0-9a-f]{64})"/.exec(html)?.[1];
const text = (html: string) => html.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');

beforeAll(async () => {
  ctx = await createTestContext();
  ctx.clock.set('2026-11-01T09:00:00.000Z');
  await ctx.services.modules.tax.tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team plan' });
  team = (await ctx.services.catalog.createPrice(product.id, { amount: 2000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  trialPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 2000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', trialDays: 14 })).id;
});
afterAll(async () => {
  await ctx?.close();
});

async function buy(email: string, pricingId: string, extra: object = {}) {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `renewal-terms-${++n}`).send({ pricingId, customerEmail: email, customerTax: { country: 'DE' }, ...extra });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const paid = await http().post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const row = await ctx.testDb.database.db('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
  return { subscriptionId: row.id as string, customerId: row.customer_id as string };
}

async function enter(body: object): Promise<string> {
  const link = await ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', ctx.orgA.apiKey).send(body);
  expect(link.status, JSON.stringify(link.body)).toBe(201);
  const path = new URL(link.body.data.url).pathname;
  const entered = await http().post(path).set('Origin', ORIGIN).type('form').send({});
  expect(entered.status).toBe(303);
  return [entered.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!.split(';')[0]!;
}

describe('a seat change’s renewals with a coupon that ends and VAT', () => {
  it('the confirm page says what the next renewals charge, as the renewals then charge it', async () => {
    const coupon = await ctx.merchant.post('/v1/coupons').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Launch', percentOff: '20', duration: 'REPEATING', durationInPeriods: 2 });
    expect(coupon.status, JSON.stringify(coupon.body)).toBe(201);
    const { subscriptionId, customerId } = await buy('seats@example.com', team, { quantity: 2, discounts: [{ coupon: coupon.body.data.id }] });
    ctx.clock.set('2026-11-11T09:00:00.000Z');
    const cookie = await enter({ customerId, allowQuantityChange: true });
    const page = await http().get(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie);
    expect(page.status).toBe(200);
    const preview = await http().post(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ csrf: csrfOf(page.text), quantity: '3', step: 'preview' });
    expect(preview.status).toBe(200);
    // The next renewal (period 1, the coupon's second): 3 × 2000 − 20 % = 4800, + 19 % = 5712; then 6000 + 19 % = 7140.
    // Before: "Then €71.40 at each renewal." (the stored amount, no coupon).
    expect(text(preview.text)).toContain('Then €57.12 at the next renewal (your discount), then €71.40 at each renewal.');
    const hiddenOf = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(preview.text)![1]!;
    const confirmed = await http().post(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie).set('Origin', ORIGIN).type('form')
      .send({ csrf: csrfOf(preview.text), quantity: '3', prorationDate: hiddenOf('prorationDate'), expected: hiddenOf('expected'), step: 'confirm' });
    expect(confirmed.status).toBe(200);
    const db = ctx.testDb.database.db;
    const amounts: number[] = [];
    for (let period = 1; period <= 2; period++) {
      const row = await db('subscriptions').where({ id: subscriptionId }).first();
      ctx.clock.set(new Date(new Date(row.current_period_end).getTime() + 2 * 3_600_000).toISOString());
      await ctx.services.subscriptions.processDue();
      amounts.push(Number((await db('orders').where({ subscription_id: subscriptionId, billing_period: period }).first()).amount_cents));
    }
    expect(amounts).toEqual([5712, 7140]);
  });
});

describe('cancelling during a free trial', () => {
  it('at the trial’s end: the confirm page and the notice say nothing will be charged (not "charged again")', async () => {
    ctx.clock.set('2027-03-01T09:00:00.000Z');
    const { subscriptionId, customerId } = await buy('trial-cancel@example.com', trialPrice);
    const cookie = await enter({ customerId });
    const confirm = await http().get(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie);
    expect(confirm.status).toBe(200);
    const page = text(confirm.text);
    expect(page).not.toContain('charged again');
    expect(page).toContain('Your free trial ends on 15 March 2027 and your subscription will not start. You will not be charged.');
    const done = await http().post(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ confirm: 'yes', csrf: csrfOf(confirm.text) });
    expect(done.status).toBe(200);
    expect(text(done.text)).not.toContain('charged again');
    expect(text(done.text)).toContain('Your free trial of Team plan ends on 15 March 2027; you will not be charged.');
  });

  it('now: the confirm page says the trial ends now and nothing is charged (not "the current period is not refunded")', async () => {
    ctx.clock.set('2027-04-01T09:00:00.000Z');
    const { subscriptionId, customerId } = await buy('trial-cancel-now@example.com', trialPrice);
    const cookie = await enter({ customerId, allowCancelNow: true });
    const confirm = await http().get(`/portal/subscriptions/${subscriptionId}/cancel?now=1`).set('Cookie', cookie);
    expect(confirm.status).toBe(200);
    const page = text(confirm.text);
    expect(page).not.toContain('not refunded');
    expect(page).toContain('Your free trial ends now and you lose access. You will not be charged.');
    const done = await http().post(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ confirm: 'yes', when: 'now', csrf: csrfOf(confirm.text) });
    expect(done.status).toBe(200);
    expect(text(done.text)).toContain('Your free trial of Team plan is canceled; you were not charged.');
  });
});

describe('plan choices of one product', () => {
  it('names each price where the buyer chooses (its own name beside the product’s), so two prices of one product are told apart', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Studio' });
    const basic = (await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', pricingName: 'Basic' })).id;
    const plus = (await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', pricingName: 'Plus (priority support)' })).id;
    const unnamed = (await ctx.services.catalog.createPrice(product.id, { amount: 3000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
    const { subscriptionId, customerId } = await buy('choices@example.com', basic);
    const cookie = await enter({ customerId, planChangePriceIds: [plus, unnamed] });
    const page = await http().get(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie);
    expect(page.status).toBe(200);
    const choices = [...page.text.matchAll(/<input type="radio" name="priceId" value="(PRC_[^"]*|[^"]+)"> <span>([^<]*)</g)].map((m) => [m[1], m[2]!.trim()]);
    // Before: both read "Studio" (the product's name only).
    expect(choices).toContainEqual([plus, 'Studio — Plus (priority support)']);
    // A price named after its product (no name of its own) shows the product's name once.
    expect(choices).toContainEqual([unnamed, 'Studio']);
  });
});
