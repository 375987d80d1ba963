/**
 * Free trials (issue 39, item 1) on the sandbox rail, on a fake clock: a price's `trialDays` and
 * the session's override; the $0 trial order; the first charge at the trial's end by the renewal
 * job; cancelling during the trial charges nothing; a trial started without a card ends EXPIRED;
 * `subscription.trial_will_end` 3 days before, once per trial, with the buyer's e-mail through a
 * real SMTP server; the hosted page's "N days free, then …". On PostgreSQL, workers racing the
 * reminder job (separate pools) emit it once per trial, over rounds.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { startSmtp } from '../buyer-emails/smtp.js';
import { openDatabase } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices } from '../../src/services.js';

const DAY = 24 * 3600 * 1000;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let ctx: TestContext;
let trialPrice: string;
let plainPrice: string;
let n = 0;

beforeAll(async () => {
  smtp = await startSmtp();
  ctx = await createTestContext({ env: { SMTP_URL: `${smtp.url}/?ignoreTLS=true`, SMTP_FROM: 'receipts@kassa.test' } });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  trialPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', trialDays: 14 })).id;
  plainPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
});
afterAll(async () => {
  await ctx?.close();
  await smtp?.close();
});
beforeEach(() => {
  smtp.received.length = 0;
});

const db = () => ctx.testDb.database.db;
const at = (iso: string | Date) => ctx.clock.set(typeof iso === 'string' ? iso : iso.toISOString());
const createSession = (body: object) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `trial-${++n}`).send({ customerEmail: `trial${n}@example.com`, ...body });

async function start(body: object = { pricingId: trialPrice }, card: object | null = { cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' }, quantity?: number) {
  const created = await createSession({ ...body, ...(quantity ? { quantity } : {}) });
  expect(created.status).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send(card ?? {});
  expect(paid.status).toBe(303);
  const order = await db()('orders').where({ checkout_session_id: created.body.data.id }).first();
  const subscription = (await ctx.merchant.get(`/v1/subscriptions/${order.subscription_id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  return { session: created.body.data, orderId: order.id as string, subscription };
}
const ordersOf = async (subscriptionId: string) => db()('orders').where({ subscription_id: subscriptionId }).orderBy('billing_period');
const eventsOf = async (subscriptionId: string, type: string) =>
  (await db()('webhook_events').where({ type }).orderBy('seq'))
    .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as { subscription: { subscriptionId: string } & Record<string, unknown> })
    .filter((p) => p.subscription?.subscriptionId === subscriptionId);
const sendMail = async () => {
  while (await ctx.services.modules.buyerEmails!.emails.sendDue()) {
    // next batch
  }
  return [...smtp.received];
};

describe('a free trial on the sandbox rail', () => {
  it('charges nothing at checkout (a $0 order with the trial line), then the price at the trial end, then monthly', async () => {
    at('2026-01-10T08:00:00.000Z');
    const { session, orderId, subscription } = await start({ pricingId: trialPrice }, undefined, 2);
    expect(session.pricing).toMatchObject({ trialDays: 14, trialPaymentMethodCollection: 'ALWAYS' });
    expect(session.amount).toBe(1800);
    const order = (await ctx.merchant.get(`/v1/orders/${orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order).toMatchObject({ status: 'PAID', amountCents: 0, subscriptionId: subscription.subscriptionId });
    // `note` is the buyer's (the spec: "buyer-supplied note; untrusted"): Kassa wrote "Free trial until …" there before.
    expect(order.note).toBeUndefined();
    expect(order.lines).toEqual([expect.objectContaining({ kind: 'PRICE', description: 'Free trial of Pro plan (14 days)', quantity: '2', unitAmountDecimal: '0', amountCents: 0 })]);
    expect(subscription).toMatchObject({ status: 'ACTIVE', amountCents: 1800, trialEnd: '2026-01-24T08:00:00.000Z', currentPeriodEnd: '2026-01-24T08:00:00.000Z' });

    at('2026-01-24T07:59:59.999Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(0);
    at('2026-01-24T08:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    const orders = await ordersOf(subscription.subscriptionId);
    expect(orders.map((o: { billing_period: number; amount_cents: number | string; status: string }) => [o.billing_period, Number(o.amount_cents), o.status])).toEqual([
      [0, 0, 'PAID'],
      [1, 1800, 'PAID'],
    ]);
    // The first paid order reads as the checkout's price: 2 × 9.00, not one line of 18.00.
    const firstPaid = orders.find((o: { billing_period: number }) => o.billing_period === 1) as { id: string };
    const paidLines = (await ctx.merchant.get(`/v1/orders/${firstPaid.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.lines;
    expect(paidLines).toEqual([expect.objectContaining({ kind: 'PRICE', description: 'Pro plan', quantity: '2', unitAmountDecimal: '900', amountCents: 1800 })]);
    const renewed = (await ctx.merchant.get(`/v1/subscriptions/${subscription.subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(renewed).toMatchObject({ status: 'ACTIVE', currentPeriodEnd: '2026-02-24T08:00:00.000Z', trialEnd: '2026-01-24T08:00:00.000Z' });
    at('2026-02-24T08:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    expect((await ctx.merchant.get(`/v1/subscriptions/${subscription.subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.currentPeriodEnd).toBe('2026-03-24T08:00:00.000Z');
  });

  it('cancelling at period end during the trial: it ends at the trial end with no charge', async () => {
    at('2026-03-01T00:00:00.000Z');
    const { subscription } = await start();
    const canceled = await ctx.services.subscriptions.cancel(subscription.subscriptionId, { atPeriodEnd: true });
    expect(canceled).toMatchObject({ status: 'ACTIVE', cancelAtPeriodEnd: true });
    at('2026-03-15T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const ended = (await ctx.merchant.get(`/v1/subscriptions/${subscription.subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(ended).toMatchObject({ status: 'ENDED', endedAt: '2026-03-15T00:00:00.000Z' });
    expect((await ordersOf(subscription.subscriptionId)).map((o: { amount_cents: number | string }) => Number(o.amount_cents))).toEqual([0]);
    // No reminder either: nothing was going to be charged.
    expect(await eventsOf(subscription.subscriptionId, 'subscription.trial_will_end')).toEqual([]);
  });

  it('cancelling now during the trial: CANCELED at once, never charged', async () => {
    at('2026-04-01T00:00:00.000Z');
    const { subscription } = await start();
    const canceled = await ctx.services.subscriptions.cancel(subscription.subscriptionId, { atPeriodEnd: false });
    expect(canceled).toMatchObject({ status: 'CANCELED' });
    at('2026-05-01T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    expect((await ordersOf(subscription.subscriptionId)).map((o: { amount_cents: number | string }) => Number(o.amount_cents))).toEqual([0]);
  });

  it('a trial started without a card (IF_REQUIRED) ends EXPIRED at its end, with no order', async () => {
    at('2026-05-01T00:00:00.000Z');
    const created = await createSession({ pricingId: plainPrice, trialDays: 7, trialPaymentMethodCollection: 'IF_REQUIRED' });
    const page = await ctx.merchant.get(new URL(created.body.data.url).pathname);
    expect(page.text).toContain('7 days free, then $9.00/month');
    expect(page.text).toContain('data-testid="card-optional"');
    expect(page.text).not.toMatch(/name="cardNumber"[^>]*required/);
    const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({});
    expect(paid.status).toBe(303);
    const row = await db()('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
    expect(row.payment_method).toBe('none');
    at('2026-05-08T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const ended = (await ctx.merchant.get(`/v1/subscriptions/${row.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(ended).toMatchObject({ status: 'EXPIRED', endedAt: '2026-05-08T00:00:00.000Z' });
    expect((await ordersOf(row.id)).map((o: { amount_cents: number | string }) => Number(o.amount_cents))).toEqual([0]);
    expect(await eventsOf(row.id, 'subscription.expired')).toHaveLength(1);
  });

  it('a card is required by default: an empty card form is refused and nothing starts', async () => {
    const created = await createSession({ pricingId: trialPrice });
    const page = await ctx.merchant.get(new URL(created.body.data.url).pathname);
    expect(page.text).toContain('14 days free, then $9.00/month');
    expect(page.text).toContain('Due today');
    expect(page.text).toContain('Start free trial');
    const refused = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({});
    expect(refused.status).toBe(400);
    expect(await db()('orders').where({ checkout_session_id: created.body.data.id })).toHaveLength(0);
    // A declined test card declines the trial checkout as it would a payment.
    const declined = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4000000000000002', expiry: '12/30', cvc: '123' });
    expect(declined.status).toBe(402);
  });
});

describe('the session override and its rules', () => {
  it('trialDays 0 on a session of a trial price: no trial, charged now', async () => {
    const { orderId, subscription } = await start({ pricingId: trialPrice, trialDays: 0 });
    expect(subscription.trialEnd).toBeNull();
    expect(Number((await db()('orders').where({ id: orderId }).first()).amount_cents)).toBe(900);
  });

  it('refuses a trial on a one-time purchase, IF_REQUIRED without a trial, and out-of-range days (400)', async () => {
    const oneTime = await createSession({ pricingData: { amount: 500, currency: 'USD', productData: { name: 'Ebook' } }, trialDays: 7 });
    expect(oneTime.status).toBe(400);
    expect(oneTime.body.error.message).toMatch(/trialDays: only SUBSCRIPTION prices have a free trial/);
    const inlineOneTime = await createSession({ pricingData: { amount: 500, currency: 'USD', productData: { name: 'Ebook' }, trialDays: 7 } });
    expect(inlineOneTime.status).toBe(400);
    const noTrial = await createSession({ pricingId: plainPrice, trialPaymentMethodCollection: 'IF_REQUIRED' });
    expect(noTrial.status).toBe(400);
    expect(noTrial.body.error.message).toMatch(/IF_REQUIRED needs a free trial/);
    expect((await createSession({ pricingId: plainPrice, trialDays: 731 })).status).toBe(400);
    const inline = await createSession({ pricingData: { amount: 500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', productData: { name: 'Box' }, trialDays: 30 } });
    expect(inline.status).toBe(201);
    expect(inline.body.data.pricing.trialDays).toBe(30);
  });

  it('a catalog price takes trialDays on SUBSCRIPTION only (admin API), and shows it', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Trial rules' });
    await expect(ctx.services.catalog.createPrice(product.id, { amount: 500, currency: 'USD', trialDays: 7 })).rejects.toThrow(/only SUBSCRIPTION prices have a free trial/);
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'YEAR', trialDays: 30 });
    expect(price.trialDays).toBe(30);
    expect((await ctx.services.catalog.findPrice(ctx.orgA.orgId, price.id))!.price.trialDays).toBe(30);
  });
});

describe('subscription.trial_will_end', () => {
  it('is emitted 3 days before the end, once, with one buyer e-mail', async () => {
    at('2026-06-01T12:00:00.000Z');
    const { subscription } = await start();
    await sendMail();
    smtp.received.length = 0;
    at(new Date(Date.parse('2026-06-15T12:00:00.000Z') - 3 * DAY - 1));
    expect(await ctx.services.subscriptions.remindTrialsEnding()).toBe(0);
    at(new Date(Date.parse('2026-06-15T12:00:00.000Z') - 3 * DAY));
    expect(await ctx.services.subscriptions.remindTrialsEnding()).toBe(1);
    expect(await ctx.services.subscriptions.remindTrialsEnding()).toBe(0);
    at('2026-06-14T00:00:00.000Z');
    expect(await ctx.services.subscriptions.remindTrialsEnding()).toBe(0);
    const events = await eventsOf(subscription.subscriptionId, 'subscription.trial_will_end');
    expect(events).toHaveLength(1);
    expect(events[0]!.subscription).toMatchObject({ status: 'ACTIVE', trialEnd: '2026-06-15T12:00:00.000Z', amountCents: 900 });
    const mails = (await sendMail()).filter((m) => m.to.includes(subscription.customerEmail));
    expect(mails).toHaveLength(1);
    expect(mails[0]!.raw).toMatch(/^Subject: Pro plan: your free trial ends on 15 June 2026$/m);
    expect(mails[0]!.raw).toContain('charged $9.00');
  });

  it("with a coupon, the started and trial-ending e-mails quote the first charge the renewal makes (the coupon taken off)", async () => {
    // Before, both quoted the stored amount ($9.00) where the trial's end charges $7.20 with a 20 % coupon.
    at('2026-08-01T12:00:00.000Z');
    const coupon = await ctx.merchant.post('/v1/coupons').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Launch', percentOff: '20', duration: 'REPEATING', durationInPeriods: 3 });
    expect(coupon.status, JSON.stringify(coupon.body)).toBe(201);
    const { subscription } = await start({ pricingId: trialPrice, discounts: [{ coupon: coupon.body.data.id }] });
    const started = (await sendMail()).filter((m) => m.to.includes(subscription.customerEmail) && /^Subject: Your Pro plan subscription with /m.test(m.raw));
    expect(started).toHaveLength(1);
    expect(started[0]!.raw).toContain('the first charge of $7.20 is then');
    smtp.received.length = 0;
    at(new Date(Date.parse('2026-08-15T12:00:00.000Z') - 3 * DAY));
    expect(await ctx.services.subscriptions.remindTrialsEnding()).toBe(1);
    const reminder = (await sendMail()).filter((m) => m.to.includes(subscription.customerEmail));
    expect(reminder).toHaveLength(1);
    expect(reminder[0]!.raw).toContain('charged $7.20');
    // What the trial's end then charges.
    at('2026-08-15T13:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const orders = await ordersOf(subscription.subscriptionId);
    expect(orders.map((o: { amount_cents: number | string }) => Number(o.amount_cents))).toEqual([0, 720]);
  });

  it('a trial shorter than 3 days is reminded at the next pass', async () => {
    at('2026-07-01T00:00:00.000Z');
    const { subscription } = await start({ pricingId: plainPrice, trialDays: 2 });
    expect(await ctx.services.subscriptions.remindTrialsEnding()).toBe(1);
    expect(await eventsOf(subscription.subscriptionId, 'subscription.trial_will_end')).toHaveLength(1);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('trial reminders raced by workers on PostgreSQL', () => {
  it('emits subscription.trial_will_end exactly once per trial over 10 rounds of 3 concurrent workers', async () => {
    const others = await Promise.all([0, 1].map(() => openDatabase({ databaseUrl: ctx.testDb.url! })));
    try {
      const workers = [ctx.services, ...others.map((o) => createServices({ db: o.db, clock: ctx.clock, secretBox: new SecretBox(randomBytes(32)), config: ctx.config }))];
      for (let round = 0; round < 10; round++) {
        at(new Date(Date.parse('2027-01-01T00:00:00.000Z') + round * 30 * DAY));
        const ids: string[] = [];
        for (let i = 0; i < 4; i++) ids.push((await start({ pricingId: plainPrice, trialDays: 3 })).subscription.subscriptionId);
        const counts = await Promise.all(workers.map((w) => w.subscriptions.remindTrialsEnding()));
        expect(counts.reduce((a, b) => a + b, 0)).toBe(4);
        for (const id of ids) expect(await eventsOf(id, 'subscription.trial_will_end')).toHaveLength(1);
        const emails = await db()('buyer_emails').where({ kind: 'trial_will_end' }).whereIn('subscription_id', ids);
        expect(emails).toHaveLength(4);
      }
    } finally {
      await Promise.all(others.map((o) => o.close()));
    }
  });
});
