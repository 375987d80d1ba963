/**
 * Metered prices where Stripe is the card processor (issue 38 §7), end to end with the official
 * `stripe` SDK against the local Stripe-shaped server: a metered price sells through Stripe
 * Checkout (its fee as the recurring price); at the period's end Stripe's renewal draft
 * (`invoice.created`) is held (`auto_advance: false`), Kassa's grace window passes (late events of
 * the period are still billed), then the worker closes the period, adds one invoice item per USAGE
 * line (Kassa's amounts: tiers, included units, one rounding rule) and finalizes it; Stripe
 * charges it and `invoice.paid` writes the renewal order, whose lines add up to what Stripe
 * collected. A redelivered `invoice.created` adds nothing. Cancel now bills the partial period on
 * an invoice of its own before Stripe cancels the subscription. A credit pack's units are drawn
 * into the usage lines (`creditedUnits`) on Stripe as on the sandbox: the invoice items Stripe
 * collects are the lines net of credits, drawn once per (subscription, period, meter).
 */
import type Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerJobs } from '../../src/jobs.js';
import { setExternalId } from '../usage/helpers.js';
import { createStripeContext, type StripeContext } from './stripe-context.js';

let s: StripeContext;
let meteredPriceId: string;
const meters = { tokens: '', requests: '' };
const db = () => s.ctx.testDb.database.db;
const usageJob = () => workerJobs({ services: s.ctx.services }).find((j) => j.name === 'stripe-usage-invoices')!;

beforeAll(async () => {
  s = await createStripeContext();
  const { ctx } = s;
  const meter = async (body: object) => {
    const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send(body);
    expect(res.status).toBe(201);
    return res.body.data.id as string;
  };
  meters.tokens = await meter({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
  meters.requests = await meter({ name: 'Requests', source: 'EVENTS', filter: { eventName: 'request' }, aggregation: 'count' });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Metered' });
  const price = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
    amount: 2000,
    currency: 'USD',
    pricingType: 'SUBSCRIPTION',
    billingInterval: 'MONTH',
    meteredComponents: [
      { meterId: meters.tokens, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } },
      { meterId: meters.requests, pricing: { model: 'GRADUATED', tiers: [{ upTo: 100, unitAmountDecimal: '1' }, { upTo: null, unitAmountDecimal: '0.5', flatAmountCents: 10 }] } },
    ],
  });
  expect(price.status, JSON.stringify(price.body)).toBe(201);
  meteredPriceId = price.body.data.pricingId;
});
afterAll(async () => {
  await s?.close();
});

const ingest = async (events: object[]) => {
  const res = await s.ctx.merchant.post('/v1/usage-events').set('X-API-Key', s.ctx.orgA.apiKey).send({ events });
  expect(res.status).toBe(200);
  return res.body.data.results.map((r: { status: string }) => r.status) as string[];
};

/** A metered subscription bought through Stripe Checkout, its customer named `externalId`. */
async function subscribe(email: string, externalId: string, pricingId = meteredPriceId) {
  const res = await s.create({ pricingId, customerEmail: email });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const stripeSessionId = await s.stripeIdOf(res.body.data.id);
  s.stripe.complete(stripeSessionId, { email });
  expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
  const session = await s.readSession(res.body.data.id);
  const order = await s.readOrder(session.orderId);
  expect((await setExternalId(s.ctx, order.customerId as string, externalId, s.ctx.orgA.apiKey)).status).toBe(200);
  const subscriptionId = (await db()('subscriptions').where({ checkout_session_id: res.body.data.id }).first()).id as string;
  const stripeSub = s.stripe.subscriptionOf(stripeSessionId);
  return { subscriptionId, stripeSub, periodEnd: stripeSub.items.data[0]!.current_period_end * 1000 };
}

/** Independent arithmetic: 0.004 ¢ per token beyond 10,000 (half up), requests 1 ¢ up to 100 then 0.5 ¢ + 10 ¢ flat (half up). */
const tokensCents = (tokens: number) => Math.floor((Math.max(tokens - 10_000, 0) * 4 + 500) / 1000);
const requestsCents = (n: number) => Math.floor((Math.min(n, 100) * 10 + Math.max(n - 100, 0) * 5 + (n > 100 ? 100 : 0) + 5) / 10);

const usageItems = (invoice: Stripe.Invoice) => invoice.lines.data.filter((l) => l.parent?.invoice_item_details);

