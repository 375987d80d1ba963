/**
 * Plan changes of metered subscriptions Stripe bills (issue 39 item 3 × issue 38 §7;
 * docs/plan-changes.md "Metered prices"), end to end with the official `stripe` SDK against the
 * Stripe-shaped server: the fee prorates in Stripe as any Stripe change does, and the usage keeps
 * reaching Stripe as invoice items on the renewal's draft — split at the change's second, one item
 * per component and part, each part at its own price's rates, included units prorated by time
 * (the sandbox's rule, metered-plan-change.ts). What Stripe collects at the renewal equals Kassa's
 * renewal order, and both equal an independent recomputation written here (BigInt). Also: a
 * downgrade at the period end (the closing period on the old price, Stripe's next fee the new one),
 * a seat change (no split), a change from a metered to a plain price (the part before is still
 * billed), a cancel at once after a change (both parts on the cancel's invoice). The race with the
 * renewal's close: stripe-metered-plan-change-race.test.ts (PostgreSQL).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { StripeContext } from './stripe-context.js';
import { expectedUsage, feeLines, meteredPlansOnStripe, orderUsage, sum, usageItems, type Plan } from './stripe-metered-plans.js';

const plans = meteredPlansOnStripe({ tag: 'smc', plans: ['basic', 'pro', 'plain'] });
const { prices, db, api, use, renew } = plans;
let s: StripeContext;
beforeAll(() => {
  s = plans.s;
});
const subscribe = (plan: Plan, start: string, quantity = 1) => plans.subscribe(prices[plan], start, { quantity });
const changeAt = (subscriptionId: string, at: string, body: object) => plans.changeAt(subscriptionId, at, body);

describe('plan changes of metered subscriptions on Stripe', () => {
  it('an upgrade mid-period: Stripe prorates the fee now; the renewal draft carries the usage before the change at Basic’s rates and after it at Pro’s; Stripe collects exactly Kassa’s order', async () => {
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe('basic', '2026-04-01T00:00:00.000Z');
    expect(periodEnd).toBe('2026-05-01T00:00:00.000Z');
    await use(externalId, '2026-04-05T00:00:00Z', { tokens: 12_000 });
    await use(externalId, '2026-04-10T00:00:00Z', { requests: 120 });
    await use(externalId, '2026-04-15T23:59:59Z', { tokens: 3000 });

    const { preview, change } = await changeAt(subscriptionId, '2026-04-16T00:00:00.000Z', { priceId: prices.pro });
    // The fee: −1000 × 15/30 + 3000 × 15/30, charged by Stripe now; the usage waits for the renewal.
    expect(preview).toMatchObject({ effective: 'IMMEDIATE', amountDueCents: 1000, usageBilledAtRenewal: true });
    const proration = await s.readOrder(change.orderId);
    expect(proration.amountCents).toBe(1000);
    const prorationInvoice = [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'subscription_update');
    expect(prorationInvoice.map((i) => i.amount_paid)).toEqual([1000]);

    await use(externalId, '2026-04-16T00:00:00Z', { tokens: 1000 });
    await use(externalId, '2026-04-20T00:00:00Z', { tokens: 40_000, requests: 30 });
    await use(externalId, '2026-04-30T23:00:00Z', { tokens: 5000, requests: 1 });

    const { invoice, order } = await renew(stripeSub.id, subscriptionId, periodEnd, 1);
    const expected = expectedUsage(
      [
        { plan: 'basic', from: '2026-04-01T00:00:00.000Z', to: '2026-04-16T00:00:00.000Z', usage: { tokens: 15_000, requests: 120 } },
        { plan: 'pro', from: '2026-04-16T00:00:00.000Z', to: periodEnd, usage: { tokens: 46_000, requests: 31 } },
      ],
      '2026-04-01T00:00:00.000Z',
      periodEnd,
    );
    // Basic 15,000 − 5,000 included = 10,000 × 0.004 = 40; 120 requests = 100 + 20 × 0.5 + 10 = 120;
    // Pro 46,000 − 25,000 = 21,000 × 0.002 = 42; 31 × 0.25 = 7.75 → 8.
    expect(expected.map((l) => l.amountCents)).toEqual([40, 120, 42, 8]);
    expect(orderUsage(order)).toEqual(expected);
    // One Stripe invoice item per component and part, of the line's amount, described by its part.
    expect(usageItems(invoice).map((l) => l.amount)).toEqual([40, 120, 42, 8]);
    expect(usageItems(invoice).map((l) => l.description!.split(':')[0])).toEqual(expected.map((l) => l.description));
    expect(feeLines(invoice).map((l) => l.amount)).toEqual([3000]);
    expect(invoice.amount_paid).toBe(3000 + 40 + 120 + 42 + 8);
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(sum(order)).toBe(order.amountCents);
    expect(order.lines[0]).toMatchObject({ kind: 'PRICE', amountCents: 3000 });

    // The next period is Pro's alone: one item per component, full included units.
    await use(externalId, '2026-05-10T00:00:00Z', { tokens: 60_000 });
    const next = await renew(stripeSub.id, subscriptionId, '2026-06-01T00:00:00.000Z', 2);
    expect(orderUsage(next.order)).toEqual(expectedUsage([{ plan: 'pro', from: '', to: '', usage: { tokens: 60_000, requests: 0 } }], '2026-05-01T00:00:00.000Z', '2026-06-01T00:00:00.000Z'));
    expect(next.invoice.amount_paid).toBe(3000 + 20);
    expect(next.order.amountCents).toBe(next.invoice.amount_paid);
  });

  it('a downgrade at the period end: Stripe’s item changes unprorated; the closing period’s usage is Pro’s whole (full included units), Stripe’s renewal fee Basic’s; the next period Basic’s', async () => {
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe('pro', '2026-07-01T00:00:00.000Z');
    await use(externalId, '2026-07-05T00:00:00Z', { tokens: 70_000, requests: 4 });
    const { preview, change } = await changeAt(subscriptionId, '2026-07-10T00:00:00.000Z', { priceId: prices.basic, effective: 'PERIOD_END' });
    expect(preview).toMatchObject({ effective: 'PERIOD_END', amountDueCents: 0, usageBilledAtRenewal: true });
    expect(change.orderId ?? null).toBeNull();
    expect(change.subscription.scheduledChange).toMatchObject({ priceId: prices.basic });
    expect(s.stripe.subscriptions.get(stripeSub.id)!.items.data[0]!.price.unit_amount).toBe(1000);
    await use(externalId, '2026-07-20T00:00:00Z', { tokens: 10_000, requests: 6 });

    const { invoice, order } = await renew(stripeSub.id, subscriptionId, periodEnd, 1);
    const expected = expectedUsage([{ plan: 'pro', from: '', to: '', usage: { tokens: 80_000, requests: 10 } }], '2026-07-01T00:00:00.000Z', periodEnd);
    expect(expected.map((l) => l.amountCents)).toEqual([60, 3]);
    expect(orderUsage(order)).toEqual(expected);
    expect(usageItems(invoice).map((l) => l.amount)).toEqual([60, 3]);
    expect(invoice.amount_paid).toBe(1000 + 60 + 3);
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(sum(order)).toBe(order.amountCents);
    const after = (await api('get', `/v1/subscriptions/${subscriptionId}`)).body.data;
    expect(after).toMatchObject({ priceId: prices.basic });
    expect(after.scheduledChange ?? null).toBeNull();

    await use(externalId, '2026-08-03T00:00:00Z', { tokens: 20_000, requests: 101 });
    const next = await renew(stripeSub.id, subscriptionId, '2026-09-01T00:00:00.000Z', 2);
    const expectedNext = expectedUsage([{ plan: 'basic', from: '', to: '', usage: { tokens: 20_000, requests: 101 } }], '2026-08-01T00:00:00.000Z', '2026-09-01T00:00:00.000Z');
    expect(orderUsage(next.order)).toEqual(expectedNext);
    expect(next.invoice.amount_paid).toBe(1000 + expectedNext.reduce((t, l) => t + l.amountCents, 0));
    expect(next.order.amountCents).toBe(next.invoice.amount_paid);
  });

  it('a seat change of the metered price: Stripe prorates the fee of the added seat; the usage is not split (full included units, one item per component)', async () => {
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe('basic', '2026-10-01T00:00:00.000Z');
    await use(externalId, '2026-10-03T00:00:00Z', { tokens: 20_000 });
    const { preview, change } = await changeAt(subscriptionId, '2026-10-16T12:00:00.000Z', { quantity: 2 });
    expect(preview.usageBilledAtRenewal).toBe(true);
    expect(preview.amountDueCents).toBeGreaterThan(0);
    expect((await s.readOrder(change.orderId)).amountCents).toBe(preview.amountDueCents);
    expect(await db()('subscription_usage_segments').where({ subscription_id: subscriptionId })).toEqual([]);
    await use(externalId, '2026-10-20T00:00:00Z', { tokens: 5000, requests: 2 });

    const { invoice, order } = await renew(stripeSub.id, subscriptionId, periodEnd, 1);
    const expected = expectedUsage([{ plan: 'basic', from: '', to: '', usage: { tokens: 25_000, requests: 2 } }], '2026-10-01T00:00:00.000Z', periodEnd);
    expect(expected.map((l) => l.amountCents)).toEqual([60, 2]);
    expect(orderUsage(order)).toEqual(expected);
    expect(feeLines(invoice).map((l) => l.amount)).toEqual([2000]);
    expect(invoice.amount_paid).toBe(2000 + 60 + 2);
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(sum(order)).toBe(order.amountCents);
  });

  it('from a metered price to a plain one at once: the renewal draft is still held and bills the part before the change (Basic’s share of the included units)', async () => {
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe('basic', '2027-01-01T00:00:00.000Z');
    expect(periodEnd).toBe('2027-02-01T00:00:00.000Z');
    await use(externalId, '2027-01-05T00:00:00Z', { tokens: 30_000, requests: 3 });
    await changeAt(subscriptionId, '2027-01-11T00:00:00.000Z', { priceId: prices.plain });
    // After the change: the plain price bills no usage.
    await use(externalId, '2027-01-20T00:00:00Z', { tokens: 99_000 });

    const { invoice, order } = await renew(stripeSub.id, subscriptionId, periodEnd, 1);
    const expected = expectedUsage(
      [
        { plan: 'basic', from: '2027-01-01T00:00:00.000Z', to: '2027-01-11T00:00:00.000Z', usage: { tokens: 30_000, requests: 3 } },
        { plan: 'plain', from: '2027-01-11T00:00:00.000Z', to: periodEnd, usage: { tokens: 99_000, requests: 0 } },
      ],
      '2027-01-01T00:00:00.000Z',
      periodEnd,
    );
    // 10,000 × 10/31 = 3,225.8 → 3,226 included: (30,000 − 3,226) × 0.004 = 107.096 → 107; 3 requests = 3.
    expect(expected.map((l) => [l.includedUnits, l.amountCents])).toEqual([
      [3226, 107],
      [0, 3],
    ]);
    expect(orderUsage(order)).toEqual(expected);
    expect(usageItems(invoice).map((l) => l.amount)).toEqual([107, 3]);
    expect(invoice.amount_paid).toBe(5000 + 107 + 3);
    expect(order.amountCents).toBe(invoice.amount_paid);
    expect(sum(order)).toBe(order.amountCents);
  });

  it('a cancel at once after a change: the cancel’s own invoice carries both parts up to the cancel (the last part keeps its share to the period’s end)', async () => {
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe('basic', '2027-03-01T00:00:00.000Z');
    expect(periodEnd).toBe('2027-04-01T00:00:00.000Z');
    await use(externalId, '2027-03-05T00:00:00Z', { tokens: 12_000, requests: 2 });
    await changeAt(subscriptionId, '2027-03-11T00:00:00.000Z', { priceId: prices.pro });
    await use(externalId, '2027-03-12T00:00:00Z', { tokens: 40_000, requests: 5 });
    s.ctx.clock.set('2027-03-21T00:00:00.000Z');
    const cancel = await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(200);
    const finals = [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
    expect(finals).toHaveLength(1);
    const expected = expectedUsage(
      [
        { plan: 'basic', from: '2027-03-01T00:00:00.000Z', to: '2027-03-11T00:00:00.000Z', usage: { tokens: 12_000, requests: 2 } },
        { plan: 'pro', from: '2027-03-11T00:00:00.000Z', to: '2027-03-21T00:00:00.000Z', usage: { tokens: 40_000, requests: 5 } },
      ],
      '2027-03-01T00:00:00.000Z',
      periodEnd,
    );
    // Basic: 10,000 × 10/31 → 3,226 included, 8,774 × 0.004 = 35.096 → 35; 2 requests = 2. Pro: 50,000 × 21/31 → 33,871, 6,129 × 0.002 → 12; 5 × 0.25 = 1.25 → 1.
    expect(expected.map((l) => l.amountCents)).toEqual([35, 2, 12, 1]);
    expect(usageItems(finals[0]!).map((l) => l.amount)).toEqual([35, 2, 12, 1]);
    expect(finals[0]!.amount_paid).toBe(50);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', finals[0]!.id))).body.outcome).toBe('applied');
    const row = await db()('orders').where({ subscription_id: subscriptionId }).orderBy('created_at', 'desc').first();
    const order = (await s.readOrder(row.id)) as Record<string, any>;
    expect(orderUsage(order)).toEqual(expected);
    expect(order.amountCents).toBe(finals[0]!.amount_paid);
  });
});
