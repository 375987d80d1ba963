/**
 * Cancel now of a metered subscription on the sandbox rail (issue 38 §7): the partial period's
 * usage — [currentPeriodStart, the cancel) — is closed (the period refuses later events while the
 * subscription is still ACTIVE) and charged at once as an order of USAGE lines alone (no fee: no
 * period starts), announced by `order.paid` after `subscription.ended`; nothing is ordered when
 * that usage costs nothing; a declined charge leaves a FAILED order and the cancel stands. A cancel
 * in the grace hour after the period's end bills the period and that hour in its one order (the
 * renewal waits for the grace window, so no renewal bills the period): every event once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, setExternalId } from '../usage/helpers.js';

let ctx: TestContext;
let priceId: string;
beforeAll(async () => {
  ctx = await createTestContext();
  const tokens = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' });
  const res = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
    amount: 2000,
    currency: 'USD',
    pricingType: 'SUBSCRIPTION',
    billingInterval: 'MONTH',
    meteredComponents: [{ meterId: tokens.body.data.id, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } }],
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  priceId = res.body.data.pricingId;
});
afterAll(async () => {
  await ctx?.close();
});

const ingest = async (events: object[]) => {
  const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
  expect(res.status).toBe(200);
  return res.body.data.results.map((r: { status: string }) => r.status) as string[];
};
const db = () => ctx.testDb.database.db;
async function subscribed(email: string, externalId: string, card?: string) {
  const { customerId, orderId } = await buy(ctx, email, priceId, ctx.orgA.apiKey, {}, card);
  expect((await setExternalId(ctx, customerId, externalId, ctx.orgA.apiKey)).status).toBe(200);
  return (await db()('orders').where({ id: orderId }).first()).subscription_id as string;
}
const cancelNow = (id: string) => ctx.admin.post(`/v1/subscriptions/${id}/cancel`).send({ atPeriodEnd: false });
const eventTypes = async (...ids: string[]) =>
  (await db()('webhook_events').orderBy('seq'))
    .filter((e: { payload: unknown }) => ids.some((id) => JSON.stringify(e.payload).includes(id)))
    .map((e: { type: string }) => e.type);

describe('cancel now of a metered subscription (sandbox)', () => {
  it('charges the partial period’s usage as an order of USAGE lines, once', async () => {
    ctx.clock.set('2026-11-22T09:00:00.000Z');
    const id = await subscribed('cancel-now@example.com', 'user_cn');
    ctx.clock.set('2026-12-01T00:00:00.000Z');
    expect(await ingest([{ id: 'cn1', customer: { externalId: 'user_cn' }, name: 'llm_tokens', timestamp: '2026-11-30T00:00:00Z', properties: { tokens: 1_234_567 } }])).toEqual(['ACCEPTED']);
    const res = await cancelNow(id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.status).toBe('CANCELED');
    const orders = await db()('orders').where({ subscription_id: id }).orderBy('billing_period');
    expect(orders.map((o: { billing_period: number; status: string; amount_cents: number }) => [o.billing_period, o.status, Number(o.amount_cents)])).toEqual([
      [0, 'PAID', 2000],
      [1, 'PAID', 4898],
    ]);
    const order = (await ctx.merchant.get(`/v1/orders/${orders[1].id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order.lines).toHaveLength(1);
    expect(order.lines[0]).toMatchObject({ kind: 'USAGE', quantity: '1234567', amountCents: 4898 });
    expect(await eventTypes(id, orders[1].id)).toEqual(expect.arrayContaining(['subscription.ended', 'order.paid']));
    // The usage read covered the period up to the cancel: it was closed first (migration 0285's mark).
    expect((await db()('subscriptions').where({ id }).first()).usage_closed_period).toBe(0);
    // A second cancel is refused and charges nothing more.
    expect((await cancelNow(id)).status).toBe(409);
    expect(await db()('orders').where({ subscription_id: id })).toHaveLength(2);
  });

  it('orders nothing when the partial period’s usage costs nothing (within the included units)', async () => {
    ctx.clock.set('2027-01-10T00:00:00.000Z');
    const id = await subscribed('cancel-free@example.com', 'user_cn_free');
    ctx.clock.set('2027-01-12T00:00:00.000Z');
    await ingest([{ id: 'cnf1', customer: { externalId: 'user_cn_free' }, name: 'llm_tokens', timestamp: '2027-01-11T00:00:00Z', properties: { tokens: 9_000 } }]);
    expect((await cancelNow(id)).status).toBe(200);
    expect(await db()('orders').where({ subscription_id: id })).toHaveLength(1);
  });

  it('a declined charge leaves a FAILED usage order; the subscription is canceled all the same', async () => {
    ctx.clock.set('2027-02-10T00:00:00.000Z');
    const id = await subscribed('cancel-declined@example.com', 'user_cn_declined', '4000000000000341');
    ctx.clock.set('2027-02-12T00:00:00.000Z');
    await ingest([{ id: 'cnd1', customer: { externalId: 'user_cn_declined' }, name: 'llm_tokens', timestamp: '2027-02-11T00:00:00Z', properties: { tokens: 110_000 } }]);
    const res = await cancelNow(id);
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('CANCELED');
    const usage = await db()('orders').where({ subscription_id: id, billing_period: 1 }).first();
    expect([usage.status, Number(usage.amount_cents)]).toEqual(['FAILED', 400]);
  });

  it('a cancel in the grace hour after the period’s end bills the period and that hour in one order, every event once; no renewal follows', async () => {
    ctx.clock.set('2027-03-10T09:00:00.000Z');
    const id = await subscribed('cancel-grace@example.com', 'user_cn_grace');
    const customer = { externalId: 'user_cn_grace' };
    const end = new Date((await db()('subscriptions').where({ id }).first()).current_period_end).getTime();
    const at = (ms: number) => new Date(ms).toISOString();
    ctx.clock.set(at(end - 86_400_000));
    expect(await ingest([{ id: 'cng-in', customer, name: 'llm_tokens', timestamp: at(end - 2 * 86_400_000), properties: { tokens: 60_000 } }])).toEqual(['ACCEPTED']);
    // 20 minutes after the period's end: the renewal waits for the grace window.
    ctx.clock.set(at(end + 20 * 60_000));
    await ctx.services.subscriptions.processDue();
    expect(await db()('orders').where({ subscription_id: id })).toHaveLength(1);
    expect(
      await ingest([
        // The closing period's late event (grace window), and one after the period's end (the next period's).
        { id: 'cng-late', customer, name: 'llm_tokens', timestamp: at(end - 1000), properties: { tokens: 5_000 } },
        { id: 'cng-next', customer, name: 'llm_tokens', timestamp: at(end + 10 * 60_000), properties: { tokens: 30_000 } },
      ]),
    ).toEqual(['ACCEPTED', 'ACCEPTED']);
    ctx.clock.set(at(end + 30 * 60_000));
    const res = await cancelNow(id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // The grace window passes: the canceled subscription is not renewed, nothing more is billed.
    ctx.clock.set(at(end + 2 * 3600_000));
    await ctx.services.subscriptions.processDue();
    const orders = await db()('orders').where({ subscription_id: id }).orderBy('billing_period');
    // 60,000 + 5,000 + 30,000 tokens, 10,000 included: 85,000 × 0.004 ¢ = 340 ¢.
    expect(orders.map((o: { billing_period: number; status: string; amount_cents: number }) => [o.billing_period, o.status, Number(o.amount_cents)])).toEqual([
      [0, 'PAID', 2000],
      [1, 'PAID', 340],
    ]);
    const order = (await ctx.merchant.get(`/v1/orders/${orders[1].id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order.lines.map((l: { kind: string; quantity: string; amountCents: number }) => [l.kind, l.quantity, l.amountCents])).toEqual([['USAGE', '95000', 340]]);
    // Both periods closed by the cancel: an event stamped before it was accepted and billed, or refused.
    expect((await db()('subscriptions').where({ id }).first()).usage_closed_period).toBe(1);
  });
});
