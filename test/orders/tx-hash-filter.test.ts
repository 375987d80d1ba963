/**
 * `GET /v1/orders?tx_hash=…` (issue 30: the console finds an order by its transaction hash): an
 * exact match on a crypto order's `txHash`, case-insensitive, combined with the other filters and
 * with the keyset cursors; another organization's hash matches nothing; a malformed hash is a 400
 * envelope. The admin API's `listOrgOrders` takes the same filter. On PostgreSQL, the planner reads
 * the filter through the index of migration 0200.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let db: Knex;

const hash = (n: number, digit = 'a') => `0x${digit.repeat(60)}${n.toString(16).padStart(4, '0')}`;
/** One transaction paid several orders on different chains (the hash is unique per chain only), so cursors have pages to walk. */
const SHARED = `0x${'AbCdEf01'.repeat(8)}`;
const CHAINS = ['eip155:1', 'eip155:8453', 'eip155:10', 'eip155:137', 'eip155:42161'];
const T0 = Date.parse('2026-11-01T00:00:00.000Z');

interface Seeded { id: string; org_id: string; tx_hash: string | null; chain: string | null; status: string; created_at: Date }
const rows: Seeded[] = [];

async function insert(orgId: string, customer: { id: string; email: string }, row: Omit<Seeded, 'org_id'> & { provider?: string }) {
  rows.push({ ...row, org_id: orgId });
  await db('orders').insert({
    id: row.id,
    org_id: orgId,
    status: row.status,
    provider: row.provider ?? 'CRYPTO',
    amount_cents: 1000,
    currency: 'USDC',
    customer_id: customer.id,
    customer_email: customer.email,
    chain: row.chain,
    tx_hash: row.tx_hash,
    from_address: row.tx_hash ? '0x1f9840a85d5aF5bf1D1762F925BDADdC4201F984' : null,
    created_at: row.created_at,
    updated_at: row.created_at,
  });
}

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
  for (const org of [ctx.orgA, ctx.orgB]) {
    const customer = { id: `CUS_tx${org.orgId.slice(-22)}`, email: `tx.${org.orgId.slice(-6)}@example.com` };
    await db('customers').insert({ ...customer, org_id: org.orgId, created_at: new Date(T0) });
    const a = org === ctx.orgA;
    // Orders with their own hash (stored as chains report them: lower case), one per minute.
    for (let i = 0; i < 6; i++) {
      await insert(org.orgId, customer, { id: `ORD_tx${a ? 'A' : 'B'}own${String(i).padStart(18, '0')}`, tx_hash: hash(i, a ? 'a' : 'b'), chain: 'eip155:8453', status: i % 2 ? 'PAID' : 'PENDING', created_at: new Date(T0 + i * 60_000) });
    }
    // Card orders: no hash.
    for (let i = 0; i < 3; i++) await insert(org.orgId, customer, { id: `ORD_tx${a ? 'A' : 'B'}card${String(i).padStart(17, '0')}`, tx_hash: null, chain: null, status: 'PAID', provider: 'STRIPE', created_at: new Date(T0 + i * 60_000) });
  }
  // The shared hash in A: five orders (one per chain), two at the same instant (the id breaks the tie), mixed case as stored.
  const customerA = { id: `CUS_tx${ctx.orgA.orgId.slice(-22)}`, email: `tx.${ctx.orgA.orgId.slice(-6)}@example.com` };
  for (const [i, chain] of CHAINS.entries()) {
    await insert(ctx.orgA.orgId, customerA, { id: `ORD_txAshared${String(i).padStart(15, '0')}`, tx_hash: i === 0 ? SHARED : SHARED.toLowerCase(), chain, status: i < 3 ? 'PAID' : 'FAILED', created_at: new Date(T0 + 3_600_000 + Math.min(i, 3) * 1000) });
  }
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

const list = (query: string, org = ctx.orgA) => ctx.merchant.get(`/v1/orders?${query}`).set('X-API-Key', org.apiKey);
const ids = (res: { body: { data: { records: Array<{ orderId: string }> } } }) => res.body.data.records.map((r) => r.orderId);
const newestFirst = (a: Seeded, b: Seeded) => b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : -1);
const expected = (orgId: string, h: string, more: (r: Seeded) => boolean = () => true) =>
  rows.filter((r) => r.org_id === orgId && r.tx_hash?.toLowerCase() === h.toLowerCase() && more(r)).sort(newestFirst).map((r) => r.id);

