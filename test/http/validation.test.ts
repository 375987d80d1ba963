/** The contract is enforced on every request: strict input, one error envelope, no leaks. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

const validSession = () => ({
  pricingData: { amount: 1500, currency: 'USD', productData: { name: 'T-shirt' } },
});

function expectEnvelope(body: unknown, code: string) {
  expect(body).toMatchObject({ success: false, error: { code } });
  const b = body as { message: string; error: { message: string } };
  expect(typeof b.message).toBe('string');
  expect(b.error.message).toBe(b.message);
  expect(JSON.stringify(body)).not.toMatch(/at .*\.(ts|js):\d+/); // no stack traces
}

describe('request validation (merchant API)', () => {
  const post = (body: unknown, headers: Record<string, string> = {}) =>
    ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'key-1')
      .set(headers)
      .send(body as object);

  it('rejects an unknown top-level field, naming it', async () => {
    const res = await post({ ...validSession(), discount: 5 });
    expect(res.status).toBe(400);
    expectEnvelope(res.body, 'VALIDATION_ERROR');
    expect(res.body.error.message).toContain('discount');
  });

  it('rejects an unknown nested field (pricingData.flexibleAmount), naming its path', async () => {
    const res = await post({ pricingData: { ...validSession().pricingData, flexibleAmount: true } });
    expect(res.status).toBe(400);
    expectEnvelope(res.body, 'VALIDATION_ERROR');
    expect(res.body.error.message).toContain('pricingData');
    expect(res.body.error.message).toContain('flexibleAmount');
  });

  it('rejects an unknown field two levels deep', async () => {
    const res = await post({ pricingData: { amount: 1, currency: 'USD', productData: { name: 'x', color: 'red' } } });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('color');
  });

  it('names both fields when mutually exclusive inputs are both given', async () => {
    const res = await post({ ...validSession(), pricingId: 'PRC_x' });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/exactly one of pricingId, pricingData/);
    const both = await post({ ...validSession(), customerId: 'CUS_x', customerEmail: 'a@example.com' });
    expect(both.status).toBe(400);
    expect(both.body.error.message).toMatch(/customerId and customerEmail are mutually exclusive/);
  });

  it('names the missing choice when neither of two required alternatives is given', async () => {
    const res = await post({ quantity: 1 });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/exactly one of pricingId, pricingData/);
  });

  it('enforces limits written in the spec: quantity, metadata, https URLs, Idempotency-Key', async () => {
    expect((await post({ ...validSession(), quantity: 0 })).status).toBe(400);
    expect((await post({ ...validSession(), quantity: 1_000_000 })).status).toBe(400);
    expect((await post({ ...validSession(), successUrl: 'http://shop.example/ok' })).status).toBe(400);
    const tooMany = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
    expect((await post({ ...validSession(), metadata: tooMany })).status).toBe(400);
    expect((await post({ ...validSession(), metadata: { 'a[b]': 'v' } })).status).toBe(400);
    expect((await post({ ...validSession(), metadata: { k: 'x'.repeat(501) } })).status).toBe(400);
    const spaced = await post(validSession(), { 'Idempotency-Key': 'has space' });
    expect(spaced.status).toBe(400);
    expect(spaced.body.error.message).toMatch(/Idempotency-Key/i);
    const missing = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).send(validSession());
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/idempotency-key/i);
  });

  it('when several things are wrong, names the body fields first and a missing header last, once each', async () => {
    const noKey = (body: object) => ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).send(body);
    const neither = await noKey({ quantity: 1 });
    expect(neither.status).toBe(400);
    expect(neither.body.error.message).toBe('body: exactly one of pricingId, pricingData must be given; the Idempotency-Key header is required');
    const both = await noKey({ ...validSession(), pricingId: 'PRC_x' });
    expect(both.body.error.message).toBe('body: exactly one of pricingId, pricingData must be given; the Idempotency-Key header is required');
    // Only the header missing: its message alone, written with the header's documented name.
    const onlyHeader = await noKey(validSession());
    expect(onlyHeader.body.error.message).toBe('the Idempotency-Key header is required');
    // The same inside pricingData: the choice named once, not ajv's line for each alternative.
    const noProduct = await post({ pricingData: { amount: 1500, currency: 'USD' } });
    expect(noProduct.body.error.message).toBe('body.pricingData: exactly one of productId, productData must be given');
  });

  it('counts customerEmail and merchantReference in UTF-8 bytes, not characters', async () => {
    // 128 two-byte characters: 128 characters (under maxLength 255) but 256 bytes.
    const res = await post({ ...validSession(), merchantReference: 'é'.repeat(128) });
    expect(res.status).toBe(400);
    expectEnvelope(res.body, 'VALIDATION_ERROR');
    expect(res.body.error.message).toMatch(/merchantReference must be at most 255 bytes/);
  });

  it('answers malformed JSON with 400 VALIDATION_ERROR', async () => {
    const res = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'k')
      .set('Content-Type', 'application/json')
      .send('{"pricingData": ');
    expect(res.status).toBe(400);
    expectEnvelope(res.body, 'VALIDATION_ERROR');
    expect(res.body.error.message).toMatch(/Malformed JSON/);
  });

  it('answers a body over 64 KiB with 413 PAYLOAD_TOO_LARGE', async () => {
    const big = { ...validSession(), merchantReference: 'x', padding: 'y'.repeat(70 * 1024) };
    const res = await post(big);
    expect(res.status).toBe(413);
    expectEnvelope(res.body, 'PAYLOAD_TOO_LARGE');
  });

  it('accepts a body just under 64 KiB as far as size goes (then validates it)', async () => {
    const res = await post({ ...validSession(), padding: 'y'.repeat(60 * 1024) });
    expect(res.status).toBe(400); // unknown field, not 413
    expect(res.body.error.message).toContain('padding');
  });

  it('rejects a non-JSON content type with 415', async () => {
    const res = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'k')
      .set('Content-Type', 'text/plain')
      .send('hello');
    expect(res.status).toBe(415);
    expectEnvelope(res.body, 'UNSUPPORTED_MEDIA_TYPE');
  });

  it('rejects unknown query parameters with 400', async () => {
    const res = await ctx.merchant.get('/v1/me?verbose=1').set('X-API-Key', ctx.orgA.apiKey);
    expect(res.status).toBe(400);
    expectEnvelope(res.body, 'VALIDATION_ERROR');
    expect(res.body.error.message).toContain('verbose');
  });

  it('rejects out-of-range page size with 400', async () => {
    const res = await ctx.merchant.get('/v1/orders?size=101').set('X-API-Key', ctx.orgA.apiKey);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('size');
  });

  it('answers unknown routes with 404 and wrong methods with 405, in the envelope', async () => {
    const unknown = await ctx.merchant.get('/v1/nothing-here').set('X-API-Key', ctx.orgA.apiKey);
    expect(unknown.status).toBe(404);
    expectEnvelope(unknown.body, 'NOT_FOUND');
    const method = await ctx.merchant.put('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    expect(method.status).toBe(405);
    expectEnvelope(method.body, 'METHOD_NOT_ALLOWED');
  });

  it('puts a request id on every response, and echoes a well-formed inbound one', async () => {
    const res = await ctx.merchant.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    expect(res.headers['x-request-id']).toMatch(/^req_[0-9A-Za-z]{24}$/);
    const echoed = await ctx.merchant.get('/v1/nowhere').set('X-Request-Id', 'trace-1234-abcd');
    expect(echoed.headers['x-request-id']).toBe('trace-1234-abcd');
    const refused = await ctx.merchant.get('/v1/nowhere').set('X-Request-Id', 'bad id with spaces');
    expect(refused.headers['x-request-id']).toMatch(/^req_/);
  });
});

describe('platform API errors', () => {
  it('uses the telemetry error envelope with lowercase codes on telemetry routes', async () => {
    const res = await ctx.platform.get('/v1/nothing');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      error: { code: 'not_found', message: 'Route not found', details: null },
      meta: { request_id: res.headers['x-request-id'], timestamp: '2026-11-22T09:00:00.000Z' },
    });
  });

  it('uses the merchant-style envelope on agent-wallet routes', async () => {
    const res = await ctx.platform.get('/v1/agent-wallet/history?limit=500');
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.body.success).toBe(false);
    expect(typeof res.body.error.code).toBe('string');
  });
});
