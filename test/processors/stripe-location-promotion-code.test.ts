/**
 * "Add a promotion code" on the Stripe rail's location step (issue 39; docs/discounts.md "Code
 * field on the location step"), end to end against the Stripe-shaped server (./stripe-server.ts):
 * a code typed on Kassa's step is checked by Kassa's rules, the Stripe Checkout Session the step
 * opens carries its coupon as a code given at creation does, and the amount Stripe collects equals
 * the order's lines (PRICE, DISCOUNT, TAX). Changing the code after Stripe's page was opened
 * expires that Checkout Session (the same code again calls no one); the redemption counts once
 * however often the buyer goes back and forth. Bad and used codes get a message; the page's rate
 * limit applies. Also the step's label before a country ("Subtotal, before tax") and the footer
 * naming the Stripe rail (it said "sandbox" on every page before).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';
import type { DiscountService } from '../../src/discounts/discount.service.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
let discounts: DiscountService;
let priceId: string;
let planId: string;
let productId: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({
    env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '500', WEBHOOK_ALLOW_LOOPBACK: 'true' },
  });
  ctx.clock.set('2026-12-01T10:00:00.000Z');
  discounts = ctx.services.modules.discounts.discounts;
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
  productId = product.id;
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 1999, currency: 'EUR' })).id;
  const plan = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  planId = (await ctx.services.catalog.createPrice(plan.id, { amount: 1250, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  const tax = ctx.services.modules.tax.tax;
  await tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
  await tax.updateSettings(ctx.orgA.orgId, { merchantCountry: 'DE' });
});
afterAll(async () => {
  await stripe?.stop();
  await ctx?.close();
});
// The page's promotion-code limits count per client address for 15 minutes (the test client is one address): a fresh window per test.
beforeEach(() => {
  ctx.clock.set(new Date(ctx.clock.now().getTime() + 16 * 60_000).toISOString());
});

let keys = 0;
let codes = 0;
const create = (body: object = {}) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `stripe-step-code-${++keys}`).send({ pricingId: priceId, ...body });
const db = () => ctx.testDb.database.db;
const deliver = (event: Stripe.Event) => {
  const signed = stripe.signed(event);
  return ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
};
const readSession = async (id: string) => (await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
const order = async (id: string) => (await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
type Line = { kind: string; amountCents: number };
const kinds = (lines: Line[]) => lines.map((l) => [l.kind, l.amountCents]);
const sum = (lines: Line[]) => lines.reduce((s, l) => s + l.amountCents, 0);
const pathOf = (url: string) => new URL(url).pathname;
const createCalls = () => stripe.requests.filter((r) => r.path === '/v1/checkout/sessions' && r.method === 'POST').length;
const lastCreate = () => stripe.requests.filter((r) => r.path === '/v1/checkout/sessions' && r.method === 'POST').at(-1)!.body as Record<string, unknown>;
const stored = async (id: string) => db()('checkout_sessions').where({ id }).first();
const step = (url: string, form: Record<string, string>) => ctx.merchant.post(`${pathOf(url)}/tax`).type('form').send(form);
// "Apply" and "Remove" answer with a redirect to the step's page (redirect-after-POST), followed here as the browser does.
const applyCode = (url: string, code: string) => ctx.merchant.post(`${pathOf(url)}/promotion-code`).type('form').send({ code }).redirects(1);
const removeCode = (url: string) => ctx.merchant.post(`${pathOf(url)}/promotion-code`).type('form').send({ remove: '1' }).redirects(1);
const stripeSessionAt = (location: string) => stripe.sessions.get(location.split('/').at(-1)!)!;
const couponCount = async (couponId: string) => (await discounts.getCoupon(ctx.orgA.orgId, couponId)).timesRedeemed;
const codeCount = async (couponId: string, codeId: string) => (await discounts.listPromotionCodes(ctx.orgA.orgId, couponId)).find((p) => p.id === codeId)!.timesRedeemed;
const redemptionOf = async (sessionId: string) => db()('discount_redemptions').where({ checkout_session_id: sessionId }).whereNull('released_at').select('coupon_id', 'promotion_code_id');

async function newCode(coupon: Parameters<DiscountService['createCoupon']>[1], code: Partial<Parameters<DiscountService['createPromotionCode']>[1]> = {}) {
  const c = await discounts.createCoupon(ctx.orgA.orgId, coupon);
  const p = await discounts.createPromotionCode(ctx.orgA.orgId, { couponId: c.id, code: `STEP${++codes}`, ...code });
  return { coupon: c, code: p };
}

/** Continues on the step with `country`; the Stripe Checkout Session it opened. */
async function continueTo(url: string, country = 'DE') {
  const went = await step(url, { country });
  expect(went.status, went.text).toBe(303);
  return stripeSessionAt(went.headers.location!);
}

