/** A NUL character (U+0000) in any text is refused with 400, never a 500, and nothing is stored. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

describe('NUL characters in input', () => {
  it('refuses them in a checkout session with 400 VALIDATION_ERROR and stores nothing', async () => {
    const before = await ctx.testDb.database.db('checkout_sessions').count<{ count: number }[]>({ count: '*' }).first();
    const res = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'nul-1')
      .send({ pricingData: { amount: 100, currency: 'USD', productData: { name: 'Tea\u0000' } }, metadata: { k: 'v\u0000' } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    const after = await ctx.testDb.database.db('checkout_sessions').count<{ count: number }[]>({ count: '*' }).first();
    expect(Number(after?.count)).toBe(Number(before?.count));
    // The key was not consumed: a corrected retry works.
    const retry = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'nul-1')
      .send({ pricingData: { amount: 100, currency: 'USD', productData: { name: 'Tea' } } });
    expect(retry.status).toBe(201);
  });

  it('refuses them in the admin API too', async () => {
    const res = await ctx.admin.post('/v1/orgs').send({ name: 'Bad\u0000name' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
  });

  it('refuses a lone surrogate escape (ill-formed Unicode) with 400, in checkout metadata and in telemetry, storing nothing', async () => {
    const res = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'surrogate-1')
      .set('Content-Type', 'application/json')
      .send('{"pricingData":{"amount":100,"currency":"USD","productData":{"name":"Tea"}},"metadata":{"k":"a\\udc00b"}}');
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringMatching(/well-formed Unicode/) });
    expect(await ctx.testDb.database.db('idempotency_keys').where({ key: 'surrogate-1' })).toHaveLength(0);

    const project = await ctx.services.telemetry.projects.create(ctx.orgA.orgId, { name: 'Surrogates', environment: 'production' });
    const { key } = await ctx.services.telemetry.keys.create(ctx.orgA.orgId, { projectId: project.id });
    const ingest = await ctx.platform
      .post('/v1/ingest')
      .set('Authorization', `Bearer ${key}`)
      .set('Content-Type', 'application/json')
      .send('{"metrics":[{"name":"m","value":1,"timestamp":"2026-11-22T09:00:00.000Z","attributes":{"a":"\\ud800"}}]}');
    expect(ingest.status).toBe(400);
    expect(ingest.body.error.message).toMatch(/well-formed Unicode/);
    expect(await ctx.testDb.database.db('telemetry_metric_points').where({ project_id: project.id })).toHaveLength(0);
  });
});
