/**
 * `meter.threshold_crossed` exactly once per threshold under concurrent ingest (issue 38 §6), on
 * PostgreSQL: in each round a new subscriber (10 calls included, thresholds 10/30/50/70/100 %)
 * sends 6 concurrent batches of 2 calls, each batch from its own pool, so several batches read a
 * consumption past the same thresholds; exactly one event per threshold is queued per round. The
 * claim is the primary-key insert into usage_balance_alerts in the event's transaction. With the
 * claim disabled (the check alone: each batch emitting what its read crossed, the claim's result
 * ignored) all 15 of 15 rounds failed, queueing 18 to 29 events instead of 5 (2026-12-06).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices, type Services } from '../../src/services.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { buy, setExternalId } from './helpers.js';

const url = process.env.TEST_DATABASE_URL;
const ROUNDS = 15;
const WORKERS = 6;
const THRESHOLDS = [10, 30, 50, 70, 100];

let ctx: TestContext;
const pools: Array<{ database: Database; services: Services }> = [];

beforeAll(async () => {
  if (!url) return;
  ctx = await createTestContext();
  for (let i = 0; i < WORKERS; i++) {
    const database = await openDatabase({ databaseUrl: ctx.testDb.url! });
    pools.push({ database, services: createServices({ db: database.db, clock: ctx.clock, secretBox: new SecretBox(randomBytes(32)), config: ctx.config }) });
  }
});
afterAll(async () => {
  for (const p of pools) await p.database.close();
  await ctx?.close();
});

describe.skipIf(!url)(skippedUnless('meter.threshold_crossed under concurrent ingest', 'postgresOnly'), () => {
  it(`is queued once per threshold in each of ${ROUNDS} rounds of ${WORKERS} concurrent batches`, async () => {
    const meter = await ctx.merchant
      .post('/v1/meters')
      .set('X-API-Key', ctx.orgA.apiKey)
      .send({ name: 'Calls', source: 'EVENTS', filter: { eventName: 'call' }, aggregation: 'count' });
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Calls plan' });
    const price = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
      amount: 1000,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'MONTH',
      meteredComponents: [{ meterId: meter.body.data.id, includedUnits: 10, thresholds: THRESHOLDS, pricing: { model: 'PER_UNIT', unitAmountDecimal: '1' } }],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const { customerId } = await buy(ctx, `trace${round}@example.com`, price.body.data.pricingId, ctx.orgA.apiKey);
      await setExternalId(ctx, customerId, `trace_${round}`, ctx.orgA.apiKey);
      const batches = pools.map((p, w) =>
        p.services.modules.usage.events.ingest(
          ctx.orgA.orgId,
          Array.from({ length: 2 }, (_, i) => ({ id: `t${round}-${w}-${i}`, customer: { externalId: `trace_${round}` }, name: 'call', timestamp: ctx.clock.now().toISOString(), properties: {} })),
        ),
      );
      const results = await Promise.all(batches);
      expect(results.reduce((n, r) => n + r.accepted, 0)).toBe(WORKERS * 2);
      const percents = (await ctx.testDb.database.db('webhook_events').where({ type: 'meter.threshold_crossed' }))
        .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>)
        .filter((p) => p.customer.customerId === customerId)
        .map((p) => p.threshold.percent as number)
        .sort((a, b) => a - b);
      if (JSON.stringify(percents) !== JSON.stringify(THRESHOLDS)) failures.push(`round ${round}: ${JSON.stringify(percents)}`);
    }
    expect(failures).toEqual([]);
  }, 600_000);
});
