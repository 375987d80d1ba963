/**
 * Two schedulers racing on real PostgreSQL (separate connection pools, as two worker processes
 * would have) create each renewal at most once. PGlite has a single connection, so this runs only
 * when TEST_DATABASE_URL is set.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { randomBytes } from 'node:crypto';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices } from '../../src/services.js';
import { createTestContext, type TestContext } from '../harness/context.js';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
let ctx: TestContext;
let second: Database;

describe.skipIf(!onPostgres)(skippedUnless('renewals with two schedulers on PostgreSQL', 'postgresOnly'), () => {
  beforeAll(async () => {
    ctx = await createTestContext();
    second = await openDatabase({ databaseUrl: ctx.testDb.url! });
  });
  afterAll(async () => {
    await second?.close();
    await ctx?.close();
  });

  it('renews each due subscription exactly once', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Plan' });
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 100, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'DAY' });
    ctx.clock.set('2026-11-22T00:00:00.000Z');
    const subscriptionIds: string[] = [];
    for (let i = 0; i < 12; i++) {
      const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `race-${i}`).send({ pricingId: price.id, customerEmail: `race${i}@example.com` });
      await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
      const row = await ctx.testDb.database.db('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
      subscriptionIds.push(row.id);
    }
    ctx.clock.set('2026-11-23T00:00:00.000Z');
    const other = createServices({ db: second.db, clock: ctx.clock, secretBox: new SecretBox(randomBytes(32)), config: ctx.config });
    const [a, b] = await Promise.all([ctx.services.subscriptions.processDue(), other.subscriptions.processDue()]);
    expect(a + b).toBe(12);
    const renewals = await ctx.testDb.database.db('orders').whereIn('subscription_id', subscriptionIds).andWhere('billing_period', 1);
    expect(renewals).toHaveLength(12);
    const events = await ctx.testDb.database.db('webhook_events').where({ type: 'subscription.updated' });
    expect(events).toHaveLength(12);
  });
});
