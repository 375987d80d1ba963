/** GET /v1/entitlements/check: one-time purchases, subscriptions, refunds, ends, inline products. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let ebook: { productId: string; priceId: string };
let plan: { productId: string; priceId: string };
beforeAll(async () => {
  ctx = await createTestContext();
  const mk = async (name: string, price: object) => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name });
    return { productId: product.id, priceId: (await ctx.services.catalog.createPrice(product.id, price as never)).id };
  };
  ebook = await mk('Ebook', { amount: 500, currency: 'USD' });
  plan = await mk('Pro plan', { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' });
});
afterAll(async () => {
  await ctx?.close();
});

let n = 0;
async function buy(body: object, email: string) {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `ent-${++n}`).send({ ...body, customerEmail: email });
  await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  return order as { orderId: string; customerId: string; subscriptionId?: string };
}
const check = (q: string, apiKey = ctx.orgA.apiKey) => ctx.merchant.get(`/v1/entitlements/check?${q}`).set('X-API-Key', apiKey);

describe('GET /v1/entitlements/check', () => {
  it('requires a subject', async () => {
    const res = await check(`product_id=${ebook.productId}`);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/customer_id, external_id, email and wallet/);
  });

  it('answers entitled false for an unknown buyer', async () => {
    const res = await check(`email=nobody@example.com&product_id=${ebook.productId}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ entitled: false, customerId: null, email: null, wallet: null, productId: ebook.productId, productName: 'Ebook', type: null, products: [], reason: 'UNKNOWN_CUSTOMER' });
  });

  it('grants ONE_TIME access after a paid order, and takes it away after a refund', async () => {
    const order = await buy({ pricingId: ebook.priceId }, 'reader@example.com');
    const res = await check(`email=READER@example.com&product_id=${ebook.productId}`);
    expect(res.body.data).toEqual({
      entitled: true,
      customerId: order.customerId,
      email: 'reader@example.com',
      wallet: null,
      productId: ebook.productId,
      productName: 'Ebook',
      type: 'ONE_TIME',
      products: [{ productId: ebook.productId, productName: 'Ebook', type: 'ONE_TIME' }],
    });
    expect((await check(`customer_id=${order.customerId}`)).body.data).toMatchObject({ entitled: true, productId: null, type: null });
    // Two identifiers of different buyers match nothing.
    const other = await buy({ pricingId: ebook.priceId }, 'other@example.com');
    expect((await check(`customer_id=${other.customerId}&email=reader@example.com`)).body.data).toMatchObject({ entitled: false, products: [] });
    // Another organization sees nothing.
    expect((await check(`customer_id=${order.customerId}`, ctx.orgB.apiKey)).body.data).toMatchObject({ entitled: false, customerId: null });

    await ctx.admin.post(`/v1/orders/${order.orderId}/refund`).send({});
    expect((await check(`email=reader@example.com&product_id=${ebook.productId}`)).body.data).toMatchObject({ entitled: false, type: null, products: [] });
  });

  it('grants SUBSCRIPTION access while active (also once canceled at period end), not after the end', async () => {
    ctx.clock.set('2026-12-01T00:00:00.000Z');
    const order = await buy({ pricingId: plan.priceId }, 'member@example.com');
    const q = `customer_id=${order.customerId}&product_id=${plan.productId}`;
    expect((await check(q)).body.data).toMatchObject({ entitled: true, type: 'SUBSCRIPTION', productName: 'Pro plan' });
    await ctx.admin.post(`/v1/subscriptions/${order.subscriptionId}/cancel`).send({ atPeriodEnd: true });
    expect((await check(q)).body.data.entitled).toBe(true);
    ctx.clock.set('2027-01-01T00:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    expect((await check(q)).body.data).toMatchObject({ entitled: false, type: null });
  });

  it("names the product asked about only when it is the organization's, whoever asks", async () => {
    const order = await buy({ pricingId: ebook.priceId }, 'namer@example.com');
    const unknownBuyer = await check(`customer_id=CUS_${'x'.repeat(24)}&product_id=${ebook.productId}`);
    expect(unknownBuyer.status).toBe(200);
    expect(unknownBuyer.body.data).toEqual({ entitled: false, customerId: null, email: null, wallet: null, productId: ebook.productId, productName: 'Ebook', type: null, products: [], reason: 'UNKNOWN_CUSTOMER' });
    const elsewhere = await ctx.services.catalog.createProduct(ctx.orgB.orgId, { name: 'Not yours' });
    expect((await check(`customer_id=${order.customerId}&product_id=${elsewhere.id}`)).body.data).toMatchObject({
      entitled: false,
      customerId: order.customerId,
      email: 'namer@example.com',
      productId: null,
      productName: null,
      type: null,
      products: [{ productId: ebook.productId, productName: 'Ebook', type: 'ONE_TIME' }],
    });
    // The same buyer named twice (id and e-mail, in another case) is one buyer.
    expect((await check(`customer_id=${order.customerId}&email=NAMER@example.com&product_id=${ebook.productId}`)).body.data).toMatchObject({ entitled: true, type: 'ONE_TIME' });
  });

  // Issue 38's follow-up: an unknown customer answered `entitled: false` with no reason, like a
  // known one who bought nothing; every refusal now says why (EntitlementCheck.reason).
  it('says why access is refused: UNKNOWN_CUSTOMER, NO_ACCESS; an entitled answer has no reason', async () => {
    const order = await buy({ pricingId: ebook.priceId }, 'why@example.com');
    const reason = async (q: string, apiKey?: string) => {
      const res = await check(q, apiKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return { entitled: res.body.data.entitled as boolean, reason: res.body.data.reason as string | undefined, customerId: res.body.data.customerId as string | null };
    };
    // Subjects that name no customer of the organization, with and without product_id.
    for (const q of [
      `email=nobody-here@example.com&product_id=${ebook.productId}`,
      `email=nobody-here@example.com`,
      `customer_id=CUS_${'y'.repeat(24)}`,
      `external_id=never_linked&product_id=${ebook.productId}`,
      `external_id=never_linked`,
    ]) {
      expect(await reason(q), q).toEqual({ entitled: false, reason: 'UNKNOWN_CUSTOMER', customerId: null });
    }
    // Another organization's customer, and two identifiers naming different customers.
    expect(await reason(`customer_id=${order.customerId}`, ctx.orgB.apiKey)).toEqual({ entitled: false, reason: 'UNKNOWN_CUSTOMER', customerId: null });
    const other = await buy({ pricingId: plan.priceId }, 'why-other@example.com');
    expect(await reason(`customer_id=${other.customerId}&email=why@example.com`)).toEqual({ entitled: false, reason: 'UNKNOWN_CUSTOMER', customerId: null });
    // A known customer without the product (or a product unknown to the organization): NO_ACCESS.
    expect(await reason(`customer_id=${order.customerId}&product_id=${plan.productId}`)).toEqual({ entitled: false, reason: 'NO_ACCESS', customerId: order.customerId });
    const elsewhere = await ctx.services.catalog.createProduct(ctx.orgB.orgId, { name: 'Theirs' });
    expect(await reason(`customer_id=${order.customerId}&product_id=${elsewhere.id}`)).toEqual({ entitled: false, reason: 'NO_ACCESS', customerId: order.customerId });
    // A wallet names no customer: a wallet that bought nothing is NO_ACCESS, never UNKNOWN_CUSTOMER.
    expect(await reason(`wallet=0x${'ab'.repeat(20)}&product_id=${ebook.productId}`)).toEqual({ entitled: false, reason: 'NO_ACCESS', customerId: null });
    // Entitled: no reason, with or without product_id.
    expect(await reason(`customer_id=${order.customerId}&product_id=${ebook.productId}`)).toEqual({ entitled: true, reason: undefined, customerId: order.customerId });
    expect(await reason(`customer_id=${order.customerId}`)).toEqual({ entitled: true, reason: undefined, customerId: order.customerId });
    // Refunded: known, no longer granted.
    await ctx.admin.post(`/v1/orders/${order.orderId}/refund`).send({});
    expect(await reason(`email=why@example.com&product_id=${ebook.productId}`)).toEqual({ entitled: false, reason: 'NO_ACCESS', customerId: order.customerId });
  });

  it('never grants access for inline products, even after payment', async () => {
    const order = await buy({ pricingData: { amount: 100, currency: 'USD', productData: { name: 'Inline thing' } } }, 'inline@example.com');
    expect((await check(`customer_id=${order.customerId}`)).body.data).toMatchObject({ entitled: false, products: [] });
  });
});
