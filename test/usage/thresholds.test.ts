/**
 * Usage thresholds (issue 38 §6): a metered component's `thresholds` (percents of its included
 * units) on the admin API's price creation, checked strictly (400 naming the field), and the
 * `meter.threshold_crossed` webhook on both databases: once per (subscription, period, meter,
 * threshold); one event per threshold when a batch jumps several, lowest first; nothing more on a
 * retried batch or a later one; the next period re-arms; exact comparison of decimal consumption;
 * the payload compared key by key with the documented example. The concurrent case is
 * test/usage/thresholds-race.test.ts (PostgreSQL).
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkThresholds, thresholdReached } from '../../src/commerce/metered-billing.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, setExternalId } from './helpers.js';

let ctx: TestContext;
let tokens: string;
let product: string;

const createPrice = (body: object) => ctx.admin.post(`/v1/products/${product}/prices`).send(body);
const metered = (component: object) => ({ amount: 2000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', meteredComponents: [{ meterId: tokens, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' }, ...component }] });
const ingest = async (events: object[]) => {
  const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.results.map((r: { status: string }) => r.status) as string[];
};
const crossed = async (customerId: string) =>
  (await ctx.testDb.database.db('webhook_events').where({ type: 'meter.threshold_crossed' }).orderBy('seq'))
    .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>)
    .filter((p) => p.customer.customerId === customerId);
const keyPaths = (v: unknown, prefix = ''): string[] =>
  v !== null && typeof v === 'object' ? Object.entries(v as object).flatMap(([k, x]) => [`${prefix}${k}`, ...keyPaths(x, `${prefix}${k}.`)]).sort() : [];
const tokenEvent = (id: string, externalId: string, at: string, n: number) => ({ id, customer: { externalId }, name: 'llm_tokens', timestamp: at, properties: { tokens: n } });

beforeAll(async () => {
  ctx = await createTestContext();
  const meter = await ctx.merchant
    .post('/v1/meters')
    .set('X-API-Key', ctx.orgA.apiKey)
    .send({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
  expect(meter.status).toBe(201);
  tokens = meter.body.data.id;
  product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro tokens' })).id;
});
afterAll(async () => {
  await ctx?.close();
});

describe('MeteredComponent.thresholds', () => {
  it('are whole percents 1-1000, unique, at most 10, only with includedUnits ≥ 1; stored ascending; [] when none', async () => {
    const ok = await createPrice(metered({ includedUnits: 10_000, thresholds: [100, 80, 150] }));
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    expect(ok.body.data.meteredComponents[0].thresholds).toEqual([80, 100, 150]);
    const listed = (await ctx.admin.get(`/v1/products/${product}/prices`)).body.data.find((p: { pricingId: string }) => p.pricingId === ok.body.data.pricingId);
    expect(listed.meteredComponents[0]).toMatchObject({ includedUnits: 10_000, thresholds: [80, 100, 150] });
    const none = await createPrice(metered({ includedUnits: 10 }));
    expect(none.body.data.meteredComponents[0].thresholds).toEqual([]);

    const refused: Array<[object, RegExp]> = [
      [{ includedUnits: 0, thresholds: [80] }, /meteredComponents\[0\]\.thresholds: thresholds are percents of includedUnits/],
      [{ thresholds: [80] }, /includedUnits, which must then be at least 1/],
      [{ includedUnits: 10, thresholds: [0] }, /thresholds/],
      [{ includedUnits: 10, thresholds: [1001] }, /thresholds/],
      [{ includedUnits: 10, thresholds: [80.5] }, /thresholds/],
      [{ includedUnits: 10, thresholds: [80, 80] }, /thresholds/],
      [{ includedUnits: 10, thresholds: Array.from({ length: 11 }, (_, i) => i + 1) }, /thresholds/],
      [{ includedUnits: 10, thresholds: ['80'] }, /thresholds/],
    ];
    for (const [component, message] of refused) {
      const res = await createPrice(metered(component));
      expect(res.status, JSON.stringify(component)).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.error.message, JSON.stringify(component)).toMatch(message);
    }
  });

  it('service rules hold without the schema (duplicates, bounds, count) and name the field', () => {
    expect(checkThresholds([100, 80], 10, 'f')).toEqual([80, 100]);
    expect(checkThresholds(undefined, 0, 'f')).toEqual([]);
    expect(() => checkThresholds([80, 80], 10, 'f')).toThrow('f[1]: 80 is given twice');
    expect(() => checkThresholds([0], 10, 'f')).toThrow('f[0] must be a whole percent from 1 to 1000');
    expect(() => checkThresholds([1001], 10, 'f')).toThrow('f[0]');
    expect(() => checkThresholds([2.5], 10, 'f')).toThrow('f[0]');
    expect(() => checkThresholds(Array.from({ length: 11 }, (_, i) => i + 1), 10, 'f')).toThrow('f: at most 10 thresholds');
    expect(() => checkThresholds([50], 0, 'f')).toThrow('f: thresholds are percents');
  });

  it('compare decimal consumption exactly (q × 100 ≥ included × percent)', () => {
    // 0.57 × 100 is 56.99999999999999 in floating point: a float comparison would miss 57 %.
    expect(0.57 * 100 >= 1 * 57).toBe(false);
    expect(thresholdReached(0.57, 1, 57)).toBe(true);
    expect(thresholdReached('0.569999999999', 1, 57)).toBe(false);
    expect(thresholdReached(8000, 10_000, 80)).toBe(true);
    expect(thresholdReached(7999.999, 10_000, 80)).toBe(false);
    expect(thresholdReached(1.65, 5, 33)).toBe(true);
    expect(thresholdReached(0, 10, 1)).toBe(false);
  });
});

describe('meter.threshold_crossed', () => {
  it('is sent once per threshold and period: one event per threshold jumped, none on a retry or a later batch, re-armed by the next period', async () => {
    ctx.clock.set('2027-03-01T00:00:00.000Z');
    const price = await createPrice(metered({ includedUnits: 10_000, thresholds: [150, 50, 80, 100] }));
    expect(price.status).toBe(201);
    const { customerId, orderId } = await buy(ctx, 'thresholds@example.com', price.body.data.pricingId, ctx.orgA.apiKey);
    await setExternalId(ctx, customerId, 'user_thresholds', ctx.orgA.apiKey);
    const subscriptionId = (await ctx.testDb.database.db('orders').where({ id: orderId }).first()).subscription_id as string;
    ctx.clock.set('2027-03-10T00:00:00.000Z');
    const at = '2027-03-05T00:00:00Z';
    const user = 'user_thresholds';

    // 4,999 of 10,000: below 50 %.
    expect(await ingest([tokenEvent('t1', user, at, 4_999)])).toEqual(['ACCEPTED']);
    expect(await crossed(customerId)).toEqual([]);
    // 5,000: exactly 50 %.
    expect(await ingest([tokenEvent('t2', user, at, 1)])).toEqual(['ACCEPTED']);
    const [fifty] = await crossed(customerId);
    expect(fifty).toEqual({
      customer: { customerId, externalId: user },
      subscriptionId,
      meter: { meterId: tokens, meterName: 'Tokens' },
      period: { start: '2027-03-01T00:00:00.000Z', end: '2027-04-01T00:00:00.000Z' },
      threshold: { percent: 50, units: 5_000 },
      consumedUnits: 5_000,
      includedUnits: 10_000,
    });
    // Every key of the documented example, and no other.
    const documented = parse(readFileSync('openapi/merchant.yaml', 'utf8')).webhooks['meter.threshold_crossed'].post.requestBody.content['application/json'].example;
    expect(keyPaths(fifty)).toEqual(keyPaths(documented.data));
    expect(documented.type).toBe('meter.threshold_crossed');

    // One batch from 5,000 to 10,500: 80 % and 100 %, one event each, lowest first.
    const jump = [tokenEvent('t3', user, at, 3_000), tokenEvent('t4', user, at, 2_500)];
    expect(await ingest(jump)).toEqual(['ACCEPTED', 'ACCEPTED']);
    expect((await crossed(customerId)).map((e) => [e.threshold.percent, e.threshold.units, e.consumedUnits])).toEqual([
      [50, 5_000, 5_000],
      [80, 8_000, 10_500],
      [100, 10_000, 10_500],
    ]);
    // The same batch again (a client's retry: duplicates) and a later batch below 150 %: nothing more.
    expect(await ingest(jump)).toEqual(['DUPLICATE', 'DUPLICATE']);
    expect(await ingest([tokenEvent('t5', user, at, 4_499)])).toEqual(['ACCEPTED']);
    expect(await crossed(customerId)).toHaveLength(3);
    // 15,000: 150 % (overage warning), once.
    expect(await ingest([tokenEvent('t6', user, at, 1)])).toEqual(['ACCEPTED']);
    expect(await ingest([tokenEvent('t7', user, at, 1)])).toEqual(['ACCEPTED']);
    expect((await crossed(customerId)).map((e) => e.threshold.percent)).toEqual([50, 80, 100, 150]);
    // The claims: one row per threshold of this period.
    const claims = await ctx.testDb.database.db('usage_balance_alerts').where({ customer_id: customerId }).orderBy('kind');
    expect(claims.map((c: { kind: string; period_key: string }) => [c.kind, c.period_key])).toEqual(
      ['threshold:100', 'threshold:150', 'threshold:50', 'threshold:80'].map((k) => [k, `sub:${subscriptionId}:2027-03-01T00:00:00.000Z`]),
    );

    // The period closes (renewal 1 hour after its end); the next period's consumption starts at 0.
    ctx.clock.set('2027-04-01T01:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    ctx.clock.set('2027-04-02T00:00:00.000Z');
    expect(await ingest([tokenEvent('n1', user, '2027-04-01T12:00:00Z', 8_000.5)])).toEqual(['ACCEPTED']);
    const next = (await crossed(customerId)).slice(4);
    expect(next.map((e) => [e.threshold.percent, e.period.start, e.consumedUnits])).toEqual([
      [50, '2027-04-01T00:00:00.000Z', 8_000.5],
      [80, '2027-04-01T00:00:00.000Z', 8_000.5],
    ]);
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
  });

  it('is not sent for a subscription without thresholds, nor for another customer', async () => {
    ctx.clock.set('2027-05-01T00:00:00.000Z');
    const price = await createPrice(metered({ includedUnits: 10 }));
    const { customerId } = await buy(ctx, 'plain@example.com', price.body.data.pricingId, ctx.orgA.apiKey);
    await setExternalId(ctx, customerId, 'user_plain', ctx.orgA.apiKey);
    expect(await ingest([tokenEvent('p1', 'user_plain', '2027-05-01T00:00:00Z', 50)])).toEqual(['ACCEPTED']);
    expect(await crossed(customerId)).toEqual([]);
    expect(await ctx.testDb.database.db('usage_balance_alerts').where({ customer_id: customerId })).toEqual([]);
  });
});
