/** Integer query parameters are decimal digits: no exponent, hex, fraction or padding (a fuzz find: page=1e999 was a 500). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

describe('integer query parameters', () => {
  it.each(['1e999', '1e3', '1.0', '0x10', '%201', '1%20', '', 'Infinity'])('refuses page=%s with 400 VALIDATION_ERROR on the merchant and admin APIs', async (value) => {
    const merchant = await ctx.merchant.get(`/v1/orders?page=${value}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(merchant.status).toBe(400);
    expect(merchant.body.error).toEqual({ code: 'VALIDATION_ERROR', message: expect.stringMatching(/query\.page/) });
    const admin = await ctx.admin.get(`/v1/orgs?size=2&page=${value}`);
    expect(admin.status).toBe(400);
    expect(admin.body.error.code).toBe('VALIDATION_ERROR');
  });

  it('accepts decimal digits (a leading + or zeros included) and still applies the documented bounds', async () => {
    expect((await ctx.merchant.get('/v1/orders?page=2&size=010').set('X-API-Key', ctx.orgA.apiKey)).body.data).toMatchObject({ page: 2, size: 10 });
    expect((await ctx.admin.get('/v1/orgs?page=%2B1')).status).toBe(200);
    const over = await ctx.admin.get('/v1/orgs?page=1000001');
    expect(over.status).toBe(400);
    expect(over.body.error.message).toMatch(/<= 1000000/);
  });
});
