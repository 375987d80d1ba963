/**
 * A Stripe plan change Kassa prorates itself (an amount-off coupon, issue 39) whose invoice Stripe
 * collected but whose subscription item update then failed (docs/plan-changes.md, "Paid, not yet
 * applied"). Before: `503`, the plan stayed old until the caller retried the same change. Now the
 * change is recorded with its PAID order and completes on its own:
 * - the `stripe-plan-change-items` job applies it without the caller (the regression);
 * - the caller's retry of the same request applies it and answers `200` with the same order, no
 *   second invoice (also once applied); another change or a preview meanwhile is `409`;
 * - the invoice's `invoice.paid` applies it;
 * - `subscription.updated` fires once, when it is applied;
 * - on PostgreSQL, rounds of the job on two workers racing the caller's retry and the webhook:
 *   Stripe's item updated once, the buyer charged once, one order, one `subscription.updated`.
 * And inclusive tax end to end on this path: Stripe's amount, its invoice's taxes and Kassa's
 * order lines (PRORATION, DISCOUNT, TAX) equal an independent recomputation, to the minor unit.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';
import { workerJobs } from '../../src/jobs.js';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices, type Services } from '../../src/services.js';
import { skippedUnless } from '../harness/skip-reasons.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';
const ROUNDS = 8;

let ctx: TestContext;
let stripe: FakeStripe;
let product: string;
let basic: string;
let pro: string;
let basicFr: string;
let proFr: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({ env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '2000' } });
  product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team plan' })).id;
  const price = async (amount: number, currency = 'EUR') => (await ctx.services.catalog.createPrice(product, { amount, currency, pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  basic = await price(1250);
  pro = await price(3333);
  basicFr = await price(1990);
  proFr = await price(4990);
  const tax = ctx.services.modules.tax.tax;
  await tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
  await tax.create(ctx.orgA.orgId, { displayName: 'TVA', percentage: '20', country: 'FR', inclusive: true });
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
const jobOf = (services: Services) => workerJobs({ services }).find((j) => j.name === 'stripe-plan-change-items')!;
const planUpdates = async (id: string) =>
  (await db()('webhook_events').where({ type: 'subscription.updated' }).orderBy('seq'))
    .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>)
    .filter((e) => e.subscription.subscriptionId === id);
const changeOrders = (id: string) => db()('orders').where({ subscription_id: id }).whereNull('billing_period');
/** The invoices Kassa made in Stripe for changes of this subscription. */
const kassaInvoices = (stripeSubId: string) => [...stripe.invoices.values()].filter((i) => i.metadata?.kassa_plan_change !== undefined && i.parent?.subscription_details?.subscription === stripeSubId);
const itemUpdatesOf = (stripeSubId: string) => stripe.itemUpdates.filter((u) => u.subscriptionId === stripeSubId);
type Line = { kind: string; amountCents: number; tax?: { taxAmountCents: number; inclusive: boolean } };

