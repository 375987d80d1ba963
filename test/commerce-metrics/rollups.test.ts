/**
 * The commerce metrics from rollups (migration 0260, issue 40): random orders, refunds, disputes,
 * status changes, deletions, checkout sessions, subscriptions (started, ended, re-priced, even an
 * end recorded before the start) and customers, written through SQL (the triggers see every
 * writer), with the queue folded in random chunks between writes: the figures read from rollups
 * plus the queue equal a recomputation from the tables at every step, for whole-, half- and
 * quarter-hour zones, every interval and a currency filter. The backfill (down then up) equals the
 * same. On PostgreSQL, the reads' plans use the rollups' keys and never the commerce tables.
 *
 * Migration 0370 (whole days): the organization's time zone is changed between rounds (through
 * the settings service) to whole-, half- and quarter-hour zones and one whose fall-back repeats
 * local midnight (America/Havana); before its local days are built the reads fall back to hours,
 * after they read the local days (checked on the statements sent), and equal the recomputation
 * either way. UTC reads the UTC day rollup. A zone PostgreSQL does not know is never built.
 *
 * Migration 0404 (time of day): another zone's moved hours and quarters are read by time of day
 * from covering indexes; the plan test checks it on two years of rollup rows.
 *
 * Migration 0372 (tax and discounts): the orders carry lines (a price, a DISCOUNT, TAX lines of
 * exclusive, inclusive or reverse-charge rates) written after the order, half of them with the
 * order's tax_cents/discount_cents already set (as the API writes them), half left to the lines'
 * trigger; refunds, disputes, status changes and deletions (the lines cascade) follow. The
 * recomputation reads the lines. The backfill (0372 and 0260 down, then up) equals it too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Knex } from 'knex';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { CommerceMetricsService } from '../../src/commerce-metrics/commerce-metrics.service.js';
import { primaryReads } from '../../src/kernel/lag-tolerant-reads.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { canonicalTimeZone } from '../../src/kernel/time-zone.js';
import { FIGURES, KnexCommerceMetricsRepository, RecomputedCommerceMetricsRepository, type MetricsRange } from '../../src/commerce-metrics/commerce-metrics.repository.js';
import { KnexCommerceRollupRepository } from '../../src/commerce-metrics/rollups.repository.js';
import * as m0260 from '../../src/db/migrations/0260_commerce_rollups.js';
import * as m0370 from '../../src/db/migrations/0370_commerce_local_days.js';
import * as m0372 from '../../src/db/migrations/0372_commerce_tax_figures.js';
import * as m0404 from '../../src/db/migrations/0404_commerce_rollup_time_of_day.js';
import * as m0440 from '../../src/db/migrations/0440_commerce_kept_zones.js';
import * as m0460 from '../../src/db/migrations/0460_commerce_kept_zone_eviction.js';

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
// Kept zones are recorded under the canonical spelling (Node 20's Intl: Asia/Katmandu): zone-aliases.test.ts.
const KATHMANDU = canonicalTimeZone('Asia/Kathmandu')!;
const ZONES = ['UTC', 'Europe/Paris', 'America/New_York', 'Asia/Kolkata', 'Asia/Kathmandu', 'America/St_Johns', 'Pacific/Chatham', 'Australia/Lord_Howe', 'America/Havana'];
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

const halfUp = (a: number, b: number, c: number) => Math.floor((2 * a * b + c) / (2 * c));

/** An order's lines as Kassa prices them (docs/tax.md), its amount, tax and discount. */
function linesOf(orgId: string, orderId: string, rng: () => number) {
  const price = 1 + Math.floor(rng() * 100_000);
  const discount = rng() < 0.3 ? Math.floor(price * rng() * 0.5) : 0;
  const taxable = price - discount;
  const kind = ['none', 'exclusive', 'exclusive2', 'inclusive', 'reverse'][Math.floor(rng() * 5)]!;
  const lines: Array<Record<string, unknown>> = [];
  let tax = 0;
  const line = (k: string, amount: number, detail: { percentage: string; inclusive: boolean; taxAmount: number; reverseCharge?: boolean } | null = null) => {
    if (detail) tax += detail.taxAmount;
    lines.push({
      order_id: orderId, position: lines.length, org_id: orgId, kind: k, description: k, exact_amount: String(amount), amount_cents: amount,
      tax: detail && JSON.stringify({ rateId: detail.reverseCharge ? null : 'TXR_x', displayName: 'VAT', country: 'DE', region: null, taxableAmount: taxable, reverseCharge: false, taxId: null, ...detail }),
    });
  };
  line('PRICE', price);
  if (discount > 0) line('DISCOUNT', -discount);
  if (kind === 'exclusive' || kind === 'exclusive2') line('TAX', halfUp(taxable, 19, 100), { percentage: '19', inclusive: false, taxAmount: halfUp(taxable, 19, 100) });
  if (kind === 'exclusive2') line('TAX', halfUp(taxable, 8875, 100_000), { percentage: '8.875', inclusive: false, taxAmount: halfUp(taxable, 8875, 100_000) });
  if (kind === 'inclusive') line('TAX', 0, { percentage: '20', inclusive: true, taxAmount: halfUp(taxable, 20, 120) });
  if (kind === 'reverse') line('TAX', 0, { percentage: '0', inclusive: false, taxAmount: 0, reverseCharge: true });
  return { amount: lines.reduce((sum, l) => sum + Number(l.amount_cents), 0), lines, tax, discount };
}

