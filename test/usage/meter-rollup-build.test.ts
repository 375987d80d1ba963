/**
 * A usage-event meter's rollup built in the background (migration 0335): creating a meter or
 * changing its filter over many stored events no longer rebuilds the rollup inside the request
 * (over millions of events that answered 503). While `BUILDING` the quantities are read from the
 * raw events (exact); the `usage-meter-rollups` job builds a chunk of customers per transaction;
 * a chunk killed before its commit leaves nothing and the next run goes on from the cursor; ingest
 * during the build (before and after the cursor, duplicates too) and a refilter mid-build end in
 * the rows a full rebuild from the events writes. On PostgreSQL, rounds of concurrent ingest
 * racing the chunks.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnexMeterRepository, rebuildMeterRollup } from '../../src/usage/usage.repository.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { buy, foldRollups, oneTimePrice, setExternalId } from './helpers.js';

let ctx: TestContext;
let db: Knex;
const externalIds: string[] = [];
let sent = 0;

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
  const once = await oneTimePrice(ctx, ctx.orgA.orgId);
  for (let i = 0; i < 6; i++) {
    const { customerId } = await buy(ctx, `builder${i}@example.com`, once, ctx.orgA.apiKey);
    expect((await setExternalId(ctx, customerId, `b${i}`, ctx.orgA.apiKey)).status).toBe(200);
    externalIds.push(`b${i}`);
  }
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

/** `count` events of the name `llm` (tiers alternate, tokens vary), spread over customers and hours of 2026-11-21/22. */
async function ingest(count: number, repeat: string[] = []): Promise<string[]> {
  const events = Array.from({ length: count }, () => {
    const i = sent++;
    return {
      id: `ev_${i}`,
      customer: { externalId: externalIds[(i * 5) % externalIds.length]! },
      name: 'llm',
      timestamp: new Date(Date.parse('2026-11-21T00:00:00Z') + ((i * 7_919_000) % (32 * 3_600_000))).toISOString(),
      properties: { tokens: (i % 97) + 1, tier: i % 3 === 0 ? 'free' : 'paid' },
    };
  });
  const res = await ctx.merchant
    .post('/v1/usage-events')
    .set('X-API-Key', ctx.orgA.apiKey)
    .send({ events: [...events, ...repeat.map((id) => ({ id, customer: { externalId: externalIds[0]! }, name: 'llm', timestamp: '2026-11-21T05:00:00Z', properties: { tokens: 1000 } }))] });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return events.map((e) => e.id);
}

/** The rollup's rows once ingest's queued deltas are folded in (migration 0395). */
const rows = async (meterId: string) => {
  await foldRollups(ctx);
  const hours = await db('usage_meter_hours').where('meter_id', meterId).orderBy(['customer_id', 'hour']).select('customer_id', 'hour', 'events', 'total', 'maximum', 'last_ts', 'last_id', 'last_value');
  const values = await db('usage_meter_hour_values').where('meter_id', meterId).orderBy(['customer_id', 'hour', 'value']).select('customer_id', 'hour', 'value');
  return JSON.parse(JSON.stringify({ hours: hours.map((r) => ({ ...r, total: Number(r.total), maximum: Number(r.maximum), last_value: Number(r.last_value) })), values }));
};
/** The rows a full rebuild from the stored events writes (in a transaction rolled back). */
const rebuilt = async (meterId: string) => {
  let expected: unknown;
  await db
    .transaction(async (trx) => {
      await rebuildMeterRollup(trx, ctx.orgA.orgId, meterId);
      const hours = await trx('usage_meter_hours').where('meter_id', meterId).orderBy(['customer_id', 'hour']).select('customer_id', 'hour', 'events', 'total', 'maximum', 'last_ts', 'last_id', 'last_value');
      const values = await trx('usage_meter_hour_values').where('meter_id', meterId).orderBy(['customer_id', 'hour', 'value']).select('customer_id', 'hour', 'value');
      expected = JSON.parse(JSON.stringify({ hours: hours.map((r) => ({ ...r, total: Number(r.total), maximum: Number(r.maximum), last_value: Number(r.last_value) })), values }));
      throw new Error('rollback');
    })
    .catch((err: Error) => {
      if (err.message !== 'rollback') throw err;
    });
  return expected;
};
/** What a create or a filter change leaves before its first chunk: BUILDING from the first customer. */
const startBuild = (meterId: string) => db('meters').where('id', meterId).update({ rollup_status: 'BUILDING', rollup_cursor: '' });
const quantity = async (meterId: string, customer: string) => {
  const res = await ctx.merchant
    .get(`/v1/meters/${meterId}/quantities`)
    .query({ customer, start: '2026-11-21T00:30:00Z', end: '2026-11-22T07:30:00Z' })
    .set('X-API-Key', ctx.orgA.apiKey);
  expect(res.status).toBe(200);
  return res.body.data.total as number;
};
const createMeter = async (aggregation: 'sum' | 'unique' | 'last' = 'sum', filter: object = { eventName: 'llm' }) => {
  const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: `build ${aggregation}`, source: 'EVENTS', filter, aggregation, property: 'tokens' });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as { id: string; rollupStatus: string };
};