async function subscribe(pricingId: string, where: 'DE' | 'FR', couponId: string) {
  const created = await api('post', '/v1/checkout-sessions')
    .set('Idempotency-Key', `stripe-recovery-${++n}`)
    .send({ pricingId, customerEmail: `recovery${n}@example.com`, quantity: 1, customerTax: { country: where }, discounts: [{ coupon: couponId }] });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const stripeSessionId = (await db()('checkout_sessions').where({ id: created.body.data.id }).first()).processor_session_id as string;
  stripe.complete(stripeSessionId, { email: `recovery${n}@example.com` });
  expect((await deliver(stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
  const row = await db()('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
  return { id: row.id as string, stripeSub: stripe.subscriptionOf(stripeSessionId) };
}

/**
 * An upgrade whose invoice is paid and whose item update fails (`failure` on Stripe's
 * `POST /v1/subscriptions/{id}`, as often as the SDK tries): `202`, the order PAID, the plan old.
 */
async function paidNotApplied(id: string, stripeSubId: string, body: object, failure: 'error500' | 'unauthorized' = 'error500') {
  const p = await preview(id, body);
  expect(p.status, JSON.stringify(p.body)).toBe(200);
  const request = { ...body, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents };
  stripe.failNext(failure, failure === 'error500' ? 3 : 1, `/v1/subscriptions/${stripeSubId}`, 'POST');
  let c;
  try {
    c = await change(id, request);
  } finally {
    stripe.clearFailures();
  }
  return { p: p.body.data as { amountDueCents: number; lines: Line[] }, c, request };
}

describe('a Stripe change Kassa prorates itself, paid but not applied (item update failed after payment)', () => {
  it('answers 202 with the PAID order, and the job applies it without the caller retrying: plan changed, subscription.updated once, item updated once, charged once', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Five off', amountOff: 500, currency: 'EUR', duration: 'FOREVER' });
    at('2029-01-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, 'DE', off.id);
    at('2029-01-05T00:00:00.000Z');
    const { p, c } = await paidNotApplied(id, stripeSub.id, { priceId: pro });
    expect(c.status, JSON.stringify(c.body)).toBe(202);
    expect(c.body.data.subscription).toMatchObject({ priceId: basic });
    expect(c.body.data.preview).toMatchObject({ amountDueCents: p.amountDueCents, to: { priceId: pro } });
    const invoice = kassaInvoices(stripeSub.id).at(-1)!;
    expect(invoice).toMatchObject({ status: 'paid', amount_paid: p.amountDueCents });
    const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
    expect(order).toMatchObject({ status: 'PAID', amountCents: p.amountDueCents });
    expect(itemUpdatesOf(stripeSub.id)).toHaveLength(0);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic });
    expect(await planUpdates(id)).toHaveLength(0);

    // Not due yet: the job leaves it for its first backoff (a minute).
    expect(await jobOf(ctx.services).run()).toBe(false);
    at('2029-01-05T00:01:01.000Z');
    expect(await jobOf(ctx.services).run()).toBe(true);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: pro, quantity: 1, amountCents: 3333 + 633 });
    expect(itemUpdatesOf(stripeSub.id)).toEqual([expect.objectContaining({ prorationBehavior: 'none', invoiceId: null })]);
    expect(stripe.subscriptions.get(stripeSub.id)!.items.data[0]!.price.unit_amount).toBe(3333);
    const updates = await planUpdates(id);
    expect(updates).toHaveLength(1);
    expect(updates[0]!.subscription).toMatchObject({ priceId: pro });
    expect(kassaInvoices(stripeSub.id)).toHaveLength(1);
    expect(await changeOrders(id)).toHaveLength(1);

    // Everything after it changes nothing more: the job again, the invoice's invoice.paid, Stripe's subscription event.
    at('2029-01-05T01:00:00.000Z');
    expect(await jobOf(ctx.services).run()).toBe(false);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    expect((await deliver(stripe.subscriptionEvent('customer.subscription.updated', stripe.subscriptions.get(stripeSub.id)!))).status).toBe(200);
    expect(await planUpdates(id)).toHaveLength(1);
    expect(await changeOrders(id)).toHaveLength(1);
    const after = (await api('get', `/v1/subscriptions/${id}`)).body.data;
    expect(after).toMatchObject({ priceId: pro });
    expect(after.processorMismatch).toBeUndefined();
  });

  it('the caller’s retry of the same request applies it: 200, the same order, no second invoice; another change or a preview meanwhile is 409; a retry once applied answers the change again', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Three off', amountOff: 300, currency: 'EUR', duration: 'FOREVER' });
    at('2029-02-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, 'DE', off.id);
    at('2029-02-10T00:00:00.000Z');
    const { c, request } = await paidNotApplied(id, stripeSub.id, { priceId: pro }, 'unauthorized');
    expect(c.status, JSON.stringify(c.body)).toBe(202);
    const orderId = c.body.data.orderId as string;

    const other = await change(id, { quantity: 2 });
    expect(other.status).toBe(409);
    expect(other.body.error.message).toMatch(/paid and still being applied/);
    expect((await preview(id, { quantity: 2 })).status).toBe(409);

    // Stripe still failing: the retry answers 202 again, nothing more charged.
    stripe.failNext('unauthorized', 1, `/v1/subscriptions/${stripeSub.id}`, 'POST');
    const again = await change(id, request);
    stripe.clearFailures();
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body.data.orderId).toBe(orderId);

    // Twenty minutes later (past the preview's 10-minute window): the retry still names the change paid for.
    at('2029-02-10T00:20:00.000Z');
    const done = await change(id, request);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body.data).toMatchObject({ orderId, subscription: { priceId: pro } });
    expect(itemUpdatesOf(stripeSub.id)).toHaveLength(1);
    expect(kassaInvoices(stripeSub.id)).toHaveLength(1);
    expect(await planUpdates(id)).toHaveLength(1);

    const late = await change(id, request);
    expect(late.status, JSON.stringify(late.body)).toBe(200);
    expect(late.body.data).toMatchObject({ orderId, subscription: { priceId: pro } });
    expect(itemUpdatesOf(stripeSub.id)).toHaveLength(1);
    expect(kassaInvoices(stripeSub.id)).toHaveLength(1);
    expect(await changeOrders(id)).toHaveLength(1);

    // Once applied, other changes are accepted again.
    expect((await preview(id, { quantity: 2 })).status).toBe(200);
  });

  it('the change invoice’s invoice.paid applies it (one subscription.updated, one order)', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Two off', amountOff: 200, currency: 'EUR', duration: 'FOREVER' });
    at('2029-03-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basic, 'DE', off.id);
    at('2029-03-03T00:00:00.000Z');
    const { c } = await paidNotApplied(id, stripeSub.id, { priceId: pro }, 'unauthorized');
    expect(c.status).toBe(202);
    const invoice = kassaInvoices(stripeSub.id).at(-1)!;
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: pro });
    expect(itemUpdatesOf(stripeSub.id)).toHaveLength(1);
    expect(await planUpdates(id)).toHaveLength(1);
    expect(await changeOrders(id)).toHaveLength(1);
  });
});

