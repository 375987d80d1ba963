/**
 * Issue 38 §9, the console and admin reads of usage: the live preview of an unsaved meter
 * (previewConsoleMeter: 30 UTC days ending now, read from an active meter's rollup when the
 * definition equals one, else from the events; the same quantities either way and as the saved
 * meter's getMeterQuantities; the creation rules' 400s; another organization's project 400; no
 * session 401; no CSRF 403) and a customer's usage this period with the estimated next charge
 * (getConsoleCustomerUsage, getOrgCustomerUsage: the renewal's pricing, the balances per meter as
 * getCustomerMeterBalances answers them, another organization's customer 404), and the admin API's meters (listOrgMeters, getOrgMeter).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { as, signUp, type Member } from '../accounts/helpers.js';
import { buy, foldRollups, setExternalId } from './helpers.js';

let ctx: TestContext;
let ownerA: Member;
let viewerA: Member;
let ownerB: Member;
let tokensMeter: string;
let priceId: string;
let customerId: string;

const preview = (m: Member, body: object) => as(m, ctx.merchant.post('/v1/console/meter-previews')).send(body);
const ingest = async (events: object[]) => {
  const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
  expect(res.status).toBe(200);
  expect(res.body.data.results.map((r: { status: string }) => r.status)).not.toContain('REJECTED');
};

beforeAll(async () => {
  ctx = await createTestContext();
  ctx.clock.set('2026-11-20T10:00:00.000Z');
  const meter = await ctx.merchant
    .post('/v1/meters')
    .set('X-API-Key', ctx.orgA.apiKey)
    .send({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
  expect(meter.status).toBe(201);
  tokensMeter = meter.body.data.id;
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' });
  const price = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
    amount: 2000,
    currency: 'USD',
    pricingType: 'SUBSCRIPTION',
    billingInterval: 'MONTH',
    meteredComponents: [{ meterId: tokensMeter, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } }],
  });
  expect(price.status, JSON.stringify(price.body)).toBe(201);
  priceId = price.body.data.pricingId;
  ({ customerId } = await buy(ctx, 'usage-console@example.com', priceId, ctx.orgA.apiKey));
  expect((await setExternalId(ctx, customerId, 'user_console', ctx.orgA.apiKey)).status).toBe(200);
  ctx.clock.set('2026-12-06T09:30:00.000Z');
  // Members sign in now: a session ends 12 hours after its sign-in.
  [ownerA, viewerA, ownerB] = await Promise.all([signUp(ctx, ctx.orgA.orgId, 'owner'), signUp(ctx, ctx.orgA.orgId, 'viewer'), signUp(ctx, ctx.orgB.orgId, 'owner')]);
  const customer = { externalId: 'user_console' };
  await ingest([
    { id: 'a', customer, name: 'llm_tokens', timestamp: '2026-11-21T08:15:00Z', properties: { tokens: 7000, tier: 'paid' } },
    { id: 'b', customer, name: 'llm_tokens', timestamp: '2026-11-21T23:59:59Z', properties: { tokens: 500, tier: 'free' } },
    { id: 'c', customer, name: 'llm_tokens', timestamp: '2026-12-06T09:10:00Z', properties: { tokens: 8000, tier: 'paid' } },
    { id: 'd', customer, name: 'other', timestamp: '2026-12-06T09:00:00Z', properties: { tokens: 1 } },
  ]);
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const nonZero = (buckets: Array<{ start: string; quantity: number }>) => buckets.filter((b) => b.quantity !== 0).map((b) => [b.start.slice(0, 10), b.quantity]);

describe('previewConsoleMeter', () => {
  it('answers the last 30 UTC days (today whole), from the rollup of an equal active meter and from the events otherwise, equal to the saved meter’s quantities', async () => {
    const same = await preview(viewerA, { source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
    expect(same.status, JSON.stringify(same.body)).toBe(200);
    expect(same.body.data).toMatchObject({ start: '2026-11-07T00:00:00.000Z', end: '2026-12-07T00:00:00.000Z', interval: 'day', read: 'ROLLUP', total: 15_500 });
    expect(same.body.data.buckets).toHaveLength(30);
    expect(same.body.data.buckets[29]).toEqual({ start: '2026-12-06T00:00:00.000Z', end: '2026-12-07T00:00:00.000Z', quantity: 8000 });
    expect(nonZero(same.body.data.buckets)).toEqual([['2026-11-21', 7500], ['2026-12-06', 8000]]);

    // The same meter's own quantities over the same range and interval.
    const saved = await ctx.merchant
      .get(`/v1/meters/${tokensMeter}/quantities`)
      .query({ start: same.body.data.start, end: same.body.data.end, interval: 'day' })
      .set('X-API-Key', ctx.orgA.apiKey);
    expect(saved.body.data.total).toBe(same.body.data.total);
    expect(saved.body.data.buckets).toEqual(same.body.data.buckets);

    // A filter no meter has: read from the events, with its properties.
    const paid = await preview(ownerA, { source: 'EVENTS', filter: { eventName: 'llm_tokens', properties: { tier: 'paid' } }, aggregation: 'sum', property: 'tokens' });
    expect(paid.body.data).toMatchObject({ read: 'EVENTS', total: 15_000 });
    expect(nonZero(paid.body.data.buckets)).toEqual([['2026-11-21', 7000], ['2026-12-06', 8000]]);
    // The same definition as the rollup's, read from the events (another aggregation reads no rollup): equal.
    const count = await preview(ownerA, { source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'count' });
    expect(count.body.data).toMatchObject({ read: 'EVENTS', total: 3 });
    const max = await preview(ownerA, { source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'max', property: 'tokens' });
    expect(max.body.data.total).toBe(8000);
    // Nothing was stored.
    const meters = await ctx.merchant.get('/v1/meters').set('X-API-Key', ctx.orgA.apiKey);
    expect(meters.body.data.records).toHaveLength(1);
  });

  it('reads the events, not the rollup, of an equal meter whose rollup is still being built (BUILDING: its hours are incomplete)', async () => {
    const db = ctx.testDb.database.db;
    await foldRollups(ctx); // ingest queued its deltas (migration 0395): the rollup's rows hold them once folded
    const rows = await db('usage_meter_hours').where('meter_id', tokensMeter).select('*');
    expect(rows.length).toBeGreaterThan(0);
    // A build in progress: the rollup holds only what its chunks wrote so far (here: nothing yet).
    await db('meters').where('id', tokensMeter).update({ rollup_status: 'BUILDING', rollup_cursor: '' });
    await db('usage_meter_hours').where('meter_id', tokensMeter).del();
    try {
      const building = await preview(viewerA, { source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
      expect(building.status).toBe(200);
      expect(building.body.data).toMatchObject({ read: 'EVENTS', total: 15_500 });
    } finally {
      await db('usage_meter_hours').insert(rows);
      await db('meters').where('id', tokensMeter).update({ rollup_status: 'READY', rollup_cursor: null });
    }
    const ready = await preview(viewerA, { source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
    expect(ready.body.data).toMatchObject({ read: 'ROLLUP', total: 15_500 });
  });

  it('checks the definition like createMeter (400 naming the field), including another organization’s project', async () => {
    const noProperty = await preview(ownerA, { source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum' });
    expect(noProperty.status).toBe(400);
    expect(noProperty.body.error).toMatchObject({ code: 'VALIDATION_ERROR', message: 'property is required for aggregation sum' });
    const noName = await preview(ownerA, { source: 'EVENTS', filter: {}, aggregation: 'count' });
    expect(noName.status).toBe(400);
    expect(noName.body.error.message).toContain('filter.eventName');
    const unknown = await preview(ownerA, { source: 'EVENTS', filter: { eventName: 'x' }, aggregation: 'count', name: 'extra' });
    expect(unknown.status).toBe(400);
    const projectB = await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/telemetry-projects`).send({ name: 'B bot' });
    expect(projectB.status).toBe(201);
    const foreign = await preview(ownerA, { source: 'SPANS', filter: { projectId: projectB.body.data.id ?? projectB.body.data.projectId }, aggregation: 'count', customerAttribute: 'user.id' });
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.message).toContain('is not a telemetry project of this organization');
  });

  it('reads the spans of a project of the organization (no spans: zeros)', async () => {
    const project = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/telemetry-projects`).send({ name: 'A bot' });
    const spans = await preview(viewerA, { source: 'SPANS', filter: { projectId: project.body.data.id ?? project.body.data.projectId }, aggregation: 'count', customerAttribute: 'user.id' });
    expect(spans.status, JSON.stringify(spans.body)).toBe(200);
    expect(spans.body.data).toMatchObject({ read: 'SPANS', total: 0 });
    expect(spans.body.data.buckets).toHaveLength(30);
  });

  it('needs a session (401) and, as a POST, the CSRF token (403); organization B sees only its own events', async () => {
    const body = { source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'count' };
    expect((await ctx.merchant.post('/v1/console/meter-previews').send(body)).status).toBe(401);
    const noCsrf = await ctx.merchant.post('/v1/console/meter-previews').set('Cookie', ownerA.cookie).set('Origin', 'http://merchant.test').send(body);
    expect(noCsrf.status).toBe(403);
    const b = await preview(ownerB, body);
    expect(b.status).toBe(200);
    expect(b.body.data).toMatchObject({ read: 'EVENTS', total: 0 });
  });
});

describe('getConsoleCustomerUsage and getOrgCustomerUsage', () => {
  it('lists the metered subscription with its usage so far and the estimated next charge, priced like the renewal', async () => {
    const res = await as(viewerA, ctx.merchant.get(`/v1/console/customers/${customerId}/usage`));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [sub] = res.body.data.subscriptions;
    expect(res.body.data.customerId).toBe(customerId);
    expect(sub).toMatchObject({
      productName: 'Pro',
      currency: 'USD',
      periodStart: '2026-11-20T10:00:00.000Z',
      periodEnd: '2026-12-20T10:00:00.000Z',
      cancelAtPeriodEnd: false,
      estimatedChargeAt: '2026-12-20T11:00:00.000Z',
    });
    // 7000 + 500 + 8000 tokens since the period started; 10,000 included;
    // 5,500 × 0.004 = 22 cents; fee 2000.
    expect(sub.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([['PRICE', 2000], ['USAGE', 22]]);
    expect(sub.lines[1]).toMatchObject({ description: 'Tokens', quantity: '15500', usage: { meterId: tokensMeter, includedUnits: 10_000, billableQuantity: '5500' } });
    expect(sub.estimatedTotalCents).toBe(2022);
    // The balances per meter: the merchant API's getCustomerMeterBalances, from the same function.
    const merchant = await ctx.merchant.get(`/v1/customers/${customerId}/meter-balances`).set('X-API-Key', ctx.orgA.apiKey);
    expect(res.body.data.balances).toEqual(merchant.body.data.balances);
    expect(res.body.data.balances).toEqual([expect.objectContaining({ meterId: tokensMeter, basis: 'SUBSCRIPTION', consumedUnits: 15_500, includedUnits: 10_000, creditBalance: 0, overageUnits: 5_500 })]);

    const byExternalId = await as(viewerA, ctx.merchant.get('/v1/console/customers/user_console/usage'));
    expect(byExternalId.body.data).toEqual(res.body.data);
    const admin = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/customers/${customerId}/usage`);
    expect(admin.status).toBe(200);
    expect(admin.body.data).toEqual(res.body.data);
  });

  it('is 404 for another organization’s customer, an unknown customer or organization, and 401 without a session', async () => {
    expect((await as(ownerB, ctx.merchant.get(`/v1/console/customers/${customerId}/usage`))).status).toBe(404);
    expect((await as(ownerB, ctx.merchant.get('/v1/console/customers/user_console/usage'))).status).toBe(404);
    expect((await as(ownerA, ctx.merchant.get('/v1/console/customers/CUS_nobody/usage'))).status).toBe(404);
    expect((await ctx.merchant.get(`/v1/console/customers/${customerId}/usage`)).status).toBe(401);
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgB.orgId}/customers/${customerId}/usage`)).status).toBe(404);
    const noOrg = await ctx.admin.get(`/v1/orgs/ORG_nobody/customers/${customerId}/usage`);
    expect(noOrg.status).toBe(404);
    expect(noOrg.body.error.message).toMatch(/Organization/);
  });
});

describe('listOrgMeters and getOrgMeter (admin)', () => {
  it('list and read an organization’s meters; another organization’s meter and an unknown organization are 404', async () => {
    const list = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/meters`);
    expect(list.status).toBe(200);
    expect(list.body.data.records.map((m: { id: string }) => m.id)).toEqual([tokensMeter]);
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/meters?status=ARCHIVED`)).body.data.records).toEqual([]);
    const one = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/meters/${tokensMeter}`);
    expect(one.body.data).toMatchObject({ id: tokensMeter, name: 'Tokens', aggregation: 'sum', property: 'tokens' });
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgB.orgId}/meters/${tokensMeter}`)).status).toBe(404);
    expect((await ctx.admin.get('/v1/orgs/ORG_nobody/meters')).status).toBe(404);
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgB.orgId}/meters`)).body.data.records).toEqual([]);
  });
});

// Last in the file: it moves the clock past the period's end (members' sessions end then).
describe('the estimated next charge of a taxed, discounted subscription with seats', () => {
  it('equals the renewal order that bills the period: the seats’ fee, the coupon’s DISCOUNT, the first order’s TAX on fee and usage', async () => {
    // Before: one fee line of the stored amount (19 % folded in) and no DISCOUNT: 2 × 2000 × 1.19 + usage,
    // where the renewal charges (4000 − 20 %) + usage, then 19 % on that.
    const rate = await as(ownerA, ctx.merchant.post('/v1/console/tax-rates')).send({ displayName: 'VAT', percentage: '19', country: 'DE' });
    expect(rate.status, JSON.stringify(rate.body)).toBe(201);
    const coupon = await ctx.merchant.post('/v1/coupons').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Launch', percentOff: '20', duration: 'FOREVER' });
    expect(coupon.status, JSON.stringify(coupon.body)).toBe(201);
    const { customerId: taxed } = await buy(ctx, 'estimate-taxed@example.com', priceId, ctx.orgA.apiKey, {
      quantity: 2,
      customerTax: { country: 'DE' },
      customerExternalId: 'user_taxed',
      discounts: [{ coupon: coupon.body.data.id }],
    });
    await ingest([{ id: 'taxed-1', customer: { externalId: 'user_taxed' }, name: 'llm_tokens', timestamp: '2026-12-06T09:32:00Z', properties: { tokens: 12_345 } }]);
    const estimate = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/customers/${taxed}/usage`);
    expect(estimate.status, JSON.stringify(estimate.body)).toBe(200);
    const [sub] = estimate.body.data.subscriptions;
    const kinds = (lines: { kind: string; amountCents: number }[]) => lines.map((l) => [l.kind, l.amountCents]);
    // 2 × 2000; 2,345 billable × 0.004 = 9.38 → 9; 20 % of 4009 = 801.8 → 802; 19 % of 3207 = 609.33 → 609.
    expect(kinds(sub.lines)).toEqual([['PRICE', 4000], ['USAGE', 9], ['DISCOUNT', -802], ['TAX', 609]]);
    expect(sub.estimatedTotalCents).toBe(3816);

    ctx.clock.set('2026-12-06T12:00:00.000Z');
    const subscriptionId = (await ctx.testDb.database.db('subscriptions').where({ customer_id: taxed }).first()).id;
    const period = await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first();
    ctx.clock.set(new Date(new Date(period.current_period_end).getTime() + 3_600_000 + 1000).toISOString());
    await ctx.services.subscriptions.processDue();
    const renewal = await ctx.testDb.database.db('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first();
    expect(renewal, 'the renewal order').toBeTruthy();
    const order = (await ctx.merchant.get(`/v1/orders/${renewal.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(kinds(order.lines)).toEqual(kinds(sub.lines));
    expect(order.amountCents).toBe(sub.estimatedTotalCents);
  });
});