async function pay(kassaId: string, stripeSessionId: string) {
  const paid = stripe.complete(stripeSessionId, { email: 'buyer@example.com' });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const session = await readSession(kassaId);
  return { paid, session, order: await order(session.orderId) };
}

describe('the location step’s page', () => {
  it('offers "Add a promotion code", labels the amount before a country "Subtotal, before tax", and its footer names Stripe, not the sandbox', async () => {
    const res = await create();
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const page = await ctx.merchant.get(pathOf(res.body.data.url));
    expect(page.status).toBe(200);
    expect(page.text).toContain('<label for="promotion-code">Add a promotion code</label>');
    expect(page.text).toMatch(/<span>Subtotal, before tax<\/span><strong class="amount" data-testid="amount">€19\.99<\/strong>/);
    expect(page.text).toContain('Tax is calculated after you choose your country.');
    expect(page.text).not.toMatch(/<span>Total<\/span>/);
    expect(page.text).toContain('<footer>Secured by Kassa · card payment by Stripe</footer>');
    expect(page.text).not.toContain('sandbox');

    // After a country: the TAX lines and "Total" (the amount Stripe's page shows).
    await continueTo(res.body.data.url);
    const back = await ctx.merchant.get(pathOf(res.body.data.url));
    expect(back.text).toMatch(/<span>Total<\/span><strong class="amount" data-testid="amount">€23\.79<\/strong>/);
    expect(back.text).not.toContain('Subtotal, before tax');
    // The pages after the step name the rail too.
    const canceled = await ctx.merchant.get(`${pathOf(res.body.data.url)}/canceled`);
    expect(canceled.text).toContain('Secured by Kassa · card payment by Stripe');
    expect(canceled.text).not.toContain('sandbox');
  });
});

