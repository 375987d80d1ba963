/**
 * Plan and seat changes (issue 39, item 3) on the sandbox rail, on a fake clock, through the
 * merchant API: the preview equals the order the change charges (lines and total); an upgrade is
 * prorated to the second and charged now (PRORATION lines, `order.paid`, `subscription.updated`);
 * a downgrade is scheduled for the period end and the renewal charges the new amount; seats; a
 * change during a trial; the refusals (4xx naming the field); a declined card changes nothing; the
 * buyer's e-mail. On PostgreSQL: rounds of two concurrent changes and of a change racing the
 * renewal job (separate pools).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { onSecondPool } from '../harness/second-pool.js';
import { startSmtp } from '../buyer-emails/smtp.js';

let smtp: Awaited<ReturnType<typeof startSmtp>>;
let ctx: TestContext;
let basic: string;
let pro: string;
let team: string;
let other: { yearly: string; eur: string; oneTime: string };
let n = 0;

beforeAll(async () => {
  smtp = await startSmtp();
  ctx = await createTestContext({ env: { SMTP_URL: `${smtp.url}/?ignoreTLS=true`, SMTP_FROM: 'receipts@kassa.test' } });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic' });
  const proProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' });
  basic = (await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  pro = (await ctx.services.catalog.createPrice(proProduct.id, { amount: 3000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  team = (await ctx.services.catalog.createPrice(proProduct.id, { amount: 1234, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  other = {
    yearly: (await ctx.services.catalog.createPrice(proProduct.id, { amount: 30000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'YEAR' })).id,
    eur: (await ctx.services.catalog.createPrice(proProduct.id, { amount: 3000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id,
    oneTime: (await ctx.services.catalog.createPrice(proProduct.id, { amount: 3000, currency: 'USD', pricingType: 'ONE_TIME' })).id,
  };
});
afterAll(async () => {
  await ctx?.close();
  await smtp?.close();
});
beforeEach(() => {
  smtp.received.length = 0;
});

const db = () => ctx.testDb.database.db;
const at = (iso: string) => ctx.clock.set(iso);
const api = (method: 'get' | 'post', path: string) => ctx.merchant[method](path).set('X-API-Key', ctx.orgA.apiKey);

async function subscribe(pricingId: string, quantity = 1, card = '4242424242424242') {
  const created = await api('post', '/v1/checkout-sessions').set('Idempotency-Key', `plan-${++n}`).send({ pricingId, customerEmail: `plan${n}@example.com`, quantity });
  expect(created.status).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: card, expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const order = await db()('orders').where({ checkout_session_id: created.body.data.id }).first();
  return order.subscription_id as string;
}
const preview = (id: string, body: object) => api('post', `/v1/subscriptions/${id}/change/preview`).send(body);
const change = (id: string, body: object) => api('post', `/v1/subscriptions/${id}/change`).send(body);
const periodOrder = async (subscriptionId: string, period: number) => {
  const row = await db()('orders').where({ subscription_id: subscriptionId, billing_period: period }).first();
  return row && (await api('get', `/v1/orders/${row.id}`)).body.data;
};
const events = async (type: string) =>
  (await db()('webhook_events').where({ type }).orderBy('seq')).map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>);

describe('plan changes through the merchant API', () => {
  it('an upgrade half way through the period: the preview is the order charged, prorated to the second', async () => {
    at('2026-04-01T00:00:00.000Z');
    const id = await subscribe(basic);
    at('2026-04-16T00:00:00.000Z');
    const p = await preview(id, { priceId: pro });
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({
      effective: 'IMMEDIATE',
      prorationDate: '2026-04-16T00:00:00.000Z',
      currentPeriodEnd: '2026-05-01T00:00:00.000Z',
      from: { priceId: basic, productName: 'Basic', unitAmountCents: 1000, quantity: 1, amountCents: 1000 },
      to: { priceId: pro, productName: 'Pro', unitAmountCents: 3000, quantity: 1, amountCents: 3000 },
      amountDueCents: 1000,
      nextRenewalAmountCents: 3000,
    });
    expect(p.body.data.lines.map((l: any) => [l.kind, l.amountCents])).toEqual([['PRORATION', -500], ['PRORATION', 1500]]);
    // A few seconds later, the change made from the preview charges the preview exactly.
    at('2026-04-16T00:00:07.000Z');
    const c = await change(id, { priceId: pro, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
    expect(c.status).toBe(200);
    expect(c.body.data.subscription).toMatchObject({ priceId: pro, quantity: 1, amountCents: 3000, productName: 'Pro', scheduledChange: null, currentPeriodEnd: '2026-05-01T00:00:00.000Z' });
    const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
    expect(order).toMatchObject({ status: 'PAID', amountCents: p.body.data.amountDueCents, subscriptionId: id, productName: 'Pro' });
    expect(order.lines).toEqual(p.body.data.lines);
    const paid = (await events('order.paid')).filter((e) => e.order.orderId === order.orderId);
    expect(paid).toHaveLength(1);
    expect(paid[0]!.order.lines).toEqual(p.body.data.lines);
    const updated = (await events('subscription.updated')).filter((e) => e.subscription.subscriptionId === id);
    expect(updated.at(-1)!.subscription).toMatchObject({ priceId: pro, quantity: 1, amountCents: 3000, product: { name: 'Pro' } });
    // The renewal charges the new price.
    at('2026-05-01T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const renewal = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(Number(renewal.amount_cents)).toBe(3000);
    // The buyer's e-mail about the change.
    while (await ctx.services.modules.buyerEmails!.emails.sendDue()) {
      // next batch
    }
    expect(smtp.received.some((m) => (m.subject ?? '').includes('your plan changed'))).toBe(true);
  });

  it('a change in the period\'s first second (a period starting mid-second) is previewed and charged, not refused', async () => {
    // Regression: the preview's prorationDate is the whole second, 00:00:00.000, which fell before a
    // period starting at 00:00:00.250, so the change made from it was refused (400 prorationDate).
    at('2026-06-01T00:00:00.250Z');
    const id = await subscribe(basic);
    at('2026-06-01T00:00:00.700Z');
    const p = await preview(id, { priceId: pro });
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    expect(p.body.data.prorationDate).toBe('2026-06-01T00:00:00.000Z');
    // The whole period remains: −1000 + 3000 (June: 30 days, to the second).
    expect(p.body.data.lines.map((l: any) => [l.kind, l.amountCents])).toEqual([['PRORATION', -1000], ['PRORATION', 3000]]);
    const c = await change(id, { priceId: pro, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    expect((await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data.lines).toEqual(p.body.data.lines);
    // A second before the period's start is still refused.
    const id2 = await subscribe(basic);
    const early = await change(id2, { priceId: pro, prorationDate: '2026-05-31T23:59:59.000Z' });
    expect(early.status).toBe(400);
    expect(early.body.message).toContain('prorationDate');
  });

  it('with a FOREVER coupon the preview shows the DISCOUNT the change charges (preview = charge)', async () => {
    // Regression: the charge re-derived the coupon's DISCOUNT (for period 0) while the preview showed
    // none, so the order charged less than previewed and its lines differed from the preview's.
    const coupon = await api('post', '/v1/coupons').send({ name: 'Half', percentOff: '50', duration: 'FOREVER' });
    expect(coupon.status, JSON.stringify(coupon.body)).toBe(201);
    at('2026-07-01T00:00:00.000Z');
    const created = await api('post', '/v1/checkout-sessions').set('Idempotency-Key', `plan-${++n}`).send({ pricingId: basic, customerEmail: `plan${n}@example.com`, discounts: [{ coupon: coupon.body.data.id }] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect((await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' })).status).toBe(303);
    const id = (await db()('orders').where({ checkout_session_id: created.body.data.id }).first()).subscription_id as string;
    at('2026-07-16T12:00:00.000Z');
    const p = await preview(id, { priceId: pro });
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    // July: 31 days, 15.5 left: −1000/2 = −500, 3000/2 = 1500; net 1000; 50 % off = 500.
    expect(p.body.data.lines.map((l: any) => [l.kind, l.amountCents])).toEqual([['PRORATION', -500], ['PRORATION', 1500], ['DISCOUNT', -500]]);
    expect(p.body.data).toMatchObject({ amountDueCents: 500, nextRenewalAmountCents: 3000 });
    const c = await change(id, { priceId: pro, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: 500 });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
    expect(order.amountCents).toBe(500);
    expect(order.lines).toEqual(p.body.data.lines);
  });

  it('seats: 3 → 5 charges the two extra seats for the rest of the period; renewals bill 5 × unit', async () => {
    at('2026-01-01T00:00:00.000Z');
    const id = await subscribe(team, 3);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ quantity: 3, amountCents: 3702, priceId: team });
    at('2026-01-21T13:17:42.000Z');
    const p = (await preview(id, { quantity: 5 })).body.data;
    // Independent: 31-day January, 10d 10h 42m 18s left = 902,538 s of 2,678,400 s.
    const remaining = 902_538;
    const half = (x: number) => Math.sign(x) * Math.floor(Math.abs(x) + 0.5);
    expect(p.lines.map((l: any) => l.amountCents)).toEqual([half((-3702 * remaining) / 2_678_400), half((6170 * remaining) / 2_678_400)]);
    const c = await change(id, { quantity: 5, prorationDate: p.prorationDate, expectedAmountDueCents: p.amountDueCents });
    expect(c.status).toBe(200);
    at('2026-02-01T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const renewal = await periodOrder(id, 1);
    expect(renewal.lines).toEqual([expect.objectContaining({ kind: 'PRICE', quantity: '5', unitAmountDecimal: '1234', amountCents: 6170 })]);
  });

  it('a downgrade is scheduled for the period end: nothing charged now, the renewal charges the new plan', async () => {
    at('2026-03-01T00:00:00.000Z');
    const id = await subscribe(pro);
    at('2026-03-10T00:00:00.000Z');
    const p = (await preview(id, { priceId: basic })).body.data;
    expect(p).toMatchObject({ effective: 'PERIOD_END', amountDueCents: 0, lines: [], nextRenewalAmountCents: 1000 });
    const c = await change(id, { priceId: basic });
    expect(c.status).toBe(200);
    expect(c.body.data.orderId).toBeNull();
    expect(c.body.data.subscription).toMatchObject({ priceId: pro, amountCents: 3000, scheduledChange: { priceId: basic, amountCents: 1000, quantity: 1, productName: 'Basic' } });
    at('2026-04-01T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const s = (await api('get', `/v1/subscriptions/${id}`)).body.data;
    expect(s).toMatchObject({ priceId: basic, amountCents: 1000, productName: 'Basic', scheduledChange: null });
    const renewal = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(Number(renewal.amount_cents)).toBe(1000);
  });

  it('a change back to the current plan drops a scheduled downgrade', async () => {
    at('2026-03-01T00:00:00.000Z');
    const id = await subscribe(pro);
    await change(id, { priceId: basic });
    const c = await change(id, { priceId: pro });
    expect(c.status).toBe(200);
    expect(c.body.data.subscription.scheduledChange).toBeNull();
  });

  it('during a free trial the change applies at once and charges nothing', async () => {
    const trialProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Trial plan' });
    const trial = (await ctx.services.catalog.createPrice(trialProduct.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', trialDays: 14 })).id;
    at('2026-06-01T00:00:00.000Z');
    const id = await subscribe(trial);
    at('2026-06-05T00:00:00.000Z');
    const c = await change(id, { priceId: pro, quantity: 2 });
    expect(c.status).toBe(200);
    expect(c.body.data).toMatchObject({ orderId: null, preview: { amountDueCents: 0, lines: [], nextRenewalAmountCents: 6000 } });
    at('2026-06-15T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const first = await periodOrder(id, 1);
    expect(first).toMatchObject({ amountCents: 6000 });
    expect(first.lines).toEqual([expect.objectContaining({ kind: 'PRICE', quantity: '2', unitAmountDecimal: '3000' })]);
  });

  it('refuses what cannot be changed, naming the field; a stale preview is 409 with nothing charged', async () => {
    at('2026-07-01T00:00:00.000Z');
    const id = await subscribe(basic);
    for (const [body, field] of [
      [{}, 'priceId'],
      [{ priceId: other.yearly }, 'priceId'],
      [{ priceId: other.eur }, 'priceId'],
      [{ priceId: other.oneTime }, 'priceId'],
      [{ priceId: 'PRC_000000000000000000000000' }, 'priceId'],
      [{ quantity: 1 }, 'quantity'],
      [{ priceId: pro, prorationDate: '2026-06-01T00:00:00.000Z' }, 'prorationDate'],
    ] as const) {
      const r = await change(id, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.message, JSON.stringify(body)).toContain(field);
    }
    const zero = await change(id, { quantity: 0 });
    expect(zero.status).toBe(400);
    const stale = await change(id, { priceId: pro, expectedAmountDueCents: 1 });
    expect(stale.status).toBe(409);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data.priceId).toBe(basic);
    expect(await db()('orders').where({ subscription_id: id }).whereNull('billing_period')).toHaveLength(0);
    expect((await ctx.merchant.post(`/v1/subscriptions/${id}/change`).set('X-API-Key', ctx.orgB.apiKey).send({ priceId: pro })).status).toBe(404);
  });

  it('a declined card changes nothing', async () => {
    at('2026-08-01T00:00:00.000Z');
    const id = await subscribe(basic);
    // The sandbox's saved method that declines every later charge (its renewal-decline test card).
    await db()('subscriptions').where({ id }).update({ payment_method: 'sbx_pm_renewal_decline_0341' });
    at('2026-08-10T00:00:00.000Z');
    const r = await change(id, { priceId: pro });
    expect(r.status).toBe(409);
    expect(r.body.error.message).toContain('declined');
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic, amountCents: 1000 });
    expect(await db()('orders').where({ subscription_id: id }).whereNull('billing_period')).toHaveLength(0);
    expect((await events('subscription.updated')).filter((e) => e.subscription.subscriptionId === id)).toHaveLength(0);
  });
});

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
describe.skipIf(!onPostgres)('races on PostgreSQL (separate pools)', () => {
  const second = onSecondPool(() => ctx);

  it('four concurrent changes from the same preview: one applies and charges once, the others are refused (20 rounds)', async () => {
    const ROUNDS = 20;
    let failures = 0;
    for (let round = 0; round < ROUNDS; round++) {
      at('2026-09-01T00:00:00.000Z');
      const id = await subscribe(basic, 1);
      at('2026-09-11T00:00:00.000Z');
      const q = await ctx.services.subscriptions.previewChange(id, { quantity: 2 }, { orgId: ctx.orgA.orgId });
      const request = { quantity: 2, prorationDate: q.prorationDate, expectedAmountDueCents: q.amountDue };
      // Four changers on two pools, each started only once all have read the subscription.
      // Four identical changes (a double-clicked button, a retried request) on two pools.
      const results = await Promise.allSettled([0, 1, 2, 3].map((i) => (i % 2 ? second.services : ctx.services).subscriptions.changePlan(id, request)));
      const ok = results.filter((r) => r.status === 'fulfilled');
      const charges = await db()('orders').where({ subscription_id: id }).whereNull('billing_period');
      const s = await db()('subscriptions').where({ id }).first();
      const expectedAmount = 2000;
      if (ok.length !== 1 || charges.length !== 1 || Number(s.amount_cents) !== expectedAmount) failures++;
    }
    expect(failures).toBe(0);
  });

  it('a change racing the renewal: one outcome, never a change priced on the old period or a lost renewal (20 rounds)', async () => {
    const ROUNDS = 20;
    let failures = 0;
    for (let round = 0; round < ROUNDS; round++) {
      at('2026-10-01T00:00:00.000Z');
      const id = await subscribe(basic, 1);
      at('2026-10-31T23:59:59.000Z');
      const q = await ctx.services.subscriptions.previewChange(id, { priceId: pro }, { orgId: ctx.orgA.orgId });
      at('2026-11-01T00:00:00.000Z');
      const [renewed, changed] = await Promise.allSettled([second.services.subscriptions.processDue(), ctx.services.subscriptions.changePlan(id, { priceId: pro, expectedAmountDueCents: q.amountDue })]);
      const s = await db()('subscriptions').where({ id }).first();
      const renewals = await db()('orders').where({ subscription_id: id, billing_period: 1 });
      const prorations = await db()('orders').where({ subscription_id: id }).whereNull('billing_period');
      // Renewed first: the change (the old period's 1-second quote) is refused (409) or, made at the
      // new period's first second, charges a full period; either way one renewal of the period.
      const bad =
        renewed.status === 'rejected' ||
        renewals.length > 1 ||
        (changed.status === 'fulfilled' && s.price_id !== pro) ||
        (changed.status === 'rejected' && (s.price_id !== basic || prorations.length !== 0)) ||
        (s.period_number === 1 && renewals.length !== 1);
      if (bad) failures++;
      // Whatever happened, the renewal job finishes the period later.
      await ctx.services.subscriptions.processDue();
      const after = await db()('orders').where({ subscription_id: id, billing_period: 1 });
      if (after.length !== 1) failures++;
    }
    expect(failures).toBe(0);
  });
});
