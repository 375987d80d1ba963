/** The monthly trace quota (quota_exceeded) and the per-key rate limit (rate_limited + headers). */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeOtlpTraceRequest } from '../../src/telemetry/otlp-protobuf.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, keyFor, span, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;
const T0 = Date.parse('2026-11-22T08:00:00.000Z');

beforeAll(async () => {
  ctx = await createTestContext({ env: { TELEMETRY_MONTHLY_TRACE_QUOTA: '3', TELEMETRY_RATE_LIMIT: '5', TELEMETRY_RATE_LIMIT_WINDOW_SECONDS: '60' } });
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
});
afterAll(async () => {
  await ctx?.close();
});

const trace = (id = traceId()) => ({ trace_id: id, spans: [span({ start: T0, durationMs: 1 })] });
/** A fresh key per test keeps the rate-limit windows of the tests apart. */
const freshKey = () => keyFor(ctx, ctx.orgA.orgId, p.projectId);

describe('monthly trace quota', () => {
  it('rejects the whole batch whose new traces would exceed the quota (429 quota_exceeded)', async () => {
    const k = await freshKey();
    const first = trace();
    const second = trace();
    expect((await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [first, second] })).status).toBe(202);
    const third = trace();
    const fourth = trace();
    const res = await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [third, fourth] });
    expect(res.status).toBe(429);
    expect(res.body.error).toEqual({
      code: 'quota_exceeded',
      message: 'Monthly trace quota of 3 traces exceeded',
      details: { quota: 3, used: 2, resets_at: '2026-12-01T00:00:00.000Z' },
    });
    expect(res.headers['x-ratelimit-limit']).toBe('5');
    // Nothing of the batch was stored.
    expect((await ctx.platform.get(`/v1/traces/${third.trace_id}`).set(bearer(k.key))).status).toBe(404);
  });

  it('still accepts spans of stored traces, metric-only batches and the last trace of the quota', async () => {
    const k = await freshKey();
    const stored = (await ctx.testDb.database.db('telemetry_traces').where({ project_id: p.projectId }).first()).trace_id;
    expect((await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [{ trace_id: stored, spans: [span({ start: T0, durationMs: 9 })] }] })).status).toBe(202);
    expect((await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ metrics: [{ name: 'm', value: 1, timestamp: '2026-11-22T08:00:00Z' }] })).status).toBe(202);
    expect((await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [trace()] })).status).toBe(202);
    const over = await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [trace()] });
    expect(over.status).toBe(429);
    expect(over.body.error.details).toMatchObject({ quota: 3, used: 3 });
  });

  it('does not count sampled-out traces, and is per organization', async () => {
    const k = await freshKey();
    await ctx.platform.patch(`/v1/projects/${p.projectId}`).set(bearer(k.key)).send({ settings: { sample_rate: 0 } });
    const res = await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [trace(), trace()] });
    expect(res.status).toBe(202);
    await ctx.platform.patch(`/v1/projects/${p.projectId}`).set(bearer(k.key)).send({ settings: { sample_rate: 1 } });
    const other = await createProjectWithKey(ctx, ctx.orgB.orgId);
    expect((await ctx.platform.post('/v1/ingest').set(bearer(other.key)).send({ traces: [trace(), trace(), trace()] })).status).toBe(202);
  });

  it('resets with the calendar month (UTC)', async () => {
    ctx.clock.set('2026-12-01T00:00:00.000Z');
    const k = await freshKey();
    expect((await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [trace(), trace(), trace()] })).status).toBe(202);
    expect((await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [trace()] })).status).toBe(429);
    ctx.clock.set('2026-11-22T09:00:00.000Z');
  });
});

