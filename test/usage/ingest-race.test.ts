/**
 * Concurrent retries of the same usage-event batch on PostgreSQL (issue 38 §8): however many
 * copies of a batch race, each event is stored once and reported ACCEPTED exactly once across the
 * answers (DUPLICATE in every other), in rounds.
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

  it(`stores each event once and accepts it in exactly one answer (${ROUNDS} rounds of ${COPIES} concurrent copies)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const events = Array.from({ length: 50 }, (_, i) => ({ id: `race_${round}_${i}`, customer: { externalId: 'racer' }, name: 'race', timestamp: '2026-11-22T08:00:00.000Z', properties: { i } }));
      const answers = await Promise.all(
        Array.from({ length: COPIES }, () => ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events })),
      );
      for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
      for (const e of events) {
        const statuses = answers.map((a) => a.body.data.results.find((r: { id: string }) => r.id === e.id).status);
        expect(statuses.filter((s) => s === 'ACCEPTED'), `round ${round} ${e.id}`).toHaveLength(1);
        expect(statuses.filter((s) => s === 'DUPLICATE')).toHaveLength(COPIES - 1);
      }
      const rows = await ctx.testDb.database.db('usage_events').where('org_id', ctx.orgA.orgId).andWhere('id', 'like', `race\\_${round}\\_%`).count<{ count: string }[]>('* as count');
      expect(Number(rows[0]!.count)).toBe(events.length);
    }
  }, 300_000);
});
