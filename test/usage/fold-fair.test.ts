/**
 * The `usage-meter-fold` job's pick of an organization (issue 38; migration 0395's queues): fair
 * and non-blocking. Each pass takes the next organization with queued deltas after the one its
 * worker folded last (round-robin by org id) whose fold lock is free (`pg_try_advisory_xact_lock`),
 * so a busy organization whose queue never empties cannot keep another organization's queue
 * waiting, and two workers fold two organizations at once instead of meeting on one.
 *
 * Both databases: two organizations, one whose queue is refilled faster than a pass folds it and
 * reused from the queue table's first slots (as after autovacuum, which the queues' own thresholds
 * trigger often): the other organization's queue is folded within two passes (before: not until the
 * busy organization's rows ahead of it in the table were gone — the pick was the first queued
 * row's organization, and the busy one's new rows took the first slots again). Quantities stay exact throughout.
 * PostgreSQL: a worker paused before its commit holds one organization while a second worker's
 * pass folds the other organization and returns (before: it picked the same organization and waited
 * on the first's rollup rows); then rounds of concurrent ingests into both organizations racing two
 * fold workers, exact against a recomputation after each round.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { KnexUsageEventRepository } from '../../src/usage/usage.repository.js';
import { createTestContext, type TestContext, type TestOrg } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { buy, foldRollups, oneTimePrice, setExternalId } from './helpers.js';

let ctx: TestContext;
let db: Knex;
const HOUR = 3_600_000;
const FROM = Date.parse('2026-11-01T00:00:00.000Z');
const NOW = '2026-11-28T12:00:00.000Z';
interface Org {
  org: TestOrg;
  externalId: string;
  count: string;
  sum: string;
}
let a: Org;
let b: Org;

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
  const setUp = async (org: TestOrg, name: string): Promise<Org> => {
    const once = await oneTimePrice(ctx, org.orgId);
    const { customerId } = await buy(ctx, `${name}@example.com`, once, org.apiKey);
    expect((await setExternalId(ctx, customerId, `ext_${name}`, org.apiKey)).status).toBe(200);
    const meter = async (body: object) => {
      const res = await ctx.merchant.post('/v1/meters').set('X-API-Key', org.apiKey).send({ source: 'EVENTS', filter: { eventName: 'call' }, ...body });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.data.id as string;
    };
    return { org, externalId: `ext_${name}`, count: await meter({ name: 'Calls', aggregation: 'count' }), sum: await meter({ name: 'Tokens', aggregation: 'sum', property: 'tokens' }) };
  };
  a = await setUp(ctx.orgA, 'busy');
  b = await setUp(ctx.orgB, 'quiet');
  ctx.clock.set(NOW);
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

const queuedOf = async (orgId: string) => {
  const [h, v] = await Promise.all([db('usage_meter_hour_deltas').where('org_id', orgId).count({ n: '*' }), db('usage_meter_hour_value_deltas').where('org_id', orgId).count({ n: '*' })]);
  return Number(h[0]!.n) + Number(v[0]!.n);
};

/** The tokens of every event accepted so far, per organization (both tests ingest into both). */
const accepted = new Map<string, number[]>();
const acceptedOf = (o: Org) => accepted.get(o.org.orgId) ?? accepted.set(o.org.orgId, []).get(o.org.orgId)!;

let sent = 0;
/** A batch of `n` events of `o`'s customer, each `tokens` 1..7, one per hour from `hour0`; returns the accepted events' tokens. */
async function ingest(o: Org, n: number, hour0: number, tag: string): Promise<number[]> {
  const events = Array.from({ length: n }, (_, i) => ({
    id: `${tag}_${++sent}`,
    customer: { externalId: o.externalId },
    name: 'call',
    timestamp: new Date(FROM + ((hour0 + i) % 600) * HOUR + 1000).toISOString(),
    properties: { tokens: (sent % 7) + 1 },
  }));
  const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', o.org.apiKey).send({ events });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return events.flatMap((e, k) => (res.body.data.results[k].status === 'ACCEPTED' ? [e.properties.tokens] : []));
}

/** The customer's totals over the whole range (rollup + queued deltas, one statement) against the accepted events. */
async function expectTotals(o: Org, tokens: number[], context: string): Promise<void> {
  const range = { customer: o.externalId, start: new Date(FROM).toISOString(), end: NOW };
  const count = await ctx.merchant.get(`/v1/meters/${o.count}/quantities`).query(range).set('X-API-Key', o.org.apiKey);
  const sum = await ctx.merchant.get(`/v1/meters/${o.sum}/quantities`).query(range).set('X-API-Key', o.org.apiKey);
  expect([count.body.data.total, sum.body.data.total], context).toEqual([tokens.length, tokens.reduce((s, t) => s + t, 0)]);
}

