/**
 * Edge cases of metered subscriptions Stripe bills (issue 39 item 3 × issue 38 §7;
 * docs/plan-changes.md "Metered prices", "Not done yet"), end to end with the official `stripe`
 * SDK against the Stripe-shaped server, each checked as the buyer and the merchant see it — what
 * Stripe collects, what Kassa's orders say — against an independent recomputation (BigInt):
 * - a change paid in Stripe whose item update still waits (`202`) when the period closes: the
 *   usage after the change's second is the plan paid for (before: billed at the old price);
 * - a renewal draft Stripe finalized without Kassa's items (MISSED) whose make-up is opened only
 *   after the renewal's `invoice.paid` applied a `PERIOD_END` change: the closed period's usage is
 *   the old plan's (before: priced at the new plan's rates);
 * - a cancel-now's final usage invoice that Stripe pays in part from the customer's credit
 *   balance (an immediate downgrade's credit): the order's lines add up to `amount_paid` + the
 *   balance applied, with its `CREDIT` line, and Kassa's mirror follows Stripe's balance;
 * - a metered plan change during a free trial: the trial's usage (both parts) is never billed, the
 *   first paid period bills the new plan's usage with its full included units.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { StripeContext } from './stripe-context.js';
import { expectedUsage, feeLines, meteredPlansOnStripe, orderUsage, sum, total, usageItems } from './stripe-metered-plans.js';

const plans = meteredPlansOnStripe({ tag: 'sme', plans: ['basic', 'pro'], basicTrial: true });
const { prices, db, api, job, subscribe, use, changeAt, renew } = plans;
let s: StripeContext;
beforeAll(() => {
  s = plans.s;
});
const invoicesOf = (stripeSubId: string, reason: string) => [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSubId && i.billing_reason === reason);
const kinds = (order: Record<string, any>) => (order.lines as Array<{ kind: string; amountCents: number }>).map((l) => [l.kind, l.amountCents]);
const subscription = async (id: string) => (await api('get', `/v1/subscriptions/${id}`)).body.data as Record<string, any>;

describe('metered subscriptions on Stripe: plan-change edge cases', () => {
  it('a change paid in Stripe whose item update still waits (202) when the period closes: the usage after the change is billed at the plan paid for; Stripe collects exactly Kassa’s order', async () => {
    const off = await s.ctx.services.modules.discounts.discounts.createCoupon(s.ctx.orgA.orgId, { name: 'Two off', amountOff: 200, currency: 'USD', duration: 'FOREVER' });
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe(prices.basic, '2026-04-01T00:00:00.000Z', { discounts: [{ coupon: off.id }] });
    expect(periodEnd).toBe('2026-05-01T00:00:00.000Z');
    await use(externalId, '2026-04-05T00:00:00Z', { tokens: 12_000 });
    await use(externalId, '2026-04-10T00:00:00Z', { requests: 120 });
    await use(externalId, '2026-04-15T23:59:59Z', { tokens: 3000 });

    // The amount-off coupon makes Kassa prorate the upgrade itself: its invoice is paid, then
    // Stripe keeps refusing the item update (until after the period's close).
    s.stripe.failNext('error500', 1000, `/v1/subscriptions/${stripeSub.id}`, 'POST');
    try {
      const { preview, change } = await changeAt(subscriptionId, '2026-04-16T00:00:00.000Z', { priceId: prices.pro }, 202);
      expect(preview).toMatchObject({ usageBilledAtRenewal: true });
      expect((await s.readOrder(change.orderId)).amountCents).toBe(preview.amountDueCents);
      expect(change.subscription).toMatchObject({ priceId: prices.basic });
      // The change invoice's invoice.paid tries the item update again: still refused.
      const changeInvoice = [...s.stripe.invoices.values()].find((i) => i.metadata?.kassa_plan_change !== undefined && i.parent?.subscription_details?.subscription === stripeSub.id)!;
      expect((await s.deliver(s.stripe.lastEvent('invoice.paid', changeInvoice.id))).body.outcome).toBe('applied');
      expect(await subscription(subscriptionId)).toMatchObject({ priceId: prices.basic });

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
      // Before the fix the part from 16 April was "on Basic", at Basic's rates: 46,000 − 5,000 → 164 and 31 requests → 31.
      expect(expected.map((l) => l.amountCents)).toEqual([40, 120, 42, 8]);
      expect(orderUsage(order)).toEqual(expected);
      expect(usageItems(invoice).map((l) => l.amount)).toEqual([40, 120, 42, 8]);
      // The fee of the next period is what Stripe's item still holds (Basic's): see docs/plan-changes.md (a limit).
      expect(feeLines(invoice).map((l) => l.amount)).toEqual([1000]);
      expect(invoice.amount_paid).toBe(1000 + 210 - 200);
      expect(order.amountCents).toBe(invoice.amount_paid);
      expect(sum(order)).toBe(order.amountCents);
    } finally {
      s.stripe.clearFailures();
    }
    // Stripe answers again: the job applies the change; the next period's usage is Pro's, whole.
    expect(await job('stripe-plan-change-items').run()).toBe(true);
    expect(await subscription(subscriptionId)).toMatchObject({ priceId: prices.pro });
    await use(externalId, '2026-05-10T00:00:00Z', { tokens: 60_000 });
    const next = await renew(stripeSub.id, subscriptionId, '2026-06-01T00:00:00.000Z', 2);
    expect(orderUsage(next.order)).toEqual(expectedUsage([{ plan: 'pro', from: '', to: '', usage: { tokens: 60_000, requests: 0 } }], '2026-05-01T00:00:00.000Z', '2026-06-01T00:00:00.000Z'));
    expect(next.order.amountCents).toBe(next.invoice.amount_paid);
    expect(sum(next.order)).toBe(next.order.amountCents);
  });

  it('a renewal draft Stripe finalized without Kassa’s items, its make-up opened only after the renewal applied a PERIOD_END downgrade: the closed period’s usage is the old plan’s, whole', async () => {
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe(prices.pro, '2026-07-01T00:00:00.000Z');
    expect(periodEnd).toBe('2026-08-01T00:00:00.000Z');
    await use(externalId, '2026-07-05T00:00:00Z', { tokens: 70_000, requests: 4 });
    const { change } = await changeAt(subscriptionId, '2026-07-10T00:00:00.000Z', { priceId: prices.basic, effective: 'PERIOD_END' });
    expect(change.subscription.scheduledChange).toMatchObject({ priceId: prices.basic });
    await use(externalId, '2026-07-20T00:00:00Z', { tokens: 10_000, requests: 6 });

    // The period ends; Kassa never holds the draft (its invoice.created lost), Stripe finalizes it at its own grace: Basic's fee alone.
    const end = Date.parse(periodEnd);
    s.ctx.clock.set(new Date(end + 1000).toISOString());
    const draft = s.stripe.renewDraft(stripeSub.id);
    const missedAt = end + 3600_000 + 2000;
    s.ctx.clock.set(new Date(missedAt).toISOString());
    expect(s.stripe.finalizeDue().map((i) => i.id)).toContain(draft.id);
    expect(s.stripe.invoices.get(draft.id)!.amount_paid).toBe(1000);
    // Its invoice.paid: the make-up cannot be opened (Stripe failing); the renewal is recorded and applies the downgrade.
    s.stripe.failNext('error500', 50, '/v1/subscriptions/');
    try {
      expect((await s.deliver(s.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
    } finally {
      s.stripe.clearFailures();
    }
    expect(invoicesOf(stripeSub.id, 'manual')).toHaveLength(0);
    const after = await subscription(subscriptionId);
    expect(after).toMatchObject({ priceId: prices.basic });
    expect(after.scheduledChange ?? null).toBeNull();

    // The retry job opens the make-up a minute later and bills the closed period.
    s.ctx.clock.set(new Date(missedAt + 60_000).toISOString());
    expect(await job('stripe-usage-makeups').run()).toBe(true);
    const makeups = invoicesOf(stripeSub.id, 'manual');
    expect(makeups).toHaveLength(1);
    const expected = expectedUsage([{ plan: 'pro', from: '', to: '', usage: { tokens: 80_000, requests: 10 } }], '2026-07-01T00:00:00.000Z', periodEnd);
    // Pro: 80,000 − 50,000 = 30,000 × 0.002 = 60; 10 × 0.25 = 2.5 → 3. Before the fix, Basic's rates: 280 and 10.
    expect(expected.map((l) => l.amountCents)).toEqual([60, 3]);
    expect(usageItems(makeups[0]!).map((l) => l.amount)).toEqual([60, 3]);
    expect(makeups[0]!.amount_paid).toBe(63);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', makeups[0]!.id))).body.outcome).toBe('applied');
    const row = await db()('orders').where({ subscription_id: subscriptionId, processor_payment_id: makeups[0]!.payments!.data[0]!.payment.payment_intent as string }).first();
    const order = (await s.readOrder(row.id)) as Record<string, any>;
    expect(orderUsage(order)).toEqual(expected);
    expect(order.amountCents).toBe(makeups[0]!.amount_paid);
    expect(sum(order)).toBe(order.amountCents);
  });

  it('a cancel-now’s final usage invoice that Stripe pays in part from the customer’s credit balance: the order’s lines add up to amount_paid + the balance applied (its CREDIT line), and the mirror follows Stripe', async () => {
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe(prices.pro, '2027-06-01T00:00:00.000Z');
    expect(periodEnd).toBe('2027-07-01T00:00:00.000Z');
    await use(externalId, '2027-06-05T00:00:00Z', { tokens: 100_000, requests: 10 });
    // An immediate downgrade with 6 of 30 days left: −3000 × 6/30 + 1000 × 6/30 = −400, Stripe's customer balance.
    const { preview } = await changeAt(subscriptionId, '2027-06-25T00:00:00.000Z', { priceId: prices.basic, effective: 'IMMEDIATE' });
    expect(preview).toMatchObject({ balanceCreditCents: 400, amountDueCents: 0 });
    const customer = stripeSub.customer as string;
    expect(s.stripe.customerBalances.get(customer)).toBe(-400);
    expect((await subscription(subscriptionId)).customerBalanceCents).toBe(400);
    await use(externalId, '2027-06-26T00:00:00Z', { tokens: 200_000 });

    s.ctx.clock.set('2027-06-28T00:00:00.000Z');
    const cancel = await s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(200);
    const finals = invoicesOf(stripeSub.id, 'manual');
    expect(finals).toHaveLength(1);
    const final = finals[0]!;
    const expected = expectedUsage(
      [
        { plan: 'pro', from: '2027-06-01T00:00:00.000Z', to: '2027-06-25T00:00:00.000Z', usage: { tokens: 100_000, requests: 10 } },
        { plan: 'basic', from: '2027-06-25T00:00:00.000Z', to: '2027-06-28T00:00:00.000Z', usage: { tokens: 200_000, requests: 0 } },
      ],
      '2027-06-01T00:00:00.000Z',
      periodEnd,
    );
    // Pro: 50,000 × 24/30 = 40,000 included, 60,000 × 0.002 = 120; 10 × 0.25 = 2.5 → 3. Basic: 10,000 × 6/30 = 2,000, 198,000 × 0.004 = 792; 0 requests.
    expect(expected.map((l) => l.amountCents)).toEqual([120, 3, 792, 0]);
    expect(usageItems(final).map((l) => l.amount)).toEqual([120, 3, 792, 0]);
    // Stripe applies the credit: total 915, 400 from the balance, 515 charged.
    expect(final.total).toBe(915);
    expect([final.starting_balance, final.ending_balance, final.amount_paid]).toEqual([-400, 0, 515]);
    expect(s.stripe.customerBalances.get(customer)).toBe(0);

    expect((await s.deliver(s.stripe.lastEvent('invoice.paid', final.id))).body.outcome).toBe('applied');
    const row = await db()('orders').where({ subscription_id: subscriptionId, processor_payment_id: final.payments!.data[0]!.payment.payment_intent as string }).first();
    const order = (await s.readOrder(row.id)) as Record<string, any>;
    expect(orderUsage(order)).toEqual(expected);
    expect(kinds(order)).toEqual([['USAGE', 120], ['USAGE', 3], ['USAGE', 792], ['USAGE', 0], ['CREDIT', -400]]);
    expect(order.amountCents).toBe(final.amount_paid);
    expect(sum(order)).toBe(final.amount_paid);
    expect(sum(order) + 400).toBe(final.total);
    // Kassa's mirror of Stripe's balance: 0, as Stripe's; a redelivery moves nothing more and writes no second order.
    expect((await subscription(subscriptionId)).customerBalanceCents).toBe(0);
    expect((await s.deliver(s.stripe.eventFor('invoice.paid', { id: final.id }))).body.outcome).toBe('applied');
    expect(await db()('orders').where({ subscription_id: subscriptionId, processor_payment_id: final.payments!.data[0]!.payment.payment_intent as string })).toHaveLength(1);
    expect((await subscription(subscriptionId)).customerBalanceCents).toBe(0);
  });

  it('a metered plan change during a free trial: neither part of the trial is billed; the trial-end invoice is the new fee alone, the first paid period the new plan’s usage with full included units', async () => {
    const { subscriptionId, stripeSub, externalId, periodEnd } = await subscribe(prices.basicTrial, '2027-09-01T00:00:00.000Z');
    expect(stripeSub.status).toBe('trialing');
    expect(periodEnd).toBe('2027-09-08T00:00:00.000Z');
    await use(externalId, '2027-09-02T00:00:00Z', { tokens: 300_000, requests: 150 });
    const { preview, change } = await changeAt(subscriptionId, '2027-09-04T00:00:00.000Z', { priceId: prices.pro });
    expect(preview).toMatchObject({ amountDueCents: 0, usageBilledAtRenewal: true });
    expect(change.orderId ?? null).toBeNull();
    // The trial's part before the change is recorded, as for any metered change.
    expect(await db()('subscription_usage_segments').where({ subscription_id: subscriptionId })).toHaveLength(1);
    await use(externalId, '2027-09-06T00:00:00Z', { tokens: 900_000, requests: 40 });

    const first = await renew(stripeSub.id, subscriptionId, periodEnd, 1);
    expect(usageItems(first.invoice)).toEqual([]);
    expect(feeLines(first.invoice).map((l) => l.amount)).toEqual([3000]);
    expect(kinds(first.order)).toEqual([['PRICE', 3000]]);
    expect(first.order.amountCents).toBe(first.invoice.amount_paid);

    await use(externalId, '2027-09-20T00:00:00Z', { tokens: 60_000, requests: 2 });
    const nextEnd = (await subscription(subscriptionId)).currentPeriodEnd as string;
    expect(nextEnd).toBe('2027-10-08T00:00:00.000Z');
    const next = await renew(stripeSub.id, subscriptionId, nextEnd, 2);
    const expected = expectedUsage([{ plan: 'pro', from: '', to: '', usage: { tokens: 60_000, requests: 2 } }], periodEnd, nextEnd);
    expect(expected.map((l) => l.amountCents)).toEqual([20, 1]);
    expect(orderUsage(next.order)).toEqual(expected);
    expect(next.invoice.amount_paid).toBe(3000 + 21);
    expect(next.order.amountCents).toBe(next.invoice.amount_paid);
  });
});
