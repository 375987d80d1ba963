/**
 * Credit packs, balances and the metered access check (issue 38 §5 credit packs, §6), on both
 * databases: a ONE_TIME price granting units of a meter; the grant written once by the payment
 * flow (sandbox card, a duplicate payment result, the crypto rail's confirmed transfer); a full
 * refund revoking what is left; the draw at a metered subscription's period close into the USAGE
 * line's creditedUnits (included units first, then credits), once; the balances API (by id and
 * externalId, another organization's customer 404); GET /v1/entitlements/check answering usage and
 * `entitled: false, reason: CREDITS_EXHAUSTED` for exhausted prepaid credit.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCommerceUnitOfWork } from '../../src/services.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, setExternalId } from './helpers.js';

let ctx: TestContext;
let tokens: string;
let images: string;
let packProduct: string;
let pack: string;

const createMeter = async (apiKey: string, body: object): Promise<string> => {
  const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', apiKey).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data.id as string;
};
const createPrice = (productId: string, body: object) => ctx.admin.post(`/v1/products/${productId}/prices`).send(body);
const ingest = async (events: object[], apiKey = ctx.orgA.apiKey) => {
  const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', apiKey).send({ events });
  expect(res.status).toBe(200);
  return res.body.data.results.map((r: { status: string }) => r.status) as string[];
};
const balances = (customer: string, apiKey = ctx.orgA.apiKey) => ctx.merchant.get(`/v1/customers/${encodeURIComponent(customer)}/meter-balances`).set('X-API-Key', apiKey);
const ledger = (customerId: string) => ctx.testDb.database.db('usage_credit_entries').where({ customer_id: customerId }).orderBy('created_at').orderBy('kind');
const exhaustedEvents = async (customerId: string) =>
  (await ctx.testDb.database.db('webhook_events').where({ type: 'meter.credits_exhausted' }).orderBy('seq'))
    .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>)
    .filter((p) => p.customer.customerId === customerId);
/** Every key path of a JSON value (arrays by their first item). */
const keyPaths = (v: unknown, prefix = ''): string[] =>
  v !== null && typeof v === 'object' ? Object.entries(v as object).flatMap(([k, x]) => [`${prefix}${k}`, ...keyPaths(x, `${prefix}${k}.`)]).sort() : [];
const check = (q: string) => ctx.merchant.get(`/v1/entitlements/check?${q}`).set('X-API-Key', ctx.orgA.apiKey);