describe('the fold\'s pick of an organization', () => {
  it('folds a quiet organization\'s queue within two passes while a busy organization\'s queue is refilled faster than a pass folds it', async () => {
    const repository = new KnexUsageEventRepository(db);
    const busy = acceptedOf(a);
    const quiet = acceptedOf(b);
    // The busy organization queues first: its rows take the queue table's first slots.
    busy.push(...(await ingest(a, 10, 0, 'busy')));
    // 2 events × 2 meters: 4 rows, one pass's worth.
    quiet.push(...(await ingest(b, 2, 0, 'quiet')));
    expect(await queuedOf(b.org.orgId)).toBeGreaterThan(0);
    const PASSES = 8;
    let foldedAt: number | undefined;
    for (let pass = 1; pass <= PASSES; pass++) {
      // 4 rows a pass, 20 queued a pass (two meters × 10 hours): the busy queue never empties.
      await repository.foldRollupDeltas(4);
      // What autovacuum does to the churning queue (its thresholds are low, migration 0395): the
      // folded rows' slots are free again and the busy organization's next batch takes them first.
      await db.raw('VACUUM usage_meter_hour_deltas');
      busy.push(...(await ingest(a, 10, pass * 10, 'busy')));
      if (foldedAt === undefined && (await queuedOf(b.org.orgId)) === 0) foldedAt = pass;
      await expectTotals(a, busy, `busy, pass ${pass}`);
      await expectTotals(b, quiet, `quiet, pass ${pass}`);
    }
    expect(await queuedOf(a.org.orgId), 'the busy queue is never empty').toBeGreaterThan(0);
    expect(foldedAt, 'the pass that folded the quiet organization\'s queue (2 organizations queued: within 2 passes)').toBeDefined();
    expect(foldedAt!).toBeLessThanOrEqual(2);
    await foldRollups(ctx);
    expect(await queuedOf(a.org.orgId)).toBe(0);
    await expectTotals(a, busy, 'busy, folded');
    await expectTotals(b, quiet, 'quiet, folded');
  }, 300_000);
});

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('two fold workers and two organizations', 'postgresOnly'), () => {
  const ROUNDS = 10;
  let other: Database | undefined;
  afterAll(async () => {
    await other?.close();
  });

  it(`a worker folding one organization does not hold up a second worker, which folds the other organization; ${ROUNDS} rounds of ingests into both racing two workers stay exact`, async () => {
    other = await openDatabase({ databaseUrl: ctx.testDb.url! });
    const workers = [new KnexUsageEventRepository(db), new KnexUsageEventRepository(other.db)];
    await foldRollups(ctx);
    const remember = (o: Org, accepted: number[]) => acceptedOf(o).push(...accepted);
    // The same hour four times per organization: four queued rows on one rollup key each, so two
    // folds of one organization would meet on that key's rollup row.
    for (let i = 0; i < 4; i++) {
      remember(a, await ingest(a, 1, 700, 'held'));
      remember(b, await ingest(b, 1, 700, 'held'));
    }
    const before = { a: await queuedOf(a.org.orgId), b: await queuedOf(b.org.orgId) };
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let paused!: () => void;
    const isPaused = new Promise<void>((r) => (paused = r));
    // Worker 0 folds 2 rows of one organization and stops before its commit (its fold lock, the
    // queue rows and the rollup row held).
    const first = workers[0]!.foldRollupDeltas(2, async () => {
      paused();
      await released;
    });
    await isPaused;
    // A fresh worker starts its round at the first organization in id order (org ids are ASCII).
    const heldOrg = a.org.orgId < b.org.orgId ? 'a' : 'b';
    const otherOrg = heldOrg === 'a' ? 'b' : 'a';
    // Worker 1's pass meanwhile: it must return (before the fix it picked the same organization
    // and waited on worker 0's rollup row until worker 0 committed — here, never).
    const second = await Promise.race([workers[1]!.foldRollupDeltas(100), new Promise<'waited'>((r) => setTimeout(() => r('waited'), 10_000))]);
    release();
    await first;
    expect(second, 'the second worker\'s pass returned while the first held its organization').not.toBe('waited');
    expect(second).toBeGreaterThan(0);
    // It folded the other organization's queue, all of it; the held organization's rows are worker 0's 2 (committed now) and 2 left.
    expect(await queuedOf((otherOrg === 'a' ? a : b).org.orgId)).toBe(0);
    expect(await queuedOf((heldOrg === 'a' ? a : b).org.orgId)).toBe(before[heldOrg] - 2);
    for (const o of [a, b]) await expectTotals(o, acceptedOf(o), 'after the paused fold');

    let passes = 0;
    for (let round = 0; round < ROUNDS; round++) {
      let ingesting = true;
      const fold = async (w: number) => {
        while (ingesting) {
          if ((await workers[w]!.foldRollupDeltas(5 + w * 3)) > 0) passes++;
          await new Promise((r) => setTimeout(r, 1));
        }
      };
      const folds = [fold(0), fold(1)];
      const sends = Array.from({ length: 6 }, async (_, k) => {
        const o = k % 2 === 0 ? a : b;
        remember(o, await ingest(o, 12, round * 37 + k * 5, `r${round}`));
      });
      await Promise.all(sends);
      ingesting = false;
      await Promise.all(folds);
      for (const o of [a, b]) await expectTotals(o, acceptedOf(o), `round ${round}`);
    }
    expect(passes, 'fold passes that took rows while ingests ran').toBeGreaterThan(0);
    await foldRollups(ctx);
    for (const o of [a, b]) {
      expect(await queuedOf(o.org.orgId)).toBe(0);
      await expectTotals(o, acceptedOf(o), 'folded');
    }
  }, 300_000);
});
