/**
 * The `usage-meter-fold` job's run (issue 38, round 26; docs/benchmarks.md): one pass per
 * organization with a queue, and "run again at once" only when a pass was full. Before, the job
 * ran its next pass as soon as the last one folded anything, so under a steady ingest each pass
 * merged a few batches and the rollup took one upsert per (meter, customer, hour) for every few
 * delta rows (fails before: a round of passes that were not full asked to run again).
 * - the policy, over a scripted repository: which passes a round takes and what it answers;
 * - both databases: two organizations' queues folded by one run, which answers false; a queue of
 *   more than FOLD_ROWS rows makes the run answer true, and the rollup holds every row.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/kernel/clock.js';
import { FOLD_ROWS, UsageEventService } from '../../src/usage/usage-events.service.js';
import type { FoldPass, UsageEventRepository } from '../../src/usage/usage.repository.js';
import { createTestContext, type TestContext } from '../harness/context.js';

function scripted(passes: FoldPass[]): { service: UsageEventService; taken: () => string[] } {
  const taken: string[] = [];
  const repository = {
    foldRollupPass: async () => {
      const pass = passes.shift() ?? { orgId: undefined, rows: 0, full: false };
      taken.push(`${pass.orgId ?? 'none'} ${pass.rows}${pass.full ? ' full' : ''}`);
      return pass;
    },
    vacuumRollupQueues: async () => {},
  } as unknown as UsageEventRepository;
  return { service: new UsageEventService(repository, undefined as never, systemClock), taken: () => taken };
}

describe('a fold round: one pass per organization with a queue; again at once only after a full pass', () => {
  it('folds each organization once and waits for the interval when no pass was full', async () => {
    const { service, taken } = scripted([
      { orgId: 'ORG_a', rows: 40, full: false },
      { orgId: 'ORG_b', rows: 7, full: false },
      { orgId: undefined, rows: 0, full: false },
      { orgId: 'ORG_a', rows: 3, full: false },
    ]);
    expect(await service.foldRound()).toBe(false);
    expect(taken()).toEqual(['ORG_a 40', 'ORG_b 7', 'none 0']);
  });

  it('stops when the pick comes back to an organization it folded, and runs again at once after a full pass', async () => {
    const { service, taken } = scripted([
      { orgId: 'ORG_a', rows: FOLD_ROWS, full: true },
      { orgId: 'ORG_b', rows: 5, full: false },
      { orgId: 'ORG_a', rows: 12, full: false },
      { orgId: 'ORG_b', rows: 1, full: false },
    ]);
    expect(await service.foldRound()).toBe(true);
    expect(taken()).toEqual([`ORG_a ${FOLD_ROWS} full`, 'ORG_b 5', 'ORG_a 12']);
  });

  it('an empty pass (another worker holds every queue) ends the round', async () => {
    const { service, taken } = scripted([{ orgId: 'ORG_a', rows: 0, full: false }, { orgId: 'ORG_b', rows: 9, full: false }]);
    expect(await service.foldRound()).toBe(false);
    expect(taken()).toEqual(['ORG_a 0']);
  });
});

describe('the usage-meter-fold job on the database', () => {
  let ctx: TestContext;
  let db: Knex;
  const meters = new Map<string, string>();
  beforeAll(async () => {
    ctx = await createTestContext();
    db = ctx.testDb.database.db;
    for (const org of [ctx.orgA, ctx.orgB]) {
      const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', org.apiKey).send({ name: 'Folded', source: 'EVENTS', filter: { eventName: 'fold-round' }, aggregation: 'sum', property: 'tokens' });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      meters.set(org.orgId, res.body.data.id as string);
    }
  }, 120_000);
  afterAll(async () => {
    await ctx?.close();
  });

  const job = () => ctx.services.modules.usage.jobs().find((j) => j.name === 'usage-meter-fold')!;
  const fill = (orgId: string, n: number) =>
    db.raw(
      `INSERT INTO usage_meter_hour_deltas (org_id, meter_id, customer_id, hour, events, total, maximum)
       SELECT ?, ?, 'CUS_round_' || (i % 40), timestamptz '2026-11-28T00:00:00Z' + (i % 24) * interval '1 hour', 1, i % 5, i % 5
       FROM generate_series(1, ?) i`,
      [orgId, meters.get(orgId)!, n],
    );
  const queued = async () => Number((await db.raw('SELECT count(*)::int AS n FROM usage_meter_hour_deltas')).rows[0].n);
  const rolled = async (orgId: string) =>
    (await db.raw('SELECT sum(events)::int AS events, sum(total)::int AS total FROM usage_meter_hours WHERE org_id = ? AND meter_id = ?', [orgId, meters.get(orgId)!])).rows[0] as { events: number; total: number };
  const totalOf = (n: number) => Array.from({ length: n }, (_, i) => (i + 1) % 5).reduce((a, b) => a + b, 0);

  it('one run folds both organizations\' queues and answers false (wait for the interval)', async () => {
    await fill(ctx.orgA.orgId, 300);
    await fill(ctx.orgB.orgId, 200);
    expect(await job().run()).toBe(false);
    expect(await queued()).toBe(0);
    expect(await rolled(ctx.orgA.orgId)).toEqual({ events: 300, total: totalOf(300) });
    expect(await rolled(ctx.orgB.orgId)).toEqual({ events: 200, total: totalOf(200) });
  });

  it('a queue longer than one pass makes the run answer true (run again at once); the rollup ends with every row', async () => {
    const before = await rolled(ctx.orgB.orgId);
    await fill(ctx.orgB.orgId, FOLD_ROWS + 25);
    expect(await job().run()).toBe(true);
    expect(await queued()).toBe(0); // the round came back to the organization once: its second pass took the rest
    expect(await job().run()).toBe(false);
    expect(await rolled(ctx.orgB.orgId)).toEqual({ events: before.events + FOLD_ROWS + 25, total: before.total + totalOf(FOLD_ROWS + 25) });
  }, 120_000);
});
