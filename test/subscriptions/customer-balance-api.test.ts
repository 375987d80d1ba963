/**
 * The merchant API of the customer credit balance (issue 39; merchant.yaml getCustomerBalance,
 * listCustomerBalanceTransactions, createCustomerBalanceTransaction): the balance per currency and
 * its ledger after a downgrade, a merchant's credits and debits (idempotent, conditional, never
 * below 0), what the next renewal draws, the ledger's cursor pages, another organization's
 * customer (404) and permissions (403). On PostgreSQL: rounds of concurrent adjustments and a
 * renewal through two pools, no update lost.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { onSecondPool } from '../harness/second-pool.js';
import { createCommerceUnitOfWork } from '../../src/services.js';
import { CustomerBalanceService } from '../../src/subscriptions/customer-balance.service.js';

let ctx: TestContext;
let basic: string;
let pro: string;
let n = 0;

beforeAll(async () => {
  ctx = await createTestContext();
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic' });
  const proProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' });
  basic = (await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  pro = (await ctx.services.catalog.createPrice(proProduct.id, { amount: 3000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
});
afterAll(async () => {
  await ctx?.close();
});

const db = () => ctx.testDb.database.db;
const at = (iso: string) => ctx.clock.set(iso);
const as = (key: string) => ({
  get: (path: string) => ctx.merchant.get(path).set('X-API-Key', key),
  post: (path: string, idempotencyKey?: string) => {
    const r = ctx.merchant.post(path).set('X-API-Key', key);
    return idempotencyKey === undefined ? r : r.set('Idempotency-Key', idempotencyKey);
  },
});
const a = () => as(ctx.orgA.apiKey);

async function subscribe(pricingId: string, email = `cbal${++n}@example.com`) {
  const created = await a().post('/v1/checkout-sessions', `cbal-${++n}`).send({ pricingId, customerEmail: email });
  expect(created.status).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const order = await db()('orders').where({ checkout_session_id: created.body.data.id }).first();
  const s = await db()('subscriptions').where({ id: order.subscription_id }).first();
  return { subscriptionId: order.subscription_id as string, customerId: s.customer_id as string };
}
const adjust = (customerId: string, key: string, body: object) => a().post(`/v1/customers/${customerId}/balance-transactions`, key).send(body);
const ledger = async (customerId: string, query = '') => (await a().get(`/v1/customers/${customerId}/balance-transactions${query}`)).body.data;
const balance = async (customerId: string) => (await a().get(`/v1/customers/${customerId}/balance`)).body.data.balances as Array<{ currency: string; amountCents: number }>;

describe('customer credit balance API', () => {
  it('reads the balance and ledger a downgrade left, adjusts it (credit, idempotent replay, conditional debit) and the renewal draws it', async () => {
    at('2026-04-01T00:00:00.000Z');
    const { subscriptionId, customerId } = await subscribe(pro);
    // No balance yet: an empty list, an empty ledger.
    const empty = await a().get(`/v1/customers/${customerId}/balance`);
    expect(empty.status).toBe(200);
    expect(empty.body.data).toEqual({ customerId, balances: [] });
    expect(await ledger(customerId)).toEqual({ items: [], hasMore: false, nextCursor: null });

    at('2026-04-16T00:00:00.000Z');
    const c = await a().post(`/v1/subscriptions/${subscriptionId}/change`).send({ priceId: basic, effective: 'IMMEDIATE' });
    expect(c.status).toBe(200);
    expect(await balance(customerId)).toEqual([{ currency: 'USD', amountCents: 1000, updatedAt: '2026-04-16T00:00:00.000Z' }]);
    const afterDowngrade = await ledger(customerId);
    expect(afterDowngrade.items).toEqual([
      expect.objectContaining({ customerId, type: 'CARRIED', currency: 'USD', amountCents: 1000, endingBalanceCents: 1000, description: null, orderId: c.body.data.orderId, subscriptionId }),
    ]);

    at('2026-04-20T00:00:00.000Z');
    const credit = await adjust(customerId, 'goodwill-1', { currency: 'usd', amountCents: 500, description: '  Goodwill credit for the outage ' });
    expect(credit.status).toBe(201);
    expect(credit.headers['idempotent-replayed']).toBeUndefined();
    expect(credit.body.data).toMatchObject({ type: 'ADJUSTMENT', currency: 'USD', amountCents: 500, endingBalanceCents: 1500, description: 'Goodwill credit for the outage', orderId: null, subscriptionId: null, createdAt: '2026-04-20T00:00:00.000Z' });
    // The same request again: the same transaction, the balance moved once.
    const replay = await adjust(customerId, 'goodwill-1', { currency: 'USD', amountCents: 500, description: 'Goodwill credit for the outage' });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data).toEqual(credit.body.data);
    expect((await balance(customerId))[0]!.amountCents).toBe(1500);
    // The key with another body.
    const reused = await adjust(customerId, 'goodwill-1', { currency: 'USD', amountCents: 600, description: 'Goodwill credit for the outage' });
    expect(reused.status).toBe(409);
    expect(reused.body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');

    // A debit beyond the balance, and one conditional on a balance that is not the current one: refused, nothing written.
    const tooMuch = await adjust(customerId, 'debit-1', { currency: 'USD', amountCents: -1501, description: 'Too much' });
    expect(tooMuch.status).toBe(409);
    expect(tooMuch.body.error.message).toMatch(/at most the balance.*1500/);
    const stale = await adjust(customerId, 'debit-2', { currency: 'USD', amountCents: -200, description: 'Granted twice', expectedBalanceCents: 1000 });
    expect(stale.status).toBe(409);
    expect(stale.body.error.message).toMatch(/1500, not the expectedBalanceCents 1000/);
    expect((await ledger(customerId)).items).toHaveLength(2);
    // A refused request did not claim its key.
    const debit = await adjust(customerId, 'debit-2', { currency: 'USD', amountCents: -200, description: 'Granted twice', expectedBalanceCents: 1500 });
    expect(debit.status).toBe(201);
    expect(debit.body.data).toMatchObject({ amountCents: -200, endingBalanceCents: 1300 });

    // The renewal draws the adjusted balance: fee 1000, all of it from the balance.
    at('2026-05-01T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const renewal = await db()('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first();
    expect(Number(renewal.amount_cents)).toBe(0);
    const applied = (await ledger(customerId)).items[0];
    expect(applied).toMatchObject({ type: 'APPLIED', amountCents: -1000, endingBalanceCents: 300, orderId: renewal.id, subscriptionId });
    expect((await balance(customerId))[0]!.amountCents).toBe(300);
    // A full debit to 0 is allowed; the row stays, at 0.
    expect((await adjust(customerId, 'debit-3', { currency: 'USD', amountCents: -300, description: 'Closing the balance' })).body.data.endingBalanceCents).toBe(0);
    expect(await balance(customerId)).toEqual([{ currency: 'USD', amountCents: 0, updatedAt: '2026-05-01T00:00:00.000Z' }]);
    // Every ending balance is the sum of the entries up to it.
    const all = (await ledger(customerId, '?limit=100')).items.reverse();
    let running = 0;
    for (const e of all) {
      running += e.amountCents;
      expect(e.endingBalanceCents).toBe(running);
    }
  });

  it('pages the ledger by cursor, filters by currency, and keeps currencies apart', async () => {
    at('2026-06-01T00:00:00.000Z');
    const { customerId } = await subscribe(basic);
    for (let i = 1; i <= 5; i++) {
      at(`2026-06-0${i + 1}T00:00:00.000Z`);
      expect((await adjust(customerId, `page-${customerId}-${i}`, { currency: i % 2 ? 'USD' : 'EUR', amountCents: i * 100, description: `Credit ${i}` })).status).toBe(201);
    }
    expect(await balance(customerId)).toEqual([
      { currency: 'EUR', amountCents: 600, updatedAt: '2026-06-05T00:00:00.000Z' },
      { currency: 'USD', amountCents: 900, updatedAt: '2026-06-06T00:00:00.000Z' },
    ]);
    const first = await ledger(customerId, '?limit=2');
    expect(first.items.map((e: { description: string }) => e.description)).toEqual(['Credit 5', 'Credit 4']);
    expect(first).toMatchObject({ hasMore: true, nextCursor: first.items[1].transactionId });
    const second = await ledger(customerId, `?limit=2&starting_after=${first.nextCursor}`);
    expect(second.items.map((e: { description: string }) => e.description)).toEqual(['Credit 3', 'Credit 2']);
    const third = await ledger(customerId, `?limit=2&starting_after=${second.nextCursor}`);
    expect(third).toMatchObject({ hasMore: false, nextCursor: null });
    expect(third.items.map((e: { description: string }) => e.description)).toEqual(['Credit 1']);
    const eur = await ledger(customerId, '?currency=eur');
    expect(eur.items.map((e: { amountCents: number; endingBalanceCents: number }) => [e.amountCents, e.endingBalanceCents])).toEqual([[400, 600], [200, 200]]);
  });

  it('refuses bad input with a 400: no Idempotency-Key, amount 0, blank description, unknown field, unknown cursor', async () => {
    const { customerId } = await subscribe(basic);
    const path = `/v1/customers/${customerId}/balance-transactions`;
    const noKey = await a().post(path).send({ currency: 'USD', amountCents: 100, description: 'x' });
    expect(noKey.status).toBe(400);
    const zero = await adjust(customerId, 'bad-0', { currency: 'USD', amountCents: 0, description: 'Nothing' });
    expect(zero.status).toBe(400);
    expect(zero.body.error.message).toMatch(/must not be 0/);
    expect((await adjust(customerId, 'bad-1', { currency: 'USD', amountCents: 100, description: '   ' })).status).toBe(400);
    expect((await adjust(customerId, 'bad-2', { currency: 'US1', amountCents: 100, description: 'x' })).status).toBe(400);
    expect((await adjust(customerId, 'bad-3', { currency: 'USD', amountCents: 1.5, description: 'x' })).status).toBe(400);
    expect((await adjust(customerId, 'bad-4', { currency: 'USD', amountCents: 100, description: 'x', note: 'y' })).status).toBe(400);
    const cursor = await a().get(`${path}?starting_after=CBE_000000000000000000000000`);
    expect(cursor.status).toBe(400);
    expect(cursor.body.error.code).toBe('VALIDATION_ERROR');
    expect((await a().get(`${path}?limit=101`)).status).toBe(400);
    expect(await ledger(customerId)).toMatchObject({ items: [] });
  });

  it("another organization's customer (or none) is 404 on every operation, and nothing is written", async () => {
    const { customerId } = await subscribe(basic);
    expect((await adjust(customerId, 'own-1', { currency: 'USD', amountCents: 700, description: 'Own credit' })).status).toBe(201);
    const b = as(ctx.orgB.apiKey);
    for (const id of [customerId, 'CUS_000000000000000000000000']) {
      expect((await b.get(`/v1/customers/${id}/balance`)).status).toBe(404);
      expect((await b.get(`/v1/customers/${id}/balance-transactions`)).status).toBe(404);
      const post = await b.post(`/v1/customers/${id}/balance-transactions`, `foreign-${id}`).send({ currency: 'USD', amountCents: -700, description: 'Steal' });
      expect(post.status).toBe(404);
      expect(post.body.error.code).toBe('NOT_FOUND');
    }
    expect((await a().get(`/v1/customers/CUS_000000000000000000000000/balance`)).status).toBe(404);
    expect((await balance(customerId))[0]!.amountCents).toBe(700);
    // The same key in the other organization is its own (keys are scoped per organization).
    const { customerId: other } = await (async () => {
      const product = await ctx.services.catalog.createProduct(ctx.orgB.orgId, { name: 'B plan' });
      const price = (await ctx.services.catalog.createPrice(product.id, { amount: 500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
      const created = await b.post('/v1/checkout-sessions', `b-${++n}`).send({ pricingId: price, customerEmail: `b${n}@example.com` });
      await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
      const order = await db()('orders').where({ checkout_session_id: created.body.data.id }).first();
      return { customerId: order.customer_id as string };
    })();
    const sameKey = await b.post(`/v1/customers/${other}/balance-transactions`, 'own-1').send({ currency: 'USD', amountCents: 50, description: 'B credit' });
    expect(sameKey.status).toBe(201);
    expect(sameKey.headers['idempotent-replayed']).toBeUndefined();
  });

  it('needs customers:read to read and customers:write to adjust (403), and an API key (401)', async () => {
    const { customerId } = await subscribe(basic);
    const reader = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'reader', permissions: ['customers:read'] });
    const outsider = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'orders only', permissions: ['orders:read'] });
    expect((await as(reader.key).get(`/v1/customers/${customerId}/balance`)).status).toBe(200);
    expect((await as(reader.key).get(`/v1/customers/${customerId}/balance-transactions`)).status).toBe(200);
    const write = await as(reader.key).post(`/v1/customers/${customerId}/balance-transactions`, 'perm-1').send({ currency: 'USD', amountCents: 100, description: 'x' });
    expect(write.status).toBe(403);
    expect((await as(outsider.key).get(`/v1/customers/${customerId}/balance`)).status).toBe(403);
    expect((await as(outsider.key).get(`/v1/customers/${customerId}/balance-transactions`)).status).toBe(403);
    expect((await ctx.merchant.get(`/v1/customers/${customerId}/balance`)).status).toBe(401);
    expect(await ledger(customerId)).toMatchObject({ items: [] });
  });
});

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
describe.skipIf(!onPostgres)('races on PostgreSQL (separate pools)', () => {
  const second = onSecondPool(() => ctx);

  it('adjustments racing each other and a renewal, and one key sent twice at once: no update lost, one adjustment per key (20 rounds)', async () => {
    const ROUNDS = 20;
    let failures = 0;
    const mine = new CustomerBalanceService(createCommerceUnitOfWork(db()), ctx.clock);
    const theirs = new CustomerBalanceService(createCommerceUnitOfWork(second.database.db), ctx.clock);
    for (let round = 0; round < ROUNDS; round++) {
      at('2026-10-01T00:00:00.000Z');
      const { subscriptionId, customerId } = await subscribe(basic, `race${round}-${randomBytes(4).toString('hex')}@example.com`);
      at('2026-10-20T00:00:00.000Z');
      const first = await mine.adjust(ctx.orgA.orgId, customerId, `seed-${round}-${customerId}`, { currency: 'USD', amountCents: 1200, description: 'Seed' });
      expect(first.entry.endingBalanceCents).toBe(1200);
      at('2026-11-01T00:00:00.000Z');
      const key = `twice-${round}-${customerId}`;
      const results = await Promise.allSettled([
        second.services.subscriptions.processDue(),
        mine.adjust(ctx.orgA.orgId, customerId, `credit-${round}-${customerId}`, { currency: 'USD', amountCents: 300, description: 'Credit' }),
        theirs.adjust(ctx.orgA.orgId, customerId, `debit-${round}-${customerId}`, { currency: 'USD', amountCents: -150, description: 'Debit' }),
        mine.adjust(ctx.orgA.orgId, customerId, key, { currency: 'USD', amountCents: 70, description: 'Once' }),
        theirs.adjust(ctx.orgA.orgId, customerId, key, { currency: 'USD', amountCents: 70, description: 'Once' }),
      ]);
      const rejected = results.filter((r) => r.status === 'rejected');
      const row = await db()('customer_balances').where({ org_id: ctx.orgA.orgId, customer_id: customerId, currency: 'USD' }).first();
      const entries = await db()('customer_balance_entries').where({ org_id: ctx.orgA.orgId, customer_id: customerId }).orderBy([{ column: 'created_at' }, { column: 'id' }]);
      const sum = entries.reduce((t: number, e: { amount_cents: string | number }) => t + Number(e.amount_cents), 0);
      const renewal = await db()('orders').where({ subscription_id: subscriptionId, billing_period: 1 }).first();
      const drawn = renewal ? 1000 - Number(renewal.amount_cents) : -1;
      const onceEntries = entries.filter((e: { idempotency_key: string | null }) => e.idempotency_key === key).length;
      const replays = [results[3]!, results[4]!].filter((r) => r.status === 'fulfilled' && (r.value as { replayed: boolean }).replayed).length;
      // In the ledger's order each ending balance is the one before plus its amount: no writer read a stale balance.
      let running = 0;
      let chained = true;
      for (const e of [...entries].sort((x, y) => Number(x.seq) - Number(y.seq))) {
        running += Number(e.amount_cents);
        if (Number(e.ending_balance_cents) !== running) chained = false;
      }
      const expected = 1200 + 300 - 150 + 70 - drawn;
      const bad = rejected.length > 0 || Number(row.amount_cents) !== sum || sum !== expected || drawn !== 1000 || onceEntries !== 1 || replays !== 1 || !chained;
      if (bad) failures++;
    }
    expect(failures).toBe(0);
  });
});
