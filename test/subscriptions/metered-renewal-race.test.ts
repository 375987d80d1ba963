/**
 * The close of a metered period with concurrent renewal workers on PostgreSQL (issue 38 §7, §8):
 * separate connection pools, as separate worker processes would have, race on the same due
 * metered subscription; in every round exactly one renewal order exists for the period, with the
 * fee and one USAGE line per component, one order.paid, and the subscription moved on once.
 * PGlite has a single connection, so this runs only when TEST_DATABASE_URL is set.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices, type Services } from '../../src/services.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { buy, setExternalId } from '../usage/helpers.js';

const ROUNDS = 20;
const WORKERS = 4;
const DAY = 24 * 3600 * 1000;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('concurrent renewal workers closing a metered period', 'postgresOnly'), () => {
  let ctx: TestContext;
  const databases: Database[] = [];
  const workers: Services[] = [];
  let priceId: string;
  const meterIds: string[] = [];
  beforeAll(async () => {
    ctx = await createTestContext();
    for (let i = 1; i < WORKERS; i++) {
      const db = await openDatabase({ databaseUrl: ctx.testDb.url! });
      databases.push(db);
      workers.push(createServices({ db: db.db, clock: ctx.clock, secretBox: new SecretBox(randomBytes(32)), config: ctx.config }));
    }
    for (const body of [
      { name: 'Tokens', source: 'EVENTS', filter: { eventName: 'tok' }, aggregation: 'sum', property: 'n' },
      { name: 'Calls', source: 'EVENTS', filter: { eventName: 'call' }, aggregation: 'count' },
    ]) {
      const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send(body);
      expect(res.status).toBe(201);
      meterIds.push(res.body.data.id);
    }
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Daily' });
    const price = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
      amount: 100,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'DAY',
      meteredComponents: [
        { meterId: meterIds[0], includedUnits: 5, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.5' } },
        { meterId: meterIds[1], pricing: { model: 'GRADUATED', tiers: [{ upTo: 2, unitAmountDecimal: '10' }, { upTo: null, unitAmountDecimal: '1' }] } },
      ],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    priceId = price.body.data.pricingId;
  });
  afterAll(async () => {
    for (const db of databases) await db.close();
    await ctx?.close();
  });

  it(`writes exactly one order with one USAGE line per component (${ROUNDS} rounds, ${WORKERS} workers)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.parse('2027-01-01T00:00:00.000Z') + round * 3 * DAY;
      ctx.clock.set(new Date(start).toISOString());
      const { customerId, orderId } = await buy(ctx, `race${round}@example.com`, priceId, ctx.orgA.apiKey);
      await setExternalId(ctx, customerId, `race_${round}`, ctx.orgA.apiKey);
      const subscriptionId = (await ctx.testDb.database.db('orders').where({ id: orderId }).first()).subscription_id as string;
      ctx.clock.set(new Date(start + DAY / 2).toISOString());
      const customer = { externalId: `race_${round}` };
      const at = new Date(start + 3600_000).toISOString();
      const events = [
        ...Array.from({ length: 3 }, (_, i) => ({ id: `t_${round}_${i}`, customer, name: 'tok', timestamp: at, properties: { n: 4 + round } })),
        ...Array.from({ length: round % 5 }, (_, i) => ({ id: `c_${round}_${i}`, customer, name: 'call', timestamp: at, properties: {} })),
      ];
      const ingested = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
      expect(ingested.body.data.accepted).toBe(events.length);

      ctx.clock.set(new Date(start + DAY + 3600_000).toISOString());
      const handled = await Promise.all([ctx.services, ...workers].map((w) => w.subscriptions.processDue()));
      expect(handled.reduce((a, b) => a + b, 0), `round ${round}`).toBe(1);

      const orders = await ctx.testDb.database.db('orders').where({ subscription_id: subscriptionId, billing_period: 1 });
      expect(orders, `round ${round}`).toHaveLength(1);
      const lines = await ctx.testDb.database.db('order_lines').where({ order_id: orders[0].id }).orderBy('position');
      expect(lines.map((l: { kind: string; meter_id: string | null }) => [l.kind, l.meter_id])).toEqual([['PRICE', null], ['USAGE', meterIds[0]], ['USAGE', meterIds[1]]]);
      const tokens = 3 * (4 + round);
      const calls = round % 5;
      // Half up of (tokens − 5) × 0.5: the only fraction is .5.
      const expected = 100 + Math.ceil(Math.max(0, tokens - 5) / 2) + Math.min(calls, 2) * 10 + Math.max(0, calls - 2);
      expect(Number(orders[0].amount_cents), `round ${round}`).toBe(expected);
      expect(lines.reduce((sum: number, l: { amount_cents: string | number }) => sum + Number(l.amount_cents), 0)).toBe(expected);
      const paid = (await ctx.testDb.database.db('webhook_events').where({ type: 'order.paid' })).filter((e: { payload: unknown }) => JSON.stringify(e.payload).includes(orders[0].id));
      expect(paid, `round ${round}`).toHaveLength(1);
      const s = await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first();
      expect(s.period_number).toBe(1);
      // Out of the way of the next round.
      expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
    }
  }, 600_000);

  it('a pass with 4 lanes on each of 4 workers closes 12 due metered periods once each (5 rounds)', async () => {
    for (let round = 0; round < 5; round++) {
      const start = Date.parse('2028-01-01T00:00:00.000Z') + round * 3 * DAY;
      ctx.clock.set(new Date(start).toISOString());
      const subscriptionIds: string[] = [];
      for (let i = 0; i < 12; i++) {
        const { customerId, orderId } = await buy(ctx, `lanes${round}_${i}@example.com`, priceId, ctx.orgA.apiKey);
        await setExternalId(ctx, customerId, `lanes_${round}_${i}`, ctx.orgA.apiKey);
        subscriptionIds.push((await ctx.testDb.database.db('orders').where({ id: orderId }).first()).subscription_id as string);
      }
      ctx.clock.set(new Date(start + DAY / 2).toISOString());
      const events = subscriptionIds.map((_, i) => ({ id: `lanes_t_${round}_${i}`, customer: { externalId: `lanes_${round}_${i}` }, name: 'tok', timestamp: new Date(start + 3600_000).toISOString(), properties: { n: 5 + i } }));
      expect((await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events })).body.data.accepted).toBe(12);

      ctx.clock.set(new Date(start + DAY + 3600_000).toISOString());
      const handled = await Promise.all([ctx.services, ...workers].map((w) => w.subscriptions.processDue(100, 4)));
      expect(handled.reduce((a, b) => a + b, 0), `round ${round}`).toBe(12);
      for (const [i, subscriptionId] of subscriptionIds.entries()) {
        const orders = await ctx.testDb.database.db('orders').where({ subscription_id: subscriptionId, billing_period: 1 });
        expect(orders, `round ${round}, subscription ${i}`).toHaveLength(1);
        // 5 + i tokens, 5 included, 0.5 each, half up; no calls.
        expect(Number(orders[0].amount_cents), `round ${round}, subscription ${i}`).toBe(100 + Math.ceil(i / 2));
        expect((await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first()).period_number).toBe(1);
        expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
      }
    }
  }, 600_000);
});
