/**
 * A usage-event meter's build chunk is bounded inside one customer (issue 38): it ends on an hour
 * of a customer, so it takes at most its event count plus one customer-hour. Before, a chunk ended
 * on a customer boundary: one customer with millions of events was one unbounded chunk (here: the
 * first chunk of 30 took all 200 events of the heavy customer, or 220 when the light one sorts
 * first). Ingest between chunks, into hours of the half-built customer on both sides of the
 * cursor, and a cursor of the old form (a plain customer id) still end in the rows a full rebuild
 * writes.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnexMeterRepository, parseEventBuildCursor, rebuildMeterRollup } from '../../src/usage/usage.repository.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, foldRollups, oneTimePrice, setExternalId } from './helpers.js';

let ctx: TestContext;
let db: Knex;
const customerIds: string[] = [];
let sent = 0;
const HOUR = 3_600_000;
const DAY_START = Date.parse('2026-11-21T00:00:00Z');

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
  const once = await oneTimePrice(ctx, ctx.orgA.orgId);
  for (const name of ['heavy', 'light']) {
    const { customerId } = await buy(ctx, `${name}@example.com`, once, ctx.orgA.apiKey);
    expect((await setExternalId(ctx, customerId, name, ctx.orgA.apiKey)).status).toBe(200);
    customerIds.push(customerId);
  }
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

/** `perHour` events of `externalId` in each of the hours `hours` (hour numbers of 2026-11-21), plus others' events of the name `other`. */
async function ingest(externalId: string, hours: number[], perHour: number): Promise<void> {
  const events = hours.flatMap((h) =>
    Array.from({ length: perHour }, (_, k) => {
      const i = sent++;
      return { id: `ev_${i}`, customer: { externalId }, name: 'llm', timestamp: new Date(DAY_START + h * HOUR + k * 1000).toISOString(), properties: { tokens: (i % 13) + 1 } };
    }),
  );
  events.push({ id: `other_${sent++}`, customer: { externalId }, name: 'other', timestamp: new Date(DAY_START).toISOString(), properties: { tokens: 1 } });
  const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data.accepted).toBe(events.length);
}

const rows = async (meterId: string) => {
  await foldRollups(ctx);
  const hours = await db('usage_meter_hours').where('meter_id', meterId).orderBy(['customer_id', 'hour']).select('customer_id', 'hour', 'events', 'total', 'maximum', 'last_ts', 'last_id', 'last_value');
  return JSON.parse(JSON.stringify(hours.map((r) => ({ ...r, events: Number(r.events), total: Number(r.total), maximum: Number(r.maximum), last_value: r.last_value === null ? null : Number(r.last_value) }))));
};
const rebuilt = async (meterId: string) => {
  let expected: unknown;
  await db
    .transaction(async (trx) => {
      await rebuildMeterRollup(trx, ctx.orgA.orgId, meterId);
      const hours = await trx('usage_meter_hours').where('meter_id', meterId).orderBy(['customer_id', 'hour']).select('customer_id', 'hour', 'events', 'total', 'maximum', 'last_ts', 'last_id', 'last_value');
      expected = JSON.parse(JSON.stringify(hours.map((r) => ({ ...r, events: Number(r.events), total: Number(r.total), maximum: Number(r.maximum), last_value: r.last_value === null ? null : Number(r.last_value) }))));
      throw new Error('rollback');
    })
    .catch((err: Error) => {
      if (err.message !== 'rollback') throw err;
    });
  return expected;
};
const builtEvents = async (meterId: string) => Number((await db('usage_meter_hours').where('meter_id', meterId).sum({ n: 'events' }))[0]!.n ?? 0);
const cursorOf = async (meterId: string) => (await db('meters').where('id', meterId).first('rollup_cursor')).rollup_cursor as string | null;

describe('usage-event meter build chunks', () => {
  it('a chunk ends inside a customer with many events, on an hour; ingest between chunks on both sides of the cursor; the built rollup equals the full rebuild', async () => {
    // 200 events of one customer over 10 hours (20 an hour), 20 of another.
    await ingest('heavy', [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 20);
    await ingest('light', [3], 20);
    const repository = new KnexMeterRepository(db);
    for (const aggregation of ['sum', 'last'] as const) {
      const created = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: `chunks ${aggregation}`, source: 'EVENTS', filter: { eventName: 'llm' }, aggregation, property: 'tokens' });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const meterId = created.body.data.id as string;
      await db('meters').where('id', meterId).update({ rollup_status: 'BUILDING', rollup_cursor: '' });
      await db('usage_meter_hours').where('meter_id', meterId).del();

      expect(await repository.buildChunk(ctx.orgA.orgId, meterId, 30)).toBe('chunk');
      // At most 30 events and the rest of the 30th's customer-hour (at most 23 here); before, the
      // chunk ran to the end of that customer (200 or 220 events).
      const cursor = await cursorOf(meterId);
      expect(cursor).toContain('|');
      const built = await builtEvents(meterId);
      expect(built).toBeGreaterThanOrEqual(30);
      expect(built).toBeLessThanOrEqual(30 + 23);
      if (aggregation === 'sum') {
        // Whichever customer comes first, the 30th event is in an hour of the heavy one: 40 events.
        expect(parseEventBuildCursor(cursor).customerId).toBe(customerIds[0]);
        expect(built).toBe(40);
      }

      // Ingest meanwhile into the first customer's built hours and unbuilt hours (and the other's).
      for (const externalId of ['heavy', 'light']) await ingest(externalId, [0, 1, 5, 11], 3);
      let chunks = 1;
      for (;;) {
        const step = await repository.buildChunk(ctx.orgA.orgId, meterId, 30);
        expect(step).not.toBe('none');
        chunks++;
        if (step === 'ready') break;
        // No chunk rewrites more than 30 events and one customer-hour (20 + 3 here).
        expect(chunks).toBeLessThan(20);
      }
      expect(chunks).toBeGreaterThan(5);
      expect(await cursorOf(meterId)).toBeNull();
      expect(await rows(meterId)).toEqual(await rebuilt(meterId));
    }
  });

  it('a cursor of the old form (the last customer whose rows were built) goes on after that customer', async () => {
    const created = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'old cursor', source: 'EVENTS', filter: { eventName: 'llm' }, aggregation: 'sum', property: 'tokens' });
    expect(created.status).toBe(201);
    const meterId = created.body.data.id as string;
    const first = [...customerIds].sort()[0]!;
    // The first customer's rows are complete (as the READY create wrote them), the rest to build.
    await db('usage_meter_hours').where('meter_id', meterId).whereNot('customer_id', first).del();
    await db('meters').where('id', meterId).update({ rollup_status: 'BUILDING', rollup_cursor: first });
    const repository = new KnexMeterRepository(db);
    while ((await repository.buildChunk(ctx.orgA.orgId, meterId, 1_000)) === 'chunk');
    expect(await rows(meterId)).toEqual(await rebuilt(meterId));
  });
});
