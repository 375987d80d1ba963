/**
 * The list queries of issue 32 (GET /v1/orders, /v1/customers, /v1/subscriptions with their
 * filters, page numbers and cursors; GET /v1/entitlements/check) against a straightforward
 * recomputation in JS on random rows: many ties on created_at (the id must break them), page
 * boundaries of every size, a second organization's rows that must never show. Property style: a
 * seeded generator (KASSA_LIST_SEED replays a run), many random queries per run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createTestContext, type TestContext } from '../harness/context.js';
import { EXACT_TOTAL_BOUND } from '../../src/kernel/list.js';

const SEED = Number(process.env.KASSA_LIST_SEED ?? Date.now() % 100000);
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = prng(SEED);
const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
// Uppercase letters and digits of one length: byte order and the database's collation agree.
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const newId = (prefix: string) => `${prefix}_${Array.from({ length: 24 }, () => pick([...ALPHABET])).join('')}`;

const BASE = Date.parse('2026-10-01T00:00:00.000Z');
// Few distinct instants: many rows share one, so the id decides their order.
const INSTANTS = Array.from({ length: 12 }, (_, i) => new Date(BASE + i * 3_600_000 + (i % 3) * 7));
const STATUSES = ['PENDING', 'PAID', 'FAILED', 'REFUNDED', 'UNDERPAID'] as const;
const PRODUCTS = ['PRD_PRODUCT0000000000000000A', 'PRD_PRODUCT0000000000000000B', 'PRD_PRODUCT0000000000000000C', 'PRD_PRODUCT0000000000000000D'];
const WALLETS = ['0x1f9840a85d5aF5bf1D1762F925BDADdC4201F984', '0x00000000000000000000000000000000000000aB', '0xAbCdEf0000000000000000000000000000000001'];
// Transaction hashes as chains report them and in upper case: several orders share each (they may, on different chains).
const TX_HASHES = [`0x${'4e3a3754'.repeat(8)}`, `0x${'ABCDEF01'.repeat(8)}`, `0x${'0'.repeat(63)}f`];
const REFERENCES = ['inv-100', 'INV-200', 'order_5%', 'inv-1001', null];

interface OrderRow { id: string; org_id: string; status: string; provider: string; customer_id: string; customer_email: string; product_id: string | null; product_name: string | null; subscription_id: string | null; from_address: string | null; tx_hash: string | null; merchant_reference: string | null; amount_refunded_cents: number; created_at: Date }
interface CustomerRow { id: string; org_id: string; email: string; created_at: Date }
interface SubscriptionRow { id: string; org_id: string; status: string; customer_id: string; customer_email: string; product_id: string | null; product_name: string; created_at: Date }

let ctx: TestContext;
let db: Knex;
const orders: OrderRow[] = [];
const customers: CustomerRow[] = [];
const subscriptions: SubscriptionRow[] = [];

const newestFirst = (a: { created_at: Date; id: string }, b: { created_at: Date; id: string }) =>
  b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

async function seed(orgId: string, scale: number) {
  const own: CustomerRow[] = [];
  for (let i = 0; i < 12 * scale; i++) own.push({ id: newId('CUS'), org_id: orgId, email: `Buyer${i}.${orgId.slice(-4)}@Example.com`, created_at: pick(INSTANTS) });
  customers.push(...own);
  const subs: SubscriptionRow[] = [];
  for (let i = 0; i < 10 * scale; i++) {
    const customer = pick(own);
    const product = pick([...PRODUCTS, null]);
    subs.push({ id: newId('SUB'), org_id: orgId, status: pick(['ACTIVE', 'CANCELED', 'PAUSED', 'ENDED']), customer_id: customer.id, customer_email: customer.email, product_id: product, product_name: product ? `Name of ${product}` : 'Inline', created_at: pick(INSTANTS) });
  }
  subscriptions.push(...subs);
  const rows: OrderRow[] = [];
  // Customers left without orders must not be listed.
  const buyers = own.slice(0, Math.ceil(own.length * 0.8));
  for (let i = 0; i < 80 * scale; i++) {
    const customer = pick(buyers);
    const crypto = rand() < 0.4;
    const product = pick([...PRODUCTS, null]);
    const sub = rand() < 0.2 ? pick(subs) : null;
    rows.push({
      id: newId('ORD'),
      org_id: orgId,
      status: pick(STATUSES),
      provider: crypto ? 'CRYPTO' : 'STRIPE',
      customer_id: customer.id,
      customer_email: customer.email,
      product_id: product,
      product_name: product ? `Name of ${product}` : null,
      subscription_id: sub?.id ?? null,
      from_address: crypto ? pick(WALLETS) : null,
      tx_hash: crypto ? pick(TX_HASHES) : null,
      merchant_reference: pick(REFERENCES),
      amount_refunded_cents: rand() < 0.15 ? 100 : 0,
      created_at: pick(INSTANTS),
    });
  }
  orders.push(...rows);
  await db('customers').insert(own);
  await db('orders').insert(rows.map((o) => ({ ...o, amount_cents: 1000, currency: 'USD', updated_at: o.created_at })));
  await db('subscriptions').insert(subs.map((s) => ({
    ...s, provider: 'STRIPE', amount_cents: 900, currency: 'USD', billing_interval: 'MONTH', billing_interval_count: 1,
    current_period_start: s.created_at, current_period_end: s.created_at, billing_anchor: s.created_at, next_action_at: s.created_at,
    initial_order_id: newId('ORD'), latest_order_id: newId('ORD'), checkout_session_id: newId('CS'), payment_method: 'pm', manage_token: newId('MT'), updated_at: s.created_at,
  })));
}

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
  await seed(ctx.orgA.orgId, 3);
  await seed(ctx.orgB.orgId, 1);
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

const get = async (path: string) => {
  const res = await ctx.merchant.get(path).set('X-API-Key', ctx.orgA.apiKey);
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`);
  return res.body.data as { records: Array<Record<string, string>>; total: number; page: number; size: number; pages: number; current: number; totalExact: boolean; hasMore: boolean; nextCursor: string | null; previousCursor: string | null };
};

/**
 * Walks a list every way a client can and compares each page with `expected` (its ids, newest
 * first): page numbers to one past the end, the cursors forward from the start, and backward from
 * the end through previousCursor.
 */
