/**
 * Plan changes of metered subscriptions on the sandbox rail (issue 39 item 3 × issue 38 §5;
 * docs/plan-changes.md "Metered prices"), through the merchant API on a fake clock: the fee
 * prorates as any change, and the renewal that closes the period bills the usage before the change
 * at the old price's rates and the usage after it at the new price's (one USAGE line per component
 * and part, each part's tiers over its own usage, included units prorated by time, half up). The
 * renewal orders' lines are held to an independent recomputation (BigInt, written here from the
 * rule, not Kassa's pricing). Also: a PERIOD_END downgrade (closing period on the old price, the
 * next on the new), changes between metered and non-metered prices, two changes in one period, a
 * cancel at once after a change, credits of one meter drawn once across its lines.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, setExternalId } from '../usage/helpers.js';
import { day, halfUp, usageCents, type Pricing } from './metered-recompute.js';

let ctx: TestContext;
const meters = { tokens: '', requests: '' };
const prices = { basic: '', pro: '', plain: '', business: '' };
const products = { basic: '', pro: '', plain: '', business: '' };

/** Basic: 10.00 a month, tokens 0.004 ¢ each over 10,000, requests graduated. Pro: 30.00, tokens 0.002 ¢ over 50,000, requests 0.25 ¢. */
const basicComponents = (): Array<{ meter: 'tokens' | 'requests'; includedUnits: number; pricing: Pricing }> => [
  { meter: 'tokens', includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } },
  { meter: 'requests', includedUnits: 0, pricing: { model: 'GRADUATED', tiers: [{ upTo: 100, unitAmountDecimal: '1' }, { upTo: null, unitAmountDecimal: '0.5', flatAmountCents: 10 }] } },
];
const proComponents = (): ReturnType<typeof basicComponents> => [
  { meter: 'tokens', includedUnits: 50_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.002' } },
  { meter: 'requests', includedUnits: 0, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.25' } },
];
const FEES = { basic: 1000, pro: 3000, plain: 5000, business: 2000 };
const NAMES = { basic: 'Basic', pro: 'Pro', plain: 'Plain', business: 'Business' };
const componentsOf = { basic: basicComponents, pro: proComponents, plain: () => [], business: () => [] } as Record<keyof typeof prices, () => ReturnType<typeof basicComponents>>;

// ---- the independent recomputation (BigInt; its pricing in ./metered-recompute.ts) ----
/** includedUnits × part seconds / period seconds, half up. */
const share = (included: number, partSeconds: number, periodSeconds: number): bigint => BigInt(halfUp(BigInt(included) * BigInt(partSeconds), BigInt(periodSeconds)));
const secondsBetween = (a: string, b: string) => (Date.parse(b) - Date.parse(a)) / 1000;

interface Part {
  plan: keyof typeof prices;
  from: string;
  to: string;
  usage: { tokens: number; requests: number };
}
/** The expected USAGE lines of a period [start, end) split into parts (one part: the unchanged rule, full included units). */
function expectedUsageLines(parts: Part[], start: string, end: string, dayOf: (iso: string) => string) {
  const period = secondsBetween(start, end);
  const lines: Array<{ description: string; quantity: string; includedUnits: number; amountCents: number }> = [];
  for (const [i, part] of parts.entries()) {
    for (const c of componentsOf[part.plan]()) {
      const included = parts.length === 1 ? BigInt(c.includedUnits) : share(c.includedUnits, secondsBetween(part.from, i === parts.length - 1 ? end : part.to), period);
      const meterName = c.meter === 'tokens' ? 'Tokens' : 'Requests';
      const description = parts.length === 1 ? meterName : `${meterName} on ${NAMES[part.plan]} ${i < parts.length - 1 ? `until ${dayOf(part.to)}` : `from ${dayOf(part.from)}`}`;
      lines.push({ description, quantity: String(part.usage[c.meter]), includedUnits: Number(included), amountCents: usageCents(BigInt(part.usage[c.meter]), included, c.pricing) });
    }
  }
  return lines;
}

// ---- API helpers ----
const api = (method: 'get' | 'post', path: string) => ctx.merchant[method](path).set('X-API-Key', ctx.orgA.apiKey);
const db = () => ctx.testDb.database.db;
let customers = 0;
async function subscribe(plan: keyof typeof prices, start: string) {
  ctx.clock.set(start);
  const n = ++customers;
  const { customerId, orderId } = await buy(ctx, `metered-change-${n}@example.com`, prices[plan], ctx.orgA.apiKey);
  expect((await setExternalId(ctx, customerId, `mc_${n}`, ctx.orgA.apiKey)).status).toBe(200);
  const subscriptionId = (await db()('orders').where({ id: orderId }).first()).subscription_id as string;
  return { subscriptionId, customerId, externalId: `mc_${n}` };
}
let eventN = 0;
/** Ingests `tokens` and `requests` events at `ts` (the clock set just after it). */
async function use(externalId: string, ts: string, usage: { tokens?: number; requests?: number }) {
  ctx.clock.set(new Date(Date.parse(ts) + 1000).toISOString());
  const events: object[] = [];
  if (usage.tokens) events.push({ id: `mce-${++eventN}`, customer: { externalId }, name: 'llm_tokens', timestamp: ts, properties: { tokens: usage.tokens } });
  for (let i = 0; i < (usage.requests ?? 0); i++) events.push({ id: `mce-${++eventN}`, customer: { externalId }, name: 'request', timestamp: ts, properties: {} });
  const res = await api('post', '/v1/usage-events').send({ events });
  expect(res.status).toBe(200);
  expect(res.body.data.results.map((r: { status: string }) => r.status)).not.toContain('REJECTED');
}
async function changeAt(subscriptionId: string, at: string, body: object) {
  ctx.clock.set(at);
  const p = await api('post', `/v1/subscriptions/${subscriptionId}/change/preview`).send(body);
  expect(p.status, JSON.stringify(p.body)).toBe(200);
  const c = await api('post', `/v1/subscriptions/${subscriptionId}/change`).send({ ...body, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
  expect(c.status, JSON.stringify(c.body)).toBe(200);
  return { preview: p.body.data as Record<string, any>, change: c.body.data as Record<string, any> };
}
async function renewAt(subscriptionId: string, period: number, at: string) {
  ctx.clock.set(at);
  await ctx.services.subscriptions.processDue();
  const row = await db()('orders').where({ subscription_id: subscriptionId, billing_period: period }).first();
  expect(row, `the order of period ${period}`).toBeDefined();
  return (await api('get', `/v1/orders/${row.id}`)).body.data as Record<string, any>;
}
const usageLines = (order: Record<string, any>) =>
  (order.lines as Array<Record<string, any>>).filter((l) => l.kind === 'USAGE').map((l) => ({ description: l.description, quantity: l.quantity, includedUnits: l.usage.includedUnits, amountCents: l.amountCents }));
const sum = (order: Record<string, any>) => (order.lines as Array<{ amountCents: number }>).reduce((t, l) => t + l.amountCents, 0);

beforeAll(async () => {
  ctx = await createTestContext();
  const meter = async (body: object) => {
    const res = await api('post', '/v1/meters').send(body);
    expect(res.status).toBe(201);
    return res.body.data.id as string;
  };
  meters.tokens = await meter({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
  meters.requests = await meter({ name: 'Requests', source: 'EVENTS', filter: { eventName: 'request' }, aggregation: 'count' });
  for (const plan of Object.keys(prices) as Array<keyof typeof prices>) {
    products[plan] = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: NAMES[plan] })).id;
    const meteredComponents = componentsOf[plan]().map((c) => ({ meterId: meters[c.meter], includedUnits: c.includedUnits, pricing: c.pricing }));
    const res = await ctx.admin.post(`/v1/products/${products[plan]}/prices`).send({ amount: FEES[plan], currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', meteredComponents });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    prices[plan] = res.body.data.pricingId;
  }
});
afterAll(async () => {
  await ctx?.close();
});

describe('plan changes of metered subscriptions (sandbox)', () => {
  it('an upgrade mid-period: the fee prorates now; the renewal bills the usage before the change at Basic’s rates and after it at Pro’s, included units prorated', async () => {
    const { subscriptionId, customerId, externalId } = await subscribe('basic', '2026-04-01T00:00:00.000Z');
    await use(externalId, '2026-04-05T00:00:00Z', { tokens: 12_000 });
    await use(externalId, '2026-04-10T00:00:00Z', { requests: 120 });
    await use(externalId, '2026-04-15T23:59:59Z', { tokens: 3000 });

    const { preview, change } = await changeAt(subscriptionId, '2026-04-16T00:00:00.000Z', { priceId: prices.pro });
    // The fee: −1000 × 15/30 + 3000 × 15/30; the usage is not in it, and the preview says where it goes.
    expect(preview).toMatchObject({ effective: 'IMMEDIATE', amountDueCents: 1000, usageBilledAtRenewal: true });
    expect(change.orderId).not.toBeNull();
    const proration = (await api('get', `/v1/orders/${change.orderId}`)).body.data;
    expect(proration.lines.map((l: { kind: string }) => l.kind)).toEqual(['PRORATION', 'PRORATION']);

    // At the change's second and after it: Pro's part.
    await use(externalId, '2026-04-16T00:00:00Z', { tokens: 1000 });
    await use(externalId, '2026-04-20T00:00:00Z', { tokens: 40_000, requests: 30 });
    await use(externalId, '2026-04-30T23:00:00Z', { tokens: 5000, requests: 1 });

    // The estimated next charge (console, admin API, portal) follows the split: the renewal's lines before it is charged.
    const estimate = (await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/customers/${customerId}/usage`)).body.data.subscriptions[0];
    expect(estimate.lines.filter((l: { kind: string }) => l.kind === 'USAGE').map((l: { description: string; amountCents: number }) => [l.description, l.amountCents])).toEqual([
      ['Tokens on Basic until 16 April 2026', 40],
      ['Requests on Basic until 16 April 2026', 120],
      ['Tokens on Pro from 16 April 2026', 42],
      ['Requests on Pro from 16 April 2026', 8],
    ]);
    expect(estimate.estimatedTotalCents).toBe(3210);

    // The grace hour first, then the renewal.
    expect(await ctx.services.subscriptions.processDue()).toBe(0);
    const renewal = await renewAt(subscriptionId, 1, '2026-05-01T01:00:00.000Z');
    const expected = expectedUsageLines(
      [
        { plan: 'basic', from: '2026-04-01T00:00:00.000Z', to: '2026-04-16T00:00:00.000Z', usage: { tokens: 15_000, requests: 120 } },
        { plan: 'pro', from: '2026-04-16T00:00:00.000Z', to: '2026-05-01T00:00:00.000Z', usage: { tokens: 46_000, requests: 31 } },
      ],
      '2026-04-01T00:00:00.000Z',
      '2026-05-01T00:00:00.000Z',
      day,
    );
    // Written out once, so a reader sees the rule: Basic 15,000 − 5,000 included = 10,000 × 0.004 = 40;
    // 120 requests = 100 + 20 × 0.5 + 10 = 120; Pro 46,000 − 25,000 = 21,000 × 0.002 = 42; 31 × 0.25 = 7.75 → 8.
    expect(expected.map((l) => l.amountCents)).toEqual([40, 120, 42, 8]);
    expect(usageLines(renewal)).toEqual(expected);
    expect(renewal.lines[0]).toMatchObject({ kind: 'PRICE', description: 'Pro', amountCents: 3000 });
    expect(renewal.amountCents).toBe(3000 + 40 + 120 + 42 + 8);
    expect(sum(renewal)).toBe(renewal.amountCents);
    expect(renewal.lines[1].description).toBe('Tokens on Basic until 16 April 2026');

    // The next period is Pro's alone again: one line per component, full included units.
    await use(externalId, '2026-05-10T00:00:00Z', { tokens: 60_000 });
    const next = await renewAt(subscriptionId, 2, '2026-06-01T01:00:00.000Z');
    expect(usageLines(next)).toEqual(expectedUsageLines([{ plan: 'pro', from: '', to: '', usage: { tokens: 60_000, requests: 0 } }], '2026-05-01T00:00:00.000Z', '2026-06-01T00:00:00.000Z', day));
    expect(usageLines(next)[0]).toMatchObject({ description: 'Tokens', includedUnits: 50_000, amountCents: 20 });
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
  });

  it('a downgrade at PERIOD_END: the closing period is billed on the old price whole, the next on the new', async () => {
    const { subscriptionId, externalId } = await subscribe('pro', '2026-06-01T00:00:00.000Z');
    await use(externalId, '2026-06-05T00:00:00Z', { tokens: 70_000, requests: 10 });
    const { preview } = await changeAt(subscriptionId, '2026-06-10T00:00:00.000Z', { priceId: prices.basic });
    expect(preview).toMatchObject({ effective: 'PERIOD_END', amountDueCents: 0, lines: [], usageBilledAtRenewal: true });
    await use(externalId, '2026-06-20T00:00:00Z', { tokens: 10_000 });
    const renewal = await renewAt(subscriptionId, 1, '2026-07-01T01:00:00.000Z');
    expect(renewal.lines[0]).toMatchObject({ kind: 'PRICE', description: 'Basic', amountCents: 1000 });
    expect(usageLines(renewal)).toEqual(expectedUsageLines([{ plan: 'pro', from: '', to: '', usage: { tokens: 80_000, requests: 10 } }], '2026-06-01T00:00:00.000Z', '2026-07-01T00:00:00.000Z', day));
    await use(externalId, '2026-07-02T00:00:00Z', { tokens: 20_000, requests: 101 });
    const next = await renewAt(subscriptionId, 2, '2026-08-01T01:00:00.000Z');
    expect(usageLines(next)).toEqual(expectedUsageLines([{ plan: 'basic', from: '', to: '', usage: { tokens: 20_000, requests: 101 } }], '2026-07-01T00:00:00.000Z', '2026-08-01T00:00:00.000Z', day));
    expect(sum(next)).toBe(next.amountCents);
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
  });

  it('from a non-metered price to a metered one, then from a metered one to a non-metered one', async () => {
    const { subscriptionId, externalId } = await subscribe('business', '2026-09-01T00:00:00.000Z');
    await use(externalId, '2026-09-05T00:00:00Z', { tokens: 99_999 });
    await changeAt(subscriptionId, '2026-09-11T00:00:00.000Z', { priceId: prices.pro });
    await use(externalId, '2026-09-20T00:00:00Z', { tokens: 80_000, requests: 4 });
    const renewal = await renewAt(subscriptionId, 1, '2026-10-01T01:00:00.000Z');
    expect(renewal.lines[0]).toMatchObject({ kind: 'PRICE', description: 'Pro', amountCents: 3000 });
    // Business bills no usage: only Pro's part, from the change, with its share of the included units (20 of 30 days).
    const expected = expectedUsageLines(
      [
        { plan: 'business', from: '2026-09-01T00:00:00.000Z', to: '2026-09-11T00:00:00.000Z', usage: { tokens: 99_999, requests: 0 } },
        { plan: 'pro', from: '2026-09-11T00:00:00.000Z', to: '2026-10-01T00:00:00.000Z', usage: { tokens: 80_000, requests: 4 } },
      ],
      '2026-09-01T00:00:00.000Z',
      '2026-10-01T00:00:00.000Z',
      day,
    );
    expect(expected.map((l) => l.includedUnits)).toEqual([33_333, 0]);
    expect(usageLines(renewal)).toEqual(expected);

    // Period 2 (31 days): Pro → Plain (50.00, no meters) at once on 10 October, 12:00.
    await use(externalId, '2026-10-05T00:00:00Z', { tokens: 30_000, requests: 200 });
    const first = await changeAt(subscriptionId, '2026-10-10T12:00:00.000Z', { priceId: prices.plain });
    expect(first.preview.usageBilledAtRenewal).toBe(true);
    await use(externalId, '2026-10-15T00:00:00Z', { tokens: 1_000_000 });
    const renewal2 = await renewAt(subscriptionId, 2, '2026-11-01T01:00:00.000Z');
    expect(renewal2.lines[0]).toMatchObject({ kind: 'PRICE', description: 'Plain', amountCents: 5000 });
    const expected2 = expectedUsageLines(
      [
        { plan: 'pro', from: '2026-10-01T00:00:00.000Z', to: '2026-10-10T12:00:00.000Z', usage: { tokens: 30_000, requests: 200 } },
        { plan: 'plain', from: '2026-10-10T12:00:00.000Z', to: '2026-11-01T00:00:00.000Z', usage: { tokens: 1_000_000, requests: 0 } },
      ],
      '2026-10-01T00:00:00.000Z',
      '2026-11-01T00:00:00.000Z',
      day,
    );
    // Pro's share: 50,000 × 9.5 / 31 days = 15,322.58… → 15,323; 30,000 − 15,323 = 14,677 × 0.002 = 29.354 → 29; 200 × 0.25 = 50.
    expect(expected2).toEqual([
      { description: 'Tokens on Pro until 10 October 2026', quantity: '30000', includedUnits: 15_323, amountCents: 29 },
      { description: 'Requests on Pro until 10 October 2026', quantity: '200', includedUnits: 0, amountCents: 50 },
    ]);
    expect(usageLines(renewal2)).toEqual(expected2);
    expect(sum(renewal2)).toBe(renewal2.amountCents);

    // Period 3: Plain has no meters and no change: no usage read, the fee alone (as before any of this).
    const renewal3 = await renewAt(subscriptionId, 3, '2026-12-01T00:00:00.000Z');
    expect(renewal3.lines.map((l: { kind: string }) => l.kind)).toEqual(['PRICE']);
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
  });

  it('two upgrades in one period make three parts; a preview older than the second change is refused (409, nothing charged)', async () => {
    const { subscriptionId, externalId } = await subscribe('basic', '2027-01-01T00:00:00.000Z');
    await use(externalId, '2027-01-03T00:00:00Z', { tokens: 20_000, requests: 5 });
    ctx.clock.set('2027-01-06T00:00:00.000Z');
    const older = (await api('post', `/v1/subscriptions/${subscriptionId}/change/preview`).send({ priceId: prices.plain })).body.data;
    await changeAt(subscriptionId, '2027-01-06T00:03:00.000Z', { priceId: prices.pro });
    await use(externalId, '2027-01-10T00:00:00Z', { tokens: 100_000, requests: 7 });
    // Pro → Plain with the preview made before the first change: its second lies in Basic's part.
    ctx.clock.set('2027-01-06T00:05:00.000Z');
    const ordersBefore = (await db()('orders').where({ subscription_id: subscriptionId })).length;
    const refused = await api('post', `/v1/subscriptions/${subscriptionId}/change`).send({ priceId: prices.plain, prorationDate: older.prorationDate });
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain('preview again');
    expect(await db()('orders').where({ subscription_id: subscriptionId })).toHaveLength(ordersBefore);
    expect((await db()('subscriptions').where({ id: subscriptionId }).first()).price_id).toBe(prices.pro);
    await changeAt(subscriptionId, '2027-01-16T00:00:00.000Z', { priceId: prices.plain });
    await use(externalId, '2027-01-20T00:00:00Z', { tokens: 5_000_000, requests: 999 });
    const renewal = await renewAt(subscriptionId, 1, '2027-02-01T01:00:00.000Z');
    const expected = expectedUsageLines(
      [
        { plan: 'basic', from: '2027-01-01T00:00:00.000Z', to: '2027-01-06T00:03:00.000Z', usage: { tokens: 20_000, requests: 5 } },
        { plan: 'pro', from: '2027-01-06T00:03:00.000Z', to: '2027-01-16T00:00:00.000Z', usage: { tokens: 100_000, requests: 7 } },
        { plan: 'plain', from: '2027-01-16T00:00:00.000Z', to: '2027-02-01T00:00:00.000Z', usage: { tokens: 5_000_000, requests: 999 } },
      ],
      '2027-01-01T00:00:00.000Z',
      '2027-02-01T00:00:00.000Z',
      day,
    );
    expect(usageLines(renewal)).toEqual(expected);
    expect(renewal.amountCents).toBe(5000 + expected.reduce((t, l) => t + l.amountCents, 0));
    expect(sum(renewal)).toBe(renewal.amountCents);
    expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
  });

  it('a cancel at once after a change bills both parts up to the cancel; prepaid credits of one meter are drawn once across its lines', async () => {
    const { subscriptionId, customerId, externalId } = await subscribe('basic', '2027-03-01T00:00:00.000Z');
    // A credit pack of 10,000 tokens, bought by the same buyer.
    const packProduct = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Token pack' })).id;
    const pack = await ctx.admin.post(`/v1/products/${packProduct}/prices`).send({ amount: 300, currency: 'USD', grantsUnits: { meterId: meters.tokens, units: 10_000 } });
    expect(pack.status, JSON.stringify(pack.body)).toBe(201);
    expect((await buy(ctx, `metered-change-${customers}@example.com`, pack.body.data.pricingId, ctx.orgA.apiKey)).customerId).toBe(customerId);
    await use(externalId, '2027-03-05T00:00:00Z', { tokens: 12_000 });
    await changeAt(subscriptionId, '2027-03-11T00:00:00.000Z', { priceId: prices.pro });
    await use(externalId, '2027-03-12T00:00:00Z', { tokens: 40_000 });
    ctx.clock.set('2027-03-21T00:00:00.000Z');
    const cancel = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(200);
    const row = await db()('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first();
    const order = (await api('get', `/v1/orders/${row.id}`)).body.data;
    // Basic's part [1, 11 March): 10,000 × 10/31 = 3,225.8 → 3,226 included; Pro's part counts to the period's end: 50,000 × 21/31 = 33,871.
    const lines = (order.lines as Array<Record<string, any>>).filter((l) => l.kind === 'USAGE');
    expect(lines.map((l) => [l.description, l.quantity, l.usage.includedUnits])).toEqual([
      ['Tokens on Basic until 11 March 2027', '12000', 3226],
      ['Requests on Basic until 11 March 2027', '0', 0],
      ['Tokens on Pro from 11 March 2027', '40000', 33_871],
      ['Requests on Pro from 11 March 2027', '0', 0],
    ]);
    // Wanted 12,000 − 3,226 = 8,774 then 40,000 − 33,871 = 6,129: one draw of 10,000, Basic's line first.
    expect(lines.map((l) => l.usage.creditedUnits)).toEqual([8774, 0, 1226, 0]);
    const draws = await db()('usage_credit_entries').where({ subscription_id: subscriptionId, kind: 'DRAW' });
    expect(draws.map((d: { units: number | string }) => Number(d.units))).toEqual([-10_000]);
    expect(lines.map((l) => l.amountCents)).toEqual([0, 0, usageCents(40_000n - 1226n, 33_871n, { model: 'PER_UNIT', unitAmountDecimal: '0.002' }), 0]);
    expect(sum(order)).toBe(order.amountCents);
  });

  it('after a change, the balances and the access check count each part against its prorated included units (the renewal’s rule), equal to the renewal’s lines', async () => {
    // Before: the current price's full included units for the whole period (50,000 here, 8,000 of them "left").
    const { subscriptionId, customerId, externalId } = await subscribe('basic', '2027-05-01T00:00:00.000Z');
    const packProduct = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Token pack' })).id;
    const pack = await ctx.admin.post(`/v1/products/${packProduct}/prices`).send({ amount: 300, currency: 'USD', grantsUnits: { meterId: meters.tokens, units: 10_000 } });
    expect(pack.status, JSON.stringify(pack.body)).toBe(201);
    expect((await buy(ctx, `metered-change-${customers}@example.com`, pack.body.data.pricingId, ctx.orgA.apiKey)).customerId).toBe(customerId);
    await use(externalId, '2027-05-05T00:00:00Z', { tokens: 12_000 });
    await changeAt(subscriptionId, '2027-05-11T00:00:00.000Z', { priceId: prices.pro });
    await use(externalId, '2027-05-12T00:00:00Z', { tokens: 30_000 });

    // The recomputation: each part's share (half up), each part's own overage, credits drawn once for both, in order.
    const period = secondsBetween('2027-05-01T00:00:00.000Z', '2027-06-01T00:00:00.000Z');
    const basicShare = Number(share(10_000, secondsBetween('2027-05-01T00:00:00.000Z', '2027-05-11T00:00:00.000Z'), period));
    const proShare = Number(share(50_000, secondsBetween('2027-05-11T00:00:00.000Z', '2027-06-01T00:00:00.000Z'), period));
    expect([basicShare, proShare]).toEqual([3226, 33_871]);
    const expectTokens = (used: { basic: number; pro: number }) => {
      const wanted = Math.max(0, used.basic - basicShare) + Math.max(0, used.pro - proShare);
      const pending = Math.min(10_000, wanted);
      const includedRemaining = Math.max(0, proShare - used.pro);
      return {
        consumedUnits: used.basic + used.pro,
        includedUnits: basicShare + proShare,
        includedRemaining,
        creditsPending: pending,
        creditsRemaining: 10_000 - pending,
        remainingUnits: includedRemaining + 10_000 - pending,
        overageUnits: wanted - pending,
      };
    };
    const balances = async () => {
      const res = await api('get', `/v1/customers/${externalId}/meter-balances`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return (res.body.data.balances as Array<Record<string, any>>).find((b) => b.meterId === meters.tokens)!;
    };
    const access = async () => {
      const res = await api('get', `/v1/entitlements/check?external_id=${externalId}&product_id=${products.pro}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data.entitled).toBe(true);
      return (res.body.data.meters as Array<Record<string, any>>).find((m) => m.meterId === meters.tokens)!;
    };
    ctx.clock.set('2027-05-20T00:00:00.000Z');
    const mid = expectTokens({ basic: 12_000, pro: 30_000 });
    // 12,000 − 3,226 = 8,774 from credits (1,226 left); Pro's 33,871 − 30,000 = 3,871 still included: 5,097 before overage.
    expect(mid).toMatchObject({ includedRemaining: 3871, creditsRemaining: 1226, remainingUnits: 5097, overageUnits: 0 });
    expect(await balances()).toMatchObject({ basis: 'SUBSCRIPTION', subscriptionId, ...mid });
    const { creditsPending: _p, includedRemaining: _i, ...shown } = mid;
    expect(await access()).toMatchObject({ basis: 'SUBSCRIPTION', ...shown });

    await use(externalId, '2027-05-25T00:00:00Z', { tokens: 10_000 });
    const late = expectTokens({ basic: 12_000, pro: 40_000 });
    expect(late).toMatchObject({ remainingUnits: 0, overageUnits: 4903 });
    expect(await balances()).toMatchObject(late);
    const { creditsPending: _p2, includedRemaining: _i2, ...shownLate } = late;
    expect(await access()).toMatchObject(shownLate);

    // The renewal bills exactly that: the token lines' included units add up to the balance's, their overage to its overage.
    const renewal = await renewAt(subscriptionId, 1, '2027-06-01T01:00:00.000Z');
    const tokenLines = (renewal.lines as Array<Record<string, any>>).filter((l) => l.kind === 'USAGE' && l.usage.meterId === meters.tokens);
    expect(tokenLines.map((l) => l.usage.includedUnits)).toEqual([basicShare, proShare]);
    expect(tokenLines.reduce((t, l) => t + l.usage.includedUnits, 0)).toBe(late.includedUnits);
    expect(tokenLines.reduce((t, l) => t + Number(l.usage.billableQuantity), 0)).toBe(late.overageUnits);
    expect(tokenLines.reduce((t, l) => t + l.usage.creditedUnits, 0)).toBe(late.creditsPending);
  });
  it('after a change, usage thresholds are percents of the period’s prorated included units, as the balances count them', async () => {
    // Before: percents of the current price's full included units (50,000 here: 19,000 tokens were 38 %, no alert).
    const priceWithThreshold = async (name: string, includedUnits: number, unitAmountDecimal: string, amount: number) => {
      const product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name })).id;
      const res = await ctx.admin.post(`/v1/products/${product}/prices`).send({
        amount,
        currency: 'USD',
        pricingType: 'SUBSCRIPTION',
        billingInterval: 'MONTH',
        meteredComponents: [{ meterId: meters.tokens, includedUnits, pricing: { model: 'PER_UNIT', unitAmountDecimal }, thresholds: [50] }],
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.data.pricingId as string;
    };
    const small = await priceWithThreshold('Small with alerts', 10_000, '0.004', 1000);
    const large = await priceWithThreshold('Large with alerts', 50_000, '0.002', 3000);
    ctx.clock.set('2027-07-01T00:00:00.000Z');
    const n = ++customers;
    const { customerId, orderId } = await buy(ctx, `metered-change-${n}@example.com`, small, ctx.orgA.apiKey);
    expect((await setExternalId(ctx, customerId, `mc_${n}`, ctx.orgA.apiKey)).status).toBe(200);
    const subscriptionId = (await db()('orders').where({ id: orderId }).first()).subscription_id as string;
    const alerts = async () =>
      (await db()('webhook_events').where({ type: 'meter.threshold_crossed' }).orderBy('seq'))
        .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>)
        .filter((p) => p.data?.subscriptionId === subscriptionId || p.subscriptionId === subscriptionId);

    await use(`mc_${n}`, '2027-07-02T00:00:00Z', { tokens: 1000 });
    await changeAt(subscriptionId, '2027-07-11T00:00:00.000Z', { priceId: large });
    // The recomputation: 10,000 × 10/31 days and 50,000 × 21/31, each half up: 3,226 + 33,871.
    const period = secondsBetween('2027-07-01T00:00:00.000Z', '2027-08-01T00:00:00.000Z');
    const included = Number(share(10_000, secondsBetween('2027-07-01T00:00:00.000Z', '2027-07-11T00:00:00.000Z'), period)) + Number(share(50_000, secondsBetween('2027-07-11T00:00:00.000Z', '2027-08-01T00:00:00.000Z'), period));
    expect(included).toBe(37_097);
    await use(`mc_${n}`, '2027-07-12T00:00:00Z', { tokens: 17_000 });
    expect(await alerts(), '18,000 of 37,097: below 50 %').toEqual([]);
    await use(`mc_${n}`, '2027-07-13T00:00:00Z', { tokens: 1000 });
    const sent = await alerts();
    expect(sent).toHaveLength(1);
    const data = (sent[0]!.data ?? sent[0]) as Record<string, any>;
    expect(data).toMatchObject({ subscriptionId, includedUnits: included, consumedUnits: 19_000, threshold: { percent: 50, units: included / 2 } });
    // The balance counts the same included units.
    const balance = (await api('get', `/v1/customers/mc_${n}/meter-balances`)).body.data.balances.find((b: { meterId: string }) => b.meterId === meters.tokens);
    expect(balance).toMatchObject({ includedUnits: included, consumedUnits: 19_000 });
  });
});
