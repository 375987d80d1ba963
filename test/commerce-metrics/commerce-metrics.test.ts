/**
 * getCommerceMetrics: the figures equal a straightforward recomputation from the rows (random
 * orders, refunds, subscriptions and sessions across time zones, DST changes and month ends), a
 * real paid checkout shows up, and the usual error and security cases.
 *
 * Tax and discounts (issue 39, item 4; migration 0372): the random orders carry lines — a price,
 * sometimes a DISCOUNT, TAX lines of exclusive rates (on top), inclusive rates (0, the tax
 * included) or reverse charge — written after the order as any writer could, then refunded in
 * part or whole and disputed in later statements; the recomputation reads the lines (never
 * orders.tax_cents) and splits each refund's tax proportionally, rounded half up, in integers.
 * A taxed checkout paid on the hosted page and refunded through the admin API shows the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createTestContext, type TestContext } from '../harness/context.js';
import type { CurrencyFigures as Figures } from '../../src/commerce-metrics/commerce-metrics.service.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

type Interval = 'day' | 'week' | 'month';
interface Metrics {
  startDate: string;
  endDate: string;
  buckets: { date: string; start: string; end: string }[];
  customers: { totals: { newCustomers: number }; series: { newCustomers: number }[] };
  currencies: { currency: string; totals: Figures; series: Figures[] }[];
}

const get = (query: Record<string, string>, apiKey = ctx.orgA.apiKey) =>
  ctx.merchant.get('/v1/metrics/commerce').query(query).set('X-API-Key', apiKey);

async function metrics(query: Record<string, string>, apiKey = ctx.orgA.apiKey): Promise<Metrics> {
  const res = await get(query, apiKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as Metrics;
}

// ---------- the recomputation: local dates by Intl, buckets by calendar arithmetic ----------

const localDate = (at: Date, timeZone: string) =>
  new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(at);
const DAY = 86_400_000;
function bucketOf(date: string, interval: Interval): string {
  if (interval === 'day') return date;
  if (interval === 'month') return `${date.slice(0, 7)}-01`;
  const t = Date.parse(`${date}T00:00:00Z`);
  const weekday = (new Date(t).getUTCDay() + 6) % 7; // Monday 0
  return new Date(t - weekday * DAY).toISOString().slice(0, 10);
}
function nextBucket(bucket: string, interval: Interval): string {
  const t = new Date(`${bucket}T00:00:00Z`);
  if (interval === 'day') return new Date(t.getTime() + DAY).toISOString().slice(0, 10);
  if (interval === 'week') return new Date(t.getTime() + 7 * DAY).toISOString().slice(0, 10);
  return new Date(Date.UTC(t.getUTCFullYear(), t.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
}
const monthly = (s: SubRow) =>
  Math.round(
    s.billing_interval === 'MONTH'
      ? s.amount_cents / s.billing_interval_count
      : s.billing_interval === 'YEAR'
        ? s.amount_cents / (12 * s.billing_interval_count)
        : (s.amount_cents * 365) / (12 * s.billing_interval_count),
  );

interface OrderRow { id: string; status: string; amount_cents: number; amount_refunded_cents: number; currency: string; created_at: Date }
interface LineRow { order_id: string; kind: string; amount_cents: number; tax: { taxAmount: number } | string | null }
/** a × b ÷ c rounded half up, for non-negative integers (exact in doubles below 2^53). */
const halfUp = (a: number, b: number, c: number) => Math.floor((2 * a * b + c) / (2 * c));
interface SubRow { currency: string; amount_cents: number; billing_interval: string; billing_interval_count: number; created_at: Date; ended_at: Date | null }
interface SessionRow { currency: string; status: string; created_at: Date }

