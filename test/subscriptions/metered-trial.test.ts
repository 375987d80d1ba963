/**
 * A free trial is free, usage included (issue 39 item 1 × issue 38 §5; Stripe: "During the trial
 * period, any usage accrued doesn't count toward the total charged to the customer"): on the
 * sandbox rail, a subscription with a trial and a metered component — the order that ends the trial
 * charges the fee only (no USAGE line), the next renewal bills only the usage after the trial
 * (checked against an independent recomputation), the estimate during the trial charges no usage
 * while the balances still count it, and a cancel during the trial charges nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, setExternalId } from '../usage/helpers.js';
import { usageCents } from './metered-recompute.js';
import { usageItem } from '../../src/portal/portal-pages.js';

let ctx: TestContext;
let meterId: string;
let priceId: string;
const FEE = 1500;
const INCLUDED = 1000;
const pricing = { model: 'PER_UNIT', unitAmountDecimal: '0.01' } as const;

const db = () => ctx.testDb.database.db;
const ingest = async (events: object[]) => {
  const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
  expect(res.status).toBe(200);
  return res.body.data.results.map((r: { status: string }) => r.status) as string[];
};
const ordersOf = (subscriptionId: string) => db()('orders').where({ subscription_id: subscriptionId }).orderBy('billing_period');
const getOrder = async (id: string) => (await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data as Record<string, any>;
const usageOf = async (customerId: string) => {
  const res = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/customers/${customerId}/usage`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as Record<string, any>;
};
const sum = (lines: Array<{ amountCents: number }>) => lines.reduce((t, l) => t + l.amountCents, 0);

async function startTrial(email: string, externalId: string): Promise<{ customerId: string; subscriptionId: string }> {
  const { customerId, orderId } = await buy(ctx, email, priceId, ctx.orgA.apiKey);
  expect((await setExternalId(ctx, customerId, externalId, ctx.orgA.apiKey)).status).toBe(200);
  const order = await db()('orders').where({ id: orderId }).first();
  return { customerId, subscriptionId: order.subscription_id as string };
}

beforeAll(async () => {
  ctx = await createTestContext();
  const meter = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'tokens' }, aggregation: 'sum', property: 'tokens' });
  expect(meter.status, JSON.stringify(meter.body)).toBe(201);
  meterId = meter.body.data.id;
  const productId = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Agent' })).id;
  const price = await ctx.admin.post(`/v1/products/${productId}/prices`).send({
    amount: FEE,
    currency: 'USD',
    pricingType: 'SUBSCRIPTION',
    billingInterval: 'MONTH',
    trialDays: 7,
    meteredComponents: [{ meterId, includedUnits: INCLUDED, pricing }],
  });
  expect(price.status, JSON.stringify(price.body)).toBe(201);
  priceId = price.body.data.pricingId;
});
afterAll(async () => {
  await ctx?.close();
});

describe('usage during a free trial', () => {
  it('is counted but not billed: the trial-end order has the fee only, the next renewal bills only the usage after the trial', async () => {
    ctx.clock.set('2026-03-01T00:00:00.000Z');
    const { customerId, subscriptionId } = await startTrial('trial-usage@example.com', 'trial_user');
    const sub = await db()('subscriptions').where({ id: subscriptionId }).first();
    expect(new Date(sub.trial_end).toISOString()).toBe('2026-03-08T00:00:00.000Z');
    const customer = { externalId: 'trial_user' };

    // During the trial: 4,000 + 2,500 tokens (well past the 1,000 included).
    ctx.clock.set('2026-03-07T12:00:00.000Z');
    const trialTokens = [4000, 2500];
    expect(
      await ingest([
        { id: 't1', customer, name: 'tokens', timestamp: '2026-03-02T00:00:00Z', properties: { tokens: trialTokens[0] } },
        { id: 't2', customer, name: 'tokens', timestamp: '2026-03-07T11:59:59Z', properties: { tokens: trialTokens[1] } },
      ]),
    ).toEqual(['ACCEPTED', 'ACCEPTED']);

    // The estimate during the trial charges the fee only; the balance still counts the trial's usage.
    const during = await usageOf(customerId);
    expect(during.subscriptions).toHaveLength(1);
    expect(during.subscriptions[0].lines.map((l: { kind: string }) => l.kind)).toEqual(['PRICE']);
    expect(during.subscriptions[0].estimatedTotalCents).toBe(FEE);
    const balance = during.balances.find((b: { meterId: string }) => b.meterId === meterId);
    expect(balance?.consumedUnits).toBe(trialTokens[0]! + trialTokens[1]!);

    // The portal's usage item says so (the same estimate the portal renders).
    const estimates = (await ctx.services.subscriptions.usageThisPeriod(ctx.orgA.orgId, customerId)).estimates;
    expect(usageItem(estimates[0]!)).toContain('Usage during your free trial (until 8 March 2026) is counted but not billed.');

    // The access check keeps answering during the trial (no prepaid credit here: entitled, with the usage counted).
    const check = await ctx.merchant.get('/v1/entitlements/check').query({ customer_id: customerId, product_id: sub.product_id }).set('X-API-Key', ctx.orgA.apiKey);
    expect(check.status, JSON.stringify(check.body)).toBe(200);
    expect(check.body.data.entitled).toBe(true);

    // The trial ends; the renewal waits out the usage grace hour, then charges the fee alone. An
    // event in that hour, stamped after the trial, belongs to the first paid period.
    ctx.clock.set('2026-03-08T00:30:00.000Z');
    expect(await ingest([{ id: 'a0', customer, name: 'tokens', timestamp: '2026-03-08T00:10:00Z', properties: { tokens: 300 } }])).toEqual(['ACCEPTED']);
    expect(await ctx.services.subscriptions.processDue()).toBe(0);
    ctx.clock.set('2026-03-08T01:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    let orders = await ordersOf(subscriptionId);
    expect(orders.map((o: { billing_period: number }) => o.billing_period)).toEqual([0, 1]);
    const trialEnd = await getOrder(orders[1].id);
    expect(trialEnd.status).toBe('PAID');
    expect(trialEnd.lines.map((l: { kind: string }) => l.kind)).toEqual(['PRICE']);
    expect(trialEnd.amountCents).toBe(FEE);
    expect(sum(trialEnd.lines)).toBe(trialEnd.amountCents);

    // Past the trial, the portal no longer says it.
    const paidPeriod = (await ctx.services.subscriptions.usageThisPeriod(ctx.orgA.orgId, customerId)).estimates;
    expect(usageItem(paidPeriod[0]!)).not.toContain('free trial');

    // After the trial: 300 (above) + 900 + 1,234 tokens; the next renewal bills exactly those.
    const after = [300, 900, 1234];
    ctx.clock.set('2026-03-20T00:00:00.000Z');
    expect(await ingest([{ id: 'a1', customer, name: 'tokens', timestamp: '2026-03-10T00:00:00Z', properties: { tokens: after[1] } }])).toEqual(['ACCEPTED']);
    ctx.clock.set('2026-04-07T23:30:00.000Z');
    expect(await ingest([{ id: 'a2', customer, name: 'tokens', timestamp: '2026-04-07T23:00:00Z', properties: { tokens: after[2] } }])).toEqual(['ACCEPTED']);
    ctx.clock.set('2026-04-08T01:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    orders = await ordersOf(subscriptionId);
    expect(orders.map((o: { billing_period: number }) => o.billing_period)).toEqual([0, 1, 2]);
    const renewal = await getOrder(orders[2].id);
    const quantity = after.reduce((a, b) => a + b, 0);
    const expectedUsage = usageCents(BigInt(quantity), BigInt(INCLUDED), pricing);
    expect(expectedUsage).toBe(Math.round((quantity - INCLUDED) * 0.01)); // 2,434 − 1,000 included = 1,434 × 0.01 = 14.34 → 14
    expect(renewal.lines.map((l: { kind: string }) => l.kind)).toEqual(['PRICE', 'USAGE']);
    expect(renewal.lines[1]).toMatchObject({ quantity: String(quantity), amountCents: expectedUsage, usage: { meterId, includedUnits: INCLUDED } });
    expect(renewal.amountCents).toBe(FEE + expectedUsage);
    expect(sum(renewal.lines)).toBe(renewal.amountCents);
  });

  it('a cancel at the trial’s end, after usage during it, charges nothing', async () => {
    ctx.clock.set('2026-06-01T00:00:00.000Z');
    const { subscriptionId } = await startTrial('trial-cancel@example.com', 'trial_cancel');
    ctx.clock.set('2026-06-03T00:00:00.000Z');
    expect(await ingest([{ id: 'c1', customer: { externalId: 'trial_cancel' }, name: 'tokens', timestamp: '2026-06-02T00:00:00Z', properties: { tokens: 50_000 } }])).toEqual(['ACCEPTED']);
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: true })).status).toBe(200);
    ctx.clock.set('2026-06-08T01:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const orders = await ordersOf(subscriptionId);
    expect(orders.map((o: { amount_cents: number }) => o.amount_cents)).toEqual([0]);
    expect((await db()('subscriptions').where({ id: subscriptionId }).first()).status).toBe('ENDED');
  });
});
