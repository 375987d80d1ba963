/**
 * `GET /v1/customers/{id}/meter-balances` in few statements (issue 38, performance: a customer's
 * reads ≤ 2 ms of server CPU), on both databases: one statement for the customer, its credits, its
 * metered subscriptions with their period's segments and the meters' names
 * (CreditLedger.balanceBasis), then one quantity statement per meter — 3 for a customer with a
 * subscription billing one meter and credits of another, where it was 12 (the customer, the
 * subscriptions, the credits, the price and its product, the segments, and per meter its name and
 * its quantity). The answers themselves are the balance tests' (credits.test.ts,
 * metered-plan-change.test.ts, …), unchanged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, setExternalId } from './helpers.js';

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

/** The statements sent on the database's pooled connections while `run` runs (knex's and the named prepared ones alike). */
async function statementsOf(run: () => Promise<unknown>): Promise<string[]> {
  const client = ctx.testDb.database.db.client as { acquireConnection(): Promise<{ query: (...args: unknown[]) => unknown }> };
  const acquire = client.acquireConnection;
  const sent: string[] = [];
  const restore: Array<() => void> = [];
  client.acquireConnection = async function (this: unknown) {
    const connection = await acquire.call(this);
    if (!Object.prototype.hasOwnProperty.call(connection, 'query')) {
      const query = connection.query;
      connection.query = function (this: unknown, ...args: unknown[]) {
        const first = args[0] as string | { text?: string; sql?: string };
        sent.push(typeof first === 'string' ? first : (first.text ?? first.sql ?? ''));
        return query.apply(this, args);
      };
      restore.push(() => delete (connection as { query?: unknown }).query);
    }
    return connection;
  };
  try {
    await run();
  } finally {
    client.acquireConnection = acquire;
    for (const r of restore) r();
  }
  return sent;
}

describe('meter balances', () => {
  it('are read in one statement besides one quantity statement per meter', async () => {
    ctx.clock.set('2027-03-01T00:00:00.000Z');
    const key = ctx.orgA.apiKey;
    const meter = async (body: object) => (await ctx.merchant.post('/v1/meters').set('X-API-Key', key).send(body)).body.data.id as string;
    const tokens = await meter({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
    const images = await meter({ name: 'Images', source: 'EVENTS', filter: { eventName: 'image' }, aggregation: 'count' });
    const product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Metered' })).id;
    const price = (body: object) => ctx.admin.post(`/v1/products/${product}/prices`).send(body);
    const sub = await price({ amount: 2000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', meteredComponents: [{ meterId: tokens, includedUnits: 1000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.01' } }] });
    const pack = await price({ amount: 500, currency: 'USD', grantsUnits: { meterId: images, units: 10 } });
    expect([sub.status, pack.status]).toEqual([201, 201]);
    const { customerId } = await buy(ctx, 'statements@example.com', sub.body.data.pricingId, key);
    await buy(ctx, 'statements@example.com', pack.body.data.pricingId, key);
    await setExternalId(ctx, customerId, 'user_statements', key);
    ctx.clock.set('2027-03-02T00:00:00.000Z');
    const events = [
      { id: 's1', customer: { externalId: 'user_statements' }, name: 'llm_tokens', timestamp: '2027-03-01T10:00:00Z', properties: { tokens: 1200 } },
      { id: 's2', customer: { externalId: 'user_statements' }, name: 'image', timestamp: '2027-03-01T10:00:00Z', properties: {} },
    ];
    expect((await ctx.merchant.post('/v1/usage-events').set('X-API-Key', key).send({ events })).status).toBe(200);

    let res: { status: number; body: { data: { customerId: string; balances: Array<Record<string, unknown>> } } } | undefined;
    const sent = await statementsOf(async () => {
      res = (await ctx.merchant.get('/v1/customers/user_statements/meter-balances').set('X-API-Key', key)) as typeof res;
    });
    expect(res!.status).toBe(200);
    expect(res!.body.data.customerId).toBe(customerId);
    // By meter id, as the balances come.
    const expected = [
      [tokens, 'SUBSCRIPTION', 1200, 0, 0, 200],
      [images, 'PREPAID', 1, 0, 9, 0],
    ].sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
    expect(res!.body.data.balances.map((b) => [b.meterId, b.basis, b.consumedUnits, b.includedRemaining, b.creditsRemaining, b.overageUnits])).toEqual(expected);
    expect(res!.body.data.balances.map((b) => b.meterName).sort()).toEqual(['Images', 'Tokens']);
    // The API key's lookup is the authentication's (cached or not), not the read's: count the read's own statements.
    const own = sent.filter((s) => !/api_keys|organizations/i.test(s));
    expect(own, own.join('\n---\n')).toHaveLength(3);
  });
});
