/** POST /v1/ingest: storage, validation (all or nothing), GenAI mapping, pricing, upserts, sampling. */
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { PriceTable } from '../../src/telemetry/prices.js';
import { bearer, createProjectWithKey, span, spanId, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;
const T0 = Date.parse('2026-11-22T08:00:00.000Z');

beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
});
afterAll(async () => {
  await ctx?.close();
});

const ingest = (body: unknown, key = p.key) => ctx.platform.post('/v1/ingest').set(bearer(key)).send(body as object);
const getTrace = (id: string, key = p.key) => ctx.platform.get(`/v1/traces/${id}`).set(bearer(key));
const storedSpans = async (projectId = p.projectId) =>
  Number((await ctx.testDb.database.db('telemetry_traces').where({ project_id: projectId }).sum({ n: 'span_count' }).first())!.n ?? 0);

describe('storing a batch', () => {
  it('answers 202 with the counts and stores traces, spans and metric points', async () => {
    const tid = traceId();
    const root = spanId();
    const child = spanId();
    const res = await ingest({
      traces: [
        {
          trace_id: tid,
          spans: [
            { span_id: root, parent_span_id: null, name: 'chat.handle_message', start_time: '2026-11-22T09:29:58.120Z', end_time: '2026-11-22T09:30:00.470Z', kind: 'SERVER', attributes: { 'service.name': 'support-bot', 'user.tier': 'pro' }, status: { code: 'OK' } },
            // Fractions beyond milliseconds are truncated; offsets are honoured.
            { span_id: child, parent_span_id: root, name: 'retrieval.search', start_time: '2026-11-22T10:29:58.1309999+01:00', end_time: '2026-11-22T09:29:58.310Z', attributes: { 'retrieval.top_k': 5, tags: ['a', 1, true] } },
          ],
        },
      ],
      metrics: [{ name: 'app.queue.depth', value: 17, timestamp: '2026-11-22T09:30:00.000Z', attributes: { queue: 'support' } }],
    });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ data: { traces_received: 1, spans_received: 2, metrics_received: 1 }, meta: { request_id: expect.any(String), timestamp: '2026-11-22T09:00:00.000Z' } });
    expect(res.headers['x-ratelimit-limit']).toBeDefined();

    const detail = await getTrace(tid);
    expect(detail.status).toBe(200);
    expect(detail.body.data).toEqual({
      trace_id: tid,
      name: 'chat.handle_message',
      start_time: '2026-11-22T09:29:58.120Z',
      end_time: '2026-11-22T09:30:00.470Z',
      duration_ms: 2350,
      spans: [
        { span_id: root, parent_span_id: null, name: 'chat.handle_message', start_time: '2026-11-22T09:29:58.120Z', end_time: '2026-11-22T09:30:00.470Z', duration_ms: 2350, attributes: { 'service.name': 'support-bot', 'user.tier': 'pro' }, status: { code: 'OK' } },
        { span_id: child, parent_span_id: root, name: 'retrieval.search', start_time: '2026-11-22T09:29:58.130Z', end_time: '2026-11-22T09:29:58.310Z', duration_ms: 180, attributes: { 'retrieval.top_k': 5, tags: ['a', 1, true] }, status: { code: 'UNSET' } },
      ],
    });
    const point = await ctx.testDb.database.db('telemetry_metric_points').where({ project_id: p.projectId, name: 'app.queue.depth' }).first();
    expect(point).toMatchObject({ value: 17, attributes: { queue: 'support' } });
    expect(new Date(point.timestamp).toISOString()).toBe('2026-11-22T09:30:00.000Z');
  });

  it('accepts a metrics-only batch and an empty traces array', async () => {
    const res = await ingest({ metrics: [{ name: 'x', value: -1.5, timestamp: '2026-11-22T09:00:00Z' }] });
    expect(res.status).toBe(202);
    expect(res.body.data).toEqual({ traces_received: 0, spans_received: 0, metrics_received: 1 });
    expect((await ingest({ traces: [] })).body.data).toEqual({ traces_received: 0, spans_received: 0, metrics_received: 0 });
  });

  it('accepts a gzip-compressed body', async () => {
    const tid = traceId();
    const body = gzipSync(Buffer.from(JSON.stringify({ traces: [{ trace_id: tid, spans: [span({ start: T0, durationMs: 7 })] }] })));
    const res = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).set('Content-Type', 'application/json').set('Content-Encoding', 'gzip').serialize((x: unknown) => x as string).send(body);
    expect(res.status).toBe(202);
    expect((await getTrace(tid)).body.data.duration_ms).toBe(7);
    const corrupt = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).set('Content-Type', 'application/json').set('Content-Encoding', 'gzip').serialize((x: unknown) => x as string).send(Buffer.from('not gzip at all'));
    expect(corrupt.status).toBe(400);
    expect(corrupt.body.error.code).toBe('invalid_request');
  });
});