describe('GET /v1/orders?tx_hash=…', () => {
  it("finds the order of a hash, in any letter case, and nothing for an unknown hash", async () => {
    const own = hash(3, 'a');
    for (const spelling of [own, own.toUpperCase().replace('0X', '0x'), `0x${own.slice(2, 20).toUpperCase()}${own.slice(20)}`]) {
      const res = await list(`tx_hash=${spelling}`);
      expect(res.status, res.text).toBe(200);
      expect(ids(res)).toEqual(['ORD_txAown000000000000000003']);
      expect(res.body.data).toMatchObject({ total: 1, totalExact: true, hasMore: false, nextCursor: null, previousCursor: null });
      expect(res.body.data.records[0].txHash).toBe(own);
    }
    const miss = await list(`tx_hash=${hash(99, 'c')}`);
    expect(miss.status).toBe(200);
    expect(miss.body.data).toMatchObject({ records: [], total: 0, totalExact: true, hasMore: false });
  });

  it("matches a hash stored in upper case too, and every chain's order of one transaction", async () => {
    const res = await list(`tx_hash=${SHARED.toLowerCase()}&size=100`);
    expect(ids(res)).toEqual(expected(ctx.orgA.orgId, SHARED));
    expect(ids(res)).toHaveLength(5);
    expect(ids(res)).toContain('ORD_txAshared000000000000000');
  });

  it("another organization's transaction hash is an empty list, not its order", async () => {
    const foreign = hash(2, 'b');
    expect(ids(await list(`tx_hash=${foreign}`, ctx.orgB))).toEqual(['ORD_txBown000000000000000002']);
    const res = await list(`tx_hash=${foreign}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ records: [], total: 0 });
    expect(ids(await list(`tx_hash=${SHARED}`, ctx.orgB))).toEqual([]);
  });

  it('combines with the other filters (AND)', async () => {
    expect(ids(await list(`tx_hash=${SHARED}&status=paid&size=100`))).toEqual(expected(ctx.orgA.orgId, SHARED, (r) => r.status === 'PAID'));
    expect(ids(await list(`tx_hash=${SHARED}&status=failed&size=100`))).toEqual(expected(ctx.orgA.orgId, SHARED, (r) => r.status === 'FAILED'));
    expect(ids(await list(`tx_hash=${SHARED}&provider=STRIPE`))).toEqual([]);
    expect(ids(await list(`tx_hash=${hash(1, 'a')}&from_address=0x1F9840A85D5AF5BF1D1762F925BDADDC4201F984`))).toEqual(['ORD_txAown000000000000000001']);
    const from = Math.floor((T0 + 3_600_000 + 1000) / 1000);
    expect(ids(await list(`tx_hash=${SHARED}&date_from=${from}&size=100`))).toEqual(expected(ctx.orgA.orgId, SHARED, (r) => r.created_at.getTime() >= from * 1000));
  });

  it('pages by cursor forward and back, and by page number, within the filter', async () => {
    const all = expected(ctx.orgA.orgId, SHARED);
    const forward: string[] = [];
    let res = await list(`tx_hash=${SHARED}&size=2`);
    expect(res.body.data).toMatchObject({ total: 5, hasMore: true });
    forward.push(...ids(res));
    const pages = [res];
    while (res.body.data.nextCursor) {
      res = await list(`tx_hash=${SHARED.toUpperCase().replace('0X', '0x')}&size=2&starting_after=${res.body.data.nextCursor}`);
      expect(res.status).toBe(200);
      forward.push(...ids(res));
      pages.push(res);
    }
    expect(forward).toEqual(all);
    expect(pages).toHaveLength(3);
    const back = await list(`tx_hash=${SHARED}&size=2&ending_before=${pages[2]!.body.data.previousCursor}`);
    expect(ids(back)).toEqual(all.slice(2, 4));
    expect(ids(await list(`tx_hash=${SHARED}&size=2&page=3`))).toEqual(all.slice(4));
    // A cursor that is another of the organization's orders (not matching the filter) works too.
    const after = await list(`tx_hash=${SHARED}&size=10&starting_after=ORD_txAown000000000000000005`);
    expect(ids(after)).toEqual([]);
    const before = await list(`tx_hash=${SHARED}&size=10&ending_before=ORD_txAown000000000000000005`);
    expect(ids(before)).toEqual(all);
  });

  it('refuses anything but 0x and 64 hexadecimal digits with a 400 envelope', async () => {
    for (const bad of [hash(1).slice(0, 65), `${hash(1)}0`, hash(1).slice(2), `0x${'g'.repeat(64)}`, '', `0X${'a'.repeat(64)}`, `${hash(1)}%20`]) {
      const res = await list(`tx_hash=${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    }
    expect((await list(`tx_hash=${hash(1)}&tx_hash=${hash(2)}`)).status).toBe(400);
  });

  it("the admin API's listOrgOrders filters the same way", async () => {
    const res = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/orders?tx_hash=${SHARED}&status=paid&size=100`);
    expect(res.status, res.text).toBe(200);
    expect(ids(res)).toEqual(expected(ctx.orgA.orgId, SHARED, (r) => r.status === 'PAID'));
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/orders?tx_hash=nope`)).status).toBe(400);
  });

  it('is read through the index of migration 0200 (org, lower(tx_hash), created_at, id)', async () => {
    const plan = await db.transaction(async (trx) => {
      await trx.raw('SET LOCAL enable_seqscan = off');
      const { rows: lines } = await trx.raw(
        `EXPLAIN SELECT id FROM orders WHERE org_id = ? AND lower(tx_hash) = lower(?) ORDER BY created_at DESC, id DESC LIMIT 21`,
        [ctx.orgA.orgId, SHARED],
      );
      return (lines as Array<{ 'QUERY PLAN': string }>).map((l) => l['QUERY PLAN']).join('\n');
    });
    expect(plan).toContain('orders_org_tx_hash_created_id');
  });
});
