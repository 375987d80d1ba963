/** Usage test helpers: paying customers through the hosted checkout, and naming them by externalId. */
import supertest from 'supertest';
import { expect } from 'vitest';
import type { TestContext } from '../harness/context.js';

let n = 0;

/** A paid checkout of `pricingId` by `email` (the sandbox card); returns the customer's id. */
export async function buy(ctx: TestContext, email: string, pricingId: string, apiKey: string, extra: object = {}, cardNumber = '4242424242424242'): Promise<{ customerId: string; orderId: string }> {
  const created = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', apiKey)
    .set('Idempotency-Key', `usage-${++n}-${Math.random()}`)
    .send({ pricingId, customerEmail: email, ...extra });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const path = new URL(created.body.data.url).pathname;
  const paid = await supertest(ctx.apps.merchant).post(`${path}/pay`).type('form').send({ cardNumber, expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', apiKey)).body.data;
  const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', apiKey)).body.data;
  return { customerId: order.customerId as string, orderId: order.id as string };
}

export async function setExternalId(ctx: TestContext, customerId: string, externalId: string | null, apiKey: string) {
  return ctx.merchant.patch(`/v1/customers/${customerId}`).set('X-API-Key', apiKey).send({ externalId });
}

export async function oneTimePrice(ctx: TestContext, orgId: string, amount = 500): Promise<string> {
  const product = await ctx.services.catalog.createProduct(orgId, { name: `Credits ${++n}` });
  return (await ctx.services.catalog.createPrice(product.id, { amount, currency: 'USD' })).id;
}

export async function monthlyPrice(ctx: TestContext, orgId: string, amount = 900): Promise<{ priceId: string; productId: string }> {
  const product = await ctx.services.catalog.createProduct(orgId, { name: `Plan ${++n}` });
  const price = await ctx.services.catalog.createPrice(product.id, { amount, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 });
  return { priceId: price.id, productId: product.id };
}

/**
 * Runs the `usage-meter-fold` job's passes until the rollup delta queues are empty (migration 0395):
 * the rollup tables then hold every stored event. Pass by pass, not the job's run, which waits for
 * its interval after a round of passes that were not full.
 */
export async function foldRollups(ctx: TestContext): Promise<void> {
  while (await ctx.services.modules.usage.events.foldRollups());
}