async function recompute(orgId: string, q: { start: string; end: string; interval: Interval; tz: string }) {
  const db = ctx.testDb.database.db;
  const n = (v: unknown) => Number(v);
  const orders = ((await db('orders').where({ org_id: orgId })) as OrderRow[]).map((o) => ({ ...o, amount_cents: n(o.amount_cents), amount_refunded_cents: n(o.amount_refunded_cents) }));
  // Each order's tax and discount from its lines: a TAX line's tax (its amount when exclusive, the
  // tax included when inclusive, 0 for reverse charge), minus the DISCOUNT lines.
  const taxOf = new Map<string, number>();
  const discountOf = new Map<string, number>();
  for (const l of (await db('order_lines').where({ org_id: orgId })) as LineRow[]) {
    const tax = typeof l.tax === 'string' ? (JSON.parse(l.tax) as { taxAmount: number }) : l.tax;
    if (l.kind === 'TAX') taxOf.set(l.order_id, (taxOf.get(l.order_id) ?? 0) + (tax ? tax.taxAmount : n(l.amount_cents)));
    if (l.kind === 'DISCOUNT') discountOf.set(l.order_id, (discountOf.get(l.order_id) ?? 0) - n(l.amount_cents));
  }
  const subs = ((await db('subscriptions').where({ org_id: orgId })) as SubRow[]).map((s) => ({ ...s, amount_cents: n(s.amount_cents) }));
  const sessions = (await db('checkout_sessions').where({ org_id: orgId })) as SessionRow[];
  const customers = (await db('customers').where({ org_id: orgId })) as { created_at: Date }[];

  const buckets: string[] = [];
  for (let b = bucketOf(q.start, q.interval); b <= bucketOf(q.end, q.interval); b = nextBucket(b, q.interval)) buckets.push(b);
  const bucket = (at: Date) => bucketOf(localDate(at, q.tz), q.interval);
  const zero = (): Figures => ({ successfulPayments: 0, grossVolume: 0, refundedVolume: 0, netVolume: 0, taxVolume: 0, refundedTaxVolume: 0, netTaxVolume: 0, netRevenue: 0, discountVolume: 0, failedPayments: 0, newSubscriptions: 0, churnedSubscriptions: 0, activeSubscriptions: 0, mrr: 0, checkoutSessionsCreated: 0, checkoutSessionsCompleted: 0 });
  const byCurrency = new Map<string, Figures[]>();
  const cell = (currency: string, b: string) => {
    const i = buckets.indexOf(b);
    if (i < 0) return undefined;
    if (!byCurrency.has(currency)) byCurrency.set(currency, buckets.map(zero));
    return byCurrency.get(currency)![i];
  };
  for (const o of orders) {
    const f = cell(o.currency, bucket(o.created_at));
    if (!f) continue;
    if (o.status === 'PAID' || o.status === 'REFUNDED') {
      f.successfulPayments++;
      f.grossVolume += o.amount_cents;
      f.refundedVolume += o.amount_refunded_cents;
      f.netVolume += o.amount_cents - o.amount_refunded_cents;
      const tax = taxOf.get(o.id) ?? 0;
      const refundedTax = o.amount_cents > 0 ? halfUp(tax, o.amount_refunded_cents, o.amount_cents) : 0;
      f.taxVolume += tax;
      f.refundedTaxVolume += refundedTax;
      f.netTaxVolume += tax - refundedTax;
      f.netRevenue += o.amount_cents - o.amount_refunded_cents - (tax - refundedTax);
      f.discountVolume += discountOf.get(o.id) ?? 0;
    }
    if (o.status === 'FAILED') f.failedPayments++;
  }
  for (const s of sessions) {
    const f = cell(s.currency, bucket(s.created_at));
    if (!f) continue;
    f.checkoutSessionsCreated++;
    if (s.status === 'COMPLETE') f.checkoutSessionsCompleted++;
  }
  for (const s of subs) {
    const start = cell(s.currency, bucket(s.created_at));
    if (start) start.newSubscriptions++;
    if (s.ended_at) {
      const end = cell(s.currency, bucket(s.ended_at));
      if (end) end.churnedSubscriptions++;
    }
    // Active at a bucket's end: started in or before it, not ended in or before it.
    buckets.forEach((b) => {
      if (bucket(s.created_at) <= b && (!s.ended_at || bucket(s.ended_at) > b)) {
        const f = cell(s.currency, b)!;
        f.activeSubscriptions++;
        f.mrr += monthly(s);
      }
    });
  }
  const newCustomers = buckets.map((b) => customers.filter((c) => bucket(c.created_at) === b).length);
  const currencies = [...byCurrency.entries()]
    .filter(([, list]) => list.some((f) => Object.values(f).some((v) => v !== 0)))
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([currency, series]) => {
      const totals = zero();
      for (const f of series)
        for (const k of Object.keys(totals) as (keyof Figures)[]) if (k !== 'activeSubscriptions' && k !== 'mrr') totals[k] += f[k];
      totals.activeSubscriptions = series[series.length - 1]!.activeSubscriptions;
      totals.mrr = series[series.length - 1]!.mrr;
      return { currency, totals, series };
    });
  return { buckets, currencies, newCustomers };
}

