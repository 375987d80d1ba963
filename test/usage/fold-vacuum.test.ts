/**
 * The fold vacuums its queues (issue 38, round 22; docs/benchmarks.md). The delta queues are
 * append-and-delete tables and a fold pass finds its rows by a scan from the table's start, so
 * every row deleted since the last VACUUM lay in the next pass's path, and the heap grew instead of
 * reusing their space — autovacuum comes at most once a minute per database (here: not at all,
 * it is off on the shared test server), and at 30,000 events/s the fold deletes ~60,000 rows a
 * second. The worker that deleted them now runs `VACUUM` of the queues after every
 * QUEUE_VACUUM_ROWS it folded.
 * - the service: a VACUUM after each QUEUE_VACUUM_ROWS folded rows, none before (fails before:
 *   no pass vacuumed);
 * - both databases: after a fold and the vacuum, a refill of the queue reuses the freed pages (the
 *   heap does not grow), and the quantities are the events'.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/kernel/clock.js';
import { UsageEventService } from '../../src/usage/usage-events.service.js';
import { KnexUsageEventRepository, type UsageEventRepository } from '../../src/usage/usage.repository.js';
import { createTestContext, type TestContext } from '../harness/context.js';

describe('the fold worker vacuums the queues after every QUEUE_VACUUM_ROWS rows it folded', () => {
  it('vacuums once the rows folded since the last vacuum reach the bound, then counts again', async () => {
    const calls: string[] = [];
    const passes = [40, 40, 40, 0, 40, 40, 40];
    const repository = {
      foldRollupPass: async () => {
        const rows = passes.shift() ?? 0;
        calls.push(`fold ${rows}`);
        return { orgId: 'ORG_a', rows, full: false };
      },
      vacuumRollupQueues: async () => {
        calls.push('vacuum');
      },
    } as unknown as UsageEventRepository;
    const service = new UsageEventService(repository, undefined as never, systemClock, undefined, undefined, 100);
    for (let i = 0; i < 7; i++) await service.foldRollups();
    expect(calls).toEqual(['fold 40', 'fold 40', 'fold 40', 'vacuum', 'fold 0', 'fold 40', 'fold 40', 'fold 40', 'vacuum']);
  });
});

describe('a vacuumed queue is refilled in the pages its folded rows freed', () => {
  let ctx: TestContext;
  let db: Knex;
  let meterId: string;
  beforeAll(async () => {
    ctx = await createTestContext();
    db = ctx.testDb.database.db;
    const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Vacuumed', source: 'EVENTS', filter: { eventName: 'vacuum' }, aggregation: 'sum', property: 'tokens' });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    meterId = res.body.data.id as string;
  }, 120_000);
  afterAll(async () => {
    await ctx?.close();
  });

  const fill = (n: number) =>
    db.raw(
      `INSERT INTO usage_meter_hour_deltas (org_id, meter_id, customer_id, hour, events, total, maximum)
       SELECT ?, ?, 'CUS_vacuum_' || (i % 50), timestamptz '2026-11-28T00:00:00Z' + (i % 24) * interval '1 hour', 1, i % 7, i % 7
       FROM generate_series(1, ?) i`,
      [ctx.orgA.orgId, meterId, n],
    );
  const heapPages = async () => Number((await db.raw("SELECT pg_relation_size('usage_meter_hour_deltas') / 8192 AS pages")).rows[0].pages);

  it('folds, vacuums, refills: the heap keeps its size and the rollup has every row', async () => {
    const repository = new KnexUsageEventRepository(db);
    await fill(3000);
    const full = await heapPages();
    expect(full).toBeGreaterThan(10);
    let folded = 0;
    for (let rows = 1; rows > 0; ) folded += rows = await repository.foldRollupDeltas(1000);
    expect(folded).toBe(3000);
    await repository.vacuumRollupQueues();
    await fill(3000);
    // The refill went into the freed pages (without the vacuum the heap doubled: 2 × full).
    expect(await heapPages()).toBeLessThanOrEqual(full + 1);
    for (let rows = 1; rows > 0; ) rows = await repository.foldRollupDeltas(1000);
    const { rows } = await db.raw("SELECT sum(events)::int AS events, sum(total)::int AS total FROM usage_meter_hours WHERE org_id = ? AND meter_id = ?", [ctx.orgA.orgId, meterId]);
    const expectedTotal = 2 * Array.from({ length: 3000 }, (_, i) => (i + 1) % 7).reduce((a, b) => a + b, 0);
    expect(rows[0]).toEqual({ events: 6000, total: expectedTotal });
  });
});