describe('a promotion code typed on the step', () => {
  it('is checked by Kassa, carried to Stripe as a coupon; Stripe collects exactly the order’s PRICE, DISCOUNT and TAX lines', async () => {
    const { coupon, code } = await newCode({ name: 'Spring', percentOff: '20', duration: 'ONCE', productIds: [productId] }, { maxRedemptions: 5 });
    const res = await create();
    const calls = createCalls();
    const applied = await applyCode(res.body.data.url, code.code.toLowerCase());
    expect(applied.status, applied.text).toBe(200);
    expect(applied.redirects).toEqual([expect.stringMatching(/\/checkout\/[^/?]+\?promotion=applied$/)]);
    expect(applied.text).toContain(`${code.code} applied.`);
    expect(applied.text).toContain('−€4.00');
    expect(applied.text).toMatch(/Subtotal, before tax<\/span><strong class="amount" data-testid="amount">€15\.99</);
    expect(applied.text).toContain(`Remove ${code.code}`);
    // Nothing opened nor redeemed yet: the step is where the buyer may still change it.
    expect(createCalls()).toBe(calls);
    expect(await couponCount(coupon.id)).toBe(0);
    expect(await readSession(res.body.data.id)).toMatchObject({ amount: 1599 });

    const opened = await continueTo(res.body.data.url);
    expect(lastCreate()).toMatchObject({ discounts: [{ coupon: `kassa_${coupon.id}_once` }] });
    expect(lastCreate()).not.toHaveProperty('allow_promotion_codes');
    // 19.99 − 20 % (4.00) = 15.99; 19 % of it = 3.0381 → 3.04.
    expect(opened.amount_total).toBe(1903);
    expect(await readSession(res.body.data.id)).toMatchObject({ amount: 1903 });
    expect(await couponCount(coupon.id)).toBe(1);
    expect(await codeCount(coupon.id, code.id)).toBe(1);

    const { paid, order: o } = await pay(res.body.data.id, opened.id);
    expect(paid).toMatchObject({ amount_total: 1903, total_details: { amount_discount: 400, amount_tax: 304 } });
    expect(kinds(o.lines)).toEqual([['PRICE', 1999], ['DISCOUNT', -400], ['TAX', 304]]);
    expect(sum(o.lines)).toBe(paid.amount_total);
    expect(o.amountCents).toBe(paid.amount_total);
    expect(await couponCount(coupon.id)).toBe(1);
  });

  it('a subscription: the subscription’s coupon from the step; the first order equals Stripe’s invoice', async () => {
    const { coupon, code } = await newCode({ name: 'First month', amountOff: 300, currency: 'EUR', duration: 'ONCE' });
    const res = await create({ pricingId: planId });
    expect((await applyCode(res.body.data.url, code.code)).status).toBe(200);
    const opened = await continueTo(res.body.data.url);
    expect(lastCreate()).toMatchObject({ mode: 'subscription', discounts: [{ coupon: `kassa_${coupon.id}_once` }] });
    const paid = stripe.complete(opened.id, { email: 'sub@example.com' });
    // 12.50 − 3.00 = 9.50; 19 % = 1.805 → 1.81.
    expect(paid.amount_total).toBe(1131);
    expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
    const row = await db()('subscriptions').where({ checkout_session_id: res.body.data.id }).first();
    const o = await order(row.initial_order_id);
    expect(kinds(o.lines)).toEqual([['PRICE', 1250], ['DISCOUNT', -300], ['TAX', 181]]);
    expect(sum(o.lines)).toBe(paid.amount_total);
  });

  it('back and forth: the same code again calls no one; another (or none) expires the open Stripe session first; each code counts once', async () => {
    const a = await newCode({ name: 'Ten', percentOff: '10', duration: 'ONCE' });
    const b = await newCode({ name: 'Five off', amountOff: 500, currency: 'EUR', duration: 'ONCE' });
    const res = await create();
    const url = res.body.data.url as string;
    const id = res.body.data.id as string;
    expect((await applyCode(url, a.code.code)).status).toBe(200);
    const first = await continueTo(url);
    expect(await couponCount(a.coupon.id)).toBe(1);

    // The same code again (a double submit, the back button): nothing changes, Stripe is not called.
    const requests = stripe.requests.length;
    const again = await applyCode(url, a.code.code);
    expect(again.status).toBe(200);
    expect(stripe.requests.length).toBe(requests);
    expect((await stored(id)).processor_url).toBe(first.url);
    expect((await continueTo(url)).id).toBe(first.id);
    expect(stripe.requests.length).toBe(requests);

    // Removed: the open Stripe session is expired, none opened until "Continue".
    const calls = createCalls();
    const removed = await removeCode(url);
    expect(removed.status).toBe(200);
    expect(removed.text).toContain('Promotion code removed.');
    expect(stripe.sessions.get(first.id)!.status).toBe('expired');
    expect(createCalls()).toBe(calls);
    expect(await readSession(id)).toMatchObject({ status: 'CREATED', amount: 2379 });
    // Its expired event is not the Kassa session's expiry.
    expect((await deliver(stripe.event('checkout.session.expired', stripe.sessions.get(first.id)!))).status).toBe(200);
    expect((await readSession(id)).status).toBe('CREATED');

    const plain = await continueTo(url);
    expect(lastCreate()).not.toHaveProperty('discounts');
    expect(plain.amount_total).toBe(2379);
    expect(await couponCount(a.coupon.id)).toBe(0);
    expect(await redemptionOf(id)).toEqual([]);

    // A, B, A again: each hand-off holds the redemption of the code it opens Stripe with.
    expect((await applyCode(url, a.code.code)).status).toBe(200);
    expect(stripe.sessions.get(plain.id)!.status).toBe('expired');
    await continueTo(url);
    expect(await couponCount(a.coupon.id)).toBe(1);
    expect((await applyCode(url, b.code.code)).status).toBe(200);
    const withB = await continueTo(url);
    // 19.99 − 5.00 = 14.99; 19 % = 2.8481 → 2.85.
    expect(withB.amount_total).toBe(1784);
    expect([await couponCount(a.coupon.id), await couponCount(b.coupon.id)]).toEqual([0, 1]);
    expect((await applyCode(url, a.code.code)).status).toBe(200);
    const last = await continueTo(url);
    expect([await couponCount(a.coupon.id), await couponCount(b.coupon.id)]).toEqual([1, 0]);
    expect(await codeCount(a.coupon.id, a.code.id)).toBe(1);
    expect(await redemptionOf(id)).toEqual([{ coupon_id: a.coupon.id, promotion_code_id: a.code.id }]);
    // One Stripe session of the Kassa session is open: the last one.
    expect([...stripe.sessions.values()].filter((s) => s.client_reference_id === id && s.status === 'open').map((s) => s.id)).toEqual([last.id]);

    const { paid, order: o } = await pay(id, last.id);
    // 19.99 − 10 % (2.00) = 17.99; 19 % = 3.4181 → 3.42.
    expect(kinds(o.lines)).toEqual([['PRICE', 1999], ['DISCOUNT', -200], ['TAX', 342]]);
    expect(sum(o.lines)).toBe(paid.amount_total);
    expect(await couponCount(a.coupon.id)).toBe(1);
  });

  it('the buyer paid the Stripe session of the old code meanwhile (another tab): the change is not made, that payment stands', async () => {
    const a = await newCode({ name: 'Fifteen', percentOff: '15', duration: 'ONCE' });
    const b = await newCode({ name: 'Twenty', percentOff: '20', duration: 'ONCE' });
    const res = await create();
    expect((await applyCode(res.body.data.url, a.code.code)).status).toBe(200);
    const opened = await continueTo(res.body.data.url);
    const paid = stripe.complete(opened.id, { email: 'tab@example.com' });
    const calls = createCalls();
    const changed = await applyCode(res.body.data.url, b.code.code);
    expect(changed.redirects).toEqual([expect.stringMatching(/\/complete$/)]);
    expect(changed.text).toContain('Your payment is processing.');
    expect(createCalls()).toBe(calls);
    expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
    const session = await readSession(res.body.data.id);
    expect(session.status).toBe('COMPLETE');
    const o = await order(session.orderId);
    expect(o.lines.map((l: Line) => l.kind)).toEqual(['PRICE', 'DISCOUNT', 'TAX']);
    expect(sum(o.lines)).toBe(paid.amount_total);
    expect([await couponCount(a.coupon.id), await couponCount(b.coupon.id)]).toEqual([1, 0]);
  });
});

