/**
 * Times at the edges of what ingest accepts: traces longer than a 32-bit millisecond count, and
 * times outside 1970…9999 (both found by the fuzz test as 500s).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, spanId, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;

beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
});
afterAll(async () => {
  await ctx?.close();
});

const ingest = (body: unknown) => ctx.platform.post('/v1/ingest').set(bearer(p.key)).send(body as object);
const otlp = (body: unknown) => ctx.platform.post('/v1/otlp/v1/traces').set(bearer(p.key)).send(body as object);
const otlpSpan = (start: string | number, end: string | number) => ({
  resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: traceId(), spanId: spanId(), name: 'far', startTimeUnixNano: start, endTimeUnixNano: end }] }] }],
});

describe('ingest time range', () => {
  it('stores a trace lasting decades, with its exact duration, and extends it with a later batch', async () => {
    const tid = traceId();
    const root = spanId();
    const first = await ingest({
      traces: [{ trace_id: tid, spans: [{ span_id: root, parent_span_id: null, name: 'long', start_time: '2015-05-09T10:13:49.231Z', end_time: '2076-07-14T10:28:02.246Z' }] }],
    });
    expect(first.status).toBe(202);
    const later = await ingest({
      traces: [{ trace_id: tid, spans: [{ span_id: spanId(), parent_span_id: root, name: 'later', start_time: '2090-01-01T00:00:00.000Z', end_time: '2094-09-01T07:43:52.430Z' }] }],
    });
    expect(later.status).toBe(202);
    const detail = await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key));
    expect(detail.status).toBe(200);
    expect(detail.body.data.duration_ms).toBe(Date.parse('2094-09-01T07:43:52.430Z') - Date.parse('2015-05-09T10:13:49.231Z'));
    expect(detail.body.data.spans[0].duration_ms).toBe(Date.parse('2076-07-14T10:28:02.246Z') - Date.parse('2015-05-09T10:13:49.231Z'));
    const listed = await ctx.platform.get('/v1/traces').query({ min_latency_ms: 2 ** 31 }).set(bearer(p.key));
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((t: { trace_id: string }) => t.trace_id)).toContain(tid);
  });

  it('refuses an OTLP time past year 9999 with 400 invalid_trace naming the field, and stores nothing', async () => {
    // As a JSON number (a decimal string is capped at 20 digits by the schema, which stays below 9999).
    const res = await otlp(otlpSpan('1000000', 1e21));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_trace');
    expect(res.body.error.message).toMatch(/endTimeUnixNano is outside the supported range/);
    const stored = await ctx.testDb.database.db('telemetry_traces').where({ project_id: p.projectId, root_name: 'far' });
    expect(stored).toHaveLength(0);
  });

  it('refuses native times before 1970 (spans and metric points) with 400', async () => {
    const span = await ingest({
      traces: [{ trace_id: traceId(), spans: [{ span_id: spanId(), parent_span_id: null, name: 'old', start_time: '1969-12-31T23:59:59.000Z', end_time: '2026-01-01T00:00:00.000Z' }] }],
    });
    expect(span.status).toBe(400);
    expect(span.body.error.code).toBe('invalid_trace');
    expect(span.body.error.message).toMatch(/start_time is outside the supported range/);
    const metric = await ingest({ metrics: [{ name: 'm', value: 1, timestamp: '1900-01-01T00:00:00.000Z' }] });
    expect(metric.status).toBe(400);
    expect(metric.body.error.message).toMatch(/metrics\[0\]: timestamp is outside the supported range/);
  });
});
