/**
 * Usage events in weekly time partitions (issue 40 item 6, migration 0380), both databases:
 * - exactly once through usage_event_ids: a retry is DUPLICATE whatever its timestamp, partitions
 *   are made on demand for the batch's weeks;
 * - the online migration of an install with events (5,000 over ten weeks, some ahead of the
 *   boundary, 100 more written by "the previous version" while the ids are copied): every event and
 *   id kept, the old table attached as the MINVALUE partition, quantities unchanged, old ids
 *   DUPLICATE afterwards;
 * - retention (USAGE_EVENT_RETENTION_DAYS): refused before the cutoff, whole weeks dropped with
 *   their ids, the default partition's old rows deleted with theirs (a day behind the cutoff),
 *   whole-hour quantities kept by the rollups.
 * The concurrent-retry guarantee is test/usage/ingest-race.test.ts (PostgreSQL).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { down as unpartition, partitionUsageEvents } from '../../src/db/migrations/0380_usage_event_partitions.js';
import { listPartitions } from '../../src/db/partitions.js';
import type { Job } from '../../src/kernel/job.js';
import { buy, oneTimePrice, setExternalId } from './helpers.js';

const rowsOf = async (ctx: TestContext, sql: string, bindings: unknown[] = []) => (await ctx.testDb.database.db.raw(sql, bindings as never)).rows as Array<Record<string, unknown>>;
const send = (ctx: TestContext, events: unknown[]) => ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events });
const statuses = (res: { body: { data: { results: Array<{ status: string }> } } }) => res.body.data.results.map((r) => r.status);
const partitionNames = async (ctx: TestContext) => (await listPartitions(ctx.testDb.database.db, 'usage_events')).map((p) => p.name);
const job = (ctx: TestContext, name: string): Job => {
  const found = ctx.services.modules.usage.jobs().find((j) => j.name === name);
  if (!found) throw new Error(`no job ${name}`);
  return found;
};

async function customer(ctx: TestContext, externalId: string): Promise<string> {
  const { customerId } = await buy(ctx, `${externalId}@example.com`, await oneTimePrice(ctx, ctx.orgA.orgId), ctx.orgA.apiKey);
  expect((await setExternalId(ctx, customerId, externalId, ctx.orgA.apiKey)).status).toBe(200);
  return customerId;
}

async function meter(ctx: TestContext): Promise<string> {
  const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'tokens', source: 'EVENTS', filter: { eventName: 'llm' }, aggregation: 'sum', property: 'tokens' });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

const quantity = async (ctx: TestContext, meterId: string, start: string, end: string) =>
  (await ctx.merchant.get(`/v1/meters/${meterId}/quantities`).query({ start, end }).set('X-API-Key', ctx.orgA.apiKey)).body.data.total as number;

describe('usage events in partitions: ingest', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
    await customer(ctx, 'ana');
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('is partitioned by week, ids deduplicated by their own table, partitions made on demand', async () => {
    expect((await rowsOf(ctx, `SELECT relkind FROM pg_class WHERE relname = 'usage_events'`))[0]!.relkind).toBe('p');
    expect(await partitionNames(ctx)).toContain('usage_events_default');
    const e = { id: 'p1', customer: { externalId: 'ana' }, name: 'llm', timestamp: '2026-11-03T10:00:00.000Z', properties: { tokens: 5 } };
    expect(statuses(await send(ctx, [e]))).toEqual(['ACCEPTED']);
    expect(await partitionNames(ctx)).toContain('usage_events_p20261102');
    // The same id with another timestamp (another week) is the same event.
    expect(statuses(await send(ctx, [e, { ...e, timestamp: '2026-11-20T10:00:00.000Z' }]))).toEqual(['DUPLICATE', 'DUPLICATE']);
    expect(await rowsOf(ctx, `SELECT id, ts FROM usage_events WHERE org_id = ?`, [ctx.orgA.orgId])).toEqual([{ id: 'p1', ts: new Date('2026-11-03T10:00:00.000Z') }]);
    expect(await rowsOf(ctx, `SELECT id, ts FROM usage_event_ids WHERE org_id = ?`, [ctx.orgA.orgId])).toEqual([{ id: 'p1', ts: new Date('2026-11-03T10:00:00.000Z') }]);
    expect(Number((await rowsOf(ctx, `SELECT count(*) AS n FROM ONLY usage_events_p20261102`))[0]!.n)).toBe(1);
  });

  it('the partition job creates this week and the next two', async () => {
    ctx.clock.set('2027-02-10T12:00:00.000Z');
    await job(ctx, 'usage-event-partitions').run();
    expect(await partitionNames(ctx)).toEqual(expect.arrayContaining(['usage_events_p20270208', 'usage_events_p20270215', 'usage_events_p20270222']));
    ctx.clock.set('2026-11-22T09:00:00.000Z');
  });
});

describe('usage events in partitions: the online migration of an install with events', () => {
  let ctx: TestContext;
  let cus: string;
  let meterId: string;
  const NOW = new Date('2026-11-22T09:00:00.000Z'); // week of Mon 2026-11-16: the legacy bound is 2026-11-23
  beforeAll(async () => {
    ctx = await createTestContext();
    cus = await customer(ctx, 'bo');
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('keeps every event and id, attaches the old table, and deduplicates old ids afterwards', async () => {
    const db = ctx.testDb.database.db;
    await unpartition(db);
    expect((await rowsOf(ctx, `SELECT relkind FROM pg_class WHERE relname = 'usage_events'`))[0]!.relkind).toBe('r');
    // 5,000 events from 2026-09-20 to 2026-12-04 (some ahead of the bound, a few beyond the weeks made).
    await db.raw(
      `INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at)
       SELECT ?, 'old_' || i, ?, 'llm', timestamptz '2026-09-20T00:00:00Z' + (i * interval '1317 seconds'), jsonb_build_object('tokens', i % 7 + 1), now()
       FROM generate_series(0, 4999) i`,
      [ctx.orgA.orgId, cus],
    );
    const range = { start: '2026-09-20T00:30:00.000Z', end: '2026-12-04T23:30:00.000Z' };
    const expected = Number((await rowsOf(ctx, `SELECT sum((properties->>'tokens')::int) AS s FROM usage_events WHERE ts >= ? AND ts < ?`, [range.start, range.end]))[0]!.s);
    meterId = await meter(ctx); // its rollup is built from the events above
    expect(await quantity(ctx, meterId, range.start, range.end)).toBe(expected);
    await partitionUsageEvents(db, NOW, {
      backfillChunk: 700,
      // The previous version's ingest, while the ids are being copied.
      afterTrigger: async () => {
        await db.raw(
          `INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at)
           SELECT ?, 'during_' || i, ?, 'llm', timestamptz '2026-11-22T08:00:00Z' + i * interval '1 second', '{"tokens": 1}', now()
           FROM generate_series(0, 99) i ON CONFLICT (org_id, id) DO NOTHING`,
          [ctx.orgA.orgId, cus],
        );
      },
    });
    expect((await rowsOf(ctx, `SELECT relkind FROM pg_class WHERE relname = 'usage_events'`))[0]!.relkind).toBe('p');
    expect(Number((await rowsOf(ctx, `SELECT count(*) AS n FROM usage_events`))[0]!.n)).toBe(5100);
    // Every event has its id with its timestamp, and nothing else is there.
    expect(Number((await rowsOf(ctx, `SELECT count(*) AS n FROM usage_event_ids`))[0]!.n)).toBe(5100);
    expect(Number((await rowsOf(ctx, `SELECT count(*) AS n FROM usage_events e JOIN usage_event_ids i USING (org_id, id, ts)`))[0]!.n)).toBe(5100);
    const partitions = await listPartitions(db, 'usage_events');
    expect(partitions[0]).toMatchObject({ name: 'usage_events_legacy', from: null, to: new Date('2026-11-23T00:00:00.000Z') });
    expect(partitions.map((p) => p.name)).toEqual(['usage_events_legacy', 'usage_events_p20261123', 'usage_events_p20261130', 'usage_events_default']);
    expect((await rowsOf(ctx, `SELECT max(ts) AS m FROM ONLY usage_events_legacy`))[0]!.m).toEqual(expect.any(Date));
    expect(new Date((await rowsOf(ctx, `SELECT max(ts) AS m FROM ONLY usage_events_legacy`))[0]!.m as Date).getTime()).toBeLessThan(Date.parse('2026-11-23T00:00:00Z'));
    expect(Number((await rowsOf(ctx, `SELECT count(*) AS n FROM ONLY usage_events_default`))[0]!.n)).toBe(0);
    // Nothing of the migration's scaffolding is left.
    expect(await rowsOf(ctx, `SELECT tgname FROM pg_trigger WHERE tgname = 'usage_events_record_ids'`)).toEqual([]);
    expect(await rowsOf(ctx, `SELECT to_regclass('usage_events_held') AS t`)).toEqual([{ t: null }]);
    // The same quantity, and the index is the parent's.
    expect(await quantity(ctx, meterId, range.start, range.end)).toBe(expected);
    expect(Number((await rowsOf(ctx, `SELECT count(*) AS n FROM pg_inherits WHERE inhrelid = 'usage_events_legacy_customer_name_ts'::regclass AND inhparent = 'usage_events_customer_name_ts'::regclass`))[0]!.n)).toBe(1);
    // Ingest after: ids of before and during the migration are duplicates, a new one is stored.
    const at = '2026-11-22T08:30:00.000Z';
    const res = await send(ctx, [
      { id: 'old_4000', customer: { externalId: 'bo' }, name: 'llm', timestamp: at, properties: { tokens: 1 } },
      { id: 'during_7', customer: { externalId: 'bo' }, name: 'llm', timestamp: at, properties: { tokens: 1 } },
      { id: 'new_1', customer: { externalId: 'bo' }, name: 'llm', timestamp: at, properties: { tokens: 1 } },
    ]);
    expect(statuses(res)).toEqual(['DUPLICATE', 'DUPLICATE', 'ACCEPTED']);
    expect(Number((await rowsOf(ctx, `SELECT count(*) AS n FROM usage_events`))[0]!.n)).toBe(5101);
  });
});

describe('usage events in partitions: retention', () => {
  let ctx: TestContext;
  let meterId: string;
  beforeAll(async () => {
    ctx = await createTestContext({ env: { USAGE_EVENT_RETENTION_DAYS: '63' } });
    await customer(ctx, 'cy');
    meterId = await meter(ctx);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('drops whole weeks past the cutoff, refuses events before it, prunes ids a day behind it, and keeps whole-hour quantities', async () => {
    const db = ctx.testDb.database.db;
    const ev = (id: string, timestamp: string) => ({ id, customer: { externalId: 'cy' }, name: 'llm', timestamp, properties: { tokens: 10 } });
    // Clock 2026-11-22: November is the current period of a customer without subscription.
    expect(statuses(await send(ctx, [ev('a', '2026-11-02T10:00:00.000Z'), ev('b', '2026-11-10T10:00:00.000Z'), ev('c', '2026-11-20T10:00:00.000Z')]))).toEqual(['ACCEPTED', 'ACCEPTED', 'ACCEPTED']);
    // A row far out of the on-demand window lands in the default partition.
    await db.raw(`INSERT INTO usage_event_ids (org_id, id, ts) VALUES (?, 'ancient', '2020-01-01T00:00:00Z')`, [ctx.orgA.orgId]);
    await db.raw(`INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at) SELECT org_id, 'ancient', customer_id, name, '2020-01-01T00:00:00Z', properties, received_at FROM usage_events WHERE id = 'a'`);
    expect(Number((await rowsOf(ctx, `SELECT count(*) AS n FROM ONLY usage_events_default`))[0]!.n)).toBe(1);
    const month = ['2026-11-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z'] as const;
    expect(await quantity(ctx, meterId, ...month)).toBe(30);

    // 63 days before 2027-01-14: the cutoff is 2026-11-12T00:00Z; the job works up to 2026-11-11.
    ctx.clock.set('2027-01-14T12:00:00.000Z');
    await job(ctx, 'usage-event-retention').run();
    const names = await partitionNames(ctx);
    expect(names).not.toContain('usage_events_p20261026'); // 'a': its week ended 2026-11-02
    expect(names).toContain('usage_events_p20261109'); // 'b': its week ends after the cutoff
    expect((await rowsOf(ctx, `SELECT id FROM usage_events ORDER BY ts`)).map((r) => r.id)).toEqual(['b', 'c']);
    // The ids go with their events: 'ancient' (the default partition's row) and 'a' (its week dropped).
    expect((await rowsOf(ctx, `SELECT id FROM usage_event_ids ORDER BY ts`)).map((r) => r.id)).toEqual(['b', 'c']);
    // Whole hours come from the meter's rollup, which outlives the events.
    expect(await quantity(ctx, meterId, ...month)).toBe(30);

    const res = await send(ctx, [ev('c', '2026-11-20T10:00:00.000Z'), ev('a', '2026-11-02T10:00:00.000Z'), ev('d', '2026-11-05T10:00:00.000Z')]);
    // 'c' was stored in time: a duplicate. 'a' and 'd' are before the cutoff: refused, never stored twice.
    expect(statuses(res)).toEqual(['DUPLICATE', 'REJECTED', 'REJECTED']);
    expect(res.body.data.results[2].reason).toMatchObject({ code: 'PERIOD_CLOSED', message: expect.stringContaining('keeps usage events for 63 days') });
    expect((await rowsOf(ctx, `SELECT id FROM usage_events ORDER BY ts`)).map((r) => r.id)).toEqual(['b', 'c']);
  });
});