describe('bad, used and guessed codes on the step', () => {
  it('an unknown, an expired, a used-up code: a clear message tied to the field, nothing changed or opened', async () => {
    const used = await newCode({ name: 'Once only', percentOff: '50', duration: 'ONCE' }, { maxRedemptions: 1 });
    const other = await create({ discounts: [{ promotionCode: used.code.code }] });
    expect(other.status).toBe(201);
    expect(await codeCount(used.coupon.id, used.code.id)).toBe(1);
    const expired = await newCode({ name: 'Gone', percentOff: '50', duration: 'ONCE' }, { expiresAt: new Date(ctx.clock.now().getTime() + 60_000).toISOString() });
    ctx.clock.set(new Date(ctx.clock.now().getTime() + 120_000).toISOString());

    const res = await create();
    const calls = createCalls();
    for (const [code, message] of [
      ['NOPE-NOPE', 'The promotion code NOPE-NOPE is not valid.'],
      [expired.code.code, `The promotion code ${expired.code.code} has expired.`],
      [used.code.code, `The promotion code ${used.code.code} has been used up.`],
      ['bad code!', 'Enter a promotion code of letters, digits, - or _.'],
    ] as const) {
      const page = await applyCode(res.body.data.url, code);
      expect(page.status, page.text).toBe(400);
      expect(page.headers['content-type']).toMatch(/text\/html/);
      expect(page.text).toContain(message);
      expect(page.text).toContain('aria-invalid="true" aria-describedby="promotion-code-message"');
      expect(page.text).toContain('Where are you buying from?');
    }
    expect(createCalls()).toBe(calls);
    expect(await readSession(res.body.data.id)).toMatchObject({ amount: 1999 });
  });

  it('rate limits guesses per checkout: the 11th attempt in 15 minutes is a 429 page', async () => {
    const res = await create();
    for (let i = 0; i < 10; i++) expect((await applyCode(res.body.data.url, `GUESS${i}`)).status).toBe(400);
    const limited = await applyCode(res.body.data.url, 'GUESS10');
    expect(limited.status).toBe(429);
    expect(limited.text).toContain('Too many promotion code attempts. Wait a few minutes, then try again.');
    expect(limited.text).toContain('Where are you buying from?');
  });

  it('a code used up between typing it and continuing: taken off with the new total, nothing opened; continuing again pays the full price', async () => {
    const last = await newCode({ name: 'Last one', percentOff: '25', duration: 'ONCE' }, { maxRedemptions: 1 });
    const slow = await create();
    const fast = await create();
    expect((await applyCode(slow.body.data.url, last.code.code)).status).toBe(200);
    expect((await applyCode(fast.body.data.url, last.code.code)).status).toBe(200);
    await continueTo(fast.body.data.url);
    expect(await codeCount(last.coupon.id, last.code.id)).toBe(1);

    const calls = createCalls();
    const refused = await step(slow.body.data.url, { country: 'DE' });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain(`The promotion code ${last.code.code} has been used up or has expired. It was removed: the total is now €19.99 before tax.`);
    expect(refused.text).toContain('role="alert"');
    expect(createCalls()).toBe(calls);
    expect(await readSession(slow.body.data.id)).toMatchObject({ amount: 1999 });
    const full = await continueTo(slow.body.data.url);
    expect(full.amount_total).toBe(2379);
    expect(await codeCount(last.coupon.id, last.code.id)).toBe(1);
  });

  it('a code limited per customer needs the session’s e-mail (Stripe asks it after the redemption); with it, it is checked', async () => {
    const first = await newCode({ name: 'Welcome', percentOff: '30', duration: 'ONCE' }, { firstTimeTransaction: true });
    const anonymous = await create();
    const refused = await applyCode(anonymous.body.data.url, first.code.code);
    expect(refused.status).toBe(400);
    expect(refused.text).toContain(`The promotion code ${first.code.code} is limited per customer and cannot be used on this checkout`);

    const named = await create({ customerEmail: 'new-buyer@example.com' });
    expect((await applyCode(named.body.data.url, first.code.code)).status).toBe(200);
    const opened = await continueTo(named.body.data.url);
    expect(lastCreate()).toMatchObject({ customer_email: 'new-buyer@example.com', discounts: [{ coupon: `kassa_${first.coupon.id}_once` }] });
    expect((await redemptionOf(named.body.data.id))).toHaveLength(1);
    expect(opened.amount_total).toBe(1665); // 19.99 − 6.00 = 13.99; 19 % = 2.6581 → 2.66
  });

  it('a merchant’s coupon given at creation can be removed on the step; its redemption is given back at the next hand-off', async () => {
    const c = await discounts.createCoupon(ctx.orgA.orgId, { name: 'Merchant gift', percentOff: '10', duration: 'ONCE' });
    const res = await create({ discounts: [{ coupon: c.id }] });
    expect(res.status).toBe(201);
    expect(await couponCount(c.id)).toBe(1);
    const page = await ctx.merchant.get(pathOf(res.body.data.url));
    expect(page.text).toContain('Remove Merchant gift');
    await continueTo(res.body.data.url);
    expect(await couponCount(c.id)).toBe(1);
    expect((await removeCode(res.body.data.url)).status).toBe(200);
    await continueTo(res.body.data.url);
    expect(await couponCount(c.id)).toBe(0);
  });
});