async function checkList(path: string, params: URLSearchParams, idOf: (r: Record<string, string>) => string, expected: string[]) {
  const size = 1 + Math.floor(rand() * 7);
  const url = (extra: Record<string, string | number>) => {
    const q = new URLSearchParams(params);
    for (const [k, v] of Object.entries(extra)) q.set(k, String(v));
    return `${path}?${q}`;
  };
  const pages = Math.ceil(expected.length / size);
  for (let p = 1; p <= pages + 1; p++) {
    const data = await get(url({ page: p, size }));
    const want = expected.slice((p - 1) * size, p * size);
    expect(data.records.map(idOf), `${url({ page: p, size })} (seed ${SEED})`).toEqual(want);
    expect(data).toMatchObject({ total: expected.length, totalExact: true, pages, page: p, current: p, size, hasMore: p * size < expected.length });
    expect(data.nextCursor).toBe(p * size < expected.length ? want.at(-1) : null);
    expect(data.previousCursor).toBe(p > 1 && want.length > 0 ? want[0] : null);
  }
  // Forward through the cursors.
  const forward: string[] = [];
  let data = await get(url({ size }));
  let last = data;
  for (let guard = 0; guard <= pages + 1; guard++) {
    forward.push(...data.records.map(idOf));
    last = data;
    if (!data.nextCursor) break;
    data = await get(url({ size, starting_after: data.nextCursor }));
    // With a cursor, total counts the rest of the list.
    expect(data.total).toBe(expected.length - forward.length);
  }
  expect(forward, `forward ${url({ size })} (seed ${SEED})`).toEqual(expected);
  // And back from the last page.
  const backward: string[] = [...last.records.map(idOf)];
  data = last;
  while (data.previousCursor) {
    data = await get(url({ size, ending_before: data.previousCursor }));
    expect(data.records.length).toBeGreaterThan(0);
    backward.unshift(...data.records.map(idOf));
  }
  expect(backward, `backward ${url({ size })} (seed ${SEED})`).toEqual(expected);
  // A cursor from anywhere in the organization (it need not match the filters).
  const anchor = pick(orders.filter((o) => o.org_id === ctx.orgA.orgId));
  return { size, anchor };
}