describe('validation: one invalid trace rejects the whole batch with invalid_trace', () => {
  const good = () => ({ trace_id: traceId(), spans: [span({ start: T0, durationMs: 1 })] });
  const cases: Array<[string, (t: any) => void, string, 'span' | 'trace']> = [
    ['end_time before start_time', (t) => (t.spans[0].end_time = '2026-11-22T07:59:59.999Z'), 'end_time', 'span'],
    ['an uppercase trace id', (t) => (t.trace_id = t.trace_id.toUpperCase().replace(/^./, 'A')), 'trace_id', 'trace'],
    ['an all-zero trace id', (t) => (t.trace_id = '0'.repeat(32)), 'trace_id', 'trace'],
    ['a short span id', (t) => (t.spans[0].span_id = 'abc'), 'span_id', 'span'],
    ['an all-zero span id', (t) => (t.spans[0].span_id = '0'.repeat(16)), 'span_id', 'span'],
    ['an all-zero parent id', (t) => (t.spans[0].parent_span_id = '0'.repeat(16)), 'parent_span_id', 'span'],
    ['a span that is its own parent', (t) => (t.spans[0].parent_span_id = t.spans[0].span_id), 'parent_span_id', 'span'],
    ['a malformed parent id', (t) => (t.spans[0].parent_span_id = 'xyz'), 'parent_span_id', 'span'],
    ['a non ISO 8601 start_time', (t) => (t.spans[0].start_time = '22/11/2026 08:00'), 'start_time', 'span'],
    ['an unknown status code', (t) => (t.spans[0].status = { code: 'FAILED' }), 'status.code', 'span'],
    ['an unknown span field', (t) => (t.spans[0].foo = 1), 'foo', 'span'],
    ['a missing span name', (t) => delete t.spans[0].name, 'name', 'span'],
    ['an object attribute value', (t) => (t.spans[0].attributes = { nested: { a: 1 } }), 'attributes.nested', 'span'],
    ['an array of objects', (t) => (t.spans[0].attributes = { list: [{ a: 1 }] }), 'attributes.list.0', 'span'],
    ['a null attribute value', (t) => (t.spans[0].attributes = { n: null }), 'attributes.n', 'span'],
    ['201 attributes', (t) => (t.spans[0].attributes = Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`k${i}`, i]))), 'attributes', 'span'],
    ['negative llm.tokens.input', (t) => (t.spans[0].attributes = { 'llm.model': 'm', 'llm.tokens.input': -1 }), 'attributes.llm.tokens.input', 'span'],
    ['fractional llm.tokens.output', (t) => (t.spans[0].attributes = { 'llm.model': 'm', 'llm.tokens.output': 1.5 }), 'attributes.llm.tokens.output', 'span'],
    ['a string gen_ai.usage.input_tokens', (t) => (t.spans[0].attributes = { 'gen_ai.request.model': 'm', 'gen_ai.usage.input_tokens': '12' }), 'attributes.gen_ai.usage.input_tokens', 'span'],
    ['a numeric llm.model', (t) => (t.spans[0].attributes = { 'llm.model': 4 }), 'attributes.llm.model', 'span'],
    ['an empty llm.vendor', (t) => (t.spans[0].attributes = { 'llm.model': 'm', 'llm.vendor': '' }), 'attributes.llm.vendor', 'span'],
    ['a negative llm.cost', (t) => (t.spans[0].attributes = { 'llm.model': 'm', 'llm.cost': -0.01 }), 'attributes.llm.cost', 'span'],
    ['an unknown trace field', (t) => (t.service = 'x'), 'service', 'trace'],
    ['no spans', (t) => (t.spans = []), 'spans', 'trace'],
    ['1001 spans', (t) => (t.spans = Array.from({ length: 1001 }, () => span({ start: T0, durationMs: 1 }))), 'spans', 'trace'],
  ];

  it.each(cases)('%s', async (_label, mutate, field, level) => {
    const first = good();
    const bad = good();
    mutate(bad);
    const before = await storedSpans();
    const res = await ingest({ traces: [first, bad] });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_trace');
    expect(res.body.error.details).toMatchObject({ trace_index: 1, field });
    expect(res.body.error.details.trace_id).toBe(typeof bad.trace_id === 'string' ? bad.trace_id.toLowerCase() : null);
    expect(res.body.error.details.span_id).toBe(level === 'span' ? (bad.spans[0]?.span_id ?? null) : null);
    expect(res.body.error.message).toMatch(/^traces\[1\]/);
    // Nothing of the batch is stored, not even the valid first trace.
    expect(await storedSpans()).toBe(before);
    expect((await getTrace(first.trace_id)).status).toBe(404);
  });

  it('a trace id twice in a batch, or a span id twice in a trace', async () => {
    const t = good();
    const dupTrace = await ingest({ traces: [t, { ...good(), trace_id: t.trace_id }] });
    expect(dupTrace.body.error).toMatchObject({ code: 'invalid_trace', details: { trace_index: 1, field: 'trace_id' } });
    const s = span({ start: T0, durationMs: 1 });
    const dupSpan = await ingest({ traces: [{ trace_id: traceId(), spans: [s, { ...s }] }] });
    expect(dupSpan.body.error).toMatchObject({ code: 'invalid_trace', details: { trace_index: 0, span_id: s.span_id, field: 'span_id' } });
  });
});

