/** Catalog set-up through the admin API, as an operator would do it. */
import { expect } from 'vitest';
import type { TestContext } from '../harness/context.js';

export async function createProduct(ctx: TestContext, orgId: string, body: Record<string, unknown>): Promise<any> {
  const res = await ctx.admin.post(`/v1/orgs/${orgId}/products`).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

export async function createPrice(ctx: TestContext, productId: string, body: Record<string, unknown>): Promise<any> {
  const res = await ctx.admin.post(`/v1/products/${productId}/prices`).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

export async function createLink(ctx: TestContext, pricingId: string, body?: Record<string, unknown>): Promise<any> {
  const req = ctx.admin.post(`/v1/prices/${pricingId}/payment-links`);
  const res = body ? await req.send(body) : await req;
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}