/** One round of writes: new rows, then refunds, disputes, status changes, ends, re-pricing and deletions of earlier ones. */
async function write(orgId: string, rng: () => number) {
  const pick = <T,>(list: readonly T[]): T => list[Math.floor(rng() * list.length)]!;
  // Instants over 14 months: at and a millisecond before the local midnights of the zones (Kolkata
  // 18:30 UTC, Kathmandu 18:15, St John's 03:30 or 02:30, Chatham 11:15 or 10:15, Paris 23:00 or
  // 22:00), a quarter hour off them, and anywhere.
  const MIDNIGHTS = [18 * 60 + 30, 18 * 60 + 15, 3 * 60 + 30, 2 * 60 + 30, 11 * 60 + 15, 10 * 60 + 15, 23 * 60, 22 * 60, 0, 4 * 60, 5 * 60].map((m) => m * 60_000);
  const at = () => {
    const inDay = rng() < 0.2 ? Math.floor(rng() * DAY) : pick(MIDNIGHTS) + pick([0, 0, -1, 15 * 60_000, -15 * 60_000]);
    return new Date(T0 + Math.floor(rng() * 420) * DAY + inDay);
  };
  const currencies = ['USD', 'EUR', 'USDC'] as const;
  // Havana's 2025 fall-back repeats 00:00–01:00 on 2 November (the first time at 04:00 UTC) and
  // its spring-forward skips midnight on 9 March: an order in each, every round.
  const havana = id('CUS');
  await db('customers').insert({ id: havana, org_id: orgId, email: `havana${seq}@example.com`, created_at: new Date('2025-11-02T04:45:00Z') });
  for (const created of [new Date('2025-11-02T04:30:00Z'), new Date('2025-11-02T05:30:00Z'), new Date('2025-03-09T05:10:00Z')]) {
    await db('orders').insert({
      id: id('ORD'), org_id: orgId, status: 'PAID', provider: 'STRIPE', amount_cents: 1 + Math.floor(rng() * 1000), amount_refunded_cents: 0, currency: 'USD',
      customer_id: havana, customer_email: `havana${seq}@example.com`, created_at: created, updated_at: created,
    });
  }
  for (let i = 0; i < 6; i++) {
    const customerId = id('CUS');
    const email = `buyer${seq}@example.com`;
    await db('customers').insert({ id: customerId, org_id: orgId, email, created_at: at() });
    const orders: object[] = [];
    const sessions: object[] = [];
    const lines: object[] = [];
    for (let j = 0; j < 4; j++) {
      const currency = pick(currencies);
      const orderId = id('ORD');
      const priced = linesOf(orgId, orderId, rng);
      const amount = priced.amount;
      lines.push(...priced.lines);
      // Half as the API writes them (the figures with the row), half left to the lines' trigger.
      const figures = rng() < 0.5 ? { tax_cents: priced.tax, discount_cents: priced.discount } : {};
      const status = pick(['PAID', 'PAID', 'REFUNDED', 'FAILED', 'PENDING'] as const);
      const created = at();
      const sessionId = id('CS');
      sessions.push({
        id: sessionId, org_id: orgId, status: pick(['CREATED', 'COMPLETE', 'EXPIRED'] as const), provider: 'STRIPE', amount, currency, quantity: 1,
        pricing: JSON.stringify({ amount, currency }), product: JSON.stringify({ name: 'Thing' }), page_token: id('tok'),
        expires_at: created, created_at: created, updated_at: created,
      });
      orders.push({
        id: orderId, org_id: orgId, status, provider: 'STRIPE', amount_cents: amount, amount_refunded_cents: status === 'REFUNDED' ? amount : 0, currency,
        customer_id: customerId, customer_email: email, checkout_session_id: sessionId, created_at: created, updated_at: created, ...figures,
      });
    }
    await db('checkout_sessions').insert(sessions);
    await db('orders').insert(orders);
    await db('order_lines').insert(lines);
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
    if (kind === 'partial') await db('orders').where({ id: o.id }).update({ amount_refunded_cents: Math.floor(amount * rng()), status: 'PAID' });
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

/** Both readers on the same queries: a few ranges in several zones and intervals, one with a currency; 12 months, 60 days and 13 weeks in the organization's zone. */
async function expectEqual(orgId: string, rng: () => number, label: string, orgZone = 'UTC') {
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
  queries.push({ timeZone: orgZone, interval: 'month', startDay: 30, length: 330, currency: undefined });
  queries.push({ timeZone: orgZone, interval: 'day', startDay: 280, length: 59, currency: undefined });
  queries.push({ timeZone: orgZone, interval: 'week', startDay: 250, length: 90, currency: 'usd' });
  // Zones other than the organization's, by whole local dates (quarters, hours and UTC days per
  // bucket): quarter-, half- and whole-hour offsets, with and without daylight saving.
  const others = ZONES.filter((z) => z !== orgZone && z !== 'UTC');
  const other = () => others[Math.floor(rng() * others.length)]!;
  queries.push({ timeZone: other(), interval: 'day', startDay: Math.floor(rng() * 360), length: 45, currency: undefined });
  queries.push({ timeZone: other(), interval: 'week', startDay: Math.floor(rng() * 300), length: 120, currency: 'EUR' });
  queries.push({ timeZone: other(), interval: 'month', startDay: 0, length: 420, currency: undefined });
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
    // Not equal by being empty: taxes, their refunded share and discounts are there.
    const year = await rollups.metrics(org.id, { startDate: '2025-01-01', endDate: '2026-02-28', interval: 'month', timeZone: 'UTC' });
    expect(year.currencies.some((c) => c.totals.taxVolume > 0 && c.totals.refundedTaxVolume > 0 && c.totals.discountVolume > 0)).toBe(true);

    // The backfill of an existing install (down, then up over the same rows) gives the same figures.
    // 0404's indexes are built outside a transaction (CONCURRENTLY on PostgreSQL), as the migration runs.
    // 0440 and 0460 (the kept zones' days, here of the zones expectEqual asked in) are undone first and redone last.
    await m0460.down(db);
    await m0440.down(db);
    await m0404.down(db);
    await db.transaction(async (trx) => {
      await m0372.down(trx);
      await m0260.down(trx);
      await m0260.up(trx);
      await m0372.up(trx);
    });
    await m0404.up(db);
    await m0440.up(db);
    await m0460.up(db);
    // 0260's backfill wrote the rollups; 0372's queued the taxed and discounted orders' figures.
    const queued = (await db('commerce_metric_changes').select('*')) as Array<Record<string, string | number>>;
    expect(queued.length).toBeGreaterThan(0);
    for (const q of queued) expect(q.gross_volume === 0 || q.gross_volume === '0', JSON.stringify(q)).toBe(true);
    expect(queued.some((q) => Number(q.tax_volume) > 0) && queued.some((q) => Number(q.discount_volume) > 0)).toBe(true);
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

  it("read the organization's local days once built, for every kind of zone, and equal the recomputation before and after", async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Local days' });
    const rng = mulberry32(Number(process.env.KASSA_METRICS_SEED ?? 20261207));
    const statements: string[] = [];
    const listener = (q: { sql: string }) => statements.push(q.sql);
    const sent = async <T,>(run: () => Promise<T>) => {
      statements.length = 0;
      db.on('query', listener);
      try {
        return await run();
      } finally {
        db.off('query', listener);
      }
    };
    const twelveMonths = (timeZone: string) => ({ startDate: '2025-02-01', endDate: '2026-01-31', interval: 'month' as const, timeZone });
    for (const [round, zone] of ['Asia/Kolkata', 'Asia/Kathmandu', 'America/St_Johns', 'Pacific/Chatham', 'Australia/Lord_Howe', 'America/New_York', 'America/Havana', 'UTC'].entries()) {
      await write(org.id, rng);
      await ctx.services.orgs.updateSettings(org.id, { timeZone: zone });
      // Not built yet (or UTC): equal all the same.
      await expectEqual(org.id, rng, `${zone}, round ${round}, days not built`, zone);
      await queue.applyQueued(1 + Math.floor(rng() * 40));
      expect(await queue.buildZones(5)).toBe(zone === 'UTC' ? 0 : 1);
      // Built, with changes still queued (folded into the days later): equal.
      await write(org.id, rng);
      await expectEqual(org.id, rng, `${zone}, round ${round}, days built, changes queued`, zone);
      await queue.applyQueued(1 + Math.floor(rng() * 40));
      await expectEqual(org.id, rng, `${zone}, round ${round}, partly folded`, zone);
      const months = await sent(() => rollups.metrics(org.id, twelveMonths(zone)));
      expect(months).toEqual(await recomputed.metrics(org.id, twelveMonths(zone)));
      const figures = statements.find((q) => q.includes('commerce_metric_changes') && !q.includes('new_subscriptions - closed_subscriptions'))!;
      expect(figures).toContain(zone === 'UTC' ? 'commerce_rollup_day' : 'commerce_rollup_local_day');
      expect(figures).not.toContain('commerce_rollup_quarter');
    }
    // Havana by day across its fall-back: 2 November starts at the second 00:00 (05:00 UTC), so the
    // first 00:00–01:00 is outside every bucket's instants (the definition): hours, not local days.
    await ctx.services.orgs.updateSettings(org.id, { timeZone: 'America/Havana' });
    await queue.drain(100);
    const fallBack = { startDate: '2025-10-25', endDate: '2025-11-08', interval: 'day' as const, timeZone: 'America/Havana' };
    expect(await sent(() => rollups.metrics(org.id, fallBack))).toEqual(await recomputed.metrics(org.id, fallBack));
    expect(statements.some((q) => q.includes('commerce_rollup_local_day'))).toBe(false);
    const june = { startDate: '2025-06-01', endDate: '2025-06-30', interval: 'day' as const, timeZone: 'America/Havana' };
    expect(await sent(() => rollups.metrics(org.id, june))).toEqual(await recomputed.metrics(org.id, june));
    expect(statements.some((q) => q.includes('commerce_rollup_local_day'))).toBe(true);
    // Another zone than the organization's, by whole local dates: UTC days, hours and quarters per bucket.
    for (const zone of ['Asia/Kolkata', 'Asia/Kathmandu', 'Pacific/Chatham', 'America/St_Johns']) {
      for (const query of [twelveMonths(zone), { startDate: '2025-03-01', endDate: '2025-04-30', interval: 'day' as const, timeZone: zone }]) {
        expect(await sent(() => rollups.metrics(org.id, query)), JSON.stringify(query)).toEqual(await recomputed.metrics(org.id, query));
        // From the hours and quarters, or from the zone's kept local days once a drain built them (0440).
        expect(statements.some((q) => q.includes('commerce_rollup_zone_day') || (q.includes('commerce_rollup_day') && q.includes('commerce_rollup_hour') && q.includes('commerce_rollup_quarter')))).toBe(true);
      }
    }

    // An install upgraded to 0370 (down, then up): the organization's zone is pending, then built.
    await ctx.services.orgs.updateSettings(org.id, { timeZone: 'Asia/Kathmandu' });
    await queue.drain(100);
    // 0372's down drops the figures 0404's indexes include (and so the indexes): undone first, redone after.
    await m0460.down(db);
    await m0440.down(db);
    await m0404.down(db);
    await db.transaction(async (trx) => {
      await m0372.down(trx);
      await m0370.down(trx);
      await m0370.up(trx);
      await m0372.up(trx);
    });
    await m0404.up(db);
    await m0440.up(db);
    await m0460.up(db);
    expect((await db('commerce_rollup_zone').where({ org_id: org.id }).first())?.state).toBe('pending');
    await write(org.id, rng);
    await queue.drain(100);
    expect((await db('commerce_rollup_zone').where({ org_id: org.id }).first())?.state).toBe('ready');
    await expectEqual(org.id, rng, 'Kathmandu after the upgrade', 'Asia/Kathmandu');
  });

  it("keeps local days for other zones its callers ask for (at most 3, never its own): built while changes arrive, folded after, equal the recomputation", async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Kept zones' });
    await ctx.services.orgs.updateSettings(org.id, { timeZone: 'Asia/Kolkata' });
    const rng = mulberry32(Number(process.env.KASSA_METRICS_SEED ?? 20261208));
    const statements: string[] = [];
    const listener = (q: { sql: string }) => statements.push(q.sql);
    const sent = async <T,>(run: () => Promise<T>) => {
      statements.length = 0;
      db.on('query', listener);
      try {
        return await run();
      } finally {
        db.off('query', listener);
      }
    };
    const zones = async () => (await db('commerce_rollup_kept_zone').where({ org_id: org.id }).orderBy('time_zone').select('time_zone', 'state')) as Array<{ time_zone: string; state: string }>;
    // The kept ones (a zone asked while 3 are kept waits: migration 0460).
    const kept = async () => (await zones()).filter((k) => k.state !== 'waiting');
    const year = (timeZone: string) => ({ startDate: '2025-02-01', endDate: '2026-01-31', interval: 'day' as const, timeZone });
    // The kept days read (and not the hours-and-quarters reader, whose statement places the queue by width_bucket).
    const readsKept = () => statements.some((q) => q.includes('commerce_rollup_zone_day')) && !statements.some((q) => q.includes('width_bucket'));
    for (const [round, zone] of [KATHMANDU, 'America/St_Johns', 'Pacific/Chatham'].entries()) {
      await write(org.id, rng);
      await queue.applyQueued(1 + Math.floor(rng() * 40));
      // First ask: answered from hours and quarters, the zone asked for.
      expect(await sent(() => rollups.metrics(org.id, year(zone)))).toEqual(await recomputed.metrics(org.id, year(zone)));
      expect(readsKept()).toBe(false);
      expect((await kept()).find((k) => k.time_zone === zone)?.state).toBe('pending');
      // Changes arrive and are partly folded before the build; more arrive after it, queued.
      await write(org.id, rng);
      await queue.applyQueued(1 + Math.floor(rng() * 40));
      // (Other tests' organizations asked for zones too: every pending one is built, oldest first.)
      while ((await queue.buildKeptZones(5)) > 0);
      expect((await kept()).find((k) => k.time_zone === zone)?.state).toBe('ready');
      await write(org.id, rng);
      expect(await sent(() => rollups.metrics(org.id, year(zone)))).toEqual(await recomputed.metrics(org.id, year(zone)));
      expect(readsKept()).toBe(true);
      await queue.applyQueued(1 + Math.floor(rng() * 40));
      for (const query of [year(zone), { ...year(zone), interval: 'week' as const, currency: 'usd' }, { startDate: '2025-01-01', endDate: '2026-02-28', interval: 'month' as const, timeZone: zone }]) {
        expect(await sent(() => rollups.metrics(org.id, query)), JSON.stringify(query)).toEqual(await recomputed.metrics(org.id, query));
        expect(readsKept()).toBe(true);
      }
    }
    expect((await kept()).map((k) => k.time_zone)).toEqual(['America/St_Johns', KATHMANDU, 'Pacific/Chatham']);
    // Random ranges in every zone (the kept ones from their days, the others from hours and
    // quarters), with changes queued and partly folded.
    for (let round = 0; round < 2; round++) {
      await write(org.id, rng);
      await expectEqual(org.id, rng, `three kept, round ${round}, changes queued`, 'Asia/Kolkata');
      await queue.applyQueued(1 + Math.floor(rng() * 40));
      await expectEqual(org.id, rng, `three kept, round ${round}, partly folded`, 'Asia/Kolkata');
    }
    // The bound: a fourth zone is read from hours and quarters (it waits: the three were asked
    // today, none is idle), and its own zone is never kept.
    await db('commerce_rollup_kept_zone').where({ org_id: org.id, state: 'waiting' }).del();
    await queue.drain(100);
    expect(await kept()).toHaveLength(3);
    // (Its zone as stored: Intl's canonical name, Asia/Calcutta here; asked under an alias it is the same zone.)
    const ownZone = ((await db('organizations').where({ id: org.id }).first()) as { time_zone: string }).time_zone;
    for (const zone of ['Europe/Paris', 'Australia/Lord_Howe', ownZone]) {
      const query = year(zone);
      expect(await rollups.metrics(org.id, query)).toEqual(await recomputed.metrics(org.id, query));
    }
    await queue.drain(100);
    expect(await kept()).toEqual([
      { time_zone: 'America/St_Johns', state: 'ready' }, { time_zone: KATHMANDU, state: 'ready' }, { time_zone: 'Pacific/Chatham', state: 'ready' },
    ]);
    expect(await zones()).toContainEqual({ time_zone: 'Europe/Paris', state: 'waiting' });
    expect((await zones()).some((k) => k.time_zone === ownZone)).toBe(false);
    // The organization moves its books to a kept zone: its own days (built) serve; both stay exact.
    const keptZone = (await kept())[0]!.time_zone;
    await ctx.services.orgs.updateSettings(org.id, { timeZone: keptZone });
    await write(org.id, rng);
    await expectEqual(org.id, rng, `books moved to ${keptZone}, not built`, keptZone);
    await queue.drain(100);
    await write(org.id, rng);
    await expectEqual(org.id, rng, `books moved to ${keptZone}, built`, keptZone);
    // The organization deleted: its kept zones and their days go with it.
    await queue.drain(100);
    for (const table of ['subscriptions', 'orders', 'checkout_sessions', 'customers']) await db(table).where({ org_id: org.id }).del();
    await db('organizations').where({ id: org.id }).del();
    expect(Number((await db('commerce_rollup_zone_day').where({ org_id: org.id }).count({ n: '*' }))[0]!.n)).toBe(0);
    expect(await zones()).toHaveLength(0);
  });

  it('replaces the least recently asked kept zone by a waiting one only once it is idle for more than 7 days (a model of asks over days), and the kept days equal the recomputation', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Zones replaced' });
    await ctx.services.orgs.updateSettings(org.id, { timeZone: 'Asia/Kolkata' });
    // Its zone as stored (Intl's canonical name), the name its own days answer to.
    const own = ((await db('organizations').where({ id: org.id }).first()) as { time_zone: string }).time_zone;
    const rng = mulberry32(Number(process.env.KASSA_METRICS_SEED ?? 20261209));
    await write(org.id, rng);
    await queue.drain(100);
    const clock = new ManualClock('2027-01-04T10:00:00Z');
    const reader = new CommerceMetricsService(primaryReads(new KnexCommerceMetricsRepository(db, db, clock)));
    const jobQueue = new KnexCommerceRollupRepository(db, clock);
    const POOL = [KATHMANDU, 'America/St_Johns', 'Pacific/Chatham', 'Australia/Lord_Howe', 'Europe/Paris', 'America/New_York', 'Asia/Tokyo', own];
    const today = () => clock.now().toISOString().slice(0, 10);
    const daysBefore = (date: string, n: number) => new Date(Date.parse(`${date}T00:00:00Z`) - n * DAY).toISOString().slice(0, 10);
    /** The model: each zone's row, kept (built or not) or waiting, and the day it was last asked. */
    type Row = { kind: 'kept' | 'waiting'; asked: string; built: boolean };
    let model = new Map<string, Row>();
    const byName = (a: [string, Row], b: [string, Row]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
    const modelAsk = (zone: string) => {
      if (zone === own) return;
      const row = model.get(zone);
      if (row) {
        row.asked = today();
        return;
      }
      const rows = [...model.values()];
      if (rows.filter((r) => r.kind === 'kept').length < 3) model.set(zone, { kind: 'kept', asked: today(), built: false });
      else if (rows.filter((r) => r.kind === 'waiting').length < 3) model.set(zone, { kind: 'waiting', asked: today(), built: false });
    };
    /** The job's pass: idle waiting zones forgotten, the most recently asked waiting one replacing the least recently asked idle kept one, then built. */
    const evicted: Array<{ zone: string; asked: string; today: string }> = [];
    const modelPass = () => {
      const idleBefore = daysBefore(today(), 7);
      for (const [zone, row] of model) if (row.kind === 'waiting' && row.asked < idleBefore) model.delete(zone);
      const entries = [...model.entries()].sort(byName);
      const kept = entries.filter(([, r]) => r.kind === 'kept').sort((a, b) => (a[1].asked < b[1].asked ? -1 : a[1].asked > b[1].asked ? 1 : 0));
      const waiting = entries.filter(([, r]) => r.kind === 'waiting').sort((a, b) => (a[1].asked > b[1].asked ? -1 : a[1].asked < b[1].asked ? 1 : 0));
      for (const [zone, row] of waiting) {
        if (kept.length >= 3) {
          if (!(kept[0]![1].asked < idleBefore)) break;
          const [gone, goneRow] = kept.shift()!;
          evicted.push({ zone: gone, asked: goneRow.asked, today: today() });
          model.delete(gone);
        }
        Object.assign(row, { kind: 'kept', asked: today(), built: false });
        kept.push([zone, row]);
      }
      for (const row of model.values()) if (row.kind === 'kept') row.built = true;
    };
    const stored = async () => {
      const rows = (await db('commerce_rollup_kept_zone').where({ org_id: org.id }).select('time_zone', 'state', db.raw("to_char(last_asked_on, 'YYYY-MM-DD') AS asked"))) as Array<{ time_zone: string; state: string; asked: string }>;
      return new Map(rows.map((r) => [r.time_zone, { kind: r.state === 'waiting' ? 'waiting' : 'kept', asked: r.asked, built: r.state === 'ready' } as Row]));
    };
    const range = (timeZone: string) => ({ startDate: '2025-03-01', endDate: '2025-04-29', interval: 'day' as const, timeZone });
    const statements: string[] = [];
    const listener = (q: { sql: string }) => statements.push(q.sql);
    let asks = 0;
    let keptReads = 0;
    const ask = async (zone: string) => {
      statements.length = 0;
      db.on('query', listener);
      let answer;
      try {
        answer = await reader.metrics(org.id, range(zone));
      } finally {
        db.off('query', listener);
      }
      // Read from the kept days exactly when the model says the zone is kept and built.
      const fromKept = statements.some((q) => q.includes('commerce_rollup_zone_day')) && !statements.some((q) => q.includes('width_bucket'));
      const row = model.get(zone);
      if (zone !== own) expect(fromKept, `${zone} on ${today()}`).toBe(Boolean(row?.kind === 'kept' && row.built));
      if (fromKept) keptReads++;
      // At most one write of the day it was asked per zone and day.
      const touches = statements.filter((q) => q.startsWith('UPDATE commerce_rollup_kept_zone SET last_asked_on')).length;
      expect(touches).toBe(row && row.asked < today() ? 1 : 0);
      expect(answer, `${zone} on ${today()}`).toEqual(await recomputed.metrics(org.id, range(zone)));
      asks++;
      modelAsk(zone);
    };
    const step = fc.record({
      days: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 6, max: 10 })),
      asks: fc.array(fc.constantFrom(...POOL), { maxLength: 4 }),
      pass: fc.boolean(),
      write: fc.integer({ min: 0, max: 9 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 3, maxLength: 9 }), async (steps) => {
        await db('commerce_rollup_kept_zone').where({ org_id: org.id }).del();
        model = new Map();
        for (const s of steps) {
          clock.advance(s.days * DAY);
          // Changes arrive now and then, partly folded: the kept days folded after a build stay exact.
          if (s.write === 0) {
            await write(org.id, rng);
            await jobQueue.applyQueued(1 + Math.floor(rng() * 40));
          }
          for (const zone of s.asks) await ask(zone);
          expect(await stored()).toEqual(model);
          if (s.pass) {
            while ((await jobQueue.admitWaitingZones(10)) > 0);
            while ((await jobQueue.buildKeptZones(10)) > 0);
            modelPass();
            expect(await stored()).toEqual(model);
          }
          const rows = [...model.values()];
          expect(rows.filter((r) => r.kind === 'kept').length).toBeLessThanOrEqual(3);
          expect(rows.filter((r) => r.kind === 'waiting').length).toBeLessThanOrEqual(3);
          expect(model.has(own)).toBe(false);
        }
      }),
      { numRuns: 10, seed: Number(process.env.KASSA_METRICS_SEED ?? 20261209) },
    );
    // The thrash guard: a replaced zone was idle for more than 7 days (asked 8 or more days before).
    for (const e of evicted) expect(e.asked < daysBefore(e.today, 7), JSON.stringify(e)).toBe(true);
    expect(evicted.length).toBeGreaterThan(0);
    expect(keptReads).toBeGreaterThan(0);
    expect(asks).toBeGreaterThan(keptReads);

    // Four zones read in turn every day for four weeks: three kept, the fourth waits, nothing is rebuilt.
    await db('commerce_rollup_kept_zone').where({ org_id: org.id }).del();
    model = new Map();
    const four = [KATHMANDU, 'America/St_Johns', 'Pacific/Chatham', 'Australia/Lord_Howe'];
    let builds = 0;
    for (let day = 0; day < 28; day++) {
      clock.advance(DAY);
      await ask(four[day % 4]!);
      while ((await jobQueue.admitWaitingZones(10)) > 0);
      for (let n; (n = await jobQueue.buildKeptZones(10)) > 0; ) builds += n;
      modelPass();
      expect(await stored()).toEqual(model);
    }
    expect(builds).toBe(3);
    expect((await stored()).get('Australia/Lord_Howe')?.kind).toBe('waiting');
    // Once one is left idle for more than 7 days, the waiting zone replaces it (and is built).
    for (let day = 0; day < 8; day++) {
      clock.advance(DAY);
      for (const zone of [KATHMANDU, 'America/St_Johns', 'Australia/Lord_Howe']) await ask(zone);
      await jobQueue.drain(100);
      modelPass();
    }
    expect([...(await stored()).entries()].sort(byName).map(([zone, r]) => [zone, r.kind, r.built])).toEqual([
      ['America/St_Johns', 'kept', true], [KATHMANDU, 'kept', true], ['Australia/Lord_Howe', 'kept', true],
    ]);
    await ask('Australia/Lord_Howe');
  });

  it('never builds a zone PostgreSQL does not know, and keeps folding', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Unknown zone' });
    await db('organizations').where({ id: org.id }).update({ time_zone: 'Nowhere/Atlantis' });
    await write(org.id, mulberry32(11));
    await queue.drain(100);
    expect((await db('commerce_rollup_zone').where({ org_id: org.id }).first())?.state).toBe('unknown');
    expect(Number((await db('commerce_rollup_local_day').where({ org_id: org.id }).count({ n: '*' }))[0]!.n)).toBe(0);
    expect(Number((await db('commerce_metric_changes').count({ n: '*' }))[0]!.n)).toBe(0);
    await expectEqual(org.id, mulberry32(12), 'an organization whose zone is unknown');
  });

  describe.skipIf(!onPostgres)(skippedUnless('query plans', 'postgresOnly'), () => {
    /** The plan of the statement that read the figures; with `noSeqScan`, sequential scans are off (the test's few rows). */
    const plan = async (run: (range: MetricsRange) => Promise<unknown>, range: MetricsRange, noSeqScan = true) => {
      const captured: Array<{ sql: string; bindings: unknown[] }> = [];
      const listener = (q: { sql: string; bindings?: unknown[] }) => captured.push({ sql: q.sql, bindings: q.bindings ?? [] });
      db.on('query', listener);
      try {
        await run(range);
      } finally {
        db.off('query', listener);
      }
      // One statement; more when local days were asked for and not kept in this zone (the
      // organization's own, then another zone's kept days answer "not ready"; a first ask records
      // the zone): the plan of the last, the one that read the figures.
      // (A kept zone's first read of a UTC date also writes that date, after the read: not the one planned.)
      const reads = captured.filter((q) => !q.sql.startsWith('UPDATE commerce_rollup_kept_zone SET last_asked_on'));
      expect(reads.length).toBeLessThanOrEqual(7);
      if (reads.length > 1) expect(reads[0]!.sql).toContain('commerce_rollup_zone');
      captured.splice(0, captured.length, reads[reads.length - 1]!);
      return db.transaction(async (trx) => {
        // The test's few rows would be read by a sequential scan; the question is whether an index can serve.
        if (noSeqScan) await trx.raw('SET LOCAL enable_seqscan = off');
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
    /** The range the service would pass for a query (its buckets from the repository). */
    const rangeOf = async (on: Knex, orgId: string, q: { startDate: string; endDate: string; interval: 'day'; timeZone: string }): Promise<MetricsRange> => {
      const buckets = await new KnexCommerceMetricsRepository(on).buckets(q.interval, q.timeZone, q.startDate, q.endDate);
      const boundaries = [...buckets.map((b) => b.start), buckets[buckets.length - 1]!.end];
      return { orgId, unit: q.interval, timeZone: q.timeZone, start: boundaries[0]!, end: boundaries[boundaries.length - 1]!, boundaries, wholeLocalDates: true };
    };

    it('12 months in UTC: the day rollup and the queue by their keys, no hours, no commerce table', async () => {
      const text = await plan((r) => repository().figures(r), months(0));
      expect(text).toContain('commerce_rollup_day_pkey');
      expect(text).not.toContain('commerce_rollup_hour');
      expect(text).toContain('commerce_metric_changes_org_bucket');
      expect(text).not.toMatch(/ on (orders|checkout_sessions|subscriptions|customers)\b/);
    });

    it("12 months in the organization's half-hour zone: its local days and the queue by their keys, no hours or quarters", async () => {
      await db('organizations').where({ id: ctx.orgA.orgId }).update({ time_zone: 'Asia/Kolkata' });
      await queue.drain(100);
      try {
        const text = await plan((r) => repository().figures(r), months(5.5 * 3600_000));
        expect(text).toContain('commerce_rollup_zone_pkey');
        expect(text).toContain('commerce_rollup_local_day_pkey');
        expect(text).toContain('commerce_metric_changes_org_bucket');
        expect(text).not.toMatch(/commerce_rollup_(hour|quarter)/);
        expect(text).not.toMatch(/ on (orders|checkout_sessions|subscriptions|customers)\b/);
      } finally {
        await db('organizations').where({ id: ctx.orgA.orgId }).update({ time_zone: 'UTC' });
      }
    });

    it('12 months in a whole-hour zone not the organization\'s: the hourly rollup and the queue by their keys, no commerce table', async () => {
      const range = months(3600_000);
      range.timeZone = 'Europe/Paris';
      const text = await plan((r) => repository().figures(r), range);
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

    it("12 months by day in a quarter-hour zone not the organization's: UTC days by their key, the moved hours and quarters by time of day (index-only), no commerce table", async () => {
      // A merchant's rollups (every quarter of 400 days, every hour and day of two years, in three
      // currencies and the customers' ''), written directly: the planner chooses by the sizes it sees.
      const org = await ctx.services.orgs.createOrganization({ name: 'Two years of rollups' });
      const columns = `org_id, bucket, currency, ${FIGURES.join(', ')}`;
      const values = FIGURES.map(() => '1').join(', ');
      await db.transaction(async (trx) => {
        // A few hundred thousand rows: not under the pool's statement timeout on a loaded machine.
        await trx.raw('SET LOCAL statement_timeout = 0');
        for (const [table, step, count] of [['commerce_rollup_quarter', '15 minutes', 400 * 96], ['commerce_rollup_hour', '1 hour', 2 * 366 * 24], ['commerce_rollup_day', '1 day', 2 * 366]] as const) {
          await trx.raw(
            `INSERT INTO ${table} (${columns}) SELECT ?, timestamptz '2024-12-01 00:00:00+00' + g * interval '${step}', c, ${values}
               FROM generate_series(0, ?) g CROSS JOIN unnest(array['USD', 'EUR', 'USDC', '']) c`,
            [org.id, count - 1],
          );
        }
      });
      await db.raw('VACUUM ANALYZE commerce_rollup_quarter, commerce_rollup_hour, commerce_rollup_day');
      // Asia/Kathmandu (+05:45): each local day is its UTC day less 18:15–24:00, plus the previous
      // day's 18:15–24:00 (the hours 18–23 less the quarter 18:00).
      const boundaries = Array.from({ length: 366 }, (_, i) => new Date(Date.UTC(2025, 0, 1 + i) - 5.75 * 3600_000));
      const range: MetricsRange = { orgId: org.id, unit: 'day', timeZone: 'Asia/Kathmandu', start: boundaries[0]!, end: boundaries[365]!, boundaries };
      const text = await plan((r) => repository().figures(r), range);
      for (const index of ['commerce_rollup_day_pkey', 'commerce_metric_changes_org_bucket']) expect(text).toContain(index);
      expect(text).not.toMatch(/ on (orders|checkout_sessions|subscriptions|customers)\b/);
      // Each rollup read once (issue 40: 1,500 key probes per request before 0370's reader, ~730
      // runs probed by it): the UTC days and the queue over one range of their keys, the hours and
      // the quarters to move by migration 0404's index — one range per time of day (six hours,
      // one quarter), read from the index alone.
      for (const table of ['commerce_rollup_day', 'commerce_rollup_hour', 'commerce_rollup_quarter', 'commerce_metric_changes']) {
        expect(text.match(new RegExp(`\\bon ${table}\\b`, 'g')) ?? [], table).toHaveLength(1);
      }
      expect(text).toMatch(/Index Only Scan using commerce_rollup_hour_time_of_day on commerce_rollup_hour/);
      expect(text).toMatch(/Index Only Scan using commerce_rollup_quarter_time_of_day on commerce_rollup_quarter/);
      expect(text).toContain("= ANY ('{18:00:00,19:00:00,20:00:00,21:00:00,22:00:00,23:00:00}'::interval[])");
      expect(text).toContain("= ANY ('{18:00:00}'::interval[])");
      expect(text).toMatch(/Index Cond: \(\(org_id = '[^']+'::text\) AND \(bucket >= '2025-01-01 00:00:00\+00'::timestamp with time zone\) AND \(bucket < '2026-01-01 00:00:00\+00'::timestamp with time zone\)\)/);
      expect(text).toMatch(/Index Cond: \(\(org_id = '[^']+'::text\) AND \(bucket >= '2024-12-31 18:15:00\+00'::timestamp with time zone\) AND \(bucket < '2025-12-31 18:15:00\+00'::timestamp with time zone\)\)/);
      // By month the UTC days inside each month serve: the day rollup by its key, no commerce table.
      const monthly = await plan((r) => repository().figures(r), { ...months(5.75 * 3600_000), orgId: org.id, timeZone: 'Asia/Kathmandu' });
      for (const index of ['commerce_rollup_day_pkey', 'commerce_rollup_hour_time_of_day', 'commerce_rollup_quarter_time_of_day']) expect(monthly).toContain(index);
      expect(monthly).not.toMatch(/ on (orders|checkout_sessions|subscriptions|customers)\b/);

      // Asked for, Kathmandu is kept for this organization (migration 0440): once the job built its
      // days, 12 months by day read them and the queue by their keys — no UTC days, hours or quarters.
      expect((await db('commerce_rollup_kept_zone').where({ org_id: org.id }).first())?.state).toBe('pending');
      while ((await queue.buildKeptZones(5)) !== 0);
      await db.raw('ANALYZE commerce_rollup_zone_day, commerce_rollup_kept_zone');
      const kept = await plan((r) => repository().figures(r), range);
      for (const index of ['commerce_rollup_kept_zone_pkey', 'commerce_rollup_zone_day_pkey', 'commerce_metric_changes_org_bucket']) expect(kept).toContain(index);
      expect(kept).not.toMatch(/commerce_rollup_(day|hour|quarter)\b/);
      expect(kept).not.toMatch(/ on (orders|checkout_sessions|subscriptions|customers)\b/);
    });

    it('a first ask in another zone read on a read-only connection (a replica) is answered there and recorded on the primary, and so is a later day it is read', async () => {
      const org = await ctx.services.orgs.createOrganization({ name: 'Asked on a replica' });
      const config = db.client.config as Knex.Config;
      const readOnly = (await import('knex')).default({
        ...config,
        pool: {
          min: 0,
          max: 1,
          afterCreate: (conn: { query: (sql: string, done: (error: Error | null) => void) => void }, done: (error: Error | null, conn: unknown) => void) =>
            conn.query('SET default_transaction_read_only = on', (error) => done(error, conn)),
        },
      });
      try {
        const clock = new ManualClock('2027-02-01T08:00:00Z');
        const onReplica = new CommerceMetricsService(primaryReads(new KnexCommerceMetricsRepository(readOnly, db, clock)));
        const query = { startDate: '2025-02-01', endDate: '2026-01-31', interval: 'day' as const, timeZone: 'Asia/Kathmandu' };
        // Without the primary the ask itself would fail on the replica (read-only transaction).
        await expect(new KnexCommerceMetricsRepository(readOnly).figures({ ...(await rangeOf(readOnly, org.id, query)) })).rejects.toThrow(/read-only/);
        expect(await onReplica.metrics(org.id, query)).toEqual(await recomputed.metrics(org.id, query));
        const row = () => db('commerce_rollup_kept_zone').where({ org_id: org.id }).first(db.raw("state, to_char(last_asked_on, 'YYYY-MM-DD') AS asked")) as Promise<{ state: string; asked: string }>;
        expect(await row()).toEqual({ state: 'pending', asked: '2027-02-01' });
        // Built, then read on a later day from the kept days: the day it was asked is written on the primary (migration 0460).
        while ((await queue.buildKeptZones(5)) !== 0);
        clock.advance(3 * 86_400_000);
        expect(await onReplica.metrics(org.id, query)).toEqual(await recomputed.metrics(org.id, query));
        expect(await row()).toEqual({ state: 'ready', asked: '2027-02-04' });
      } finally {
        await readOnly.destroy();
      }
    });

    it('subscriptions active at the start: day, hour and quarter rollups, not the subscriptions', async () => {
      const text = await plan((r) => repository().subscriptionsActiveAtStart(r), months(5.5 * 3600_000));
      expect(text).toContain('commerce_rollup_day_pkey');
      // The hours and quarters of the start's day: by the key, or (this test's few rows of the
      // organization; the 10k bench organization's plan takes the key) by 0404's index alone.
      expect(text).toMatch(/commerce_rollup_hour_(pkey|time_of_day)/);
      expect(text).toMatch(/commerce_rollup_quarter_(pkey|time_of_day)/);
      expect(text).not.toMatch(/ on subscriptions\b/);
    });
  });
});