// ---------- random rows, written as Kassa's tables hold them ----------

let seq = 0;
const id = (prefix: string) => `${prefix}_${String(++seq).padStart(24, '0')}`;

async function insertRows(orgId: string, instants: Date[], rng: () => number) {
  const db = ctx.testDb.database.db;
  const pick = <T,>(list: readonly T[]): T => list[Math.floor(rng() * list.length)]!;
  const at = () => pick(instants);
  const currencies = ['USD', 'EUR', 'USDC'] as const;
  const rows = { customers: [] as object[], checkout_sessions: [] as object[], orders: [] as object[], subscriptions: [] as object[] };
  const lines: object[] = [];
  for (let i = 0; i < 25; i++) {
    const customerId = id('CUS');
    const email = `buyer${seq}@example.com`;
    rows.customers.push({ id: customerId, org_id: orgId, email, created_at: at() });
    for (let j = 0; j < 3; j++) {
      const currency = pick(currencies);
      const orderId = id('ORD');
      const { amount, lines: orderLines } = randomLines(orgId, orderId, rng);
      lines.push(...orderLines);
      const status = pick(['PAID', 'PAID', 'PAID', 'REFUNDED', 'FAILED', 'PENDING', 'UNDERPAID'] as const);
      const refunded = status === 'REFUNDED' ? amount : status === 'PAID' && rng() < 0.3 ? Math.floor(amount * rng()) : 0;
      const created = at();
      const sessionId = id('CS');
      const sessionStatus = pick(['CREATED', 'COMPLETE', 'EXPIRED', 'FAILED'] as const);
      rows.checkout_sessions.push({
        id: sessionId, org_id: orgId, status: sessionStatus, provider: 'STRIPE', amount, currency, quantity: 1,
        pricing: JSON.stringify({ amount, currency }), product: JSON.stringify({ name: 'Thing' }), page_token: id('tok'),
        expires_at: created, created_at: created, updated_at: created,
      });
      rows.orders.push({
        id: orderId, org_id: orgId, status, provider: 'STRIPE', amount_cents: amount, amount_refunded_cents: refunded, currency,
        customer_id: customerId, customer_email: email, checkout_session_id: sessionId, created_at: created, updated_at: created,
      });
    }
    if (rng() < 0.6) {
      const [a, b] = [at(), at()].sort((x, y) => x.getTime() - y.getTime()) as [Date, Date];
      rows.subscriptions.push({
        id: id('SUB'), org_id: orgId, status: rng() < 0.5 ? 'ACTIVE' : 'CANCELED', provider: 'STRIPE', customer_id: customerId, customer_email: email,
        product_name: 'Plan', amount_cents: 1 + Math.floor(rng() * 50_000), currency: pick(currencies), billing_interval: pick(['DAY', 'MONTH', 'YEAR'] as const),
        billing_interval_count: pick([1, 1, 2, 3, 12]), current_period_start: a, current_period_end: b, billing_anchor: a,
        next_action_at: b, initial_order_id: id('ORD'), latest_order_id: id('ORD'), checkout_session_id: id('CS'),
        payment_method: 'pm', manage_token: id('mt'), created_at: a, updated_at: a, ended_at: rng() < 0.4 ? b : null,
      });
    }
  }
  // Subscriptions that started before the range and end exactly on, or just before, its first bound.
  const before = new Date(Math.min(...instants.map((t) => t.getTime())));
  const bound = instants[0]!;
  for (const ended of [bound, new Date(bound.getTime() - 1), new Date(bound.getTime() + 1)]) {
    const customerId = rows.customers.length ? (rows.customers[0] as { id: string }).id : '';
    rows.subscriptions.push({
      id: id('SUB'), org_id: orgId, status: 'CANCELED', provider: 'STRIPE', customer_id: customerId, customer_email: 'edge@example.com',
      product_name: 'Plan', amount_cents: 999, currency: 'USD', billing_interval: 'MONTH', billing_interval_count: 1,
      current_period_start: before, current_period_end: ended, billing_anchor: before, next_action_at: ended,
      initial_order_id: id('ORD'), latest_order_id: id('ORD'), checkout_session_id: id('CS'), payment_method: 'pm',
      manage_token: id('mt'), created_at: before, updated_at: before, ended_at: ended,
    });
  }
  for (const [table, list] of Object.entries(rows)) if (list.length > 0) await db(table).insert(list);
  // The lines after their orders, as the order repository writes them (and any other writer could).
  if (lines.length > 0) await db('order_lines').insert(lines);
  // Later statements: refunds in part or whole (a proportional share of the tax), a dispute (the
  // flag only: the status and refunded amount stay), a pending order paid.
  const later = (await db('orders').where({ org_id: orgId }).select('id', 'status', 'amount_cents').orderBy('id')) as Array<{ id: string; status: string; amount_cents: string | number }>;
  for (const o of later) {
    const r = rng();
    const amount = Number(o.amount_cents);
    if (r < 0.08 && o.status === 'PAID') await db('orders').where({ id: o.id }).update({ amount_refunded_cents: Math.floor(amount * rng()) });
    else if (r < 0.12 && o.status === 'PAID') await db('orders').where({ id: o.id }).update({ amount_refunded_cents: amount, status: 'REFUNDED' });
    else if (r < 0.16 && o.status === 'PAID') await db('orders').where({ id: o.id }).update({ disputed: true });
    else if (r < 0.2 && o.status === 'PENDING') await db('orders').where({ id: o.id }).update({ status: 'PAID' });
  }
}

