/**
 * The commerce metrics from rollups (migration 0260, issue 40): random orders, refunds, disputes,
 * status changes, deletions, checkout sessions, subscriptions (started, ended, re-priced, even an
 * end recorded before the start) and customers, written through SQL (the triggers see every
 * writer), with the queue folded in random chunks between writes: the figures read from rollups
 * plus the queue equal a recomputation from the tables at every step, for whole-, half- and
 * quarter-hour zones, every interval and a currency filter. The backfill (down then up) equals the
 * same. On PostgreSQL, the reads' plans use the rollups' keys and never the commerce tables.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Knex } from 'knex';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { CommerceMetricsService } from '../../src/commerce-metrics/commerce-metrics.service.js';
import { primaryReads } from '../../src/kernel/lag-tolerant-reads.js';
import { KnexCommerceMetricsRepository, RecomputedCommerceMetricsRepository, type MetricsRange } from '../../src/commerce-metrics/commerce-metrics.repository.js';
import { KnexCommerceRollupRepository } from '../../src/commerce-metrics/rollups.repository.js';
import * as m0260 from '../../src/db/migrations/0260_commerce_rollups.js';

let ctx: TestContext;
let db: Knex;
let rollups: CommerceMetricsService;
let recomputed: CommerceMetricsService;
let queue: KnexCommerceRollupRepository;
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
  rollups = new CommerceMetricsService(primaryReads(new KnexCommerceMetricsRepository(db)));
  recomputed = new CommerceMetricsService(primaryReads(new RecomputedCommerceMetricsRepository(db)));
  queue = new KnexCommerceRollupRepository(db);
});
afterAll(async () => {
  await ctx?.close();
});

const DAY = 86_400_000;
const T0 = Date.parse('2025-01-01T00:00:00Z');
const ZONES = ['UTC', 'Europe/Paris', 'America/New_York', 'Asia/Kolkata', 'Asia/Kathmandu', 'America/St_Johns', 'Pacific/Chatham', 'Australia/Lord_Howe'];
let seq = 0;
const id = (prefix: string) => `${prefix}_${String(++seq).padStart(24, '0')}`;

function mulberry32(seed: number) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One round of writes: new rows, then refunds, disputes, status changes, ends, re-pricing and deletions of earlier ones. */
async function write(orgId: string, rng: () => number) {
  const pick = <T,>(list: readonly T[]): T => list[Math.floor(rng() * list.length)]!;
  // Instants over 14 months: at and a millisecond before the local midnights of the zones (Kolkata
  // 18:30 UTC, Kathmandu 18:15, St John's 03:30 or 02:30, Chatham 11:15 or 10:15, Paris 23:00 or
  // 22:00), a quarter hour off them, and anywhere.
  const MIDNIGHTS = [18 * 60 + 30, 18 * 60 + 15, 3 * 60 + 30, 2 * 60 + 30, 11 * 60 + 15, 10 * 60 + 15, 23 * 60, 22 * 60, 0].map((m) => m * 60_000);
  const at = () => {
    const inDay = rng() < 0.2 ? Math.floor(rng() * DAY) : pick(MIDNIGHTS) + pick([0, 0, -1, 15 * 60_000, -15 * 60_000]);
    return new Date(T0 + Math.floor(rng() * 420) * DAY + inDay);
  };
  const currencies = ['USD', 'EUR', 'USDC'] as const;
  for (let i = 0; i < 6; i++) {
    const customerId = id('CUS');
    const email = `buyer${seq}@example.com`;
    await db('customers').insert({ id: customerId, org_id: orgId, email, created_at: at() });
    const orders: object[] = [];
    const sessions: object[] = [];
    for (let j = 0; j < 4; j++) {
      const currency = pick(currencies);
      const amount = 1 + Math.floor(rng() * 100_000);
      const status = pick(['PAID', 'PAID', 'REFUNDED', 'FAILED', 'PENDING'] as const);
      const created = at();
      const sessionId = id('CS');
      sessions.push({
        id: sessionId, org_id: orgId, status: pick(['CREATED', 'COMPLETE', 'EXPIRED'] as const), provider: 'STRIPE', amount, currency, quantity: 1,
        pricing: JSON.stringify({ amount, currency }), product: JSON.stringify({ name: 'Thing' }), page_token: id('tok'),
        expires_at: created, created_at: created, updated_at: created,
      });
      orders.push({
        id: id('ORD'), org_id: orgId, status, provider: 'STRIPE', amount_cents: amount, amount_refunded_cents: status === 'REFUNDED' ? amount : 0, currency,
        customer_id: customerId, customer_email: email, checkout_session_id: sessionId, created_at: created, updated_at: created,
      });
    }
    await db('checkout_sessions').insert(sessions);
    await db('orders').insert(orders);
    if (rng() < 0.7) {
      const [a, b] = [at(), at()].sort((x, y) => x.getTime() - y.getTime()) as [Date, Date];
      await db('subscriptions').insert({
        id: id('SUB'), org_id: orgId, status: 'ACTIVE', provider: 'STRIPE', customer_id: customerId, customer_email: email,
        product_name: 'Plan', amount_cents: 1 + Math.floor(rng() * 50_000), currency: pick(currencies), billing_interval: pick(['DAY', 'MONTH', 'YEAR'] as const),
        billing_interval_count: pick([1, 2, 12]), current_period_start: a, current_period_end: b, billing_anchor: a,
        next_action_at: b, initial_order_id: id('ORD'), latest_order_id: id('ORD'), checkout_session_id: id('CS'),
        payment_method: 'pm', manage_token: id('mt'), created_at: a, updated_at: a, ended_at: rng() < 0.3 ? b : null,
      });
    }
  }
  const some = async (table: string, n: number) => (await db(table).where({ org_id: orgId }).select('*').orderByRaw('md5(id || ?)', [String(rng())]).limit(n)) as Array<Record<string, unknown>>;
  // Partial and full refunds, a lost dispute taking the rest, a pending order paid, a paid one failing, one deleted.
  for (const o of await some('orders', 4)) {
    const amount = Number(o.amount_cents);
    const kind = pick(['partial', 'full', 'dispute', 'paid', 'failed', 'delete'] as const);
    if (kind === 'partial') await db('orders').where({ id: o.id }).update({ amount_refunded_cents: Math.floor(amount / 3), status: 'PAID' });
    if (kind === 'full') await db('orders').where({ id: o.id }).update({ amount_refunded_cents: amount, status: 'REFUNDED' });
    if (kind === 'dispute') await db('orders').where({ id: o.id }).update({ disputed: true, status: 'REFUNDED', amount_refunded_cents: amount });
    if (kind === 'paid') await db('orders').where({ id: o.id }).update({ status: 'PAID', amount_refunded_cents: 0 });
    if (kind === 'failed') await db('orders').where({ id: o.id }).update({ status: 'FAILED' });
    if (kind === 'delete') await db('orders').where({ id: o.id }).del();
  }
  // An update of many rows in one statement (one queue row per quarter it touches).
  await db('checkout_sessions').where({ org_id: orgId, status: 'CREATED' }).andWhere('amount', '<', 30_000).update({ status: 'COMPLETE' });
  for (const s of await some('subscriptions', 3)) {
    const kind = pick(['end', 'end-before-start', 'reprice', 'recurrency'] as const);
    const created = (s.created_at as Date).getTime();
    if (kind === 'end') await db('subscriptions').where({ id: s.id }).update({ ended_at: new Date(created + Math.floor(rng() * 60) * DAY + 1), status: 'ENDED' });
    if (kind === 'end-before-start') await db('subscriptions').where({ id: s.id }).update({ ended_at: new Date(created - 7 * DAY), status: 'ENDED' });
    if (kind === 'reprice') await db('subscriptions').where({ id: s.id }).update({ amount_cents: 1 + Math.floor(rng() * 90_000), billing_interval: 'MONTH', billing_interval_count: 1 });
    if (kind === 'recurrency') await db('subscriptions').where({ id: s.id }).update({ currency: pick(currencies) });
  }
}

