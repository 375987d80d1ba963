/** Inline product name: 1-255 characters after trimming surrounding whitespace, at both edges. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

let keys = 0;
const create = (name: string) =>
  ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `name-${++keys}`)
    .send({ pricingData: { amount: 1500, currency: 'USD', productData: { name } } });

describe('pricingData.productData.name', () => {
  it.each([
    ['1 character with surrounding whitespace', ' \t x \n ', 'x'],
    ['255 characters', 'a'.repeat(255), 'a'.repeat(255)],
    ['255 characters with surrounding spaces', `  ${'a'.repeat(255)}  `, 'a'.repeat(255)],
    ['255 characters with a lot of surrounding whitespace', `${' '.repeat(300)}${'a'.repeat(255)}\n\t${' '.repeat(300)}`, 'a'.repeat(255)],
    ['255 characters outside the BMP (510 UTF-16 code units)', '🚀'.repeat(255), '🚀'.repeat(255)],
    ['255 characters, inner whitespace kept', `x${' '.repeat(253)}y`, `x${' '.repeat(253)}y`],
  ])('takes %s, and stores it trimmed', async (_label, name, stored) => {
    const res = await create(name);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.productName).toBe(stored);
    expect(res.body.data.product.name).toBe(stored);
  });

  it.each([
    ['the empty string', ''],
    ['whitespace only', ' \t\n '],
    ['256 characters', 'a'.repeat(256)],
    ['256 characters inside surrounding spaces', `  ${'a'.repeat(256)}  `],
    ['256 characters outside the BMP', '🚀'.repeat(256)],
  ])('answers 400 naming the field for %s, and creates nothing', async (_label, name) => {
    const before = await ctx.testDb.database.db('checkout_sessions').count<{ count: number }[]>({ count: '*' }).first();
    const res = await create(name);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.message).toMatch(/pricingData\.productData\.name/);
    const after = await ctx.testDb.database.db('checkout_sessions').count<{ count: number }[]>({ count: '*' }).first();
    expect(Number(after?.count)).toBe(Number(before?.count));
  });
});
