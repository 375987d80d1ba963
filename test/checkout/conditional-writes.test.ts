/**
 * The commerce repositories write state only conditionally on the status the writer read: a copy
 * read before another writer moved the row on is refused, and the row keeps the newer state.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommerceUnitOfWork } from '../../src/commerce/stores.js';
import { createCommerceUnitOfWork } from '../../src/services.js';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let uow: CommerceUnitOfWork;
beforeAll(async () => {
  ctx = await createTestContext();
  uow = createCommerceUnitOfWork(ctx.testDb.database.db);
});
afterAll(async () => {
  await ctx?.close();
});

async function paidSubscriptionCheckout() {
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Plan' });
  const price = await ctx.services.catalog.createPrice(product.id, { amount: 500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' });
  const created = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `cw-${Math.random()}`)
    .send({ pricingId: price.id, customerEmail: 'cw@example.com' });
  const stale = (await uow.stores.sessions.find(ctx.orgA.orgId, created.body.data.id))!;
  await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  return { stale };
}

describe('conditional state writes', () => {
  it('a checkout session read while open cannot be written back over its completion', async () => {
    const { stale } = await paidSubscriptionCheckout();
    expect(stale.status).toBe('CREATED');
    expect(await uow.stores.sessions.update({ ...stale, status: 'EXPIRED' }, 'CREATED')).toBe(false);
    expect(await uow.stores.sessions.recordAttemptFailure(stale.id, { code: 'card_declined', occurredAt: new Date().toISOString(), operation: 'charge', requestId: 'r' }, new Date())).toBe(false);
    const now = (await uow.stores.sessions.find(ctx.orgA.orgId, stale.id))!;
    expect(now).toMatchObject({ status: 'COMPLETE', lastError: null });
  });

  it('an order or subscription written with a status it no longer has is refused', async () => {
    const { stale } = await paidSubscriptionCheckout();
    const order = (await uow.stores.orders.findBySession(stale.id))!;
    expect(order.status).toBe('PAID');
    expect(await uow.stores.orders.update({ ...order, status: 'FAILED' }, 'PENDING')).toBe(false);
    expect((await uow.stores.orders.find(ctx.orgA.orgId, order.id))!.status).toBe('PAID');

    const subscription = (await uow.stores.subscriptions.findBySession(stale.id))!;
    expect(subscription.status).toBe('ACTIVE');
    expect(await uow.stores.subscriptions.update({ ...subscription, status: 'CANCELED' }, 'PAUSED')).toBe(false);
    expect((await uow.stores.subscriptions.find(ctx.orgA.orgId, subscription.id))!.status).toBe('ACTIVE');
    expect(await uow.stores.subscriptions.update({ ...subscription, status: 'PAUSED', pausedAt: new Date() }, 'ACTIVE')).toBe(true);
  });
});