/** Both readers on the same queries: a few ranges in several zones and intervals, one with a currency. */
async function expectEqual(orgId: string, rng: () => number, label: string) {
  const queries = fc.sample(
    fc.record({
      timeZone: fc.constantFrom(...ZONES),
      interval: fc.constantFrom('day' as const, 'week' as const, 'month' as const),
      startDay: fc.integer({ min: -20, max: 430 }),
      length: fc.integer({ min: 0, max: 60 }),
      currency: fc.constantFrom(undefined, 'usd', 'EUR'),
    }),
    { numRuns: 4, seed: Math.floor(rng() * 2 ** 31) },
  );
  // Always 12 months by month in a half-hour zone (every boundary cuts an hour), and today.
  queries.push({ timeZone: 'Asia/Kolkata', interval: 'month', startDay: 30, length: 330, currency: undefined });
  queries.push({ timeZone: 'Asia/Kathmandu', interval: 'day', startDay: 200, length: 0, currency: undefined });
  for (const q of queries) {
    const startDate = new Date(T0 + q.startDay * DAY).toISOString().slice(0, 10);
    const endDate = new Date(T0 + (q.startDay + q.length) * DAY).toISOString().slice(0, 10);
    const query = { startDate, endDate, interval: q.interval, timeZone: q.timeZone, currency: q.currency };
    expect(await rollups.metrics(orgId, query), `${label}: ${JSON.stringify(query)}`).toEqual(await recomputed.metrics(orgId, query));
  }
}