describe('races', () => {
  it('a code change racing "Continue": the open Stripe session carries the session’s discount and the redemption is that one (rounds)', async () => {
    const a = await newCode({ name: 'Race A', percentOff: '10', duration: 'ONCE' });
    const b = await newCode({ name: 'Race B', percentOff: '20', duration: 'ONCE' });
    const rounds = 8;
    for (let round = 0; round < rounds; round++) {
      const res = await create();
      const url = res.body.data.url as string;
      const id = res.body.data.id as string;
      expect((await applyCode(url, a.code.code)).status).toBe(200);
      if (round % 2 === 1) await continueTo(url);
      const [changed, went] = await Promise.all([applyCode(url, b.code.code), step(url, { country: 'DE' })]);
      expect([200, 400]).toContain(changed.status);
      expect([303, 409]).toContain(went.status);
      // Whatever won, one more "Continue" settles it, and everything agrees.
      const final = await continueTo(url);
      const row = await stored(id);
      expect(row.processor_session_id).toBe(final.id);
      const discount = row.pricing.discount as { couponId: string; promotionCodeId: string } | undefined;
      expect(final.amount_total).toBe(Number(row.amount));
      expect(final.total_details?.amount_discount ?? 0).toBe(discount ? (discount.couponId === a.coupon.id ? 200 : 400) : 0);
      expect(await redemptionOf(id)).toEqual(discount ? [{ coupon_id: discount.couponId, promotion_code_id: discount.promotionCodeId }] : []);
      expect([...stripe.sessions.values()].filter((s) => s.client_reference_id === id && s.status === 'open').map((s) => s.id)).toEqual([final.id]);
    }
    // Every round's session holds exactly one redemption, of A or B.
    expect((await couponCount(a.coupon.id)) + (await couponCount(b.coupon.id))).toBe(rounds);
  });
});