/**
 * An order's lines as Kassa prices them (docs/tax.md): a price, sometimes a DISCOUNT, then TAX
 * lines on the discounted amount — exclusive (rounded half up, on top), inclusive (0, the tax
 * included: taxable × p ÷ (100 + Σp)) or reverse charge (0) — summing to the order's amount.
 */
function randomLines(orgId: string, orderId: string, rng: () => number): { amount: number; lines: object[] } {
  const price = 1 + Math.floor(rng() * 100_000);
  const discount = rng() < 0.25 ? Math.floor(price * rng() * 0.5) : 0;
  const taxable = price - discount;
  const kind = ['none', 'exclusive', 'exclusive2', 'inclusive', 'reverse'][Math.floor(rng() * 5)]!;
  const lines: Array<Record<string, unknown>> = [];
  const line = (k: string, amount: number, tax: object | null = null) =>
    lines.push({ order_id: orderId, position: lines.length, org_id: orgId, kind: k, description: k, exact_amount: String(amount), amount_cents: amount, tax: tax && JSON.stringify(tax) });
  const detail = (percentage: string, inclusive: boolean, taxAmount: number, reverseCharge = false) => ({
    rateId: reverseCharge ? null : 'TXR_x', displayName: 'VAT', percentage, inclusive, country: 'DE', region: null, taxableAmount: taxable, taxAmount, reverseCharge, taxId: null,
  });
  line('PRICE', price);
  if (discount > 0) line('DISCOUNT', -discount);
  if (kind === 'exclusive' || kind === 'exclusive2') {
    // 19 %, and a second rate of 8.875 % side by side (no tax on tax).
    const vat = halfUp(taxable, 19, 100);
    line('TAX', vat, detail('19', false, vat));
    if (kind === 'exclusive2') {
      const district = halfUp(taxable, 8875, 100_000);
      line('TAX', district, detail('8.875', false, district));
    }
  }
  if (kind === 'inclusive') {
    const included = halfUp(taxable, 20, 120);
    line('TAX', 0, detail('20', true, included));
  }
  if (kind === 'reverse') line('TAX', 0, detail('0', false, 0, true));
  return { amount: lines.reduce((s, l) => s + Number(l.amount_cents), 0), lines };
}

