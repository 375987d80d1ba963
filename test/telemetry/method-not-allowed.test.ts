/** A telemetry path called with a method it does not document: 405 with its own code, in the telemetry error body. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;
beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
});
afterAll(async () => {
  await ctx?.close();
});

describe('telemetry API: wrong method on a known path', () => {
  it.each([
    ['get', '/v1/ingest'],
    ['put', '/v1/projects'],
    ['delete', '/v1/traces'],
    ['post', '/v1/metrics'],
    ['get', '/v1/otlp/v1/traces'],
    ['options', '/v1/projects'],
  ] as const)('%s %s → 405 method_not_allowed', async (method, path) => {
    const res = await ctx.platform[method](path).set(bearer(p.key));
    expect(res.status).toBe(405);
    expect(res.body).toEqual({
      error: { code: 'method_not_allowed', message: 'Method not allowed on this path', details: null },
      meta: { request_id: res.headers['x-request-id'], timestamp: '2026-11-22T09:00:00.000Z' },
    });
  });

  it('keeps not_found for a path that does not exist, and the envelope code on the agent wallet routes', async () => {
    const unknown = await ctx.platform.get('/v1/nothing-here').set(bearer(p.key));
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    const agent = await ctx.platform.delete('/v1/agent-wallet');
    expect(agent.status).toBe(405);
    expect(agent.body).toMatchObject({ success: false, error: { code: 'METHOD_NOT_ALLOWED' } });
  });
});