describe('commerce metrics from rollups', () => {
  it('equal a recomputation from the tables after every round of writes, with the queue folded in random chunks', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Rollups' });
    const rng = mulberry32(Number(process.env.KASSA_METRICS_SEED ?? 20261206));
    for (let round = 0; round < 5; round++) {
      await write(org.id, rng);
      await expectEqual(org.id, rng, `round ${round}, before folding`);
      // Fold part of the queue (other organizations' changes too): figures still equal.
      await queue.applyQueued(1 + Math.floor(rng() * 40));
      await expectEqual(org.id, rng, `round ${round}, partly folded`);
    }
    await queue.drain(100);
    expect(Number((await db('commerce_metric_changes').count({ n: '*' }))[0]!.n)).toBe(0);
    await expectEqual(org.id, rng, 'all folded');

    // The backfill of an existing install (down, then up over the same rows) gives the same figures.
    await db.transaction(async (trx) => {
      await m0260.down(trx);
      await m0260.up(trx);
    });
    expect(Number((await db('commerce_metric_changes').count({ n: '*' }))[0]!.n)).toBe(0);
    await expectEqual(org.id, rng, 'after the backfill');
    // And the triggers are back: a new round of writes is counted.
    await write(org.id, rng);
    await expectEqual(org.id, rng, 'written after the backfill');
    await queue.drain(100);
  });

  it('drops queued changes of an organization deleted meanwhile', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Gone' });
    await write(org.id, mulberry32(7));
    await db('subscriptions').where({ org_id: org.id }).del();
    await db('orders').where({ org_id: org.id }).del();
    await db('checkout_sessions').where({ org_id: org.id }).del();
    await db('customers').where({ org_id: org.id }).del();
    await db('organizations').where({ id: org.id }).del();
    await queue.drain(100);
    expect(Number((await db('commerce_rollup_hour').where({ org_id: org.id }).count({ n: '*' }))[0]!.n)).toBe(0);
  });

  describe.skipIf(!onPostgres)(skippedUnless('query plans', 'postgresOnly'), () => {
    const plan = async (run: (range: MetricsRange) => Promise<unknown>, range: MetricsRange) => {
      const captured: Array<{ sql: string; bindings: unknown[] }> = [];
      const listener = (q: { sql: string; bindings?: unknown[] }) => captured.push({ sql: q.sql, bindings: q.bindings ?? [] });
      db.on('query', listener);
      try {
        await run(range);
      } finally {
        db.off('query', listener);
      }
      expect(captured).toHaveLength(1);
      return db.transaction(async (trx) => {
        // The test's few rows would be read by a sequential scan; the question is whether an index can serve.
        await trx.raw('SET LOCAL enable_seqscan = off');
        // knex reports the statement with the driver's placeholders ($1, $2, … in order).
        const { rows } = await trx.raw(`EXPLAIN ${captured[0]!.sql.replace(/\$\d+/g, '?')}`, captured[0]!.bindings as Knex.RawBinding[]);
        return (rows as Array<{ 'QUERY PLAN': string }>).map((l) => l['QUERY PLAN']).join('\n');
      });
    };
    const months = (offsetMs: number): MetricsRange => {
      const boundaries = Array.from({ length: 13 }, (_, i) => new Date(Date.UTC(2025, i, 1) - offsetMs));
      return { orgId: ctx.orgA.orgId, unit: 'month', timeZone: offsetMs ? 'Asia/Kolkata' : 'UTC', start: boundaries[0]!, end: boundaries[12]!, boundaries };
    };
    const repository = () => new KnexCommerceMetricsRepository(db);

    it('12 months in a whole-hour zone: the hourly rollup and the queue by their keys, no commerce table', async () => {
      const text = await plan((r) => repository().figures(r), months(0));
      expect(text).toContain('commerce_rollup_hour_pkey');
      expect(text).toContain('commerce_metric_changes_org_bucket');
      expect(text).not.toMatch(/ on (orders|checkout_sessions|subscriptions|customers)\b/);
    });

    it('12 months in a half-hour zone: the hours midnight cuts from the quarter-hour rollup, by its key', async () => {
      const text = await plan((r) => repository().figures(r), months(5.5 * 3600_000));
      expect(text).toContain('commerce_rollup_hour_pkey');
      expect(text).toContain('commerce_rollup_quarter_pkey');
      expect(text).not.toMatch(/ on (orders|checkout_sessions|subscriptions|customers)\b/);
    });

    it('subscriptions active at the start: day, hour and quarter rollups, not the subscriptions', async () => {
      const text = await plan((r) => repository().subscriptionsActiveAtStart(r), months(5.5 * 3600_000));
      for (const index of ['commerce_rollup_day_pkey', 'commerce_rollup_hour_pkey', 'commerce_rollup_quarter_pkey']) expect(text).toContain(index);
      expect(text).not.toMatch(/ on subscriptions\b/);
    });
  });
});