describe('validation: invalid_request for the batch itself', () => {
  it.each([
    ['an unknown top-level field', { traces: [], extra: 1 }],
    ['an empty object', {}],
    ['traces not an array', { traces: {} }],
    ['1001 traces', { traces: Array.from({ length: 1001 }, () => ({ trace_id: traceId(), spans: [span({ start: T0, durationMs: 1 })] })) }],
  ])('%s', async (_label, body) => {
    const res = await ingest(body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
  });

  it('malformed JSON, a JSON array, and a non-JSON content type', async () => {
    const malformed = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).set('Content-Type', 'application/json').send('{"traces": [');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe('invalid_request');
    const array = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).set('Content-Type', 'application/json').send('[]');
    expect(array.status).toBe(400);
    expect(array.body.error.code).toBe('invalid_request');
    const text = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).set('Content-Type', 'text/plain').send('hello');
    expect(text.status).toBe(400);
    expect(text.body.error.code).toBe('invalid_request');
  });

  it('an invalid metric point names its index and field', async () => {
    const res = await ingest({ metrics: [{ name: 'ok', value: 1, timestamp: '2026-11-22T09:00:00Z' }, { name: 'bad', value: 'high', timestamp: '2026-11-22T09:00:00Z' }] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { metric_index: 1, field: 'value' } });
  });

  it('a body over 5 MB is 413 payload_too_large', async () => {
    const big = { traces: [{ trace_id: traceId(), spans: [span({ start: T0, durationMs: 1, attributes: { blob: 'x'.repeat(5 * 1024 * 1024) } })] }] };
    const res = await ingest(big);
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: 'payload_too_large', details: { limit_bytes: 5 * 1024 * 1024 } });
  });
});

