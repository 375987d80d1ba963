/**
 * The console's read of a product's x402 paywalls (GET /v1/console/products/{id}/x402-paywalls):
 * what the merchant API's PUT/DELETE /v1/x402/paywalls/{id} set, called with the session; the
 * role table (x402:settle: owner, admin, developer; 403 for support and viewer), another
 * organization's product (404), a malformed id (400), no session (401).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { as, signUp, type Member } from './helpers.js';

let ctx: TestContext;
let ownerA: Member;
let developerA: Member;
let supportA: Member;
let viewerA: Member;
let ownerB: Member;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TRUST_PROXY: '1' } });
  [ownerA, developerA, supportA, viewerA, ownerB] = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'owner'),
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgA.orgId, 'support'),
    signUp(ctx, ctx.orgA.orgId, 'viewer'),
    signUp(ctx, ctx.orgB.orgId, 'owner'),
  ]);
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const paywalls = (m: Member, productId: string) => as(m, ctx.merchant.get(`/v1/console/products/${productId}/x402-paywalls`));

async function productWithPrices(): Promise<{ productId: string; prices: string[] }> {
  const product = await as(ownerA, ctx.merchant.post('/v1/console/products')).send({ name: `Reports ${Date.now()}` });
  expect(product.status, product.text).toBe(201);
  const productId = product.body.data.productId as string;
  const prices: string[] = [];
  for (const amount of [100, 250, 500]) {
    const price = await as(ownerA, ctx.merchant.post(`/v1/console/products/${productId}/prices`)).send({ amount, currency: 'USD' });
    expect(price.status, price.text).toBe(201);
    prices.push(price.body.data.pricingId);
  }
  return { productId, prices };
}

describe('GET /v1/console/products/{id}/x402-paywalls', () => {
  it('lists the paywalls the session set with the merchant API, ordered by price id; a removed one disappears', async () => {
    const { productId, prices } = await productWithPrices();
    expect((await paywalls(ownerA, productId)).body).toMatchObject({ success: true, data: [] });

    const receipt = await as(ownerA, ctx.merchant.put(`/v1/x402/paywalls/${prices[0]}`)).send({});
    expect(receipt.status, receipt.text).toBe(200);
    const redirect = await as(developerA, ctx.merchant.put(`/v1/x402/paywalls/${prices[2]}`)).send({ contentUrl: 'https://shop.example.com/reports/latest' });
    expect(redirect.status, redirect.text).toBe(200);

    const listed = await paywalls(developerA, productId);
    expect(listed.status).toBe(200);
    const expected = [receipt.body.data, redirect.body.data].sort((a, b) => (a.pricingId < b.pricingId ? -1 : 1));
    expect(listed.body.data).toEqual(expected);
    expect(listed.body.data.find((p: { pricingId: string }) => p.pricingId === prices[2]).contentUrl).toBe('https://shop.example.com/reports/latest');
    expect(listed.body.data[0].url).toMatch(/\/x402\/prices\/PRC_/);

    expect((await as(ownerA, ctx.merchant.delete(`/v1/x402/paywalls/${prices[0]}`))).status).toBe(200);
    expect((await paywalls(ownerA, productId)).body.data.map((p: { pricingId: string }) => p.pricingId)).toEqual([prices[2]]);
  });

  it('support and viewer are refused (403): paywalls are x402:settle, like setting them', async () => {
    const { productId } = await productWithPrices();
    for (const m of [supportA, viewerA]) {
      const res = await paywalls(m, productId);
      expect(res.status).toBe(403);
      expect(res.body.success).toBe(false);
    }
  });

  it("another organization's product and an unknown product are 404; its paywalls are not shown", async () => {
    const { productId, prices } = await productWithPrices();
    expect((await as(ownerA, ctx.merchant.put(`/v1/x402/paywalls/${prices[1]}`)).send({})).status).toBe(200);
    const other = await paywalls(ownerB, productId);
    expect(other.status).toBe(404);
    expect(other.body.error.code).toBe('NOT_FOUND');
    expect((await paywalls(ownerA, 'PRD_000000000000000000000000')).status).toBe(404);
  });

  it('a malformed id is 400; no session is 401', async () => {
    const bad = await paywalls(ownerA, 'x'.repeat(65));
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('VALIDATION_ERROR');
    expect((await ctx.merchant.get('/v1/console/products/PRD_000000000000000000000000/x402-paywalls')).status).toBe(401);
  });
});