describe('per-key rate limit', () => {
  it('counts requests per key in a fixed window and answers 429 rate_limited with Retry-After when exhausted', async () => {
    ctx.clock.set('2026-11-22T09:00:15.000Z');
    const k = await freshKey();
    const other = await freshKey();
    const reset = String(Date.parse('2026-11-22T09:01:00.000Z') / 1000);
    for (let i = 1; i <= 5; i++) {
      const res = await ctx.platform.get('/v1/projects').set(bearer(k.key));
      expect(res.status).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('5');
      expect(res.headers['x-ratelimit-remaining']).toBe(String(5 - i));
      expect(res.headers['x-ratelimit-reset']).toBe(reset);
    }
    for (const res of [await ctx.platform.get('/v1/projects').set(bearer(k.key)), await ctx.platform.post('/v1/ingest').set(bearer(k.key)).send({ traces: [] })]) {
      expect(res.status).toBe(429);
      expect(res.body.error).toEqual({ code: 'rate_limited', message: 'Rate limit exceeded', details: { retry_after_seconds: 45 } });
      expect(res.headers['retry-after']).toBe('45');
      expect(res.headers['x-ratelimit-remaining']).toBe('0');
      expect(res.headers['x-ratelimit-reset']).toBe(reset);
    }
    // Another key of the same project has its own window.
    expect((await ctx.platform.get('/v1/projects').set(bearer(other.key))).status).toBe(200);
    // The next window starts afresh.
    ctx.clock.set('2026-11-22T09:01:00.000Z');
    const next = await ctx.platform.get('/v1/projects').set(bearer(k.key));
    expect(next.status).toBe(200);
    expect(next.headers['x-ratelimit-remaining']).toBe('4');
    ctx.clock.set('2026-11-22T09:00:00.000Z');
  });

  it('prunes windows that can no longer be read', async () => {
    ctx.clock.set('2026-11-22T12:00:00.000Z');
    await ctx.services.telemetry.retention.run();
    const left = await ctx.testDb.database.db('telemetry_rate_limits').where('window_start', '<', new Date('2026-11-22T11:58:00.000Z')).count({ n: '*' }).first();
    expect(Number(left!.n)).toBe(0);
    ctx.clock.set('2026-11-22T09:00:00.000Z');
  });
});

describe('OTLP/HTTP under the same limits', () => {
  const otlpSpan = (tid = traceId()) => ({
    traceId: tid,
    spanId: randomBytes(8).toString('hex'),
    name: 'chat',
    startTimeUnixNano: (BigInt(T0) * 1_000_000n).toString(),
    endTimeUnixNano: (BigInt(T0 + 5) * 1_000_000n).toString(),
  });
  const protobuf = (key: string, spans: unknown[]) =>
    ctx.platform
      .post('/v1/otlp/v1/traces')
      .set(bearer(key))
      .set('Content-Type', 'application/x-protobuf')
      .send(encodeOtlpTraceRequest({ resourceSpans: [{ scopeSpans: [{ spans }] }] }));

  it('the monthly quota (429 quota_exceeded, nothing stored), sampling, and the key project only', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'OTLP limits' });
    const a = await createProjectWithKey(ctx, org.id, 'A');
    const b = await createProjectWithKey(ctx, org.id, 'B');
    const over = [otlpSpan(), otlpSpan(), otlpSpan(), otlpSpan()];
    const res = await protobuf(a.key, over);
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({ code: 'quota_exceeded', details: { quota: 3, used: 0 } });
    expect((await ctx.platform.get(`/v1/traces/${over[0]!.traceId}`).set(bearer(a.key))).status).toBe(404);

    await ctx.platform.patch(`/v1/projects/${a.projectId}`).set(bearer(a.key)).send({ settings: { sample_rate: 0 } });
    const sampledOut = otlpSpan();
    expect((await protobuf(a.key, [sampledOut])).status).toBe(200);
    expect((await ctx.platform.get(`/v1/traces/${sampledOut.traceId}`).set(bearer(a.key))).status).toBe(404);
    // A second key of project A: the first has used up its rate-limit window (5 requests).
    const a2 = await keyFor(ctx, org.id, a.projectId);
    await ctx.platform.patch(`/v1/projects/${a.projectId}`).set(bearer(a2.key)).send({ settings: { sample_rate: 1 } });

    const kept = [otlpSpan(), otlpSpan(), otlpSpan()];
    expect((await protobuf(a2.key, kept)).status).toBe(200);
    expect((await ctx.platform.get(`/v1/traces/${kept[0]!.traceId}`).set(bearer(a2.key))).status).toBe(200);
    // Project B's key does not see project A's traces.
    expect((await ctx.platform.get(`/v1/traces/${kept[0]!.traceId}`).set(bearer(b.key))).status).toBe(404);
  });
});