describe(`list queries against a recomputation (seed ${SEED})`, () => {
  it('GET /v1/orders: every filter, alone and combined, by page and by cursor', async () => {
    const own = orders.filter((o) => o.org_id === ctx.orgA.orgId).sort(newestFirst);
    for (let round = 0; round < 24; round++) {
      const params = new URLSearchParams();
      let rows = own;
      const filters = round === 0 ? [] : new Set(Array.from({ length: 1 + Math.floor(rand() * 2) }, () => pick(['status', 'customer_id', 'product_id', 'provider', 'from_address', 'tx_hash', 'subscription_id', 'merchant_reference', 'dates'] as const)));
      for (const f of filters) {
        if (f === 'status') {
          const s = pick(STATUSES);
          params.set('status', pick([s, s.toLowerCase(), s[0] + s.slice(1).toLowerCase()]));
          rows = rows.filter((o) => o.status === s);
        } else if (f === 'customer_id') {
          const c = pick(own).customer_id;
          params.set('customer_id', c);
          rows = rows.filter((o) => o.customer_id === c);
        } else if (f === 'product_id') {
          const p = pick(PRODUCTS);
          params.set('product_id', p);
          rows = rows.filter((o) => o.product_id === p);
        } else if (f === 'provider') {
          const p = pick(['STRIPE', 'CRYPTO']);
          params.set('provider', p);
          rows = rows.filter((o) => o.provider === p);
        } else if (f === 'from_address') {
          const w = pick(WALLETS);
          params.set('from_address', rand() < 0.5 ? w.toLowerCase() : w.toUpperCase().replace('0X', '0x'));
          rows = rows.filter((o) => o.from_address?.toLowerCase() === w.toLowerCase());
        } else if (f === 'tx_hash') {
          const h = pick(TX_HASHES);
          params.set('tx_hash', rand() < 0.5 ? h.toLowerCase() : h.toUpperCase().replace('0X', '0x'));
          rows = rows.filter((o) => o.tx_hash?.toLowerCase() === h.toLowerCase());
        } else if (f === 'subscription_id') {
          const s = pick(subscriptions.filter((x) => x.org_id === ctx.orgA.orgId)).id;
          params.set('subscription_id', s);
          rows = rows.filter((o) => o.subscription_id === s);
        } else if (f === 'merchant_reference') {
          const r = pick(['inv', 'INV-2', '5%', '100']);
          params.set('merchant_reference', r);
          rows = rows.filter((o) => o.merchant_reference?.toLowerCase().includes(r.toLowerCase()));
        } else {
          const from = pick(INSTANTS).getTime();
          const to = from + Math.floor(rand() * 5) * 3_600_000;
          params.set('date_from', String(Math.floor(from / 1000)));
          params.set('date_to', String(Math.ceil(to / 1000)));
          rows = rows.filter((o) => o.created_at.getTime() >= Math.floor(from / 1000) * 1000 && o.created_at.getTime() < Math.ceil(to / 1000) * 1000);
        }
      }
      const expected = rows.map((o) => o.id);
      const { size, anchor } = await checkList('/v1/orders', params, (r) => r.orderId!, expected);
      const after = rows.filter((o) => newestFirst(o, anchor) > 0).map((o) => o.id);
      const data = await get(`/v1/orders?${params}&size=${size}&starting_after=${anchor.id}`);
      expect(data.records.map((r) => r.orderId)).toEqual(after.slice(0, size));
      expect(data.total).toBe(after.length);
      const before = rows.filter((o) => newestFirst(o, anchor) < 0).map((o) => o.id);
      const back = await get(`/v1/orders?${params}&size=${size}&ending_before=${anchor.id}`);
      expect(back.records.map((r) => r.orderId)).toEqual(before.slice(Math.max(0, before.length - size)));
      expect(back.hasMore).toBe(before.length > size);
    }
  }, 600_000);

  it('GET /v1/customers (only those with orders) and GET /v1/subscriptions, by page and by cursor', async () => {
    const withOrders = new Set(orders.filter((o) => o.org_id === ctx.orgA.orgId).map((o) => o.customer_id));
    const ownCustomers = customers.filter((c) => c.org_id === ctx.orgA.orgId && withOrders.has(c.id)).sort(newestFirst);
    await checkList('/v1/customers', new URLSearchParams(), (r) => r.customerId!, ownCustomers.map((c) => c.id));
    const someone = pick(ownCustomers);
    await checkList('/v1/customers', new URLSearchParams({ email: someone.email.toUpperCase() }), (r) => r.customerId!, [someone.id]);
    const ownSubs = subscriptions.filter((s) => s.org_id === ctx.orgA.orgId).sort(newestFirst);
    for (const params of [{}, { status: 'ACTIVE' }, { status: 'CANCELED' }, { customer_id: pick(ownSubs).customer_id }, { status: 'ACTIVE', customer_id: pick(ownSubs).customer_id }] as Array<Record<string, string>>) {
      const expected = ownSubs.filter((s) => (!params.status || s.status === params.status) && (!params.customer_id || s.customer_id === params.customer_id)).map((s) => s.id);
      await checkList('/v1/subscriptions', new URLSearchParams(params), (r) => r.subscriptionId!, expected);
    }
  }, 600_000);

  it("refuses a cursor that is not one of the organization's records, and both cursors at once", async () => {
    const foreign = orders.find((o) => o.org_id === ctx.orgB.orgId)!;
    for (const q of [`starting_after=${foreign.id}`, 'ending_before=ORD_nope', `starting_after=${orders[0]!.id}&ending_before=${orders[0]!.id}`]) {
      const res = await ctx.merchant.get(`/v1/orders?${q}`).set('X-API-Key', ctx.orgA.apiKey);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
    }
    const sub = subscriptions.find((s) => s.org_id === ctx.orgB.orgId)!;
    expect((await ctx.merchant.get(`/v1/subscriptions?starting_after=${sub.id}`).set('X-API-Key', ctx.orgA.apiKey)).status).toBe(400);
    const customer = customers.find((c) => c.org_id === ctx.orgB.orgId)!;
    expect((await ctx.merchant.get(`/v1/customers?ending_before=${customer.id}`).set('X-API-Key', ctx.orgA.apiKey)).status).toBe(400);
  });

  it('GET /v1/entitlements/check answers as the rules recomputed on the rows', async () => {
    const orgId = ctx.orgA.orgId;
    const grantsOf = (customerId: string | null, wallet: string | undefined) => {
      const products = new Map<string, { productName: string; type: string }>();
      for (const s of subscriptions) {
        if (s.org_id === orgId && customerId && !wallet && s.status === 'ACTIVE' && s.customer_id === customerId && s.product_id) products.set(s.product_id, { productName: s.product_name, type: 'SUBSCRIPTION' });
      }
      for (const o of [...orders].sort(newestFirst).reverse()) {
        if (o.org_id !== orgId || o.status !== 'PAID' || o.amount_refunded_cents !== 0 || o.subscription_id || !o.product_id) continue;
        if (customerId && o.customer_id !== customerId) continue;
        if (wallet && o.from_address?.toLowerCase() !== wallet.toLowerCase()) continue;
        products.set(o.product_id, { productName: o.product_name ?? '', type: 'ONE_TIME' });
      }
      return [...products].map(([productId, g]) => ({ productId, ...g })).sort((a, b) => (a.productId < b.productId ? -1 : 1));
    };
    const own = customers.filter((c) => c.org_id === orgId);
    for (let round = 0; round < 60; round++) {
      const customer = pick([...own, ...customers.filter((c) => c.org_id !== orgId).slice(0, 2)]);
      const other = pick(own);
      const q: Record<string, string> = {};
      const shape = pick(['id', 'email', 'wallet', 'id+email', 'id+wallet', 'mismatch']);
      if (shape.includes('id')) q.customer_id = customer.id;
      if (shape.includes('email')) q.email = customer.email.toLowerCase();
      if (shape.includes('wallet')) q.wallet = pick(WALLETS).toLowerCase();
      if (shape === 'mismatch') Object.assign(q, { customer_id: customer.id, email: other.email });
      const product = pick([...PRODUCTS, undefined]);
      if (product) q.product_id = product;
      const res = await ctx.merchant.get(`/v1/entitlements/check?${new URLSearchParams(q)}`).set('X-API-Key', ctx.orgA.apiKey);
      expect(res.status).toBe(200);
      const known = customer.org_id === orgId && (shape !== 'mismatch' || other.id === customer.id);
      const subjectId = q.customer_id || q.email ? (known ? customer.id : null) : null;
      const unknown = (q.customer_id !== undefined || q.email !== undefined) && !known;
      const products = unknown ? [] : grantsOf(subjectId, q.wallet);
      expect(res.body.data.products, `${JSON.stringify(q)} (seed ${SEED})`).toEqual(products);
      expect(res.body.data.customerId).toBe(subjectId);
      expect(res.body.data.entitled).toBe(product ? products.some((p) => p.productId === product) : products.length > 0);
    }
  }, 300_000);

  it(`reports the total exactly up to ${EXACT_TOTAL_BOUND} and as an estimate beyond, with exact paging either way`, async () => {
    const orgId = ctx.orgB.orgId;
    const customer = customers.find((c) => c.org_id === orgId)!;
    // One more than the bound: generated in the database (the same on PGlite and PostgreSQL).
    await db.raw(
      `INSERT INTO orders (id, org_id, status, provider, amount_cents, currency, customer_id, customer_email, created_at, updated_at)
       SELECT 'ORD_BULK' || lpad(g::text, 20, '0'), ?, 'PAID', 'STRIPE', 100, 'USD', ?, ?, ?::timestamptz - g * interval '1 second', ?::timestamptz
         FROM generate_series(1, ?) g`,
      [orgId, customer.id, customer.email, new Date(BASE - 86_400_000), new Date(BASE), EXACT_TOTAL_BOUND + 1],
    );
    await db.raw('ANALYZE orders');
    const own = orders.filter((o) => o.org_id === orgId).length + EXACT_TOTAL_BOUND + 1;
    const res = await ctx.merchant.get('/v1/orders?size=100&page=3').set('X-API-Key', ctx.orgB.apiKey);
    expect(res.body.data).toMatchObject({ totalExact: false, hasMore: true, page: 3 });
    expect(res.body.data.total).toBeGreaterThan(EXACT_TOTAL_BOUND);
    expect(res.body.data.pages).toBe(Math.ceil(res.body.data.total / 100));
    // The estimate is the planner's: near the real count, never below the bound.
    expect(Math.abs(res.body.data.total - own) / own).toBeLessThan(0.5);
    const paid = await ctx.merchant.get('/v1/orders?status=paid&size=5').set('X-API-Key', ctx.orgB.apiKey);
    expect(paid.body.data.totalExact).toBe(false);
    // The end of the list: exact again once fewer than the bound remain after the cursor.
    const oldest = await db('orders').where({ org_id: orgId }).orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }]).limit(3);
    const tail = await ctx.merchant.get(`/v1/orders?starting_after=${oldest[2].id}`).set('X-API-Key', ctx.orgB.apiKey);
    expect(tail.body.data).toMatchObject({ total: 2, totalExact: true, hasMore: false, nextCursor: null });
    expect(tail.body.data.records.map((r: { orderId: string }) => r.orderId)).toEqual([oldest[1].id, oldest[0].id]);
  }, 300_000);
});