describe('metered subscriptions billed by Stripe', () => {
  it('sells a metered price through Stripe Checkout and a payment link (the 400 guard is gone)', async () => {
    const { link } = await s.ctx.services.catalog.createPaymentLink(meteredPriceId, {}, s.ctx.orgA.orgId);
    const res = await s.ctx.merchant.get(`/pay/${link.token}`);
    expect(res.status).toBe(303);
  });

  it('holds the renewal draft, adds the closed period’s usage as invoice items after the grace window, and the paid order’s lines equal what Stripe collected', async () => {
    s.ctx.clock.set('2026-11-22T09:00:00.000Z');
    const { subscriptionId, stripeSub, periodEnd } = await subscribe('metered-stripe@example.com', 'user_stripe');
    const customer = { externalId: 'user_stripe' };
    s.ctx.clock.set('2026-12-10T00:00:00.000Z');
    expect(
      await ingest([
        { id: 's-t1', customer, name: 'llm_tokens', timestamp: '2026-11-23T00:00:00Z', properties: { tokens: 1_000_000 } },
        { id: 's-t2', customer, name: 'llm_tokens', timestamp: '2026-12-01T00:00:00Z', properties: { tokens: 234_567 } },
        ...Array.from({ length: 128 }, (_, i) => ({ id: `s-r${i}`, customer, name: 'request', timestamp: '2026-12-05T00:00:00Z' })),
      ]),
    ).not.toContain('REJECTED');

    // The period ends: Stripe drafts the renewal invoice and sends invoice.created; Kassa holds it.
    s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
    const draft = s.stripe.renewDraft(stripeSub.id);
    const created = s.stripe.lastEvent('invoice.created', draft.id);
    expect((await s.deliver(created)).body.outcome).toBe('applied');
    expect(s.stripe.invoices.get(draft.id)).toMatchObject({ status: 'draft', auto_advance: false });
    expect(s.stripe.requests.filter((r) => r.path === `/v1/invoices/${draft.id}` && r.method === 'POST').at(-1)).toMatchObject({ idempotencyKey: `kassa_usage_hold_${draft.id}`, body: { auto_advance: 'false' } });

    // In the grace window a late event of the closing period is accepted, and billed; Stripe's own
    // finalization time passes without finalizing the held draft; the job waits for Kassa's grace.
    s.ctx.clock.set(new Date(periodEnd + 1800_000).toISOString());
    expect(await ingest([{ id: 's-r-late', customer, name: 'request', timestamp: new Date(periodEnd - 1000).toISOString() }])).toEqual(['ACCEPTED']);
    expect(await usageJob().run()).toBe(false);
    s.ctx.clock.set(new Date(periodEnd + 3600_000 + 1000).toISOString());
    expect(s.stripe.finalizeDue()).toEqual([]);
    expect(await usageJob().run()).toBe(true);

    // After the close, a late event of that period is refused, never silently dropped.
    expect(await ingest([{ id: 's-r-too-late', customer, name: 'request', timestamp: new Date(periodEnd - 1000).toISOString() }])).toEqual(['REJECTED']);

    const invoice = s.stripe.invoices.get(draft.id)!;
    const tokens = 1_234_567;
    const requests = 129;
    expect(invoice.status).toBe('paid');
    expect(usageItems(invoice).map((l) => [l.amount, l.metadata[`kassa_usage_item`]])).toEqual([
      [tokensCents(tokens), `kassa_usage_${draft.id}_0`],
      [requestsCents(requests), `kassa_usage_${draft.id}_1`],
    ]);
    expect(tokensCents(tokens)).toBe(4898);
    expect(invoice.amount_paid).toBe(2000 + 4898 + requestsCents(requests));
    expect(usageItems(invoice)[0]!.description).toBe('Tokens: 1,234,567 used, 10,000 included: 1,224,567 × $0.00004');
    expect(usageItems(invoice)[0]!.period).toEqual({ start: Math.floor(Date.parse('2026-11-22T09:00:00.000Z') / 1000), end: periodEnd / 1000 });

    // Stripe's invoice.paid: the renewal order carries the fee and the usage lines, adding up to the
    // amount paid — even when it is applied before Kassa recorded the finalization (Stripe charges at once).
    await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).update({ state: 'HELD' });
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
    const order = await db()('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first();
    const read = await s.readOrder(order.id);
    expect(read.amountCents).toBe(invoice.amount_paid);
    expect((read.lines as Array<{ kind: string; amountCents: number; quantity: string }>).map((l) => [l.kind, l.quantity, l.amountCents])).toEqual([
      ['PRICE', '1', 2000],
      ['USAGE', String(tokens), 4898],
      ['USAGE', String(requests), requestsCents(requests)],
    ]);
    expect(await s.orderEvents(order.id)).toEqual(['order.paid']);

    // A redelivered invoice.created (a new event id, the same invoice) and another job pass add nothing.
    const items = s.stripe.invoiceItems.size;
    expect((await s.deliver(s.stripe.eventFor('invoice.created', { id: draft.id }))).body.outcome).toBe('applied');
    // It finds the stale HELD row and the finalized invoice carrying every item: recorded FINALIZED, nothing added.
    expect((await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first()).state).toBe('FINALIZED');
    expect(await usageJob().run()).toBe(false);
    expect(s.stripe.invoiceItems.size).toBe(items);
    expect(s.stripe.invoices.get(draft.id)!.amount_paid).toBe(invoice.amount_paid);
  });

  it('a free trial bills no usage: the trial-end invoice carries no usage item (the fee only), the next renewal only the usage after the trial', async () => {
    const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: 'Metered trial' });
    const price = await s.ctx.admin.post(`/v1/products/${product.id}/prices`).send({
      amount: 2000,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'MONTH',
      trialDays: 7,
      meteredComponents: [{ meterId: meters.tokens, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } }],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    s.ctx.clock.set('2027-05-01T00:00:00.000Z');
    const { subscriptionId, stripeSub, periodEnd } = await subscribe('trial-metered@example.com', 'user_trial_metered', price.body.data.pricingId);
    expect(stripeSub.status).toBe('trialing');
    expect(periodEnd).toBe(Date.parse('2027-05-08T00:00:00.000Z'));
    const customer = { externalId: 'user_trial_metered' };
    s.ctx.clock.set('2027-05-05T00:00:00.000Z');
    expect(await ingest([{ id: 'tr-1', customer, name: 'llm_tokens', timestamp: '2027-05-02T00:00:00Z', properties: { tokens: 500_000 } }])).toEqual(['ACCEPTED']);

    // The trial ends: Stripe drafts its first paid invoice; Kassa holds it, closes the trial's usage after the grace hour: no item.
    s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
    const first = s.stripe.renewDraft(stripeSub.id);
    expect((await s.deliver(s.stripe.lastEvent('invoice.created', first.id))).body.outcome).toBe('applied');
    s.ctx.clock.set(new Date(periodEnd + 1800_000).toISOString());
    // An event in the grace hour, stamped after the trial's end: the first paid period's.
    expect(await ingest([{ id: 'tr-2', customer, name: 'llm_tokens', timestamp: new Date(periodEnd + 60_000).toISOString(), properties: { tokens: 7_000 } }])).toEqual(['ACCEPTED']);
    s.ctx.clock.set(new Date(periodEnd + 3600_000 + 1000).toISOString());
    expect(await usageJob().run()).toBe(true);
    const trialEnd = s.stripe.invoices.get(first.id)!;
    expect(trialEnd.status).toBe('paid');
    expect(usageItems(trialEnd)).toEqual([]);
    expect(trialEnd.amount_paid).toBe(2000);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', first.id))).body.outcome).toBe('applied');
    const firstOrder = await s.readOrder((await db()('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first()).id);
    expect((firstOrder.lines as Array<{ kind: string; amountCents: number }>).map((l) => [l.kind, l.amountCents])).toEqual([['PRICE', 2000]]);
    expect(firstOrder.amountCents).toBe(trialEnd.amount_paid);

    // The first paid period: 7,000 + 8,000 tokens; its renewal bills those alone (independent arithmetic).
    const next = (await db()('subscriptions').where({ id: subscriptionId }).first()) as { current_period_end: string | Date };
    const nextEnd = new Date(next.current_period_end).getTime();
    s.ctx.clock.set(new Date(nextEnd - 3600_000).toISOString());
    expect(await ingest([{ id: 'tr-3', customer, name: 'llm_tokens', timestamp: new Date(nextEnd - 7200_000).toISOString(), properties: { tokens: 8_000 } }])).toEqual(['ACCEPTED']);
    s.ctx.clock.set(new Date(nextEnd + 1000).toISOString());
    const second = s.stripe.renewDraft(stripeSub.id);
    expect((await s.deliver(s.stripe.lastEvent('invoice.created', second.id))).body.outcome).toBe('applied');
    s.ctx.clock.set(new Date(nextEnd + 3600_000 + 1000).toISOString());
    expect(await usageJob().run()).toBe(true);
    const renewal = s.stripe.invoices.get(second.id)!;
    expect(usageItems(renewal).map((l) => l.amount)).toEqual([tokensCents(15_000)]);
    expect(tokensCents(15_000)).toBe(20);
    expect(renewal.amount_paid).toBe(2000 + 20);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', second.id))).body.outcome).toBe('applied');
    const periods = (await db()('orders').where({ subscription_id: subscriptionId }).orderBy('created_at')) as Array<{ id: string; billing_period: number }>;
    expect(periods.map((o) => o.billing_period)).toEqual([0, 1, 2]);
    const order = await s.readOrder(periods[2]!.id);
    expect((order.lines as Array<{ kind: string; quantity: string; amountCents: number }>).map((l) => [l.kind, l.quantity, l.amountCents])).toEqual([
      ['PRICE', '1', 2000],
      ['USAGE', '15000', 20],
    ]);
    expect(order.amountCents).toBe(renewal.amount_paid);
  });

  it('a draft whose invoice.created arrives after the grace window is closed and billed at once; a subscription without metered components is left to Stripe', async () => {
    s.ctx.clock.set('2027-03-01T00:00:00.000Z');
    const { stripeSub, periodEnd } = await subscribe('late-created@example.com', 'user_late_created');
    s.ctx.clock.set('2027-03-05T00:00:00.000Z');
    await ingest([{ id: 'lc-1', customer: { externalId: 'user_late_created' }, name: 'request', timestamp: '2027-03-02T00:00:00Z' }]);
    s.ctx.clock.set(new Date(periodEnd + 3600_000 + 60_000).toISOString());
    const draft = s.stripe.renewDraft(stripeSub.id);
    expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
    const invoice = s.stripe.invoices.get(draft.id)!;
    expect(invoice.status).toBe('paid');
    expect(usageItems(invoice).map((l) => l.amount)).toEqual([0, 1]);
    expect(invoice.amount_paid).toBe(2001);

    // A plain (unmetered) Stripe subscription: invoice.created is ignored and Stripe finalizes on its own.
    const plain = await s.create({ pricingId: s.priceId.replace(/.*/, (await plainSubscriptionPrice())), customerEmail: 'plain@example.com' });
    expect(plain.status).toBe(201);
    const stripeSessionId = await s.stripeIdOf(plain.body.data.id);
    s.stripe.complete(stripeSessionId, { email: 'plain@example.com' });
    await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeSessionId));
    const plainSub = s.stripe.subscriptionOf(stripeSessionId);
    s.ctx.clock.set(new Date(plainSub.items.data[0]!.current_period_end * 1000 + 1000).toISOString());
    const plainDraft = s.stripe.renewDraft(plainSub.id);
    expect((await s.deliver(s.stripe.lastEvent('invoice.created', plainDraft.id))).body.outcome).toBe('ignored');
    expect(s.stripe.invoices.get(plainDraft.id)!.auto_advance).toBe(true);
  });

  it('cancel now bills the partial period’s usage on an invoice of its own, once, before Stripe cancels the subscription', async () => {
    s.ctx.clock.set('2027-06-01T00:00:00.000Z');
    const { subscriptionId, stripeSub } = await subscribe('cancel-now@example.com', 'user_cancel_now');
    const customer = { externalId: 'user_cancel_now' };
    s.ctx.clock.set('2027-06-10T00:00:00.000Z');
    await ingest([
      { id: 'cn-t', customer, name: 'llm_tokens', timestamp: '2027-06-02T00:00:00Z', properties: { tokens: 60_000 } },
      ...Array.from({ length: 3 }, (_, i) => ({ id: `cn-r${i}`, customer, name: 'request', timestamp: '2027-06-03T00:00:00Z' })),
    ]);
    const res = await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.status).toBe('CANCELED');
    expect(s.stripe.subscriptions.get(stripeSub.id)!.status).toBe('canceled');
    const finals = [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
    expect(finals).toHaveLength(1);
    const final = finals[0]!;
    expect(final.status).toBe('paid');
    expect(usageItems(final).map((l) => l.amount)).toEqual([tokensCents(60_000), requestsCents(3)]);
    expect(final.amount_paid).toBe(200 + 3);
    // The cancel's request: the usage invoice was opened with Kassa's idempotency key, before the DELETE.
    const paths = s.stripe.requests.map((r) => `${r.method} ${r.path}`);
    expect(paths.lastIndexOf(`POST /v1/invoices/${final.id}/finalize`)).toBeLessThan(paths.lastIndexOf(`DELETE /v1/subscriptions/${stripeSub.id}`));
    expect(s.stripe.requests.find((r) => r.method === 'POST' && r.path === '/v1/invoices')?.idempotencyKey).toMatch(/^kassa_usage_final_/);

    // From the cancel on the customer has no ACTIVE subscription: later events fall into calendar
    // months (accepted), no longer into the canceled subscription's closed period.
    expect(await ingest([{ id: 'cn-late', customer, name: 'request', timestamp: '2027-06-04T00:00:00Z' }])).toEqual(['ACCEPTED']);

    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', final.id))).body.outcome).toBe('applied');
    const order = await db()('orders').where({ subscription_id: subscriptionId, processor_payment_id: (final.payments!.data[0]!.payment.payment_intent as string) }).first();
    const read = await s.readOrder(order.id);
    expect(read.amountCents).toBe(final.amount_paid);
    expect((read.lines as Array<{ kind: string; amountCents: number }>).map((l) => [l.kind, l.amountCents])).toEqual([
      ['USAGE', 200],
      ['USAGE', 3],
    ]);
    // A retried cancel is refused (already canceled) and opens no second invoice.
    expect((await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(409);
    expect([...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual')).toHaveLength(1);
  });

  it('cancel now whose usage invoice is below Stripe’s minimum charge: Stripe marks it paid with nothing charged and debits the customer; Kassa’s order keeps the usage lines and carries the amount (total 0 = amount_paid), once', async () => {
    s.stripe.minimumCharge = true;
    try {
      s.ctx.clock.set('2028-03-01T00:00:00.000Z');
      const { subscriptionId, stripeSub } = await subscribe('cancel-small@example.com', 'user_cancel_small');
      const customer = { externalId: 'user_cancel_small' };
      s.ctx.clock.set('2028-03-05T00:00:00.000Z');
      // 3 requests (3 ¢) and tokens within the included 10,000: 3 ¢ due, below Stripe's 50 ¢.
      await ingest([
        { id: 'cnsmall-t', customer, name: 'llm_tokens', timestamp: '2028-03-02T00:00:00Z', properties: { tokens: 4_000 } },
        ...Array.from({ length: 3 }, (_, i) => ({ id: `cnsmall-r${i}`, customer, name: 'request', timestamp: '2028-03-03T00:00:00Z' })),
      ]);
      const res = await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(s.stripe.subscriptions.get(stripeSub.id)!.status).toBe('canceled');
      const finals = [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
      expect(finals).toHaveLength(1);
      const final = finals[0]!;
      expect(usageItems(final).map((l) => l.amount)).toEqual([tokensCents(4_000), requestsCents(3)]);
      expect(final).toMatchObject({ status: 'paid', total: 3, amount_due: 3, amount_paid: 0, amount_remaining: 0 });
      const stripeCustomer = s.stripe.subscriptions.get(stripeSub.id)!.customer as string;
      expect(s.stripe.customerBalances.get(stripeCustomer)).toBe(3);

      const paid = s.stripe.invoiceEvent('invoice.paid', s.stripe.invoices.get(final.id)!);
      expect((await s.deliver(paid)).body.outcome).toBe('applied');
      expect((await s.deliver(paid)).status).toBe(200);
      const orders = await db()('orders').where({ subscription_id: subscriptionId, processor_payment_id: final.id });
      expect(orders).toHaveLength(1);
      const read = await s.readOrder(orders[0].id);
      expect((read.lines as Array<{ kind: string; description: string; amountCents: number }>).map((l) => [l.kind, l.description, l.amountCents])).toEqual([
        ['USAGE', 'Tokens', 0],
        ['USAGE', 'Requests', 3],
        ['CREDIT', 'Carried to the next invoice (below Stripe’s minimum charge)', -3],
      ]);
      expect(read).toMatchObject({ status: 'PAID', amountCents: final.amount_paid });
    } finally {
      s.stripe.minimumCharge = false;
    }
  });

  it('a cancel now in the grace hour after the period’s end bills that hour on its own invoice and the held renewal draft the period: every accepted event once', async () => {
    s.ctx.clock.set('2027-08-01T00:00:00.000Z');
    const { subscriptionId, stripeSub, periodEnd } = await subscribe('cancel-grace@example.com', 'user_cancel_grace');
    const customer = { externalId: 'user_cancel_grace' };
    const at = (ms: number) => new Date(ms).toISOString();
    const finals = () => [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
    s.ctx.clock.set(at(periodEnd - 86_400_000));
    expect(
      await ingest([
        { id: 'cg-t', customer, name: 'llm_tokens', timestamp: at(periodEnd - 2 * 86_400_000), properties: { tokens: 60_000 } },
        ...Array.from({ length: 3 }, (_, i) => ({ id: `cg-r${i}`, customer, name: 'request', timestamp: at(periodEnd - 2 * 86_400_000) })),
      ]),
    ).not.toContain('REJECTED');
    // The period ends: Stripe moves the subscription on and drafts the renewal (the next period's fee); Kassa holds it.
    s.ctx.clock.set(at(periodEnd + 1000));
    const draft = s.stripe.renewDraft(stripeSub.id);
    expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
    // In the grace hour: a late event of the closing period, and events after its end (the period Stripe started).
    s.ctx.clock.set(at(periodEnd + 20 * 60_000));
    expect(
      await ingest([
        { id: 'cg-late', customer, name: 'request', timestamp: at(periodEnd - 1000) },
        { id: 'cg-next-t', customer, name: 'llm_tokens', timestamp: at(periodEnd + 5 * 60_000), properties: { tokens: 25_000 } },
        ...Array.from({ length: 2 }, (_, i) => ({ id: `cg-next-r${i}`, customer, name: 'request', timestamp: at(periodEnd + 10 * 60_000) })),
      ]),
    ).toEqual(['ACCEPTED', 'ACCEPTED', 'ACCEPTED', 'ACCEPTED']);
    const cancelAt = periodEnd + 30 * 60_000;
    s.ctx.clock.set(at(cancelAt));
    const res = await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(s.stripe.subscriptions.get(stripeSub.id)!.status).toBe('canceled');
    // The cancel's invoice: the usage from the period's end to the cancel (before the fix: none, and
    // these events were billed nowhere). 25,000 tokens with the new period's 10,000 included; 2 requests.
    expect(finals(), 'the cancel-now invoice').toHaveLength(1);
    const final = finals()[0]!;
    expect(final.status).toBe('paid');
    expect(usageItems(final).map((l) => [l.amount, l.period])).toEqual([
      [tokensCents(25_000), { start: periodEnd / 1000, end: Math.floor(cancelAt / 1000) }],
      [requestsCents(2), { start: periodEnd / 1000, end: Math.floor(cancelAt / 1000) }],
    ]);
    expect(s.stripe.requests.find((r) => r.method === 'POST' && r.path === '/v1/invoices' && r.idempotencyKey?.includes(subscriptionId))?.idempotencyKey).toBe(`kassa_usage_final_${subscriptionId}_1`);
    // The held draft, after the grace window: the closed period's usage (the late event included), none of the hour after it.
    s.ctx.clock.set(at(periodEnd + 3600_000 + 1000));
    expect(await usageJob().run()).toBe(true);
    const renewal = s.stripe.invoices.get(draft.id)!;
    expect(renewal.status).toBe('paid');
    expect(usageItems(renewal).map((l) => [l.amount, l.period])).toEqual([
      [tokensCents(60_000), { start: Math.floor(Date.parse('2027-08-01T00:00:00.000Z') / 1000), end: periodEnd / 1000 }],
      [requestsCents(4), { start: Math.floor(Date.parse('2027-08-01T00:00:00.000Z') / 1000), end: periodEnd / 1000 }],
    ]);
    // Every accepted event in exactly one invoice: the orders' USAGE quantities add up to what was accepted.
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', final.id))).body.outcome).toBe('applied');
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
    const orders = await db()('orders').where({ subscription_id: subscriptionId });
    const lines = await db()('order_lines').whereIn('order_id', orders.map((o: { id: string }) => o.id)).andWhere({ kind: 'USAGE' });
    const used = (name: string) => lines.filter((l: { description: string }) => l.description.startsWith(name)).reduce((sum: number, l: { quantity: string }) => sum + Number(l.quantity), 0);
    expect([used('Tokens'), used('Requests')]).toEqual([60_000 + 25_000, 3 + 1 + 2]);
    expect(finals()).toHaveLength(1);
  });

  it('a grace-hour cancel whose Stripe calls straddle the end of the grace window, the renewal draft recorded and billed in between: every accepted event on one invoice, none on two', async () => {
    s.ctx.clock.set('2029-05-01T00:00:00.000Z');
    const { subscriptionId, stripeSub, periodEnd } = await subscribe('cancel-straddle@example.com', 'user_cancel_straddle');
    const customer = { externalId: 'user_cancel_straddle' };
    const at = (ms: number) => new Date(ms).toISOString();
    const finals = () => [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
    s.ctx.clock.set(at(periodEnd - 86_400_000));
    await ingest([
      { id: 'straddle-t', customer, name: 'llm_tokens', timestamp: at(periodEnd - 2 * 86_400_000), properties: { tokens: 60_000 } },
      ...Array.from({ length: 3 }, (_, i) => ({ id: `straddle-r${i}`, customer, name: 'request', timestamp: at(periodEnd - 2 * 86_400_000) })),
    ]);
    // The period ends and Stripe drafts the renewal; its invoice.created is not handled yet.
    s.ctx.clock.set(at(periodEnd + 1000));
    const draft = s.stripe.renewDraft(stripeSub.id);
    s.ctx.clock.set(at(periodEnd + 20 * 60_000));
    expect(await ingest([{ id: 'straddle-next-t', customer, name: 'llm_tokens', timestamp: at(periodEnd + 5 * 60_000), properties: { tokens: 25_000 } }, { id: 'straddle-next-r', customer, name: 'request', timestamp: at(periodEnd + 10 * 60_000) }])).toEqual(['ACCEPTED', 'ACCEPTED']);
    // The cancel, in the grace hour, has decided its range and is opening its invoice on Stripe when
    // the grace window ends and the draft's invoice.created is handled: the draft is billed at once.
    s.ctx.clock.set(at(periodEnd + 30 * 60_000));
    let drafted: number | undefined;
    s.stripe.beforeNext('POST', '/v1/invoices', async () => {
      s.ctx.clock.set(at(periodEnd + 3600_000 + 1000));
      drafted = (await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).status;
    });
    const res = await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(drafted).toBe(200);
    await usageJob().run();
    const renewal = s.stripe.invoices.get(draft.id)!;
    expect(renewal.status).toBe('paid');
    expect(finals()).toHaveLength(1);
    for (const invoice of [finals()[0]!, renewal]) expect((await s.deliver(s.stripe.lastEvent('invoice.paid', invoice.id))).body.outcome).toBe('applied');
    // Every accepted event on exactly one invoice: the orders' USAGE quantities add up to what was accepted,
    // and Stripe collected those lines (before: the draft billed the period and the cancel's invoice it again).
    const orders = await db()('orders').where({ subscription_id: subscriptionId });
    const lines = await db()('order_lines').whereIn('order_id', orders.map((o: { id: string }) => o.id)).andWhere({ kind: 'USAGE' });
    const used = (name: string) => lines.filter((l: { description: string }) => l.description.startsWith(name)).reduce((sum: number, l: { quantity: string }) => sum + Number(l.quantity), 0);
    expect([used('Tokens'), used('Requests')]).toEqual([60_000 + 25_000, 3 + 1]);
    const collected = [finals()[0]!, renewal].flatMap(usageItems).reduce((sum, l) => sum + l.amount, 0);
    expect(collected).toBe(lines.reduce((sum: number, l: { amount_cents: string | number }) => sum + Number(l.amount_cents), 0));
  });

  it('a grace-hour cancel that failed after closing usage, the draft recorded before its retry: the retried cancel bills the whole range, the draft nothing', async () => {
    s.ctx.clock.set('2029-08-01T00:00:00.000Z');
    const { subscriptionId, stripeSub, periodEnd } = await subscribe('cancel-retry-grace@example.com', 'user_cancel_retry_grace');
    const customer = { externalId: 'user_cancel_retry_grace' };
    const at = (ms: number) => new Date(ms).toISOString();
    const finals = () => [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
    s.ctx.clock.set(at(periodEnd - 86_400_000));
    await ingest([{ id: 'retry-grace-t', customer, name: 'llm_tokens', timestamp: at(periodEnd - 2 * 86_400_000), properties: { tokens: 40_000 } }, { id: 'retry-grace-r', customer, name: 'request', timestamp: at(periodEnd - 86_400_000) }]);
    s.ctx.clock.set(at(periodEnd + 1000));
    const draft = s.stripe.renewDraft(stripeSub.id);
    s.ctx.clock.set(at(periodEnd + 20 * 60_000));
    await ingest([{ id: 'retry-grace-next', customer, name: 'request', timestamp: at(periodEnd + 5 * 60_000) }]);
    // The cancel closes usage, then Stripe refuses its invoice: the cancel fails.
    s.ctx.clock.set(at(periodEnd + 30 * 60_000));
    s.stripe.failNext('unauthorized', 1, '/v1/invoices', 'POST');
    const failed = await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(failed.status).toBeGreaterThanOrEqual(500);
    expect(finals()).toHaveLength(0);
    // The draft arrives meanwhile (held: an empty range), then the cancel is retried.
    s.ctx.clock.set(at(periodEnd + 40 * 60_000));
    expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
    s.ctx.clock.set(at(periodEnd + 45 * 60_000));
    const retried = await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    s.ctx.clock.set(at(periodEnd + 3600_000 + 1000));
    await usageJob().run();
    expect(finals()).toHaveLength(1);
    expect(usageItems(finals()[0]!).map((l) => l.amount)).toEqual([tokensCents(40_000), requestsCents(2)]);
    expect(usageItems(s.stripe.invoices.get(draft.id)!).reduce((sum, l) => sum + l.amount, 0)).toBe(0);
  });

  it('a renewal draft Stripe finalized without Kassa’s items (invoice.created lost, or handled too late) bills its period’s usage on a make-up invoice of its own, once', async () => {
    const makeups = (stripeSubId: string) => [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSubId && i.billing_reason === 'manual');
    for (const order of ['invoice.paid first', 'invoice.created late'] as const) {
      const n = order === 'invoice.paid first' ? 'a' : 'b';
      s.ctx.clock.set(n === 'a' ? '2028-01-01T00:00:00.000Z' : '2028-03-01T00:00:00.000Z');
      const { subscriptionId, stripeSub, periodEnd } = await subscribe(`makeup-${n}@example.com`, `user_makeup_${n}`);
      const customer = { externalId: `user_makeup_${n}` };
      s.ctx.clock.set(new Date(periodEnd - 86_400_000).toISOString());
      await ingest([
        { id: `mk-${n}-t`, customer, name: 'llm_tokens', timestamp: new Date(periodEnd - 2 * 86_400_000).toISOString(), properties: { tokens: 35_000 } },
        ...Array.from({ length: 4 }, (_, i) => ({ id: `mk-${n}-r${i}`, customer, name: 'request', timestamp: new Date(periodEnd - 2 * 86_400_000).toISOString() })),
      ]);
      // The period ends and Stripe drafts the renewal; Kassa never holds it (its invoice.created is
      // not handled in time), so Stripe finalizes it at its own grace and charges the fee alone.
      s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
      const draft = s.stripe.renewDraft(stripeSub.id);
      s.ctx.clock.set(new Date(periodEnd + 3600_000 + 2000).toISOString());
      expect(s.stripe.finalizeDue().map((i) => i.id)).toContain(draft.id);
      expect(s.stripe.invoices.get(draft.id)!.amount_paid).toBe(2000);

      if (order === 'invoice.created late') expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
      expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
      const renewal = await s.readOrder((await db()('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first()).id);
      expect((renewal.lines as Array<{ kind: string; amountCents: number }>).map((l) => [l.kind, l.amountCents])).toEqual([['PRICE', 2000]]);
      expect((await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first()).state).toBe('MISSED');

      // The period's usage on an invoice of its own: Kassa's items, finalized and charged at once (the grace window has passed).
      expect(makeups(stripeSub.id)).toHaveLength(1);
      const makeup = makeups(stripeSub.id)[0]!;
      expect(makeup.status).toBe('paid');
      expect(usageItems(makeup).map((l) => l.amount)).toEqual([tokensCents(35_000), requestsCents(4)]);
      expect(makeup.amount_paid).toBe(100 + 4);
      expect(s.stripe.requests.filter((r) => r.method === 'POST' && r.path === '/v1/invoices').at(-1)?.idempotencyKey).toBe(`kassa_usage_makeup_${subscriptionId}_0`);
      expect(makeup.metadata).toMatchObject({ kassa_usage: 'makeup' });
      // The period is closed for usage: a late event of it is refused, not silently unbilled.
      expect(await ingest([{ id: `mk-${n}-late`, customer, name: 'request', timestamp: new Date(periodEnd - 1000).toISOString() }])).toEqual(['REJECTED']);

      // Its invoice.paid: an order of the USAGE lines alone, adding up to what Stripe collected.
      expect((await s.deliver(s.stripe.lastEvent('invoice.paid', makeup.id))).body.outcome).toBe('applied');
      const paymentIntent = makeup.payments!.data[0]!.payment.payment_intent as string;
      const usageOrder = await s.readOrder((await db()('orders').where({ subscription_id: subscriptionId, processor_payment_id: paymentIntent }).first()).id);
      expect(usageOrder.amountCents).toBe(makeup.amount_paid);
      expect((usageOrder.lines as Array<{ kind: string; quantity: string; amountCents: number }>).map((l) => [l.kind, l.quantity, l.amountCents])).toEqual([
        ['USAGE', '35000', 100],
        ['USAGE', '4', 4],
      ]);

      // Redeliveries (both invoices) and the job's pass add nothing: one make-up, one order each.
      const items = s.stripe.invoiceItems.size;
      expect((await s.deliver(s.stripe.eventFor('invoice.created', { id: draft.id }))).body.outcome).toBe('applied');
      expect((await s.deliver(s.stripe.eventFor('invoice.paid', { id: draft.id }))).body.outcome).toBe('applied');
      expect((await s.deliver(s.stripe.eventFor('invoice.paid', { id: makeup.id }))).body.outcome).toBe('applied');
      await usageJob().run();
      expect(makeups(stripeSub.id)).toHaveLength(1);
      expect(s.stripe.invoiceItems.size).toBe(items);
      expect(await db()('orders').where({ subscription_id: subscriptionId })).toHaveLength(3);
    }
  });

  it('a make-up invoice below Stripe’s minimum charge: marked paid with nothing charged, the customer debited; Kassa’s order keeps the usage lines and carries the amount (total 0 = amount_paid)', async () => {
    s.stripe.minimumCharge = true;
    try {
      s.ctx.clock.set('2029-01-01T00:00:00.000Z');
      const { subscriptionId, stripeSub, periodEnd } = await subscribe('makeup-small@example.com', 'user_makeup_small');
      const customer = { externalId: 'user_makeup_small' };
      s.ctx.clock.set(new Date(periodEnd - 86_400_000).toISOString());
      await ingest([
        { id: 'mks-t', customer, name: 'llm_tokens', timestamp: new Date(periodEnd - 2 * 86_400_000).toISOString(), properties: { tokens: 9_000 } },
        ...Array.from({ length: 7 }, (_, i) => ({ id: `mks-r${i}`, customer, name: 'request', timestamp: new Date(periodEnd - 2 * 86_400_000).toISOString() })),
      ]);
      // Kassa never holds the renewal draft: Stripe finalizes it with the fee alone.
      s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
      const draft = s.stripe.renewDraft(stripeSub.id);
      s.ctx.clock.set(new Date(periodEnd + 3600_000 + 2000).toISOString());
      expect(s.stripe.finalizeDue().map((i) => i.id)).toContain(draft.id);
      expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
      const makeups = [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
      expect(makeups).toHaveLength(1);
      const makeup = s.stripe.invoices.get(makeups[0]!.id)!;
      // 7 ¢ of requests, the tokens within the included 10,000: below Stripe's 50 ¢.
      expect(usageItems(makeup).map((l) => l.amount)).toEqual([tokensCents(9_000), requestsCents(7)]);
      expect(makeup).toMatchObject({ status: 'paid', total: 7, amount_due: 7, amount_paid: 0, amount_remaining: 0 });
      expect(s.stripe.customerBalances.get(s.stripe.subscriptions.get(stripeSub.id)!.customer as string)).toBe(7);

      const paid = s.stripe.invoiceEvent('invoice.paid', makeup);
      expect((await s.deliver(paid)).body.outcome).toBe('applied');
      expect((await s.deliver(paid)).status).toBe(200);
      const orders = await db()('orders').where({ subscription_id: subscriptionId, processor_payment_id: makeup.id });
      expect(orders).toHaveLength(1);
      const read = await s.readOrder(orders[0].id);
      expect((read.lines as Array<{ kind: string; description: string; amountCents: number }>).map((l) => [l.kind, l.description, l.amountCents])).toEqual([
        ['USAGE', 'Tokens', 0],
        ['USAGE', 'Requests', 7],
        ['CREDIT', 'Carried to the next invoice (below Stripe’s minimum charge)', -7],
      ]);
      expect(read).toMatchObject({ status: 'PAID', amountCents: makeup.amount_paid });
    } finally {
      s.stripe.minimumCharge = false;
    }
  });

  it('a renewal finalized without Kassa’s items is recorded even when its make-up cannot be opened (Stripe failing): the error is logged, the order is the fee', async () => {
    s.ctx.clock.set('2028-05-01T00:00:00.000Z');
    const { subscriptionId, stripeSub, periodEnd } = await subscribe('makeup-fails@example.com', 'user_makeup_fails');
    s.ctx.clock.set(new Date(periodEnd - 86_400_000).toISOString());
    await ingest([{ id: 'mkf-r', customer: { externalId: 'user_makeup_fails' }, name: 'request', timestamp: new Date(periodEnd - 2 * 86_400_000).toISOString() }]);
    s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
    const draft = s.stripe.renewDraft(stripeSub.id);
    s.ctx.clock.set(new Date(periodEnd + 3600_000 + 2000).toISOString());
    expect(s.stripe.finalizeDue().map((i) => i.id)).toContain(draft.id);
    // Opening the make-up reads the subscription first: those reads fail (Stripe's 500s outlast the SDK's retries).
    s.stripe.failNext('error500', 50, '/v1/subscriptions/');
    try {
      expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
    } finally {
      (s.stripe as unknown as { failures: unknown[] }).failures.length = 0;
    }
    expect((await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first()).state).toBe('MISSED');
    const renewal = await s.readOrder((await db()('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first()).id);
    expect(renewal.amountCents).toBe(2000);
  });
});

// Plan changes of Stripe-billed metered subscriptions (before: 409): stripe-metered-plan-change.test.ts.

describe('make-up invoices retried by the stripe-usage-makeups job', () => {
  const makeupJob = () => workerJobs({ services: s.ctx.services }).find((j) => j.name === 'stripe-usage-makeups');
  const makeups = (stripeSubId: string) => [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSubId && i.billing_reason === 'manual');
  const clearFailures = () => ((s.stripe as unknown as { failures: unknown[] }).failures.length = 0);

  it('a make-up that could not be opened while the renewal’s invoice.paid was applied is retried with backoff until opened: the period’s usage is billed once', async () => {
    // Before: nothing retried it — no job, no make-up invoice, the period's usage never billed.
    s.ctx.clock.set('2028-07-01T00:00:00.000Z');
    const { subscriptionId, stripeSub, periodEnd } = await subscribe('makeup-retry@example.com', 'user_makeup_retry');
    s.ctx.clock.set(new Date(periodEnd - 86_400_000).toISOString());
    await ingest([
      { id: 'mkr-t', customer: { externalId: 'user_makeup_retry' }, name: 'llm_tokens', timestamp: new Date(periodEnd - 2 * 86_400_000).toISOString(), properties: { tokens: 60_000 } },
      { id: 'mkr-r', customer: { externalId: 'user_makeup_retry' }, name: 'request', timestamp: new Date(periodEnd - 2 * 86_400_000).toISOString() },
    ]);
    s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
    const draft = s.stripe.renewDraft(stripeSub.id);
    const missedAt = periodEnd + 3600_000 + 2000;
    s.ctx.clock.set(new Date(missedAt).toISOString());
    expect(s.stripe.finalizeDue().map((i) => i.id)).toContain(draft.id);
    s.stripe.failNext('error500', 50, '/v1/subscriptions/');
    try {
      expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
      expect(makeups(stripeSub.id)).toHaveLength(0);
      const job = makeupJob();
      expect(job, 'the stripe-usage-makeups job').toBeDefined();
      // Still failing: the first retry fails and waits 1 minute, the next 2 minutes.
      expect(await job!.run()).toBe(false);
      let row = await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first();
      expect([row.state, row.makeup_attempts, new Date(row.makeup_retry_at).getTime()]).toEqual(['MISSED', 1, missedAt + 60_000]);
      expect(await job!.run()).toBe(false); // not due yet: nothing leased
      s.ctx.clock.set(new Date(missedAt + 60_000).toISOString());
      expect(await job!.run()).toBe(false);
      row = await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first();
      expect([row.makeup_attempts, new Date(row.makeup_retry_at).getTime()]).toEqual([2, missedAt + 60_000 + 120_000]);
    } finally {
      clearFailures();
    }
    expect(makeups(stripeSub.id)).toHaveLength(0);
    // Stripe answers again: the next due pass opens the make-up, bills it (the grace window has passed) and Stripe charges it.
    s.ctx.clock.set(new Date(missedAt + 180_000).toISOString());
    expect(await makeupJob()!.run()).toBe(true);
    expect(makeups(stripeSub.id)).toHaveLength(1);
    const makeup = makeups(stripeSub.id)[0]!;
    expect(makeup.status).toBe('paid');
    expect(usageItems(makeup).map((l) => l.amount)).toEqual([tokensCents(60_000), requestsCents(1)]);
    expect(s.stripe.requests.filter((r) => r.method === 'POST' && r.path === '/v1/invoices').at(-1)?.idempotencyKey).toBe(`kassa_usage_makeup_${subscriptionId}_0`);
    const row = await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first();
    expect([row.state, row.makeup_retry_at]).toEqual(['MISSED', null]);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', makeup.id))).body.outcome).toBe('applied');
    const usageOrder = await s.readOrder((await db()('orders').where({ subscription_id: subscriptionId, processor_payment_id: makeup.payments!.data[0]!.payment.payment_intent as string }).first()).id);
    expect(usageOrder.amountCents).toBe(tokensCents(60_000) + requestsCents(1));
    // Nothing pending: later passes and a redelivered invoice.paid open nothing more.
    s.ctx.clock.set(new Date(missedAt + 86_400_000).toISOString());
    expect(await makeupJob()!.run()).toBe(false);
    expect((await s.deliver(s.stripe.eventFor('invoice.paid', { id: draft.id }))).body.outcome).toBe('applied');
    expect(makeups(stripeSub.id)).toHaveLength(1);
    expect(await db()('processor_usage_invoices').where({ subscription_id: subscriptionId, kind: 'MAKEUP' })).toHaveLength(1);
  });

  it('gives up after MAKEUP_MAX_ATTEMPTS failed attempts (logged as an error): nothing is leased any more', async () => {
    const { MAKEUP_MAX_ATTEMPTS, makeupBackoffMs } = await import('../../src/commerce/processor-usage.js');
    expect([1, 2, 3, 9, 10, 24].map(makeupBackoffMs)).toEqual([60_000, 120_000, 240_000, 256 * 60_000, 6 * 3600_000, 6 * 3600_000]);
    s.ctx.clock.set('2028-09-01T00:00:00.000Z');
    const { stripeSub, periodEnd } = await subscribe('makeup-giveup@example.com', 'user_makeup_giveup');
    s.ctx.clock.set(new Date(periodEnd - 86_400_000).toISOString());
    await ingest([{ id: 'mkg-r', customer: { externalId: 'user_makeup_giveup' }, name: 'request', timestamp: new Date(periodEnd - 2 * 86_400_000).toISOString() }]);
    s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
    const draft = s.stripe.renewDraft(stripeSub.id);
    let now = periodEnd + 3600_000 + 2000;
    s.ctx.clock.set(new Date(now).toISOString());
    s.stripe.finalizeDue();
    s.stripe.failNext('error500', 200, '/v1/subscriptions/');
    try {
      expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
      expect(await makeupJob()!.run()).toBe(false);
      // Fast-forward the count (each real attempt waits out the SDK's retries): the next failure is the last.
      await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).update({ makeup_attempts: MAKEUP_MAX_ATTEMPTS - 1 });
      now += makeupBackoffMs(1);
      s.ctx.clock.set(new Date(now).toISOString());
      expect(await makeupJob()!.run()).toBe(false);
      const row = await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first();
      expect([row.makeup_attempts, row.makeup_retry_at]).toEqual([MAKEUP_MAX_ATTEMPTS, null]);
    } finally {
      clearFailures();
    }
    s.ctx.clock.set(new Date(now + 30 * 86_400_000).toISOString());
    expect(await makeupJob()!.run()).toBe(false);
    expect(makeups(stripeSub.id)).toHaveLength(0);
  }, 120_000);
});

/** A credit pack of `units` tokens bought through Stripe Checkout (a ONE_TIME price: payment mode). */
async function buyTokenPack(email: string, units: number) {
  const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: `Token pack ${units}` });
  const price = await s.ctx.admin.post(`/v1/products/${product.id}/prices`).send({ amount: 1000, currency: 'USD', grantsUnits: { meterId: meters.tokens, units } });
  expect(price.status, JSON.stringify(price.body)).toBe(201);
  const res = await s.create({ pricingId: price.body.data.pricingId, customerEmail: email });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const stripeSessionId = await s.stripeIdOf(res.body.data.id);
  s.stripe.complete(stripeSessionId, { email });
  expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
}

const tokenBalance = async (externalId: string) => {
  const res = await s.ctx.merchant.get(`/v1/customers/${externalId}/meter-balances`).set('X-API-Key', s.ctx.orgA.apiKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body.data.balances as Array<{ meterId: string; creditBalance: number }>).find((b) => b.meterId === meters.tokens)?.creditBalance;
};
const draws = (subscriptionId: string) => db()('usage_credit_entries').where({ subscription_id: subscriptionId, kind: 'DRAW' }).orderBy('billing_period').select('billing_period', 'meter_id', 'units');

describe('credit packs on Stripe-billed metered subscriptions', () => {
  it('the renewal draws the credits into the usage lines once: Stripe collects the lines net of credits, the order says so', async () => {
    s.ctx.clock.set('2027-09-01T00:00:00.000Z');
    const { subscriptionId, stripeSub, periodEnd } = await subscribe('credits-stripe@example.com', 'user_credits_stripe');
    await buyTokenPack('credits-stripe@example.com', 30_000);
    expect(await tokenBalance('user_credits_stripe')).toBe(30_000);
    const customer = { externalId: 'user_credits_stripe' };
    s.ctx.clock.set('2027-09-10T00:00:00.000Z');
    await ingest([
      { id: 'cs-t', customer, name: 'llm_tokens', timestamp: '2027-09-02T00:00:00Z', properties: { tokens: 100_000 } },
      ...Array.from({ length: 5 }, (_, i) => ({ id: `cs-r${i}`, customer, name: 'request', timestamp: '2027-09-03T00:00:00Z' })),
    ]);
    s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
    const draft = s.stripe.renewDraft(stripeSub.id);
    expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
    s.ctx.clock.set(new Date(periodEnd + 3600_000 + 1000).toISOString());
    expect(await usageJob().run()).toBe(true);

    // 100,000 tokens: 10,000 included, then 30,000 from credit, 60,000 billed (without the draw: 90,000).
    const invoice = s.stripe.invoices.get(draft.id)!;
    expect(invoice.status).toBe('paid');
    expect(usageItems(invoice).map((l) => l.amount)).toEqual([tokensCents(100_000 - 30_000), requestsCents(5)]);
    expect(tokensCents(100_000 - 30_000)).toBe(240);
    expect(usageItems(invoice)[0]!.description).toContain('30,000 from credit');
    expect(invoice.amount_paid).toBe(2000 + 240 + 5);
    expect(await tokenBalance('user_credits_stripe')).toBe(0);
    const period = (await db()('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first()).usage_period as number;
    expect((await draws(subscriptionId)).map((d) => [d.billing_period, d.meter_id, Number(d.units)])).toEqual([[period, meters.tokens, -30_000]]);

    // invoice.paid: the order's USAGE line carries the credited units, its total is what Stripe collected.
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
    const order = await db()('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first();
    const read = await s.readOrder(order.id);
    expect(read.amountCents).toBe(invoice.amount_paid);
    expect((read.lines as Array<{ kind: string; amountCents: number; usage?: { creditedUnits: number } }>).map((l) => [l.kind, l.usage?.creditedUnits ?? 0, l.amountCents])).toEqual([
      ['PRICE', 0, 2000],
      ['USAGE', 30_000, 240],
      ['USAGE', 0, 5],
    ]);

    // A new pack, then a redelivered invoice.created and another job pass: nothing more is drawn or billed.
    await buyTokenPack('credits-stripe@example.com', 1_000);
    expect((await s.deliver(s.stripe.eventFor('invoice.created', { id: draft.id }))).body.outcome).toBe('applied');
    await usageJob().run();
    expect(await tokenBalance('user_credits_stripe')).toBe(1_000);
    expect(await draws(subscriptionId)).toHaveLength(1);
    expect(s.stripe.invoices.get(draft.id)!.amount_paid).toBe(invoice.amount_paid);
  });

  it('cancel now draws the credits of the partial period: the invoice carries the rest, and none is opened when the credits cover it all', async () => {
    s.ctx.clock.set('2027-10-01T00:00:00.000Z');
    const partly = await subscribe('credits-cancel@example.com', 'user_credits_cancel');
    await buyTokenPack('credits-cancel@example.com', 100_000);
    const covered = await subscribe('credits-covered@example.com', 'user_credits_covered');
    await buyTokenPack('credits-covered@example.com', 100_000);
    s.ctx.clock.set('2027-10-10T00:00:00.000Z');
    await ingest([
      { id: 'cc-t', customer: { externalId: 'user_credits_cancel' }, name: 'llm_tokens', timestamp: '2027-10-02T00:00:00Z', properties: { tokens: 60_000 } },
      ...Array.from({ length: 3 }, (_, i) => ({ id: `cc-r${i}`, customer: { externalId: 'user_credits_cancel' }, name: 'request', timestamp: '2027-10-03T00:00:00Z' })),
      { id: 'cv-t', customer: { externalId: 'user_credits_covered' }, name: 'llm_tokens', timestamp: '2027-10-02T00:00:00Z', properties: { tokens: 60_000 } },
    ]);
    const finals = (stripeSubId: string) => [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSubId && i.billing_reason === 'manual');

    // 60,000 tokens, 10,000 included, 50,000 from credit: only the 3 requests are billed (without the draw: 200 + 3).
    expect((await s.ctx.admin.post(`/v1/subscriptions/${partly.subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
    expect(finals(partly.stripeSub.id)).toHaveLength(1);
    const final = finals(partly.stripeSub.id)[0]!;
    expect(usageItems(final).map((l) => l.amount)).toEqual([0, requestsCents(3)]);
    expect(final.amount_paid).toBe(3);
    expect(await tokenBalance('user_credits_cancel')).toBe(50_000);
    expect((await draws(partly.subscriptionId)).map((d) => Number(d.units))).toEqual([-50_000]);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', final.id))).body.outcome).toBe('applied');
    const order = await db()('orders').where({ subscription_id: partly.subscriptionId, processor_payment_id: final.payments!.data[0]!.payment.payment_intent as string }).first();
    const read = await s.readOrder(order.id);
    expect(read.amountCents).toBe(3);
    expect((read.lines as Array<{ usage: { creditedUnits: number }; amountCents: number }>).map((l) => [l.usage.creditedUnits, l.amountCents])).toEqual([
      [50_000, 0],
      [0, 3],
    ]);

    // Credits cover all of it: drawn all the same (the usage was consumed), no invoice, the subscription canceled.
    const res = await s.ctx.admin.post(`/v1/subscriptions/${covered.subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.status).toBe('CANCELED');
    expect(s.stripe.subscriptions.get(covered.stripeSub.id)!.status).toBe('canceled');
    expect(finals(covered.stripeSub.id)).toHaveLength(0);
    expect(await tokenBalance('user_credits_covered')).toBe(50_000);
    expect((await draws(covered.subscriptionId)).map((d) => Number(d.units))).toEqual([-50_000]);
  });
});

let plainPrice: string | undefined;
async function plainSubscriptionPrice(): Promise<string> {
  if (plainPrice) return plainPrice;
  const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: 'Plain' });
  plainPrice = (await s.ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  return plainPrice;
}
