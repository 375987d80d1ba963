/**
 * The last growing lists of issue 40, on PostgreSQL: the queries the repositories build, explained.
 * `merchant_reference` (a contains-match) is read through the trigram index of migration 0261, not
 * a scan of the organization's orders; the customers list's last page through a cursor walks the
 * customers' (org, created_at, id) index from the cursor and probes each customer's orders by
 * index (no hash join over all orders, no sort), whatever the depth. A page by number past the
 * first skips its offset over an index alone (index-only) and reads only its own rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { KnexOrderRepository, LIST_ORDERS_DEEP_SQL } from '../../src/orders/order.repository.js';
import { KnexCustomerRepository } from '../../src/orders/customer.repository.js';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
let ctx: TestContext;
let db: Knex;
const T0 = Date.parse('2026-01-01T00:00:00Z');
const CUSTOMERS = 300;
const ORDERS = 3000;
/** Distinct references, as invoice numbers of a real shop are (a shared prefix's trigrams match every order). */
const reference = (i: number) => `INV-${((i * 2654435761) % 2 ** 32).toString(36).toUpperCase()}`;

describe.skipIf(!onPostgres)(skippedUnless('list query plans', 'postgresOnly'), () => {
  beforeAll(async () => {
    ctx = await createTestContext();
    db = ctx.testDb.database.db;
    const orgId = ctx.orgA.orgId;
    const customers = Array.from({ length: CUSTOMERS }, (_, i) => ({ id: `CUS_plan${String(i).padStart(20, '0')}`, org_id: orgId, email: `plan${i}@example.com`, created_at: new Date(T0 + i * 60_000) }));
    await db.batchInsert('customers', customers, 500);
    const orders = Array.from({ length: ORDERS }, (_, i) => {
      const c = customers[(i * 7) % CUSTOMERS]!;
      return {
        id: `ORD_plan${String(i).padStart(20, '0')}`, org_id: orgId, status: 'PAID', provider: 'STRIPE', amount_cents: 1000, currency: 'USD',
        customer_id: c.id, customer_email: c.email, merchant_reference: reference(i), created_at: new Date(T0 + i * 1000), updated_at: new Date(T0 + i * 1000),
      };
    });
    await db.batchInsert('orders', orders, 500);
    await db.raw('ANALYZE orders, customers');
  });
  afterAll(async () => {
    await ctx?.close();
  });

  /** EXPLAIN of every statement `run` sends (knex reports them with $n placeholders, in order). */
  async function plans(run: () => Promise<unknown>): Promise<string[]> {
    const captured: Array<{ sql: string; bindings: unknown[] }> = [];
    const listener = (q: { sql: string; bindings?: unknown[] }) => captured.push({ sql: q.sql, bindings: q.bindings ?? [] });
    db.on('query', listener);
    try {
      await run();
    } finally {
      db.off('query', listener);
    }
    return db.transaction(async (trx) => {
      // A test's few thousand rows fit a page or two: a scan wins there; the question is whether the indexes serve.
      await trx.raw('SET LOCAL enable_seqscan = off');
      const out: string[] = [];
      for (const q of captured.filter((c) => !c.sql.startsWith('EXPLAIN'))) {
        const { rows } = await trx.raw(`EXPLAIN ${q.sql.replace(/\$\d+/g, '?')}`, q.bindings as Knex.RawBinding[]);
        out.push((rows as Array<{ 'QUERY PLAN': string }>).map((l) => l['QUERY PLAN']).join('\n'));
      }
      return out;
    });
  }

  it('orders?merchant_reference: the trigram index of migration 0261', async () => {
    const orders = new KnexOrderRepository(db);
    const [page] = await plans(() => orders.list(ctx.orgA.orgId, { merchantReference: reference(1234).slice(2) }, { offset: 0, limit: 20 }));
    expect(page).toContain('orders_merchant_reference_trgm');
    expect(page).not.toMatch(/Seq Scan on orders/);
    const found = await orders.list(ctx.orgA.orgId, { merchantReference: reference(1234).toLowerCase() }, { offset: 0, limit: 20 });
    expect(found.records.map((o) => o.merchantReference)).toEqual([reference(1234)]);
  });

  it('customers, last page by cursor: index walk from the cursor, each customer probed by index', async () => {
    const customers = new KnexCustomerRepository(db);
    const twentyFirstOldest = (await db('customers').where({ org_id: ctx.orgA.orgId }).orderBy([{ column: 'created_at' }, { column: 'id' }]).offset(20).first('created_at', 'id'))!;
    const keyset = { createdAt: new Date(twentyFirstOldest.created_at), id: twentyFirstOldest.id };
    const statements = await plans(() => customers.listWithOrders(ctx.orgA.orgId, {}, { offset: 0, limit: 20, startingAfter: keyset }));
    const page = statements[0]!;
    expect(page).toContain('customers_org_created_id');
    expect(page).toContain('orders_org_customer_created_id');
    // Bounded by the cursor in the index (a page's worth of entries), the orders probed per customer.
    expect(page).toMatch(/Index Cond: .*ROW\(created_at, id\) </);
    expect(page).not.toMatch(/Seq Scan|Hash/);
    const last = await customers.listWithOrders(ctx.orgA.orgId, {}, { offset: 0, limit: 20, startingAfter: keyset });
    expect(last.records).toHaveLength(20);
    expect(last.hasMore).toBe(false);
  });

  it('a page by number past the first skips its offset over the index alone and reads only its rows', async () => {
    const orders = new KnexOrderRepository(db);
    const customers = new KnexCustomerRepository(db);
    const deep = { offset: 2900, limit: 20 };
    const explain = async (sql: string, bindings: Knex.RawBinding[]) =>
      db.transaction(async (trx) => {
        await trx.raw('SET LOCAL enable_seqscan = off');
        const positional = [...sql.matchAll(/\$(\d+)/g)].map((m) => bindings[Number(m[1]) - 1]!);
        const { rows } = await trx.raw(`EXPLAIN ${sql.replace(/\$\d+/g, '?')}`, positional);
        return (rows as Array<{ 'QUERY PLAN': string }>).map((l) => l['QUERY PLAN']).join('\n');
      });
    // The page's own statement (the others count the list or probe its edges).
    const pageOf = async (run: () => Promise<unknown>) => (await plans(run)).find((plan) => plan.includes('Limit') && !plan.startsWith('Aggregate'))!;
    for (const [label, plan] of [
      // The unfiltered list runs its fixed statement directly (prepared, not through knex's query log).
      ['orders', await explain(LIST_ORDERS_DEEP_SQL, [ctx.orgA.orgId, 2900, 21])],
      ['orders?status', await pageOf(() => orders.list(ctx.orgA.orgId, { status: 'PAID' }, deep))],
      ['customers', await pageOf(() => customers.listWithOrders(ctx.orgA.orgId, {}, { offset: 260, limit: 20 }))],
    ] as const) {
      const page = plan;
      // The skipped entries come from an index-only scan; the page's rows by their primary key.
      expect(page, label).toMatch(/Index Only Scan (Backward )?using (orders|customers)_org_\w+/);
      // (The customers' outer read is the planner's choice at this size: the page's 21 ids or a walk of 300 rows.)
      if (label !== 'customers') expect(page, label).toMatch(/Index Scan using orders_pkey/);
      expect(page, label).not.toMatch(/Seq Scan/);
    }
    const all = await db('orders').where({ org_id: ctx.orgA.orgId }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).pluck('id');
    const page = await orders.list(ctx.orgA.orgId, {}, deep);
    expect(page.records.map((o) => o.id)).toEqual(all.slice(2900, 2920));
    expect(page).toMatchObject({ hasMore: true, hasNewer: true });
  });
});