// ---- inclusive tax on this path: an independent recomputation (BigInt, its own rounding) ----

const nearest = (num: bigint, den: bigint) => (num < 0n ? -((-2n * num + den) / (2n * den)) : (2n * num + den) / (2n * den));

describe('inclusive tax on a Stripe change Kassa prorates itself (amount-off coupon)', () => {
  it('20 % inclusive, 4.00 EUR off, 19.90 → 49.90: Stripe collects the two items’ sum; its inclusive taxes = the order’s TAX line; PRORATION and DISCOUNT = the recomputation', async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Four off', amountOff: 400, currency: 'EUR', duration: 'FOREVER' });
    at('2029-04-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(basicFr, 'FR', off.id);
    expect((stripe.subscriptions.get(stripeSub.id)!.default_tax_rates ?? []).length).toBe(1);
    at('2029-04-12T07:30:00.000Z');
    const p = await preview(id, { priceId: proFr });
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    const c = await change(id, { priceId: proFr, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
    expect(c.status, JSON.stringify(c.body)).toBe(200);

    const length = BigInt(Date.parse('2029-05-01T00:00:00.000Z') - Date.parse('2029-04-01T00:00:00.000Z')) / 1000n;
    const remaining = BigInt(Date.parse('2029-05-01T00:00:00.000Z') - Date.parse('2029-04-12T07:30:00.000Z')) / 1000n;
    const credit = nearest(-1990n * remaining, length);
    const charge = nearest(4990n * remaining, length);
    const items = [credit, charge - 400n];
    // 20 % inclusive: each item's tax is its amount × 20 / 120, rounded half away from zero, per item.
    const tax = items.reduce((sum, a) => sum + nearest(a * 20n, 120n), 0n);
    const total = Number(credit + charge - 400n);

    const lines = c.body.data.preview.lines as Line[];
    expect(lines.map((l) => [l.kind, l.amountCents])).toEqual([['PRORATION', Number(credit)], ['PRORATION', Number(charge)], ['DISCOUNT', -400], ['TAX', 0]]);
    expect(lines[3]!.tax).toMatchObject({ inclusive: true, taxAmountCents: Number(tax) });
    expect(c.body.data.preview.amountDueCents).toBe(total);

    const invoice = kassaInvoices(stripeSub.id).at(-1)!;
    expect(invoice).toMatchObject({ status: 'paid', amount_paid: total, total });
    expect(invoice.lines.data.map((l) => l.amount)).toEqual(items.map(Number));
    expect(invoice.lines.data.map((l) => l.taxes![0]!.amount)).toEqual(items.map((a) => Number(nearest(a * 20n, 120n))));
    expect(invoice.total_taxes).toEqual([expect.objectContaining({ tax_behavior: 'inclusive', amount: Number(tax) })]);
    expect(invoice.total_excluding_tax).toBe(total - Number(tax));

    const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect((order.lines as Line[]).map((l) => [l.kind, l.amountCents])).toEqual(lines.map((l) => [l.kind, l.amountCents]));
    expect((order.lines as Line[]).find((l) => l.kind === 'TAX')!.tax).toMatchObject({ inclusive: true, taxAmountCents: invoice.total_taxes![0]!.amount });
    expect(c.body.data.subscription).toMatchObject({ priceId: proFr, amountCents: 4990 });

    // The invoice's invoice.paid writes no second order.
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    expect(await changeOrders(id)).toHaveLength(1);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('races of a Stripe change paid but not applied', 'postgresOnly'), () => {
  let workerDb: Database;
  let worker: Services;
  beforeAll(async () => {
    workerDb = await openDatabase({ databaseUrl: ctx.testDb.url! });
    worker = createServices({ db: workerDb.db, clock: ctx.clock, secretBox: new SecretBox(randomBytes(32)), config: ctx.config });
  });
  afterAll(async () => {
    await workerDb?.close();
  });

  it(`the job on two workers, the caller’s retry and the invoice’s invoice.paid (twice) at once: the item updated once, charged once, one order, one subscription.updated (${ROUNDS} rounds)`, async () => {
    const off = await coupons().createCoupon(ctx.orgA.orgId, { name: 'Race off', amountOff: 250, currency: 'EUR', duration: 'FOREVER' });
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.UTC(2031, round, 1);
      at(new Date(start).toISOString());
      const { id, stripeSub } = await subscribe(basic, 'DE', off.id);
      at(new Date(start + 5 * 86400_000).toISOString());
      const { c, request } = await paidNotApplied(id, stripeSub.id, { priceId: pro }, 'unauthorized');
      expect(c.status, `round ${round}: ${JSON.stringify(c.body)}`).toBe(202);
      const invoice = kassaInvoices(stripeSub.id).at(-1)!;
      const charges = stripe.charges.size;
      // Past the first backoff: the job's row is due.
      at(new Date(start + 5 * 86400_000 + 61_000).toISOString());
      const event = stripe.invoiceEvent('invoice.paid', invoice);
      const answers = await Promise.all([jobOf(ctx.services).run(), jobOf(worker).run(), change(id, request), deliver(event), deliver(event)]);
      const retry = answers[2] as { status: number };
      const sub = (await api('get', `/v1/subscriptions/${id}`)).body.data;
      const problems = [
        itemUpdatesOf(stripeSub.id).length !== 1 && `${itemUpdatesOf(stripeSub.id).length} item updates`,
        kassaInvoices(stripeSub.id).length !== 1 && `${kassaInvoices(stripeSub.id).length} invoices`,
        stripe.charges.size !== charges && `${stripe.charges.size - charges} more charges`,
        (await changeOrders(id)).length !== 1 && `${(await changeOrders(id)).length} orders`,
        (await planUpdates(id)).length !== 1 && `${(await planUpdates(id)).length} subscription.updated`,
        sub.priceId !== pro && `plan ${sub.priceId}`,
        (retry.status !== 200 && retry.status !== 202) && `retry answered ${retry.status}`,
        (answers[3] as { status: number }).status !== 200 && 'webhook failed',
      ].filter(Boolean);
      if (problems.length > 0) failures.push(`round ${round}: ${problems.join(', ')}`);
    }
    expect(failures, `${failures.length} of ${ROUNDS} rounds`).toEqual([]);
  }, 600_000);
});
