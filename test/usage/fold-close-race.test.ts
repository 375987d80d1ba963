/**
 * Usage ingest racing the rollup's fold (migration 0395) racing the close of a metered period on
 * PostgreSQL (issue 38 §8): as test/usage/ingest-close-race.test.ts, with two fold workers (one on
 * each connection pool, and one pass killed before its commit each round) folding the ingests'
 * rollup deltas while the renewal job closes the period and reads its quantity. Every event
 * answered ACCEPTED is billed in the period's order exactly once (the USAGE line's quantity equals
 * the number accepted), every PERIOD_CLOSED one in none — whether the close read it as a queued
 * delta or as a folded rollup row (the meter sums a property of 1 per event). PGlite has one
 * connection: PostgreSQL only.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices, type Services } from '../../src/services.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { KnexUsageEventRepository } from '../../src/usage/usage.repository.js';
import { buy, setExternalId } from './helpers.js';

const ROUNDS = 25;
const BATCHES = 8;
const PER_BATCH = 5;
const DAY = 24 * 3600 * 1000;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('usage ingest racing the fold and the close of a metered period', 'postgresOnly'), () => {
  let ctx: TestContext;
  let db: Database;
  let foldDb: Database | undefined;
  let worker: Services;
  let priceId: string;
  let meterId: string;
  beforeAll(async () => {
    ctx = await createTestContext();
    db = await openDatabase({ databaseUrl: ctx.testDb.url! });
    worker = createServices({ db: db.db, clock: ctx.clock, secretBox: new SecretBox(randomBytes(32)), config: ctx.config });
    const meter = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Calls', source: 'EVENTS', filter: { eventName: 'call' }, aggregation: 'sum', property: 'n' });
    expect(meter.status).toBe(201);
    meterId = meter.body.data.id;
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Daily' });
    const price = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
      amount: 100,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'DAY',
      meteredComponents: [{ meterId, pricing: { model: 'PER_UNIT', unitAmountDecimal: '1' } }],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    priceId = price.body.data.pricingId;
  });
  afterAll(async () => {
    await foldDb?.close();
    await db?.close();
    await ctx?.close();
  });

  it(`bills every accepted event once and no refused one (${ROUNDS} rounds, ${BATCHES} racing batches, two folds and a killed one)`, async () => {
    const failures: string[] = [];
    // The folds on a pool of their own (a third process's): they must not starve the close's or ingest's connections.
    foldDb = await openDatabase({ databaseUrl: ctx.testDb.url! });
    const folds = [new KnexUsageEventRepository(foldDb.db), new KnexUsageEventRepository(foldDb.db)];
    let kills = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.parse('2028-01-01T00:00:00.000Z') + round * 3 * DAY;
      ctx.clock.set(new Date(start).toISOString());
      const { customerId, orderId } = await buy(ctx, `close${round}@example.com`, priceId, ctx.orgA.apiKey);
      await setExternalId(ctx, customerId, `close_${round}`, ctx.orgA.apiKey);
      const subscriptionId = (await ctx.testDb.database.db('orders').where({ id: orderId }).first()).subscription_id as string;
      // The close time: the period's end + the grace window.
      ctx.clock.set(new Date(start + DAY + 3600_000).toISOString());
      const at = new Date(start + 3600_000).toISOString();
      const send = async (b: number) => {
        // Spread over the close's few milliseconds.
        await new Promise((r) => setTimeout(r, b * 3));
        const events = Array.from({ length: PER_BATCH }, (_, i) => ({ id: `cl_${round}_${b}_${i}`, customer: { externalId: `close_${round}` }, name: 'call', timestamp: at, properties: { n: 1 } }));
        const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return res.body.data.results as Array<{ id: string; status: string; reason: { code: string } | null }>;
      };
      let racing = true;
      const fold = async (w: number) => {
        while (racing) {
          await folds[w]!.foldRollupDeltas(3 + w * 4);
          await new Promise((r) => setTimeout(r, 2));
        }
      };
      // One pass killed before its commit, as soon as it finds deltas (a pass that finds no organization to fold — an empty queue, or one another worker is folding — returns before the crash point).
      const killed = (async () => {
        while (racing) {
          const crashed = await folds[1]!.foldRollupDeltas(100, async () => {
            throw new Error('killed');
          }).then(() => false, () => true);
          if (crashed) return kills++;
          await new Promise((r) => setTimeout(r, 1));
        }
      })();
      const folding = [fold(0), fold(1), killed];
      const [handled, ...answers] = await Promise.all([
        (async () => {
          // The close starts at a different point of the ingests in each round.
          await new Promise((r) => setTimeout(r, (round % 10) * 2));
          let n = 0;
          // The close waits for the ingests holding the row (one pass renews it).
          n += await worker.subscriptions.processDue();
          return n;
        })(),
        ...Array.from({ length: BATCHES }, (_, b) => send(b)),
      ]);
      racing = false;
      await Promise.all(folding);
      const results = answers.flat();
      const accepted = results.filter((r) => r.status === 'ACCEPTED').length;
      const closed = results.filter((r) => r.reason?.code === 'PERIOD_CLOSED').length;
      expect(accepted + closed, `round ${round}: every event accepted or PERIOD_CLOSED`).toBe(BATCHES * PER_BATCH);
      expect(handled, `round ${round}`).toBe(1);
      const orders = await ctx.testDb.database.db('orders').where({ subscription_id: subscriptionId }).andWhere('billing_period', '>=', 1);
      expect(orders, `round ${round}`).toHaveLength(1);
      const line = await ctx.testDb.database.db('order_lines').where({ order_id: orders[0].id, kind: 'USAGE' }).first();
      const billed = Number(line.quantity);
      if (billed !== accepted) failures.push(`round ${round}: ${accepted} accepted, ${closed} PERIOD_CLOSED, ${billed} billed`);
      // Out of the way of the next round.
      expect((await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false })).status).toBe(200);
    }
    expect(failures, `${failures.length} of ${ROUNDS} rounds`).toEqual([]);
    expect(kills, 'killed folds (a pass that found deltas)').toBeGreaterThan(0);
  }, 600_000);
});