describe('model-call spans: GenAI mapping and cost', () => {
  it('maps gen_ai.* onto llm.*, keeps the originals, and prices the call from the table', async () => {
    const tid = traceId();
    const res = await ingest({
      traces: [
        {
          trace_id: tid,
          spans: [
            span({
              start: T0,
              durationMs: 2130,
              attributes: {
                'gen_ai.provider.name': 'openai',
                'gen_ai.system': 'ignored-when-provider-given',
                'gen_ai.request.model': 'gpt-4o',
                'gen_ai.response.model': 'gpt-4o-2024-08-06',
                'gen_ai.usage.input_tokens': 1200,
                'gen_ai.usage.output_tokens': 350,
              },
            }),
          ],
        },
      ],
    });
    expect(res.status).toBe(202);
    const attrs = (await getTrace(tid)).body.data.spans[0].attributes;
    expect(attrs).toEqual({
      'gen_ai.provider.name': 'openai',
      'gen_ai.system': 'ignored-when-provider-given',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.response.model': 'gpt-4o-2024-08-06',
      'gen_ai.usage.input_tokens': 1200,
      'gen_ai.usage.output_tokens': 350,
      'llm.vendor': 'openai',
      // The response model wins; the dated snapshot prices as gpt-4o (2.50 / 10.00 USD per 1M).
      'llm.model': 'gpt-4o-2024-08-06',
      'llm.tokens.input': 1200,
      'llm.tokens.output': 350,
      'llm.cost': 0.0065,
    });
    const list = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ model: 'gpt-4o-2024-08-06' });
    expect(list.body.data.find((t: { trace_id: string }) => t.trace_id === tid).llm_summary).toEqual({ model: 'gpt-4o-2024-08-06', tokens_input: 1200, tokens_output: 350, cost: 0.0065 });
  });

  it('falls back to gen_ai.system and gen_ai.request.model; explicit llm.* keys win', async () => {
    const tid = traceId();
    await ingest({
      traces: [
        {
          trace_id: tid,
          spans: [
            span({ start: T0, durationMs: 5, attributes: { 'gen_ai.system': 'anthropic', 'gen_ai.request.model': 'claude-sonnet-4-5', 'gen_ai.usage.input_tokens': 1000 } }),
            span({ start: T0 + 1, durationMs: 5, attributes: { 'llm.model': 'mine', 'gen_ai.request.model': 'theirs', 'llm.tokens.input': 3, 'gen_ai.usage.input_tokens': 99, 'llm.cost': 0.5 } }),
          ],
        },
      ],
    });
    const spans = (await getTrace(tid)).body.data.spans;
    expect(spans[0].attributes).toMatchObject({ 'llm.vendor': 'anthropic', 'llm.model': 'claude-sonnet-4-5', 'llm.tokens.input': 1000, 'llm.cost': 0.003 });
    expect(spans[0].attributes['llm.tokens.output']).toBeUndefined();
    expect(spans[1].attributes).toMatchObject({ 'llm.model': 'mine', 'llm.tokens.input': 3, 'llm.cost': 0.5 });
    expect(spans[1].attributes['llm.vendor']).toBeUndefined();
  });

  it('leaves llm.cost absent for a model without a price (counted as 0 in the summary)', async () => {
    const tid = traceId();
    await ingest({ traces: [{ trace_id: tid, spans: [span({ start: T0, durationMs: 5, attributes: { 'llm.model': 'home-grown-7b', 'llm.tokens.input': 10 } })] }] });
    expect((await getTrace(tid)).body.data.spans[0].attributes['llm.cost']).toBeUndefined();
    const list = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ model: 'home-grown-7b' });
    expect(list.body.data[0].llm_summary).toEqual({ model: 'home-grown-7b', tokens_input: 10, tokens_output: 0, cost: 0 });
  });

  it('price table: exact name, longest dashed prefix, and deployment overrides', () => {
    const table = new PriceTable({ 'gpt-4o': { input: 1, output: 1 }, 'my-model': { input: 4, output: 8 } });
    expect(table.cost('gpt-4o', 1_000_000, 0)).toBe(1);
    expect(table.cost('gpt-4o-mini-2024-07-18', 1_000_000, 1_000_000)).toBeCloseTo(0.75, 12);
    expect(table.cost('my-model', 500_000, 250_000)).toBe(4);
    expect(table.cost('gpt-4oo', 1, 1)).toBeUndefined();
    expect(table.cost('unknown', 1, 1)).toBeUndefined();
  });
});

describe('re-sending and extending traces', () => {
  it('replaces a re-sent span instead of duplicating it, and recomputes the summary', async () => {
    const tid = traceId();
    const root = span({ start: T0, durationMs: 1000, name: 'root' });
    const call = span({ parent_span_id: root.span_id, start: T0 + 100, durationMs: 500, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 10, 'llm.cost': 1 } });
    await ingest({ traces: [{ trace_id: tid, spans: [root, call] }] });
    const resent = { ...call, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 20, 'llm.cost': 2 }, status: { code: 'ERROR' } };
    expect((await ingest({ traces: [{ trace_id: tid, spans: [resent] }] })).status).toBe(202);
    const detail = (await getTrace(tid)).body.data;
    expect(detail.spans).toHaveLength(2);
    expect(detail.spans[1]).toMatchObject({ span_id: call.span_id, attributes: { 'llm.tokens.input': 20 }, status: { code: 'ERROR' } });
    const summary = (await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ status: 'error' })).body.data.find((t: { trace_id: string }) => t.trace_id === tid);
    expect(summary).toMatchObject({ span_count: 2, status: 'error', llm_summary: { model: 'gpt-4o', tokens_input: 20, tokens_output: 0, cost: 2 }, root_span: { name: 'root' } });
  });

  it('joins spans of one trace sent in several batches (times, root and totals recomputed)', async () => {
    const tid = traceId();
    const root = span({ start: T0, durationMs: 3000, name: 'root', attributes: { r: 1 } });
    const late = span({ parent_span_id: root.span_id, start: T0 + 2000, durationMs: 4000, name: 'late', attributes: { 'llm.model': 'b', 'llm.tokens.output': 7 } });
    const early = span({ parent_span_id: root.span_id, start: T0 - 500, durationMs: 100, name: 'early', attributes: { 'llm.model': 'a', 'llm.tokens.input': 3 } });
    await ingest({ traces: [{ trace_id: tid, spans: [late] }] });
    let summary = (await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ model: 'b' })).body.data.find((t: { trace_id: string }) => t.trace_id === tid);
    expect(summary.root_span.name).toBe('late');
    await ingest({ traces: [{ trace_id: tid, spans: [root] }] });
    await ingest({ traces: [{ trace_id: tid, spans: [early] }] });
    summary = (await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ model: 'b' })).body.data.find((t: { trace_id: string }) => t.trace_id === tid);
    expect(summary).toEqual({
      trace_id: tid,
      name: 'root',
      start_time: new Date(T0 - 500).toISOString(),
      end_time: new Date(T0 + 6000).toISOString(),
      duration_ms: 6500,
      span_count: 3,
      root_span: { name: 'root', attributes: { r: 1 } },
      llm_summary: { model: 'a', tokens_input: 3, tokens_output: 7, cost: 0 },
      status: 'ok',
      session_id: null,
      user_id: null,
    });
  });
});

