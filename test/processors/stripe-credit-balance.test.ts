/**
 * Immediate downgrades of Stripe-billed subscriptions (issue 39): Stripe's customer balance, end to
 * end against the Stripe-shaped server (./stripe-server.ts: the proration invoice of a total below
 * 0 is due 0 and its credit goes to the customer's balance; every invoice it finalizes applies the
 * balance, with `starting_balance` / `ending_balance` and balance transactions). Kassa's orders are
 * the sandbox's lines — the downgrade's PRORATION lines and BALANCE line (total 0), the renewal's
 * CREDIT "Applied balance" — and each order's total is what Stripe collected; Kassa's mirror of the
 * Stripe customer's balance (migration 0441) is minus Stripe's balance, and the sum of its ledger.
 * On PostgreSQL: a downgrade racing the renewal's invoice.paid (20 rounds, two pools).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Stripe from 'stripe';
import supertest from 'supertest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { onSecondPool } from '../harness/second-pool.js';
import { FakeStripe } from './stripe-server.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
/** The official SDK pointed at the Stripe-shaped server, to read what Stripe holds. */
let sdk: Stripe;
let lite: string;
let basic: string;
let pro: string;
let euroBasic: string;
let euroPro: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  const url = new URL(base);
  sdk = new Stripe(SECRET_KEY, { host: url.hostname, port: Number(url.port), protocol: 'http' });
  ctx = await createTestContext({ env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '2000' } });
  const basicProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic' });
  const proProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' });
  const liteProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Lite' });
  basic = (await ctx.services.catalog.createPrice(basicProduct.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  pro = (await ctx.services.catalog.createPrice(proProduct.id, { amount: 3000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  lite = (await ctx.services.catalog.createPrice(liteProduct.id, { amount: 500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  const team = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team plan' });
  euroBasic = (await ctx.services.catalog.createPrice(team.id, { amount: 1250, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  euroPro = (await ctx.services.catalog.createPrice(team.id, { amount: 3333, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  await ctx.services.modules.tax.tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
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
const linesOf = async (orderId: string) => ((await api('get', `/v1/orders/${orderId}`)).body.data.lines as any[]).map((l) => [l.kind, l.amountCents]);
const customerOf = (sub: Stripe.Subscription) => sub.customer as string;

/** A subscription bought through Stripe Checkout (the buyer's country given: the organization has a tax rate): Kassa's id and Stripe's subscription. */
async function subscribe(pricingId: string, extra: object = {}) {
  const created = await api('post', '/v1/checkout-sessions').set('Idempotency-Key', `stripe-credit-${++n}-${randomBytes(4).toString('hex')}`).send({ pricingId, customerEmail: `stripecredit${n}@example.com`, customerTax: { country: 'JP' }, ...extra });
  expect(created.status).toBe(201);
  const stripeSessionId = (await db()('checkout_sessions').where({ id: created.body.data.id }).first()).processor_session_id as string;
  const paid = stripe.complete(stripeSessionId, { email: `stripecredit${n}@example.com` });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const row = await db()('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
  return { id: row.id as string, stripeSub: stripe.subscriptionOf(stripeSessionId) };
}

/** Kassa's mirror of a Stripe customer's credit, and the sum of its ledger. */
async function mirrorOf(customer: string, currency = 'USD') {
  const row = await db()('processor_customer_balances').where({ org_id: ctx.orgA.orgId, processor_customer_id: customer, currency }).first();
  const sum = await db()('processor_customer_balance_entries').where({ org_id: ctx.orgA.orgId, processor_customer_id: customer }).sum({ s: 'amount_cents' }).first();
  return { balance: row ? Number(row.amount_cents) : 0, ledger: Number(sum?.s ?? 0) };
}

/** Stripe's renewal of the period, and Kassa's renewal order from its invoice.paid. */
async function renew(stripeSubId: string) {
  const invoice = stripe.renew(stripeSubId);
  expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
  return invoice;
}

describe('immediate downgrades on Stripe: Stripe’s customer balance, mirrored', () => {
  it('Pro 30.00 → Basic 10.00 half way: the order is the sandbox’s lines (BALANCE 1000), Stripe credits 1000 to the customer; the renewal draws it as “Applied balance”', async () => {
    at('2026-04-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro);
    at('2026-04-16T00:00:00.000Z');
    const p = await preview(id, { priceId: basic, effective: 'IMMEDIATE' });
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({ effective: 'IMMEDIATE', amountDueCents: 0, balanceCreditCents: 1000, nextRenewalAmountCents: 1000 });
    expect(p.body.data.lines.map((l: any) => [l.kind, l.amountCents])).toEqual([['PRORATION', -1500], ['PRORATION', 500], ['BALANCE', 1000]]);

    const c = await change(id, { priceId: basic, effective: 'IMMEDIATE', prorationDate: p.body.data.prorationDate, expectedAmountDueCents: 0, expectedBalanceCreditCents: 1000 });
    expect(c.status).toBe(200);
    expect(c.body.data.subscription).toMatchObject({ priceId: basic, amountCents: 1000, scheduledChange: null, customerBalanceCents: 1000 });
    // Stripe: always_invoice at the preview's second; the invoice's total is −1000, due 0, its credit in the balance.
    const live = stripe.subscriptions.get(stripeSub.id)!;
    const invoice = stripe.invoices.get(live.latest_invoice as string)!;
    expect(invoice).toMatchObject({ billing_reason: 'subscription_update', status: 'paid', total: -1000, amount_due: 0, amount_paid: 0, starting_balance: 0, ending_balance: -1000 });
    expect((await sdk.customers.retrieve(customerOf(live))) as Stripe.Customer).toMatchObject({ balance: -1000 });
    const transactions = await sdk.customers.listBalanceTransactions(customerOf(live));
    expect(transactions.data.map((t) => [t.type, t.amount, t.invoice])).toEqual([['applied_to_invoice', -1000, invoice.id]]);
    // Kassa's order: the preview's lines (Stripe's descriptions of its proration lines), total 0 = what Stripe collected.
    const order = (await api('get', `/v1/orders/${c.body.data.orderId}`)).body.data;
    expect(order).toMatchObject({ status: 'PAID', amountCents: invoice.amount_paid });
    expect(order.lines.map((l: any) => [l.kind, l.description, l.amountCents])).toEqual([
      ['PRORATION', 'Unused time on Pro after 16 Apr 2026', -1500],
      ['PRORATION', 'Remaining time on Basic after 16 Apr 2026', 500],
      ['BALANCE', 'Credit added to your balance', 1000],
    ]);
    expect(await mirrorOf(customerOf(live))).toEqual({ balance: 1000, ledger: 1000 });
    // Stripe's invoice.paid of it (and its redelivery) writes nothing more and moves nothing twice.
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    expect(await db()('orders').where({ subscription_id: id }).whereNull('billing_period')).toHaveLength(1);
    expect(await mirrorOf(customerOf(live))).toEqual({ balance: 1000, ledger: 1000 });

    // The renewal: Stripe applies the credit (Basic 1000, due 0, nothing charged); Kassa's order draws it.
    at('2026-05-01T00:00:00.000Z');
    const renewal = await renew(stripeSub.id);
    expect(renewal).toMatchObject({ total: 1000, amount_due: 0, amount_paid: 0, starting_balance: -1000, ending_balance: 0, status: 'paid' });
    const period1 = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(Number(period1.amount_cents)).toBe(renewal.amount_paid);
    expect(await linesOf(period1.id)).toEqual([['PRICE', 1000], ['CREDIT', -1000]]);
    expect((await api('get', `/v1/orders/${period1.id}`)).body.data.lines[1].description).toBe('Applied balance');
    expect((await sdk.customers.retrieve(customerOf(live))) as Stripe.Customer).toMatchObject({ balance: 0 });
    expect(await mirrorOf(customerOf(live))).toEqual({ balance: 0, ledger: 0 });
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic, customerBalanceCents: 0 });
  });

  it('a credit larger than one renewal is drawn over two; an upgrade’s invoice draws it too (Stripe applies it to any invoice); every order’s total is what Stripe collected', async () => {
    at('2026-06-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro);
    const customer = customerOf(stripeSub);
    at('2026-06-04T00:00:00.000Z');
    // 27 of 30 days left: −2700 + 900, a credit of 1800.
    const c = await change(id, { priceId: basic, effective: 'IMMEDIATE', expectedBalanceCreditCents: 1800 });
    expect(c.status).toBe(200);
    expect(await linesOf(c.body.data.orderId)).toEqual([['PRORATION', -2700], ['PRORATION', 900], ['BALANCE', 1800]]);
    expect(stripe.customerBalances.get(customer)).toBe(-1800);
    expect(await mirrorOf(customer)).toEqual({ balance: 1800, ledger: 1800 });

    at('2026-07-01T00:00:00.000Z');
    const first = await renew(stripeSub.id);
    expect(first).toMatchObject({ total: 1000, amount_paid: 0, starting_balance: -1800, ending_balance: -800 });
    const o1 = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect([Number(o1.amount_cents), await linesOf(o1.id)]).toEqual([0, [['PRICE', 1000], ['CREDIT', -1000]]]);
    expect(await mirrorOf(customer)).toEqual({ balance: 800, ledger: 800 });
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data.customerBalanceCents).toBe(800);

    at('2026-08-01T00:00:00.000Z');
    const second = await renew(stripeSub.id);
    expect(second).toMatchObject({ total: 1000, amount_due: 200, amount_paid: 200, starting_balance: -800, ending_balance: 0 });
    const o2 = await db()('orders').where({ subscription_id: id, billing_period: 2 }).first();
    expect([Number(o2.amount_cents), await linesOf(o2.id)]).toEqual([200, [['PRICE', 1000], ['CREDIT', -800]]]);
    expect(await mirrorOf(customer)).toEqual({ balance: 0, ledger: 0 });
    expect(stripe.customerBalances.get(customer)).toBe(0);

    // A new credit, then an upgrade: Stripe's proration invoice draws the credit; Kassa's order says so.
    at('2026-08-16T12:00:00.000Z');
    const down = await change(id, { priceId: lite, effective: 'IMMEDIATE' });
    expect(down.status).toBe(200);
    const credit = -stripe.customerBalances.get(customer)!;
    expect(credit).toBe(down.body.data.preview.balanceCreditCents);
    at('2026-08-20T00:00:00.000Z');
    const up = await change(id, { priceId: basic });
    expect(up.status).toBe(200);
    const upInvoice = stripe.invoices.get(stripe.subscriptions.get(stripeSub.id)!.latest_invoice as string)!;
    const drawn = Math.min(credit, upInvoice.total);
    expect(upInvoice).toMatchObject({ total: up.body.data.preview.amountDueCents, amount_paid: upInvoice.total - drawn });
    const upOrder = (await api('get', `/v1/orders/${up.body.data.orderId}`)).body.data;
    expect(upOrder.amountCents).toBe(upInvoice.amount_paid);
    expect(upOrder.lines.at(-1)).toMatchObject({ kind: 'CREDIT', description: 'Applied balance', amountCents: -drawn });
    expect(await mirrorOf(customer)).toEqual({ balance: credit - drawn, ledger: credit - drawn });
    expect(-stripe.customerBalances.get(customer)!).toBe(credit - drawn);
    // Over the whole life: what Stripe collected = the sum of Kassa's orders' totals.
    const collected = [...stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.status === 'paid').reduce((sum, i) => sum + i.amount_paid, 0);
    const ordered = (await db()('orders').where({ subscription_id: id, status: 'PAID' })).reduce((sum: number, o: any) => sum + Number(o.amount_cents), 0);
    expect(ordered).toBe(collected);
  });

  it('with 19 % VAT and a 20 % coupon: Stripe reflects the coupon in the proration lines and taxes each line; the credit is the mirror of the upgrade (DISCOUNT ≥ 0, TAX ≤ 0); preview = Stripe’s invoice = Kassa’s order', async () => {
    const coupon = await ctx.services.modules.discounts.discounts.createCoupon(ctx.orgA.orgId, { name: 'Partner', percentOff: '20', duration: 'FOREVER' });
    at('2027-01-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(euroPro, { customerTax: { country: 'DE' }, discounts: [{ coupon: coupon.id }] });
    at('2027-01-12T07:13:05.000Z');
    const p = (await preview(id, { priceId: euroBasic, effective: 'IMMEDIATE' })).body.data;
    // An independent recomputation of Stripe's invoice: each line the discounted period amount prorated, halves away from zero; VAT per line.
    const remaining = BigInt(Date.parse('2027-02-01T00:00:00Z') / 1000 - Date.parse('2027-01-12T07:13:05Z') / 1000);
    const length = 31n * 86400n;
    const near = (num: bigint, d: bigint) => Number(num < 0n ? -((-2n * num + d) / (2n * d)) : (2n * num + d) / (2n * d));
    const off20 = (a: bigint) => a - BigInt(near(a * 20n, 100n));
    const gross = [near(-3333n * remaining, length), near(1250n * remaining, length)];
    const net = [near(-off20(3333n) * remaining, length), near(off20(1250n) * remaining, length)];
    const vat = net.reduce((sum, a) => sum + near(BigInt(a) * 19n, 100n), 0);
    const credit = -(net[0]! + net[1]! + vat);
    expect(p.lines.map((l: any) => [l.kind, l.amountCents])).toEqual([['PRORATION', gross[0]], ['PRORATION', gross[1]], ['DISCOUNT', net[0]! + net[1]! - gross[0]! - gross[1]!], ['TAX', vat], ['BALANCE', credit]]);
    expect(p.lines[2].amountCents).toBeGreaterThan(0);
    expect(p.lines[3].amountCents).toBeLessThan(0);
    expect(p).toMatchObject({ amountDueCents: 0, balanceCreditCents: credit });
    const c = await change(id, { priceId: euroBasic, effective: 'IMMEDIATE', prorationDate: p.prorationDate, expectedBalanceCreditCents: credit });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    const invoice = stripe.invoices.get(stripe.subscriptions.get(stripeSub.id)!.latest_invoice as string)!;
    expect(invoice).toMatchObject({ total: -credit, amount_due: 0, amount_paid: 0, ending_balance: -credit });
    expect(invoice.lines.data.map((l) => l.amount)).toEqual(net);
    expect(invoice.total_taxes!.map((t) => t.amount)).toEqual([vat]);
    expect(await linesOf(c.body.data.orderId)).toEqual(p.lines.map((l: any) => [l.kind, l.amountCents]));
    expect(await mirrorOf(customerOf(stripeSub), 'EUR')).toEqual({ balance: credit, ledger: credit });
    // The renewal: Stripe bills Basic less 20 % with VAT (1000 + 190) and applies the credit; Kassa's order is its lines.
    at('2027-02-01T00:00:00.000Z');
    const renewal = await renew(stripeSub.id);
    const drawn = Math.min(credit, renewal.total);
    expect(renewal).toMatchObject({ total: 1190, amount_paid: 1190 - drawn });
    const o1 = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect(await linesOf(o1.id)).toEqual([['PRICE', 1250], ['DISCOUNT', -250], ['TAX', 190], ['CREDIT', -drawn]]);
    expect(Number(o1.amount_cents)).toBe(renewal.amount_paid);
    expect(await mirrorOf(customerOf(stripeSub), 'EUR')).toEqual({ balance: credit - drawn, ledger: credit - drawn });
  });

  it('the change’s answer lost (503 after Stripe made it): invoice.paid writes the order with its BALANCE line and moves the mirror; the same change retried applies the plan, with no second order or move', async () => {
    at('2027-03-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro);
    const customer = customerOf(stripeSub);
    at('2027-03-16T00:00:00.000Z');
    const p = (await preview(id, { priceId: basic, effective: 'IMMEDIATE' })).body.data;
    const request = { priceId: basic, effective: 'IMMEDIATE', prorationDate: p.prorationDate, expectedBalanceCreditCents: p.balanceCreditCents };
    stripe.failNext('answerThenHang', 1, `/v1/subscriptions/${stripeSub.id}`, 'POST');
    stripe.failNext('hang', 2, `/v1/subscriptions/${stripeSub.id}`, 'POST');
    const lost = await change(id, request);
    expect(lost.status).toBe(503);
    expect(stripe.customerBalances.get(customer)).toBe(-p.balanceCreditCents);
    const invoice = stripe.invoices.get(stripe.subscriptions.get(stripeSub.id)!.latest_invoice as string)!;
    const delivered = await deliver(stripe.invoiceEvent('invoice.paid', invoice));
    expect(delivered.status, JSON.stringify(delivered.body)).toBe(200);
    const [written] = await db()('orders').where({ subscription_id: id }).whereNull('billing_period');
    expect(await linesOf(written.id)).toEqual(p.lines.map((l: any) => [l.kind, l.amountCents]));
    expect(await mirrorOf(customer)).toEqual({ balance: p.balanceCreditCents, ledger: p.balanceCreditCents });
    const retry = await change(id, request);
    expect(retry.status, JSON.stringify(retry.body)).toBe(200);
    expect(retry.body.data).toMatchObject({ orderId: written.id, subscription: { priceId: basic, customerBalanceCents: p.balanceCreditCents } });
    expect(await db()('orders').where({ subscription_id: id }).whereNull('billing_period')).toHaveLength(1);
    expect(await mirrorOf(customer)).toEqual({ balance: p.balanceCreditCents, ledger: p.balanceCreditCents });
    expect(stripe.customerBalances.get(customer)).toBe(-p.balanceCreditCents);
  });

  it('what Stripe still cannot take is a clear 4xx, nothing sent: an unchanged PERIOD_END default for downgrades', async () => {
    at('2026-09-01T00:00:00.000Z');
    const { id } = await subscribe(pro);
    at('2026-09-10T00:00:00.000Z');
    const requests = stripe.requests.length;
    expect((await preview(id, { priceId: basic })).body.data).toMatchObject({ effective: 'PERIOD_END', balanceCreditCents: 0 });
    const stale = await change(id, { priceId: basic, effective: 'IMMEDIATE', expectedBalanceCreditCents: 1 });
    expect(stale.status).toBe(409);
    expect(stripe.requests.filter((r) => r.method === 'POST').length).toBe(stripe.requests.slice(0, requests).filter((r) => r.method === 'POST').length);
  });
});

describe('the customer portal on the Stripe rail', () => {
  const PORTAL_ORIGIN = 'http://merchant.test';
  const http = () => supertest(ctx.apps.merchant);
  const csrfOf = (html: string) => /name="csrf" value="([0-9a-f]{64})"/.exec(html)?.[1];
  /** Follows a portal link as a browser does (the continue page, then its POST); returns the session cookie. */
  async function enter(url: string): Promise<string> {
    const path = new URL(url).pathname;
    expect((await http().get(path)).status).toBe(200);
    const entered = await http().post(path).set('Origin', PORTAL_ORIGIN).type('form').send({});
    expect(entered.status).toBe(303);
    return [entered.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!.split(';')[0]!;
  }

  it('a buyer downgrades now, with credit for the unused time: the preview is Stripe’s credit, Stripe credits the customer’s balance, the portal shows it', async () => {
    at('2026-10-01T00:00:00.000Z');
    const { id, stripeSub } = await subscribe(pro);
    at('2026-10-16T12:00:00.000Z');
    const customerId = (await api('get', `/v1/subscriptions/${id}`)).body.data.customerId as string;
    const portal = await api('post', '/v1/customer-portal-sessions').send({ customerId, planChangePriceIds: [basic] });
    expect(portal.status, JSON.stringify(portal.body)).toBe(201);
    const cookie = await enter(portal.body.data.url);
    const page = await http().get(`/portal/subscriptions/${id}/change`).set('Cookie', cookie);
    expect(page.status).toBe(200);
    expect(page.text).toContain('name="when" value="now"');
    const send = (form: Record<string, string>) => http().post(`/portal/subscriptions/${id}/change`).set('Cookie', cookie).set('Origin', PORTAL_ORIGIN).type('form').send(form);
    const shown = await send({ csrf: csrfOf(page.text)!, priceId: basic, when: 'now', step: 'preview' });
    expect(shown.status).toBe(200);
    const quote = (await preview(id, { priceId: basic, effective: 'IMMEDIATE' })).body.data;
    const usd = (minor: number) => new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' }).format(minor / 100);
    expect(quote.balanceCreditCents).toBeGreaterThan(0);
    expect(shown.text).toContain(`data-testid="preview-credit">${usd(quote.balanceCreditCents)} is added to your credit balance`);
    const hiddenOf = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(shown.text)![1]!;
    expect(hiddenOf('expectedCredit')).toBe(String(quote.balanceCreditCents));
    const done = await send({ csrf: csrfOf(shown.text)!, priceId: basic, prorationDate: hiddenOf('prorationDate'), expected: hiddenOf('expected'), when: 'now', effective: 'IMMEDIATE', expectedCredit: hiddenOf('expectedCredit'), step: 'confirm' });
    expect(done.status, done.text.slice(0, 500)).toBe(200);
    expect(done.text).toContain(`${usd(quote.balanceCreditCents)} was added to your credit balance`);
    // The account page shows it, as Stripe holds it (before: the sandbox ledger only, so nothing).
    expect(done.text).toContain(`data-testid="credit-balance">${usd(quote.balanceCreditCents)} <span class="muted">taken off your next renewals in USD`);
    // Stripe holds the credit (its sign: negative is owed to the customer); Kassa's mirror equals it.
    const live = stripe.subscriptions.get(stripeSub.id)!;
    expect((await sdk.customers.retrieve(customerOf(live))) as Stripe.Customer).toMatchObject({ balance: -quote.balanceCreditCents });
    expect(await mirrorOf(customerOf(live))).toEqual({ balance: quote.balanceCreditCents, ledger: quote.balanceCreditCents });
    expect((await api('get', `/v1/subscriptions/${id}`)).body.data).toMatchObject({ priceId: basic, customerBalanceCents: quote.balanceCreditCents, scheduledChange: null });
  });
});

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
describe.skipIf(!onPostgres)('races on PostgreSQL (separate pools)', () => {
  const second = onSecondPool(() => ctx);

  it('an immediate downgrade racing the renewal that draws the credit: one outcome, Kassa’s mirror = Stripe’s balance = its ledger (20 rounds)', async () => {
    const ROUNDS = 20;
    const failed: string[] = [];
    const outcomes = { renewalThenChange: 0, changeRefusedRenewing: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      at('2026-10-01T00:00:00.000Z');
      const { id, stripeSub } = await subscribe(pro);
      const customer = customerOf(stripeSub);
      at('2026-10-16T00:00:00.000Z');
      expect((await change(id, { priceId: basic, effective: 'IMMEDIATE' })).status).toBe(200);
      // Stripe renews (drawing the credit) at the period's end; its invoice.paid reaches Kassa while a downgrade is asked.
      at('2026-11-01T00:00:00.000Z');
      const invoice = stripe.renew(stripeSub.id);
      at('2026-11-01T00:10:00.000Z');
      const [delivered, changed] = await Promise.allSettled([
        deliver(stripe.invoiceEvent('invoice.paid', invoice)),
        second.services.subscriptions.changePlan(id, { priceId: lite, effective: 'IMMEDIATE' }, { orgId: ctx.orgA.orgId }),
      ]);
      const renewals = await db()('orders').where({ subscription_id: id, billing_period: 1 });
      const changes = await db()('orders').where({ subscription_id: id }).whereNull('billing_period');
      const mirror = await mirrorOf(customer);
      const stripeCredit = -(stripe.customerBalances.get(customer) ?? 0);
      const ok = delivered.status === 'fulfilled' && delivered.value.status === 200;
      const applied = changed.status === 'fulfilled';
      if (applied) outcomes.renewalThenChange++;
      else outcomes.changeRefusedRenewing++;
      const refusedClearly = applied || (changed.reason as { code?: string }).code === 'CONFLICT';
      if (!ok || !refusedClearly || renewals.length !== 1 || changes.length !== (applied ? 2 : 1) || mirror.balance !== mirror.ledger || mirror.balance !== stripeCredit || Number(renewals[0].amount_cents) !== invoice.amount_paid) {
        failed.push(`round ${round}: delivered ${ok}, change ${applied ? 'applied' : String((changed as PromiseRejectedResult).reason)}, renewals ${renewals.length}, change orders ${changes.length}, mirror ${JSON.stringify(mirror)}, Stripe credit ${stripeCredit}`);
      }
    }
    expect(failed).toEqual([]);
    console.info('stripe credit race outcomes', outcomes);
  });
});
