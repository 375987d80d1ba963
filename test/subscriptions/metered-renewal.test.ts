/**
 * Metered prices on the sandbox rail (issue 38 §5, §7): a SUBSCRIPTION price's metered
 * components are checked when the price is made and read back; at renewal, once the usage-event
 * grace window after the period's end has passed, one order carries the new period's fee and one
 * USAGE line per component for the closing period (zero usage included), charged once; a run
 * killed after writing the order (before its commit) leaves nothing and the next run writes the
 * same order; an ending subscription's last usage is charged on its own; a usage order refunds
 * like any other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommerceUnitOfWork } from '../../src/commerce/stores.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, setExternalId } from '../usage/helpers.js';

let ctx: TestContext;
let productId: string;
let priceId: string;
const meters: Record<'tokens' | 'requests' | 'images', string> = { tokens: '', requests: '', images: '' };

const createMeter = async (apiKey: string, body: object): Promise<string> => {
  const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', apiKey).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data.id as string;
};
const createPrice = (body: object, product = productId) => ctx.admin.post(`/v1/products/${product}/prices`).send(body);
const ingest = async (events: object[]) => {
  const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
  expect(res.status).toBe(200);
  return res.body.data.results.map((r: { status: string }) => r.status) as string[];
};
const ordersOf = (subscriptionId: string) => ctx.testDb.database.db('orders').where({ subscription_id: subscriptionId }).orderBy('billing_period');
const getOrder = async (id: string) => (await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data as Record<string, any>;
/** Cancels at once, so the next test's renewal passes see only their own subscription. */
const endNow = async (id: string) => expect((await ctx.admin.post(`/v1/subscriptions/${id}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
const subscriptionOf = async (orderId: string) => (await ctx.testDb.database.db('orders').where({ id: orderId }).first()).subscription_id as string;

const components = () => [
  { meterId: meters.tokens, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } },
  { meterId: meters.requests, pricing: { model: 'GRADUATED', tiers: [{ upTo: 100, unitAmountDecimal: '1' }, { upTo: null, unitAmountDecimal: '0.5', flatAmountCents: 10 }] } },
  { meterId: meters.images, pricing: { model: 'PACKAGE', packageSize: 10, packageAmountDecimal: '25' } },
];

beforeAll(async () => {
  ctx = await createTestContext();
  meters.tokens = await createMeter(ctx.orgA.apiKey, { name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
  meters.requests = await createMeter(ctx.orgA.apiKey, { name: 'Requests', source: 'EVENTS', filter: { eventName: 'request' }, aggregation: 'count' });
  meters.images = await createMeter(ctx.orgA.apiKey, { name: 'Images', source: 'EVENTS', filter: { eventName: 'image' }, aggregation: 'count' });
  productId = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' })).id;
  const res = await createPrice({ amount: 2000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', meteredComponents: components() });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  priceId = res.body.data.pricingId;
});
afterAll(async () => {
  await ctx?.close();
});

describe('metered prices', () => {
  it('are read back with their components; a meter of another organization, an archived meter and a one-time price are 400 naming the field', async () => {
    const listed = await ctx.admin.get(`/v1/products/${productId}/prices`);
    const price = listed.body.data.find((p: { pricingId: string }) => p.pricingId === priceId);
    expect(price.meteredComponents).toEqual([
      { meterId: meters.tokens, includedUnits: 10_000, thresholds: [], pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } },
      { meterId: meters.requests, includedUnits: 0, thresholds: [], pricing: { model: 'GRADUATED', tiers: [{ upTo: 100, unitAmountDecimal: '1' }, { upTo: null, unitAmountDecimal: '0.5', flatAmountCents: 10 }] } },
      { meterId: meters.images, includedUnits: 0, thresholds: [], pricing: { model: 'PACKAGE', packageSize: 10, packageAmountDecimal: '25' } },
    ]);
    const plain = await createPrice({ amount: 500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' });
    expect(plain.body.data.meteredComponents).toEqual([]);

    const foreign = await createMeter(ctx.orgB.apiKey, { name: 'B tokens', source: 'EVENTS', filter: { eventName: 'x' }, aggregation: 'count' });
    const subscription = { amount: 2000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' };
    const other = await createPrice({ ...subscription, meteredComponents: [{ meterId: foreign, pricing: { model: 'PER_UNIT', unitAmountDecimal: '1' } }] });
    expect(other.status).toBe(400);
    expect(other.body.error).toMatchObject({ code: 'VALIDATION_ERROR', message: `meteredComponents[0].meterId: no meter ${foreign} in this organization` });

    const archived = await createMeter(ctx.orgA.apiKey, { name: 'Old', source: 'EVENTS', filter: { eventName: 'old' }, aggregation: 'count' });
    expect((await ctx.merchant.post(`/v1/meters/${archived}/archive`).set('X-API-Key', ctx.orgA.apiKey)).status).toBe(200);
    const refused = await createPrice({ ...subscription, meteredComponents: [{ meterId: archived, pricing: { model: 'PER_UNIT', unitAmountDecimal: '1' } }] });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain('archived');

    const oneTime = await createPrice({ amount: 2000, currency: 'USD', meteredComponents: [{ meterId: meters.tokens, pricing: { model: 'PER_UNIT', unitAmountDecimal: '1' } }] });
    expect(oneTime.status).toBe(400);
    expect(oneTime.body.error.message).toMatch(/^meteredComponents: only SUBSCRIPTION card/);

    const incomplete = await createPrice({ ...subscription, meteredComponents: [{ meterId: meters.tokens, pricing: { model: 'PACKAGE', packageSize: 10 } }] });
    expect(incomplete.status).toBe(400);
    expect(incomplete.body.error.message).toBe('meteredComponents[0].pricing.packageAmountDecimal is required for model PACKAGE');
  });

  it('renew 1 hour after the period ends with the new fee and the closing period’s usage as one order, charged once; the order refunds like any other', async () => {
    ctx.clock.set('2026-11-22T09:00:00.000Z');
    const { customerId, orderId } = await buy(ctx, 'metered@example.com', priceId, ctx.orgA.apiKey);
    expect((await setExternalId(ctx, customerId, 'user_metered', ctx.orgA.apiKey)).status).toBe(200);
    const subscriptionId = await subscriptionOf(orderId);
    const customer = { externalId: 'user_metered' };
    ctx.clock.set('2026-12-10T00:00:00.000Z');
    expect(
      await ingest([
        { id: 'm1', customer, name: 'llm_tokens', timestamp: '2026-11-23T00:00:00Z', properties: { tokens: 7000 } },
        { id: 'm2', customer, name: 'llm_tokens', timestamp: '2026-12-01T00:00:00Z', properties: { tokens: 8000 } },
        ...Array.from({ length: 129 }, (_, i) => ({ id: `r${i}`, customer, name: 'request', timestamp: '2026-12-05T00:00:00Z', properties: {} })),
      ]),
    ).not.toContain('REJECTED');

    // At the period's end the grace window is open: nothing is charged yet, the renewal waits for it.
    ctx.clock.set('2026-12-22T09:00:00.001Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(0);
    expect(await ordersOf(subscriptionId)).toHaveLength(1);
    const waiting = await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first();
    expect(new Date(waiting.next_action_at).toISOString()).toBe('2026-12-22T10:00:00.000Z');

    // A late event of the closing period (in the grace window) is billed; one of the new period is not.
    ctx.clock.set('2026-12-22T09:30:00.000Z');
    expect(
      await ingest([
        { id: 'r-late', customer, name: 'request', timestamp: '2026-12-22T08:59:59Z', properties: {} },
        { id: 'm-next', customer, name: 'llm_tokens', timestamp: '2026-12-22T09:10:00Z', properties: { tokens: 100_000 } },
      ]),
    ).toEqual(['ACCEPTED', 'ACCEPTED']);
    expect(await ctx.services.subscriptions.processDue()).toBe(0);

    ctx.clock.set('2026-12-22T10:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    const orders = await ordersOf(subscriptionId);
    expect(orders.map((o: { billing_period: number }) => o.billing_period)).toEqual([0, 1]);
    const renewal = await getOrder(orders[1].id);
    // Tokens: 15,000 − 10,000 included = 5,000 × 0.004 = 20; requests: 100 × 1 + 30 × 0.5 + 10 = 125; images: none.
    expect(renewal).toMatchObject({ status: 'PAID', amountCents: 2145 });
    expect(renewal.lines).toEqual([
      { kind: 'PRICE', description: 'Pro', productId, priceId, quantity: '1', unitAmountDecimal: '2000', exactAmountDecimal: '2000', amountCents: 2000 },
      {
        kind: 'USAGE',
        description: 'Tokens',
        quantity: '15000',
        unitAmountDecimal: '0.004',
        usage: { meterId: meters.tokens, includedUnits: 10_000, creditedUnits: 0, billableQuantity: '5000', pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' }, tiers: null },
        exactAmountDecimal: '20',
        amountCents: 20,
      },
      {
        kind: 'USAGE',
        description: 'Requests',
        quantity: '130',
        unitAmountDecimal: null,
        usage: {
          meterId: meters.requests,
          includedUnits: 0,
          creditedUnits: 0,
          billableQuantity: '130',
          pricing: components()[1]!.pricing,
          tiers: [
            { tier: 1, upTo: 100, quantity: '100', unitAmountDecimal: '1', flatAmountCents: 0, amountDecimal: '100' },
            { tier: 2, upTo: null, quantity: '30', unitAmountDecimal: '0.5', flatAmountCents: 10, amountDecimal: '25' },
          ],
        },
        exactAmountDecimal: '125',
        amountCents: 125,
      },
      {
        kind: 'USAGE',
        description: 'Images',
        quantity: '0',
        unitAmountDecimal: null,
        usage: { meterId: meters.images, includedUnits: 0, creditedUnits: 0, billableQuantity: '0', pricing: components()[2]!.pricing, tiers: null },
        exactAmountDecimal: '0',
        amountCents: 0,
      },
    ]);
    expect(renewal.lines.reduce((sum: number, l: { amountCents: number }) => sum + l.amountCents, 0)).toBe(renewal.amountCents);
    const paid = (await ctx.testDb.database.db('webhook_events').where({ type: 'order.paid' }).orderBy('seq'))
      .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>)
      .filter((p) => p.order.orderId === renewal.orderId);
    expect(paid).toHaveLength(1);
    expect(paid[0]!.order.lines).toEqual(renewal.lines);

    // Run again: nothing more.
    expect(await ctx.services.subscriptions.processDue()).toBe(0);
    expect(await ordersOf(subscriptionId)).toHaveLength(2);
    const next = await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first();
    expect(next.period_number).toBe(1);
    expect(new Date(next.next_action_at).toISOString()).toBe('2027-01-22T09:00:00.000Z');

    const refund = await ctx.admin.post(`/v1/orders/${renewal.orderId}/refund`).send({});
    expect(refund.status, JSON.stringify(refund.body)).toBe(200);
    expect(await getOrder(renewal.orderId)).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 2145, lines: renewal.lines });
    await endNow(subscriptionId);
  });

  it('a run killed after writing the order, before its commit, leaves nothing; the next run writes the same order once', async () => {
    ctx.clock.set('2027-03-01T00:00:00.000Z');
    const { customerId, orderId } = await buy(ctx, 'killed@example.com', priceId, ctx.orgA.apiKey);
    await setExternalId(ctx, customerId, 'user_killed', ctx.orgA.apiKey);
    const subscriptionId = await subscriptionOf(orderId);
    ctx.clock.set('2027-03-05T00:00:00.000Z');
    expect(await ingest([{ id: 'k1', customer: { externalId: 'user_killed' }, name: 'llm_tokens', timestamp: '2027-03-02T00:00:00Z', properties: { tokens: 12_345 } }])).toEqual(['ACCEPTED']);
    ctx.clock.set('2027-04-01T01:00:00.000Z');

    const service = ctx.services.subscriptions as unknown as { uow: CommerceUnitOfWork };
    const real = service.uow;
    let killed = 0;
    service.uow = {
      stores: real.stores,
      transaction: (work) =>
        real.transaction((stores) =>
          work({
            ...stores,
            emit: async (event, now) => {
              // The order is written and order.paid queued; the process dies before the commit.
              if (event.type === 'subscription.updated') {
                killed++;
                throw new Error('killed');
              }
              return stores.emit(event, now);
            },
          }),
        ),
    };
    try {
      expect(await ctx.services.subscriptions.processDue()).toBe(0);
    } finally {
      service.uow = real;
    }
    expect(killed).toBe(1);
    expect(await ordersOf(subscriptionId)).toHaveLength(1);

    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    expect(await ctx.services.subscriptions.processDue()).toBe(0);
    const orders = await ordersOf(subscriptionId);
    expect(orders).toHaveLength(2);
    const renewal = await getOrder(orders[1].id);
    // 2,345 billable tokens × 0.004 = 9.38 → 9 (half up, once).
    expect(renewal.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([['PRICE', 2000], ['USAGE', 9], ['USAGE', 0], ['USAGE', 0]]);
    expect(renewal.amountCents).toBe(2009);
    await endNow(subscriptionId);
  });

  it('a subscription ending at its period’s end has its last usage charged as an order of USAGE lines alone', async () => {
    ctx.clock.set('2027-06-01T00:00:00.000Z');
    const { customerId, orderId } = await buy(ctx, 'ending@example.com', priceId, ctx.orgA.apiKey);
    await setExternalId(ctx, customerId, 'user_ending', ctx.orgA.apiKey);
    const subscriptionId = await subscriptionOf(orderId);
    ctx.clock.set('2027-06-05T00:00:00.000Z');
    expect(await ingest(Array.from({ length: 3 }, (_, i) => ({ id: `e${i}`, customer: { externalId: 'user_ending' }, name: 'request', timestamp: '2027-06-02T00:00:00Z', properties: {} })))).not.toContain('REJECTED');
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: true })).status).toBe(200);
    ctx.clock.set('2027-07-01T00:30:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(0);
    ctx.clock.set('2027-07-01T01:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    const orders = await ordersOf(subscriptionId);
    expect(orders).toHaveLength(2);
    const last = await getOrder(orders[1].id);
    expect(last).toMatchObject({ status: 'PAID', amountCents: 3 });
    expect(last.lines.map((l: { kind: string; description: string; amountCents: number }) => [l.kind, l.description, l.amountCents])).toEqual([
      ['USAGE', 'Tokens', 0],
      ['USAGE', 'Requests', 3],
      ['USAGE', 'Images', 0],
    ]);
    const ended = await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first();
    expect(ended.status).toBe('ENDED');
  });

  it('the last usage order of an ending subscription draws the credit balance: in part, whole (no charge), and a declined one gives it back', async () => {
    const cases = [
      { name: 'part', balance: 2, card: 'ok', expect: { status: 'PAID', amountCents: 1, applied: -2, balanceAfter: 0 } },
      { name: 'whole', balance: 10, card: 'ok', expect: { status: 'PAID', amountCents: 0, applied: -3, balanceAfter: 7 } },
      { name: 'declined', balance: 2, card: 'decline', expect: { status: 'FAILED', amountCents: 1, applied: -2, balanceAfter: 2 } },
    ] as const;
    for (const c of cases) {
      ctx.clock.set('2027-08-01T00:00:00.000Z');
      const { customerId, orderId } = await buy(ctx, `ending-balance-${c.name}@example.com`, priceId, ctx.orgA.apiKey);
      await setExternalId(ctx, customerId, `user_ending_${c.name}`, ctx.orgA.apiKey);
      const subscriptionId = await subscriptionOf(orderId);
      ctx.clock.set('2027-08-05T00:00:00.000Z');
      expect(await ingest(Array.from({ length: 3 }, (_, i) => ({ id: `eb-${c.name}-${i}`, customer: { externalId: `user_ending_${c.name}` }, name: 'request', timestamp: '2027-08-02T00:00:00Z', properties: {} })))).not.toContain('REJECTED');
      const credited = await ctx.merchant.post(`/v1/customers/${customerId}/balance-transactions`).set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `ending-${c.name}`).send({ currency: 'USD', amountCents: c.balance, description: 'Credit' });
      expect(credited.status).toBe(201);
      expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: true })).status).toBe(200);
      if (c.card === 'decline') await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).update({ payment_method: 'sbx_pm_renewal_decline_0341' });
      ctx.clock.set('2027-09-01T01:00:00.000Z');
      expect(await ctx.services.subscriptions.processDue()).toBe(1);
      const orders = await ordersOf(subscriptionId);
      expect(orders).toHaveLength(2);
      const last = await getOrder(orders[1].id);
      expect(last, c.name).toMatchObject({ status: c.expect.status, amountCents: c.expect.amountCents });
      expect(last.lines.map((l: { kind: string; description: string; amountCents: number }) => [l.kind, l.description, l.amountCents])).toEqual([
        ['USAGE', 'Tokens', 0],
        ['USAGE', 'Requests', 3],
        ['USAGE', 'Images', 0],
        ['CREDIT', 'Applied balance', c.expect.applied],
      ]);
      // Paid by the balance alone: nothing was charged to the card.
      if (c.name === 'whole') expect(orders[1].processor_payment_id).toBeNull();
      const balance = await ctx.merchant.get(`/v1/customers/${customerId}/balance`).set('X-API-Key', ctx.orgA.apiKey);
      expect(balance.body.data.balances[0].amountCents, c.name).toBe(c.expect.balanceAfter);
      const ledger = (await ctx.merchant.get(`/v1/customers/${customerId}/balance-transactions`).set('X-API-Key', ctx.orgA.apiKey)).body.data.items;
      expect(ledger.map((e: { type: string; amountCents: number }) => [e.type, e.amountCents])).toEqual(
        c.card === 'decline' ? [['RESTORED', 2], ['APPLIED', -2], ['ADJUSTMENT', 2]] : [['APPLIED', c.expect.applied], ['ADJUSTMENT', c.balance]],
      );
      expect((await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first()).status).toBe('ENDED');
    }
  });

  it('a closed period takes no more events while its declined renewal is retried: accepted means billed', async () => {
    ctx.clock.set('2027-08-01T00:00:00.000Z');
    // A card that pays the checkout and declines the renewal (sandbox).
    const { customerId, orderId } = await buy(ctx, 'declined@example.com', priceId, ctx.orgA.apiKey, {}, '4000000000000341');
    await setExternalId(ctx, customerId, 'user_declined', ctx.orgA.apiKey);
    const subscriptionId = await subscriptionOf(orderId);
    const event = (id: string) => ({ id, customer: { externalId: 'user_declined' }, name: 'request', timestamp: '2027-08-10T00:00:00Z', properties: {} });
    ctx.clock.set('2027-08-20T00:00:00.000Z');
    expect(await ingest([event('d0')])).toEqual(['ACCEPTED']);
    ctx.clock.set('2027-09-01T01:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    await ctx.services.subscriptions.processDue();
    const orders = await ordersOf(subscriptionId);
    expect(orders.map((o) => o.status)).toEqual(['PAID', 'FAILED']);
    expect((await getOrder(orders[1].id)).lines.find((l: { description: string }) => l.description === 'Requests')).toMatchObject({ quantity: '1' });
    // Still in its August period (dunning), which the renewal closed: its events are refused now.
    expect((await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first()).period_number).toBe(0);
    expect(await ingest([event('d1')])).toEqual(['REJECTED']);
    // A retry of the billed event stays DUPLICATE; an event of September (the next period) is taken.
    expect(await ingest([event('d0'), { ...event('d2'), timestamp: '2027-09-01T00:30:00Z' }])).toEqual(['DUPLICATE', 'ACCEPTED']);
    await endNow(subscriptionId);
  });
});
