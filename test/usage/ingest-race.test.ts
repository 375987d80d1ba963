/**
 * Concurrent retries of the same usage-event batch on PostgreSQL (issue 38 §8): however many
 * copies of a batch race, each event is stored once and reported ACCEPTED exactly once across the
 * answers (DUPLICATE in every other), in rounds. The meters' rollups (migration 0280) count each
 * event once: a meter made before the rounds, and one made in each round while its copies race
 * (its rebuild from the events and the ingest that adds to it exclude each other).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { buy, oneTimePrice, setExternalId } from './helpers.js';

const ROUNDS = 20;
const COPIES = 6;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('concurrent retries of one usage-event batch', 'postgresOnly'), () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
    const { customerId } = await buy(ctx, 'race@example.com', await oneTimePrice(ctx, ctx.orgA.orgId), ctx.orgA.apiKey);
    expect((await setExternalId(ctx, customerId, 'racer', ctx.orgA.apiKey)).status).toBe(200);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const createMeter = async (aggregation: 'count' | 'sum') => {
    const res = await ctx.merchant
      .post('/v1/meters')
      .set('X-API-Key', ctx.orgA.apiKey)
      .send({ name: 'race', source: 'EVENTS', filter: { eventName: 'race' }, aggregation, ...(aggregation === 'sum' ? { property: 'i' } : {}) });
    expect(res.status).toBe(201);
    return res.body.data.id as string;
  };
  // The whole hour of the events: read from the rollup.
  const quantity = async (meterId: string) =>
    (await ctx.merchant.get(`/v1/meters/${meterId}/quantities`).query({ start: '2026-11-22T08:00:00Z', end: '2026-11-22T09:00:00Z', customer: 'racer' }).set('X-API-Key', ctx.orgA.apiKey)).body.data.total as number;
  let counter: string;

  it(`stores each event once and accepts it in exactly one answer (${ROUNDS} rounds of ${COPIES} concurrent copies)`, async () => {
    counter = await createMeter('count');
    for (let round = 0; round < ROUNDS; round++) {
      const events = Array.from({ length: 50 }, (_, i) => ({ id: `race_${round}_${i}`, customer: { externalId: 'racer' }, name: 'race', timestamp: '2026-11-22T08:00:00.000Z', properties: { i } }));
      const [answers, racing] = await Promise.all([
        Promise.all(Array.from({ length: COPIES }, () => ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events }))),
        createMeter('sum'),
      ]);
      for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
      for (const e of events) {
        const statuses = answers.map((a) => a.body.data.results.find((r: { id: string }) => r.id === e.id).status);
        expect(statuses.filter((s) => s === 'ACCEPTED'), `round ${round} ${e.id}`).toHaveLength(1);
        expect(statuses.filter((s) => s === 'DUPLICATE')).toHaveLength(COPIES - 1);
      }
      const rows = await ctx.testDb.database.db('usage_events').where('org_id', ctx.orgA.orgId).andWhere('id', 'like', `race\\_${round}\\_%`).count<{ count: string }[]>('* as count');
      expect(Number(rows[0]!.count)).toBe(events.length);
      const stored = 50 * (round + 1);
      const sumOfI = (round + 1) * ((49 * 50) / 2);
      expect(await quantity(counter)).toBe(stored);
      expect(await quantity(racing), `round ${round}: the meter made during the race`).toBe(sumOfI);
    }
  }, 300_000);
});
