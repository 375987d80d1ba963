/**
 * `meter.credits_exhausted` exactly once under concurrent ingest (issue 38 §6), on PostgreSQL:
 * in each round a customer holding 10 credits of a prepaid meter sends 6 concurrent batches of 4
 * events, each batch from its own pool, so several of them see the credits used up; one event
 * is queued per round. The claim is a primary-key insert in the event's transaction
 * (usage_balance_alerts): without it (the check alone, measured with the claim disabled) every
 * one of the 15 rounds failed, queueing 4 to 6 events instead of 1.
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

describe.skipIf(!url)(skippedUnless('meter.credits_exhausted under concurrent ingest', 'postgresOnly'), () => {
  it(`is queued once per crossing in each of ${ROUNDS} rounds of ${WORKERS} concurrent batches`, async () => {
    const meter = await ctx.merchant
      .post('/v1/meters')
      .set('X-API-Key', ctx.orgA.apiKey)
      .send({ name: 'Calls', source: 'EVENTS', filter: { eventName: 'call' }, aggregation: 'count' });
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Call credits' });
    const pack = await ctx.services.catalog.createPrice(product.id, { amount: 100, currency: 'USD', grantsUnits: { meterId: meter.body.data.id, units: 10 } });
    for (let round = 0; round < ROUNDS; round++) {
      const { customerId } = await buy(ctx, `race${round}@example.com`, pack.id, ctx.orgA.apiKey);
      await setExternalId(ctx, customerId, `race_${round}`, ctx.orgA.apiKey);
      const batches = pools.map((p, w) =>
        p.services.modules.usage.events.ingest(
          ctx.orgA.orgId,
          Array.from({ length: 4 }, (_, i) => ({ id: `r${round}-${w}-${i}`, customer: { externalId: `race_${round}` }, name: 'call', timestamp: ctx.clock.now().toISOString(), properties: {} })),
        ),
      );
      const results = await Promise.all(batches);
      expect(results.reduce((n, r) => n + r.accepted, 0)).toBe(WORKERS * 4);
      const events = (await ctx.testDb.database.db('webhook_events').where({ type: 'meter.credits_exhausted' }))
        .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any>)
        .filter((p) => p.customer.customerId === customerId);
      expect(events, `round ${round}`).toHaveLength(1);
    }
  }, 300_000);
});
