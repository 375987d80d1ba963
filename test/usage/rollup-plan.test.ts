/**
 * Meter rollups (migration 0280): a customer's quantity over a period reads the meter's hour rows
 * by their key, and the raw events only for the partial hours at the edges, by the
 * (org, customer, name, ts) index — EXPLAIN on PostgreSQL, for every aggregation and with buckets.
 * The range splitting is checked on both databases.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { CUSTOMER_QUANTITY_SQL, KnexUsageEventRepository, splitRange, type EventQuantityQuery } from '../../src/usage/usage.repository.js';
import { buy, oneTimePrice } from './helpers.js';

const HOUR = 3_600_000;

describe('splitRange', () => {
  it('reads whole hours from the rollup and the partial hours around them from the events', () => {
    const h = Date.parse('2026-11-01T00:00:00Z');
    expect(splitRange(h, h + 3 * HOUR)).toEqual({ hours: [h, h + 3 * HOUR], edges: [] });
    expect(splitRange(h + 1, h + 3 * HOUR - 1)).toEqual({ hours: [h + HOUR, h + 2 * HOUR], edges: [[h + 1, h + HOUR], [h + 2 * HOUR, h + 3 * HOUR - 1]] });
    expect(splitRange(h + 1, h + HOUR + 5)).toEqual({ hours: null, edges: [[h + 1, h + HOUR + 5]] });
    expect(splitRange(h, h + HOUR - 1)).toEqual({ hours: null, edges: [[h, h + HOUR - 1]] });
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('query plans of meter quantities', 'postgresOnly'), () => {
  let ctx: TestContext;
  let db: Knex;
  let customerId: string;
  beforeAll(async () => {
    ctx = await createTestContext();
    db = ctx.testDb.database.db;
    customerId = (await buy(ctx, 'plan@example.com', await oneTimePrice(ctx, ctx.orgA.orgId), ctx.orgA.apiKey)).customerId;
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const plan = async (run: () => Promise<unknown>) => {
    const captured: Array<{ sql: string; bindings: unknown[] }> = [];
    const listener = (q: { sql: string; bindings?: unknown[] }) => captured.push({ sql: q.sql, bindings: q.bindings ?? [] });
    db.on('query', listener);
    try {
      await run();
    } finally {
      db.off('query', listener);
    }
    expect(captured).toHaveLength(1);
    return db.transaction(async (trx) => {
      // The test's few rows would be read by a sequential scan; the question is whether an index can serve.
      await trx.raw('SET LOCAL enable_seqscan = off');
      const { rows } = await trx.raw(`EXPLAIN ${captured[0]!.sql.replace(/\$\d+/g, '?')}`, captured[0]!.bindings as Knex.RawBinding[]);
      return (rows as Array<{ 'QUERY PLAN': string }>).map((l) => l['QUERY PLAN']).join('\n');
    });
  };

  for (const aggregation of ['count', 'sum', 'max', 'last', 'unique'] as const) {
    it(`${aggregation}: a period cut mid-hour reads the hour rows by key and the edge events by the customer index`, async () => {
      const meter = await ctx.services.modules.usage.meters.create(ctx.orgA.orgId, {
        name: aggregation,
        source: 'EVENTS',
        filter: { eventName: 'llm', properties: { tier: 'paid' } },
        aggregation,
        ...(aggregation === 'count' ? {} : { property: 'tokens' }),
      });
      const query: EventQuantityQuery = {
        orgId: ctx.orgA.orgId,
        customerId,
        eventName: 'llm',
        properties: { tier: 'paid' },
        aggregation,
        property: meter.property,
        start: new Date('2026-10-03T10:23:45.000Z'),
        end: new Date('2026-11-03T10:23:45.000Z'),
        meterId: meter.id,
      };
      const repository = new KnexUsageEventRepository(db);
      for (const text of [await plan(() => repository.quantity(query)), await plan(() => repository.bucketQuantities(query, 'day'))]) {
        expect(text).toContain(aggregation === 'unique' ? 'usage_meter_hour_values_pkey' : 'usage_meter_hours_pkey');
        // The weekly partitions' copies of usage_events_customer_name_ts (migration 0380), pruned to the edges' weeks.
        expect(text).toMatch(/usage_events_\w+_org_id_customer_id_name_ts_idx|usage_events_customer_name_ts/);
        expect(text).not.toMatch(/Seq Scan/);
      }
    });
  }

  /**
   * The one-statement customer read (CUSTOMER_QUANTITY_SQL: the quantity request, the balances and
   * the metered access check), prepared as runStatement runs it and planned generically (what a
   * prepared statement comes to after five executions): every range is an index range on all the
   * key's columns, never a filter over the meter's or the customer's other rows — what kept the
   * read flat from 1M to 10M events (docs/benchmarks.md). Before the scalar subqueries, the hour
   * values' scan of a `unique` meter kept customer_id out of its Index Cond.
   */
  const generic = async (meterId: string, ref: string) =>
    db.transaction(async (trx) => {
      await trx.raw('SET LOCAL enable_seqscan = off');
      await trx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
      await trx.raw(`PREPARE customer_quantity_plan AS ${CUSTOMER_QUANTITY_SQL}`);
      try {
        const values = [ctx.orgA.orgId, meterId, ref, '2026-10-03T10:23:45.000Z', '2026-11-03T10:23:45.000Z', '2026-10-03T11:00:00.000Z', '2026-11-03T10:00:00.000Z'];
        // The span branches' bounds in epoch ms ($8–$11: the same instants as $6, $7, $4, $5).
        values.push(...[values[5]!, values[6]!, values[3]!, values[4]!].map((v) => String(Date.parse(v))));
        const { rows } = await trx.raw(`EXPLAIN EXECUTE customer_quantity_plan(${values.map((v) => `'${v}'`).join(', ')})`);
        return (rows as Array<{ 'QUERY PLAN': string }>).map((l) => l['QUERY PLAN']).join('\n');
      } finally {
        await trx.raw('DEALLOCATE customer_quantity_plan');
      }
    });

  for (const aggregation of ['sum', 'unique'] as const) {
    it(`${aggregation}: the customer read (meter, customer, quantity in one prepared statement) reads every range by its full index key`, async () => {
      const meter = await ctx.services.modules.usage.meters.create(ctx.orgA.orgId, {
        name: `one statement ${aggregation}`,
        source: 'EVENTS',
        filter: { eventName: 'llm' },
        aggregation,
        property: 'tokens',
      });
      const text = await generic(meter.id, customerId);
      const conds = text.split('\n').filter((l) => l.includes('Index Cond'));
      const hours = aggregation === 'unique' ? 'usage_meter_hour_values_pkey' : 'usage_meter_hours_pkey';
      expect(text).toContain(hours);
      expect(text).toMatch(/usage_events_\w+_org_id_customer_id_name_ts_idx|usage_events_customer_name_ts/);
      expect(text).not.toMatch(/Seq Scan/);
      // The rollup: org, meter, customer and the hour range are all index conditions.
      expect(conds.some((l) => /meter_id = \$2\) AND \(customer_id = \$\d+\) AND \(hour >= \$6\) AND \(hour < \$7\)/.test(l)), text).toBe(true);
      // The events: org, customer, name and the ts range, for the edges and the read without rollup.
      const events = conds.filter((l) => /customer_id = \$\d+\) AND \(name = \$\d+\)/.test(l));
      // Three ranges, each over every weekly partition (migration 0380; a generic plan prunes at run time).
      expect(events.length, text).toBeGreaterThanOrEqual(3);
      expect(events.length % 3, text).toBe(0);
      for (const l of events) expect(l, text).toMatch(/\(ts >= .*\) AND \(ts < /);
      // The customer: by its id, else its externalId (unique per organization), each an index condition.
      expect(conds.some((l) => /\(id = \$3\)/.test(l)), text).toBe(true);
      expect(conds.some((l) => /\(org_id = \$1\) AND \(external_id = \$3\)/.test(l)), text).toBe(true);
      const repository = new KnexUsageEventRepository(db);
      const read = await repository.customerQuantity(ctx.orgA.orgId, meter.id, customerId, new Date('2026-10-03T10:23:45.000Z'), new Date('2026-11-03T10:23:45.000Z'));
      expect(read.customer?.id).toBe(customerId);
      expect(read.meter?.id).toBe(meter.id);
    });
  }
});