beforeAll(async () => {
  ctx = await createTestContext();
  tokens = await createMeter(ctx.orgA.apiKey, { name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
  images = await createMeter(ctx.orgA.apiKey, { name: 'Images', source: 'EVENTS', filter: { eventName: 'image' }, aggregation: 'count' });
  packProduct = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Image credits' })).id;
  const res = await createPrice(packProduct, { amount: 500, currency: 'USD', pricingName: '100 images', grantsUnits: { meterId: images, units: 100 } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  pack = res.body.data.pricingId;
});
afterAll(async () => {
  await ctx?.close();
});

describe('credit packs', () => {
  it('are ONE_TIME fixed-amount prices of a meter of the organization, read back; anything else is 400 naming the field', async () => {
    const listed = await ctx.admin.get(`/v1/products/${packProduct}/prices`);
    expect(listed.body.data.find((p: { pricingId: string }) => p.pricingId === pack)).toMatchObject({ pricingType: 'ONE_TIME', grantsUnits: { meterId: images, units: 100 } });
    const subscription = await createPrice(packProduct, { amount: 500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', grantsUnits: { meterId: images, units: 1 } });
    expect(subscription.status).toBe(400);
    expect(subscription.body.error).toMatchObject({ code: 'VALIDATION_ERROR', message: 'grantsUnits: only ONE_TIME prices are credit packs' });
    const foreign = await createMeter(ctx.orgB.apiKey, { name: 'B', source: 'EVENTS', filter: { eventName: 'b' }, aggregation: 'count' });
    const other = await createPrice(packProduct, { amount: 500, currency: 'USD', grantsUnits: { meterId: foreign, units: 1 } });
    expect(other.status).toBe(400);
    expect(other.body.error.message).toBe(`grantsUnits.meterId: no meter ${foreign} in this organization`);
    const zero = await createPrice(packProduct, { amount: 500, currency: 'USD', grantsUnits: { meterId: images, units: 0 } });
    expect(zero.status).toBe(400);
    const flexible = await createPrice(packProduct, { amount: 500, currency: 'USD', flexibleAmount: true, grantsUnits: { meterId: images, units: 5 } });
    expect(flexible.status).toBe(400);
    expect(flexible.body.error.message).toContain('grantsUnits');
  });

  it('grant units × quantity once when paid (a repeated payment result grants nothing more); balances and the access check follow consumption to exhaustion', async () => {
    ctx.clock.set('2026-11-22T09:00:00.000Z');
    const { customerId, orderId } = await buy(ctx, 'prepaid@example.com', pack, ctx.orgA.apiKey, { quantity: 2 });
    await setExternalId(ctx, customerId, 'user_prepaid', ctx.orgA.apiKey);
    const order = await ctx.testDb.database.db('orders').where({ id: orderId }).first();
    expect(order.status).toBe('PAID');
    // The same payment's result again (a processor's retry): unchanged, no second grant.
    const again = await ctx.services.payments.applyPaymentResult({ checkoutSessionId: order.checkout_session_id, outcome: 'succeeded', processorPaymentId: order.processor_payment_id });
    expect(again.outcome).toBe('unchanged');
    expect((await ledger(customerId)).map((e) => [e.kind, Number(e.units), e.order_id])).toEqual([['GRANT', 200, orderId]]);

    const session = (await ctx.merchant.get(`/v1/checkout-sessions/${order.checkout_session_id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(session.pricing.grantsUnits).toEqual({ meterId: images, units: 100 });

    ctx.clock.set('2026-11-23T00:00:00.000Z');
    const customer = { externalId: 'user_prepaid' };
    expect(await ingest(Array.from({ length: 150 }, (_, i) => ({ id: `p${i}`, customer, name: 'image', timestamp: '2026-11-22T12:00:00Z', properties: {} })))).not.toContain('REJECTED');
    for (const ref of [customerId, 'user_prepaid']) {
      const res = await balances(ref);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data).toEqual({
        customerId,
        externalId: 'user_prepaid',
        asOf: '2026-11-23T00:00:00.000Z',
        balances: [
          {
            meterId: images,
            meterName: 'Images',
            basis: 'PREPAID',
            subscriptionId: null,
            periodStart: '2026-11-22T09:00:00.000Z',
            periodEnd: null,
            consumedUnits: 150,
            includedUnits: 0,
            includedRemaining: 0,
            creditBalance: 200,
            creditsPending: 150,
            creditsRemaining: 50,
            remainingUnits: 50,
            overageUnits: 0,
            exhausted: false,
          },
        ],
      });
    }
    // Another organization's key: the customer does not exist there.
    expect((await balances(customerId, ctx.orgB.apiKey)).status).toBe(404);
    expect((await balances('nobody')).status).toBe(404);

    const before = await check(`external_id=user_prepaid&product_id=${packProduct}`);
    expect(before.body.data).toMatchObject({ entitled: true, type: 'ONE_TIME', meters: [{ meterId: images, basis: 'PREPAID', consumedUnits: 150, creditsRemaining: 50, remainingUnits: 50, exhausted: false }] });
    expect(before.body.data.reason).toBeUndefined();

    expect(await ingest(Array.from({ length: 60 }, (_, i) => ({ id: `q${i}`, customer, name: 'image', timestamp: '2026-11-22T13:00:00Z', properties: {} })))).not.toContain('REJECTED');
    const after = await check(`external_id=user_prepaid&product_id=${packProduct}`);
    expect(after.body.data).toMatchObject({
      entitled: false,
      type: null,
      reason: 'CREDITS_EXHAUSTED',
      productId: packProduct,
      productName: 'Image credits',
      meters: [{ meterId: images, basis: 'PREPAID', consumedUnits: 210, creditsRemaining: 0, remainingUnits: 0, overageUnits: 10, exhausted: true }],
    });
    // Without product_id nothing is metered: the answer keeps its shape.
    const plain = await check('external_id=user_prepaid');
    expect(plain.body.data.meters).toBeUndefined();
    expect(plain.body.data.entitled).toBe(true);

    // The crossing was announced once (the batch that crossed), with every key of the documented example.
    const events = await exhaustedEvents(customerId);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ customer: { customerId, externalId: 'user_prepaid' }, balance: { meterId: images, basis: 'PREPAID', creditsRemaining: 0, exhausted: true, consumedUnits: 210 } });
    const documented = parse(readFileSync('openapi/merchant.yaml', 'utf8')).webhooks['meter.credits_exhausted'].post.requestBody.content['application/json'].example;
    expect(keyPaths(events[0])).toEqual(keyPaths(documented.data));
    expect(await ingest([{ id: 'q-more', customer, name: 'image', timestamp: '2026-11-22T14:00:00Z', properties: {} }])).toEqual(['ACCEPTED']);
    expect(await exhaustedEvents(customerId)).toHaveLength(1);

    // A second pack restores access.
    await buy(ctx, 'prepaid@example.com', pack, ctx.orgA.apiKey);
    expect((await check(`external_id=user_prepaid&product_id=${packProduct}`)).body.data).toMatchObject({ entitled: true, meters: [{ creditsRemaining: 89, exhausted: false }] });
    // Running out of the new balance is a new crossing.
    expect(await ingest(Array.from({ length: 89 }, (_, i) => ({ id: `s${i}`, customer, name: 'image', timestamp: '2026-11-22T15:00:00Z', properties: {} })))).not.toContain('REJECTED');
    expect(await exhaustedEvents(customerId)).toHaveLength(2);
  });

  it('on the crypto rail: a confirmed transfer grants once (seen, confirmed, confirmed again), a transfer only seen grants nothing', async () => {
    const product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Crypto credits' })).id;
    const price = await createPrice(product, { amount: 5_000_000, currency: 'USDC', provider: 'CRYPTO', grantsUnits: { meterId: images, units: 40 } });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    // A crypto session of the pack as checkout stores it (its quote needs a chain, which this file has not).
    const { orderId } = await buy(ctx, 'chain@example.com', pack, ctx.orgA.apiKey);
    const template = (await createCommerceUnitOfWork(ctx.testDb.database.db).stores.sessions.find(ctx.orgA.orgId, (await ctx.testDb.database.db('orders').where({ id: orderId }).first()).checkout_session_id))!;
    const customerId = (await ctx.testDb.database.db('orders').where({ id: orderId }).first()).customer_id as string;
    const session = {
      ...template,
      id: `CS_crypto${Date.now()}`,
      status: 'CREATED' as const,
      provider: 'CRYPTO' as const,
      currency: 'USDC',
      amount: 5_000_000,
      quantity: 1,
      pageToken: `tok${Date.now()}`,
      pricing: { ...template.pricing, amount: 5_000_000, currency: 'USDC', pricingId: price.body.data.pricingId, grantsUnits: { meterId: images, units: 40 } },
      expiresAt: new Date(ctx.clock.now().getTime() + 3_600_000),
    };
    await createCommerceUnitOfWork(ctx.testDb.database.db).transaction((stores) => stores.sessions.insert(session));
    const transfer = { checkoutSessionId: session.id, chain: 'eip155:31337', txHash: `0x${'ab'.repeat(32)}`, fromAddress: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', recipient: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359', valueUnits: 5_000_000, quotedUnits: 5_000_000 };
    const grantsOf = async () => (await ledger(customerId)).filter((e) => e.kind === 'GRANT' && e.units == 40);
    expect((await ctx.services.payments.applyCryptoTransfer({ ...transfer, event: 'seen' })).outcome).toBe('applied');
    expect(await grantsOf()).toHaveLength(0);
    expect((await ctx.services.payments.applyCryptoTransfer({ ...transfer, event: 'confirmed' })).outcome).toBe('applied');
    expect((await ctx.services.payments.applyCryptoTransfer({ ...transfer, event: 'confirmed' })).outcome).toBe('unchanged');
    expect(await grantsOf()).toHaveLength(1);
  });

  it('a full refund revokes what is left of the pack (never more than the balance); a partial refund revokes nothing', async () => {
    const { customerId, orderId } = await buy(ctx, 'refund@example.com', pack, ctx.orgA.apiKey);
    const second = await buy(ctx, 'refund@example.com', pack, ctx.orgA.apiKey);
    expect((await ctx.admin.post(`/v1/orders/${second.orderId}/refund`).send({ amount: 100 })).status).toBe(200);
    expect((await ledger(customerId)).map((e) => e.kind)).toEqual(['GRANT', 'GRANT']);
    expect((await ctx.admin.post(`/v1/orders/${orderId}/refund`).send({})).status).toBe(200);
    const entries = await ledger(customerId);
    expect(entries.filter((e) => e.kind === 'REVOKE').map((e) => [Number(e.units), e.order_id])).toEqual([[-100, orderId]]);
    const [balance] = (await balances(customerId)).body.data.balances;
    expect(balance).toMatchObject({ basis: 'PREPAID', creditBalance: 100 });
  });

  it('a metered subscription draws included units first, then credits, at its period close, once; the USAGE line says creditedUnits', async () => {
    ctx.clock.set('2027-01-01T00:00:00.000Z');
    const product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro tokens' })).id;
    const sub = await createPrice(product, {
      amount: 2000,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'MONTH',
      meteredComponents: [{ meterId: tokens, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } }],
    });
    const tokenPack = await createPrice(product, { amount: 1000, currency: 'USD', grantsUnits: { meterId: tokens, units: 3_000 } });
    expect([sub.status, tokenPack.status]).toEqual([201, 201]);
    const { customerId, orderId } = await buy(ctx, 'drawer@example.com', sub.body.data.pricingId, ctx.orgA.apiKey);
    await setExternalId(ctx, customerId, 'user_drawer', ctx.orgA.apiKey);
    await buy(ctx, 'drawer@example.com', tokenPack.body.data.pricingId, ctx.orgA.apiKey);
    const subscriptionId = (await ctx.testDb.database.db('orders').where({ id: orderId }).first()).subscription_id as string;
    ctx.clock.set('2027-01-10T00:00:00.000Z');
    expect(await ingest([{ id: 'd1', customer: { externalId: 'user_drawer' }, name: 'llm_tokens', timestamp: '2027-01-05T00:00:00Z', properties: { tokens: 14_000.5 } }])).toEqual(['ACCEPTED']);

    const mid = (await balances('user_drawer')).body.data.balances;
    expect(mid).toEqual([
      expect.objectContaining({
        meterId: tokens,
        basis: 'SUBSCRIPTION',
        subscriptionId,
        periodStart: '2027-01-01T00:00:00.000Z',
        periodEnd: '2027-02-01T00:00:00.000Z',
        consumedUnits: 14_000.5,
        includedUnits: 10_000,
        includedRemaining: 0,
        creditBalance: 3_000,
        creditsPending: 3_000,
        creditsRemaining: 0,
        remainingUnits: 0,
        overageUnits: 1_000.5,
        exhausted: false,
      }),
    ]);
    // Credits used up within a subscription's period: announced once for the period.
    expect((await exhaustedEvents(customerId)).map((e) => [e.balance.basis, e.balance.subscriptionId])).toEqual([['SUBSCRIPTION', subscriptionId]]);
    // A subscription's meter never closes access: the overage is billed.
    expect((await check(`external_id=user_drawer&product_id=${product}`)).body.data).toMatchObject({ entitled: true, type: 'ONE_TIME', meters: [{ basis: 'SUBSCRIPTION', overageUnits: 1_000.5 }] });

    ctx.clock.set('2027-02-01T01:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    expect(await ctx.services.subscriptions.processDue()).toBe(0);
    const renewal = await ctx.testDb.database.db('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first();
    const lines = (await ctx.merchant.get(`/v1/orders/${renewal.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.lines;
    // 14,000.5 − 10,000 included − 3,000 credited = 1,000.5 × 0.004 = 4.002 → 4.
    expect(lines[1]).toMatchObject({ kind: 'USAGE', quantity: '14000.5', usage: { includedUnits: 10_000, creditedUnits: 3_000, billableQuantity: '1000.5' }, amountCents: 4 });
    expect(renewal.amount_cents).toBe(2004);
    const draws = (await ledger(customerId)).filter((e) => e.kind === 'DRAW');
    expect(draws.map((e) => [Number(e.units), e.subscription_id, e.billing_period])).toEqual([[-3_000, subscriptionId, 0]]);
    const after = (await balances('user_drawer')).body.data.balances;
    expect(after).toEqual([expect.objectContaining({ basis: 'SUBSCRIPTION', periodStart: '2027-02-01T00:00:00.000Z', consumedUnits: 0, creditBalance: 0, remainingUnits: 10_000 })]);
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
  });
});