/** Instants around the buckets' bounds (exactly on them, a millisecond before) and spread inside. */
function instantsAround(buckets: { start: string; end: string }[], rng: () => number): Date[] {
  const out: Date[] = [];
  for (const b of buckets) {
    const s = Date.parse(b.start);
    const e = Date.parse(b.end);
    out.push(new Date(s), new Date(s - 1), new Date(e - 1), new Date(s + Math.floor(rng() * (e - s))));
  }
  return out;
}

function mulberry32(seed: number) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('getCommerceMetrics', () => {
  it('equals a recomputation from the rows, across time zones, DST changes and month ends', async () => {
    const zones = ['UTC', 'Europe/Paris', 'America/New_York', 'Asia/Kolkata', 'Australia/Lord_Howe', 'Pacific/Chatham', 'America/Santiago'];
    const cases = fc.sample(
      fc.record({
        tz: fc.constantFrom(...zones),
        interval: fc.constantFrom<Interval>('day', 'week', 'month'),
        startDay: fc.integer({ min: 0, max: 500 }),
        length: fc.integer({ min: 0, max: 70 }),
        seed: fc.integer(),
      }),
      { numRuns: 8, seed: Number(process.env.KASSA_METRICS_SEED ?? 20261128) },
    );
    // A fresh organization per case: its rows are all this case's.
    for (const c of cases) {
      const org = await ctx.services.orgs.createOrganization({ name: `Metrics ${seq}` });
      const key = await ctx.services.orgs.createApiKey(org.id, { name: 'm' });
      const base = Date.parse('2025-10-01T00:00:00Z');
      const start = new Date(base + c.startDay * DAY).toISOString().slice(0, 10);
      const end = new Date(base + (c.startDay + (c.interval === 'month' ? c.length * 5 : c.interval === 'week' ? c.length * 2 : c.length)) * DAY).toISOString().slice(0, 10);
      const query = { start_date: start, end_date: end, interval: c.interval, time_zone: c.tz };
      const empty = await metrics(query, key.key);
      expect(empty.currencies).toEqual([]);
      const rng = mulberry32(c.seed);
      // Rows inside the range, on its bucket bounds, and before and after it.
      const inside = instantsAround(empty.buckets, rng);
      const first = Date.parse(empty.buckets[0]!.start);
      const last = Date.parse(empty.buckets[empty.buckets.length - 1]!.end);
      await insertRows(org.id, [new Date(first), ...inside, new Date(first - 40 * DAY), new Date(last + 3 * DAY), new Date(last)], rng);

      const got = await metrics(query, key.key);
      const want = await recompute(org.id, { start, end, interval: c.interval, tz: c.tz });
      expect(got.buckets.map((b) => b.date), JSON.stringify(c)).toEqual(want.buckets);
      expect(got.customers.series.map((s) => s.newCustomers), JSON.stringify(c)).toEqual(want.newCustomers);
      expect(got.currencies, JSON.stringify(c)).toEqual(want.currencies);
      // One currency alone answers that currency's figures, in either case.
      const usd = await metrics({ ...query, currency: 'usd' }, key.key);
      expect(usd.currencies).toEqual(want.currencies.filter((x) => x.currency === 'USD'));
    }
  });

  it('gives each bucket its local bounds: a DST change makes a 23-hour day', async () => {
    const m = await metrics({ start_date: '2026-03-28', end_date: '2026-03-30', time_zone: 'Europe/Paris' });
    expect(m.buckets).toEqual([
      { date: '2026-03-28', start: '2026-03-27T23:00:00.000Z', end: '2026-03-28T23:00:00.000Z' },
      { date: '2026-03-29', start: '2026-03-28T23:00:00.000Z', end: '2026-03-29T22:00:00.000Z' },
      { date: '2026-03-30', start: '2026-03-29T22:00:00.000Z', end: '2026-03-30T22:00:00.000Z' },
    ]);
    const months = await metrics({ start_date: '2026-01-15', end_date: '2026-03-02', interval: 'month' });
    expect(months.startDate).toBe('2026-01-01');
    expect(months.endDate).toBe('2026-03-31');
    expect(months.buckets.map((b) => b.date)).toEqual(['2026-01-01', '2026-02-01', '2026-03-01']);
    const weeks = await metrics({ start_date: '2026-11-25', end_date: '2026-11-30', interval: 'week' });
    expect(weeks.buckets.map((b) => b.date)).toEqual(['2026-11-23', '2026-11-30']);
    expect(weeks.endDate).toBe('2026-12-06');
  });

  it('counts a checkout paid on the hosted page, today against yesterday', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 1200, currency: 'USD' });
    const session = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'metrics-1')
      .send({ pricingId: price.id, successUrl: 'https://shop.example/thanks' });
    expect(session.status).toBe(201);
    const paid = await ctx.merchant
      .post(`${new URL(session.body.data.url).pathname}/pay`)
      .type('form')
      .send({ cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123', email: 'ada@example.com' });
    expect(paid.status).toBe(303);
    // The harness clock stands at 2026-11-22T09:00Z.
    const m = await metrics({ start_date: '2026-11-21', end_date: '2026-11-22' });
    expect(m.customers.series).toEqual([{ newCustomers: 0 }, { newCustomers: 1 }]);
    const usd = m.currencies.find((c) => c.currency === 'USD')!;
    expect(usd.series[0]).toMatchObject({ successfulPayments: 0, grossVolume: 0, checkoutSessionsCreated: 0 });
    expect(usd.series[1]).toMatchObject({ successfulPayments: 1, grossVolume: 1200, netVolume: 1200, checkoutSessionsCreated: 1, checkoutSessionsCompleted: 1 });
    // Organization B sees none of it.
    const b = await metrics({ start_date: '2026-11-21', end_date: '2026-11-22' }, ctx.orgB.apiKey);
    expect(b.currencies).toEqual([]);
    expect(b.customers.totals.newCustomers).toBe(0);
  });

  it('splits a taxed checkout paid on the hosted page into net, tax and gross, and a refund proportionally', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Taxed metrics' });
    const key = await ctx.services.orgs.createApiKey(org.id, { name: 'm' });
    await ctx.services.modules.tax.tax.create(org.id, { displayName: 'VAT', percentage: '19', country: 'DE' });
    await ctx.services.modules.tax.tax.create(org.id, { displayName: 'TVA', percentage: '20', country: 'FR', inclusive: true });
    const product = await ctx.services.catalog.createProduct(org.id, { name: 'Ebook' });
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'EUR' });
    const buy = async (body: object) => {
      const session = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', key.key).set('Idempotency-Key', `taxed-${++seq}`).send({ pricingId: price.id, ...body });
      expect(session.status, JSON.stringify(session.body)).toBe(201);
      const paid = await ctx.merchant
        .post(`${new URL(session.body.data.url).pathname}/pay`)
        .type('form')
        .send({ cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123', email: 'ada@example.com', amount: String(session.body.data.amount) });
      expect(paid.status).toBe(303);
      const s = (await ctx.merchant.get(`/v1/checkout-sessions/${session.body.data.id}`).set('X-API-Key', key.key)).body.data;
      return s.orderId as string;
    };
    // 3 × 10.00 at 19 % exclusive: 30.00 + 5.70 = 35.70. 10.00 at 20 % inclusive: 1.67 included.
    const german = await buy({ quantity: 3, customerTax: { country: 'DE' } });
    await buy({ customerTax: { country: 'FR' } });
    const query = { start_date: '2026-11-21', end_date: '2026-11-22' };
    let eur = (await metrics(query, key.key)).currencies.find((c) => c.currency === 'EUR')!;
    expect(eur.totals).toMatchObject({ successfulPayments: 2, grossVolume: 4570, taxVolume: 737, refundedVolume: 0, refundedTaxVolume: 0, netTaxVolume: 737, netVolume: 4570, netRevenue: 3833, discountVolume: 0 });
    // The API's insert writes the order's tax with its row; the lines' trigger finds it equal.
    expect(Number((await ctx.testDb.database.db('orders').where({ id: german }).first()).tax_cents)).toBe(570);
    // 10.00 of the 35.70 refunded: its tax share is 570 × 1000 ÷ 3570 = 159.66 → 160.
    expect((await ctx.admin.post(`/v1/orders/${german}/refund`).send({ amount: 1000 })).status).toBe(200);
    eur = (await metrics(query, key.key)).currencies.find((c) => c.currency === 'EUR')!;
    expect(eur.series[1]).toMatchObject({ grossVolume: 4570, taxVolume: 737, refundedVolume: 1000, refundedTaxVolume: 160, netTaxVolume: 577, netVolume: 3570, netRevenue: 2993 });
    // The rest refunded: all of its tax.
    expect((await ctx.admin.post(`/v1/orders/${german}/refund`).send({})).status).toBe(200);
    eur = (await metrics(query, key.key)).currencies.find((c) => c.currency === 'EUR')!;
    expect(eur.totals).toMatchObject({ refundedVolume: 3570, refundedTaxVolume: 570, netTaxVolume: 167, netVolume: 1000, netRevenue: 833 });
  });

  it('refuses a range that ends before it starts, spans more than 400 buckets, or names an unknown zone', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ start_date: '2026-11-02', end_date: '2026-11-01' }, /end_date must not be before start_date/],
      [{ start_date: '2025-01-01', end_date: '2026-03-01' }, /at most 400/],
      [{ start_date: '2026-11-01', end_date: '2026-11-02', time_zone: 'Mars/Olympus_Mons' }, /Unknown time zone/],
      [{ start_date: '1969-12-31', end_date: '1970-01-02' }, /1970-01-01 or later/],
      [{ start_date: '2026-02-30', end_date: '2026-03-01' }, /start_date/],
      [{ start_date: '2026-11-01' }, /end_date/],
      [{ start_date: '2026-11-01', end_date: '2026-11-02', interval: 'hour' }, /interval/],
    ];
    for (const [query, message] of cases) {
      const res = await get(query);
      expect(res.status, JSON.stringify(query)).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.message + res.body.error.message).toMatch(message);
    }
    // 400 months is fine; 401 days is not.
    expect((await get({ start_date: '1990-01-01', end_date: '2023-04-30', interval: 'month' })).status).toBe(200);
    expect((await get({ start_date: '2026-01-01', end_date: '2027-02-05' })).status).toBe(400);
  });

  it('needs orders:read', async () => {
    const key = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'no orders', permissions: ['catalog:read'] });
    const res = await get({ start_date: '2026-11-01', end_date: '2026-11-02' }, key.key);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('FORBIDDEN');
    const anonymous = await ctx.merchant.get('/v1/metrics/commerce').query({ start_date: '2026-11-01', end_date: '2026-11-02' });
    expect(anonymous.status).toBe(401);
  });
});