describe('background rollup builds', () => {
  it('a meter over few events is READY from its create; BUILDING ones answer exact quantities from the events; the job makes them READY with the full rebuild\'s rows', async () => {
    await ingest(120);
    const meter = await createMeter('sum', { eventName: 'llm', properties: { tier: 'paid' } });
    expect(meter.rollupStatus).toBe('READY');
    const ready = Object.fromEntries(await Promise.all(externalIds.map(async (c) => [c, await quantity(meter.id, c)])));
    expect(await rows(meter.id)).toEqual(await rebuilt(meter.id));

    await startBuild(meter.id);
    await db('usage_meter_hours').where('meter_id', meter.id).del(); // nothing built yet: the reads must not use the rollup
    expect((await ctx.merchant.get(`/v1/meters/${meter.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.rollupStatus).toBe('BUILDING');
    for (const c of externalIds) expect(await quantity(meter.id, c)).toBe(ready[c]);

    const job = ctx.services.modules.usage.jobs().find((j) => j.name === 'usage-meter-rollups')!;
    expect(await job.run()).toBe(true);
    expect(await job.run()).toBe(false);
    expect((await ctx.merchant.get(`/v1/meters/${meter.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.rollupStatus).toBe('READY');
    expect(await rows(meter.id)).toEqual(await rebuilt(meter.id));
    for (const c of externalIds) expect(await quantity(meter.id, c)).toBe(ready[c]);
  });

  it('a chunk killed before its commit leaves nothing; the next run goes on from the cursor; ingest and a refilter during the build end in the full rebuild\'s rows', async () => {
    const repository = new KnexMeterRepository(db);
    for (const aggregation of ['sum', 'unique', 'last'] as const) {
      const meter = await createMeter(aggregation);
      await startBuild(meter.id);
      // Stale rows the build must replace (as a changed filter leaves them).
      await db('usage_meter_hours').where('meter_id', meter.id).update({ events: 999, total: 999 });
      expect(await repository.buildChunk(ctx.orgA.orgId, meter.id, 30)).toBe('chunk');
      const cursor = (await db('meters').where('id', meter.id).first('rollup_cursor')).rollup_cursor as string;
      expect(cursor).not.toBe('');
      // Killed mid-way: the chunk's deletes and inserts and the cursor's move roll back together.
      const before = await rows(meter.id);
      await expect(repository.buildChunk(ctx.orgA.orgId, meter.id, 30, async () => {
        throw new Error('killed');
      })).rejects.toThrow('killed');
      expect(await rows(meter.id)).toEqual(before);
      expect((await db('meters').where('id', meter.id).first('rollup_cursor')).rollup_cursor).toBe(cursor);
      // Ingest meanwhile (customers before and after the cursor, and a duplicate of a stored id).
      await ingest(40, ['ev_3']);
      let steps = 0;
      for (;;) {
        const step = await repository.buildChunk(ctx.orgA.orgId, meter.id, 30);
        expect(step).not.toBe('none');
        if (step === 'ready') break;
        if (++steps === 1 && aggregation === 'sum') {
          // A refilter mid-build starts over (the request builds its first chunk, the job the rest).
          const changed = await ctx.merchant.patch(`/v1/meters/${meter.id}`).set('X-API-Key', ctx.orgA.apiKey).send({ filter: { eventName: 'llm', properties: { tier: 'free' } } });
          expect(changed.status).toBe(200);
          expect((await db('meters').where('id', meter.id).first('rollup_status')).rollup_status).toBe(changed.body.data.rollupStatus);
          if (changed.body.data.rollupStatus === 'READY') break;
          await ingest(10);
        }
      }
      expect((await db('meters').where('id', meter.id).first('rollup_status', 'rollup_cursor'))).toEqual({ rollup_status: 'READY', rollup_cursor: null });
      expect(await rows(meter.id)).toEqual(await rebuilt(meter.id));
    }
  });

  it('an archived meter stops building (read from the events)', async () => {
    const meter = await createMeter();
    await startBuild(meter.id);
    const archived = await ctx.merchant.post(`/v1/meters/${meter.id}/archive`).set('X-API-Key', ctx.orgA.apiKey);
    expect(archived.body.data).toMatchObject({ status: 'ARCHIVED', rollupStatus: 'READY' });
    expect(await new KnexMeterRepository(db).buildChunk(ctx.orgA.orgId, meter.id, 30)).toBe('none');
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('ingest racing a rollup build', 'postgresOnly'), () => {
  it('rounds of concurrent ingest batches racing the build\'s chunks: the built rollup equals the full rebuild', async () => {
    const meter = await createMeter('sum');
    const repository = new KnexMeterRepository(db);
    for (let round = 0; round < 15; round++) {
      await startBuild(meter.id);
      const build = (async () => {
        for (let i = 0; i < 100; i++) if ((await repository.buildChunk(ctx.orgA.orgId, meter.id, 25)) !== 'chunk') return;
      })();
      await Promise.all([build, ...Array.from({ length: 4 }, () => ingest(30, [`ev_${round}`]))]);
      expect(await repository.buildChunk(ctx.orgA.orgId, meter.id, 25)).toBe('none');
      expect(await rows(meter.id), `round ${round}`).toEqual(await rebuilt(meter.id));
    }
  }, 240_000);
});
