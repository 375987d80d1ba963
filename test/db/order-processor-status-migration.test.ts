/**
 * Migration 0082 adds `orders.processor_status` (the API's `providerStatus`) and fills it for the
 * card orders made before it, from their order status; crypto orders keep null.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as m0082 from '../../src/db/migrations/0082_order_processor_status.js';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

async function cardOrder(outcome: 'succeeded' | 'pending', email: string): Promise<string> {
  const res = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `migration-${email}`)
    .send({ pricingData: { amount: 700, currency: 'USD', productData: { name: 'Mug' } }, customerEmail: email });
  expect(res.status).toBe(201);
  const { order } = await ctx.services.payments.applyPaymentResult({ checkoutSessionId: res.body.data.id, outcome, processorPaymentId: `sbx_pay_${email.split('@')[0]}` });
  return order.id;
}

describe('migration 0082 (orders.processor_status)', () => {
  it('fills the status of earlier card orders from their order status, and leaves other orders null', async () => {
    const db = ctx.testDb.database.db;
    const paid = await cardOrder('succeeded', 'paid@example.com');
    const refunded = await cardOrder('succeeded', 'refunded@example.com');
    const pending = await cardOrder('pending', 'pending@example.com');
    const failed = await cardOrder('pending', 'failed@example.com');
    const crypto = await cardOrder('succeeded', 'crypto@example.com');
    await db('orders').where({ id: refunded }).update({ status: 'REFUNDED', amount_refunded_cents: 700 });
    await db('orders').where({ id: failed }).update({ status: 'FAILED' });
    await db('orders').where({ id: crypto }).update({ provider: 'CRYPTO' });

    // As before the migration: no column; then the migration as it runs on an existing database.
    await m0082.down(db);
    await m0082.up(db);
    const statusOf = async (id: string) => (await db('orders').where({ id }).first()).processor_status;
    expect(await statusOf(paid)).toBe('succeeded');
    expect(await statusOf(refunded)).toBe('succeeded');
    expect(await statusOf(pending)).toBe('processing');
    expect(await statusOf(failed)).toBe('requires_payment_method');
    expect(await statusOf(crypto)).toBeNull();
    const read = (await ctx.merchant.get(`/v1/orders/${pending}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(read).toMatchObject({ status: 'PENDING', providerPaymentId: 'sbx_pay_pending', providerStatus: 'processing' });
  });
});