describe('sampling by trace id', () => {
  it('stores exactly the traces whose last 56 bits clear the threshold, counting all as received', async () => {
    const s = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Sampled');
    await ctx.platform.patch(`/v1/projects/${s.projectId}`).set(bearer(s.key)).send({ settings: { sample_rate: 0.25 } });
    const ids = Array.from({ length: 200 }, () => traceId());
    const res = await ingest({ traces: ids.map((id) => ({ trace_id: id, spans: [span({ start: T0, durationMs: 1 })] })) }, s.key);
    expect(res.body.data).toEqual({ traces_received: 200, spans_received: 200, metrics_received: 0 });
    const threshold = BigInt(Math.round(0.75 * 2 ** 56));
    const expected = ids.filter((id) => BigInt(`0x${id.slice(-14)}`) >= threshold).sort();
    const stored = (await ctx.testDb.database.db('telemetry_traces').where({ project_id: s.projectId }).select('trace_id')).map((r: { trace_id: string }) => r.trace_id).sort();
    expect(stored).toEqual(expected);
    expect(stored.length).toBeGreaterThan(20);
    expect(stored.length).toBeLessThan(90);
    // The same decision for later batches of those traces.
    const dropped = ids.find((id) => !expected.includes(id))!;
    await ingest({ traces: [{ trace_id: dropped, spans: [span({ start: T0, durationMs: 2 })] }] }, s.key);
    expect((await getTrace(dropped, s.key)).status).toBe(404);
    // Rate 0 stores nothing; rate 1 everything.
    await ctx.platform.patch(`/v1/projects/${s.projectId}`).set(bearer(s.key)).send({ settings: { sample_rate: 0 } });
    const none = traceId();
    expect((await ingest({ traces: [{ trace_id: none, spans: [span({ start: T0, durationMs: 2 })] }] }, s.key)).body.data.traces_received).toBe(1);
    expect((await getTrace(none, s.key)).status).toBe(404);
  });
});

describe('concurrent batches', () => {
  it('several batches extending one new trace at once store every span once, and count it once', async () => {
    const c = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Concurrent');
    const tid = traceId();
    const start = Date.parse('2026-11-22T07:00:00.000Z');
    const batches = Array.from({ length: 6 }, (_, i) => ({
      traces: [
        { trace_id: tid, spans: [span({ start: start + i * 10, durationMs: 100 + i, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 10 } })] },
        { trace_id: traceId(), spans: [span({ start: start + i, durationMs: 5 })] },
      ],
    }));
    const results = await Promise.all(batches.map((b) => ingest(b, c.key)));
    expect(results.map((r) => r.status)).toEqual([202, 202, 202, 202, 202, 202]);
    const detail = (await getTrace(tid, c.key)).body.data;
    expect(detail.spans).toHaveLength(6);
    const summary = (await ctx.platform.get('/v1/traces').set(bearer(c.key)).query({ model: 'gpt-4o' })).body.data;
    expect(summary).toHaveLength(1);
    expect(summary[0]).toMatchObject({ trace_id: tid, span_count: 6, llm_summary: { tokens_input: 60 } });
    expect((await ctx.platform.get(`/v1/projects/${c.projectId}`).set(bearer(c.key))).body.data.stats.traces_today).toBe(7);
    const metrics = await ctx.platform.get('/v1/metrics').set(bearer(c.key)).query({
      metric: 'llm.requests.total', aggregation: 'count', interval: '1h', group_by: 'project',
      start_time: '2026-11-22T07:00:00Z', end_time: '2026-11-22T08:00:00Z',
    });
    const mine = metrics.body.data.series.find((s: { group: { project: string } }) => s.group.project === c.projectId);
    expect(mine.datapoints[0].value).toBe(6);
  });
});
