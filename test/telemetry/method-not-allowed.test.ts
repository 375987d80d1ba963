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

  // Issue 27, item 11: OTEL_EXPORTER_OTLP_ENDPOINT={api_url} (without /v1/otlp) makes exporters
  // POST /v1/traces, /v1/metrics, /v1/logs: the answer names the right path instead of a bare 405.
  it.each([
    ['/v1/traces', 405, 'method_not_allowed'],
    ['/v1/metrics', 405, 'method_not_allowed'],
    ['/v1/logs', 404, 'not_found'],
  ] as const)('POST %s (an OTLP exporter without /v1/otlp) → %i naming /v1/otlp/v1/traces', async (path, status, code) => {
    for (const type of ['application/x-protobuf', 'application/json']) {
      const res = await ctx.platform.post(path).set(bearer(p.key)).set('Content-Type', type).send(type === 'application/json' ? '{"resourceSpans":[]}' : Buffer.from([0x0a, 0x00]));
      expect(res.status).toBe(status);
      expect(res.body.error.code).toBe(code);
      expect(res.body.error.message).toContain('POST /v1/otlp/v1/traces');
      expect(res.body.error.message).toContain('OTEL_EXPORTER_OTLP_ENDPOINT=');
      expect(res.body.error.message).toMatch(/\/v1\/otlp\b/);
      expect(res.body.meta.request_id).toBe(res.headers['x-request-id']);
    }
  });
});
