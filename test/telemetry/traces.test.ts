/** GET /v1/traces (filters, keyset cursor under concurrent ingest) and GET /v1/traces/{trace_id}. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, prng, span, spanId, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;
const T0 = Date.parse('2026-11-21T00:00:00.000Z');

interface Expected {
  traceId: string;
  startMs: number;
  endMs: number;
  model: string | null;
  models: string[];
  cost: number;
  error: boolean;
  tokensIn: number;
  tokensOut: number;
  spans: number;
}
const expected: Expected[] = [];
const MODELS = ['gpt-4o', 'claude-sonnet-4-5', 'gemini-2.5-flash'];

beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
  const rand = prng(7);
  const traces = [];
  for (let i = 0; i < 120; i++) {
    const tid = traceId();
    // Some traces share a start time: the cursor must break ties by trace id.
    const start = T0 + Math.floor(i / 3) * 60_000;
    const rootDuration = 50 + Math.floor(rand() * 5000);
    const root = span({ start, durationMs: rootDuration, name: `root-${i}`, attributes: { i } });
    const n = Math.floor(rand() * 3);
    const children = [];
    const models: string[] = [];
    let cost = 0;
    let tokensIn = 0;
    let tokensOut = 0;
    let error = false;
    for (let c = 0; c < n; c++) {
      const model = MODELS[Math.floor(rand() * MODELS.length)]!;
      const callCost = Math.round(rand() * 1000) / 10000;
      const tin = Math.floor(rand() * 2000);
      const tout = Math.floor(rand() * 500);
      const failed = rand() < 0.2;
      children.push(
        span({ parent_span_id: root.span_id, start: start + 10 + c, durationMs: 5, attributes: { 'llm.model': model, 'llm.cost': callCost, 'llm.tokens.input': tin, 'llm.tokens.output': tout }, status: failed ? 'ERROR' : 'OK' }),
      );
      models.push(model);
      cost += callCost;
      tokensIn += tin;
      tokensOut += tout;
      error ||= failed;
    }
    traces.push({ trace_id: tid, spans: [root, ...children] });
    expected.push({ traceId: tid, startMs: start, endMs: Math.max(start + rootDuration, ...children.map((c) => Date.parse(c.end_time))), model: models[0] ?? null, models, cost, error, tokensIn, tokensOut, spans: n + 1 });
  }
  const res = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces });
  expect(res.status).toBe(202);
});
afterAll(async () => {
  await ctx?.close();
});

const order = (a: { startMs: number; traceId: string }, b: { startMs: number; traceId: string }) => b.startMs - a.startMs || (a.traceId < b.traceId ? 1 : -1);

async function all(query: Record<string, string | number>, key = p.key): Promise<Array<Record<string, any>>> {
  const out = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const res = await ctx.platform.get('/v1/traces').set(bearer(key)).query({ ...query, ...(cursor ? { cursor } : {}) });
    expect(res.status).toBe(200);
    out.push(...res.body.data);
    if (!res.body.pagination.has_more) {
      expect(res.body.pagination.next_cursor).toBeNull();
      return out;
    }
    cursor = res.body.pagination.next_cursor;
  }
  throw new Error('too many pages');
}

describe('GET /v1/traces', () => {
  it('returns summaries newest first with a default page of 50', async () => {
    const res = await ctx.platform.get('/v1/traces').set(bearer(p.key));
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(50);
    expect(res.body.pagination).toEqual({ limit: 50, has_more: true, next_cursor: expect.any(String) });
    const sorted = [...expected].sort(order);
    expect(res.body.data.map((t: { trace_id: string }) => t.trace_id)).toEqual(sorted.slice(0, 50).map((e) => e.traceId));
    const first = sorted[0]!;
    expect(res.body.data[0]).toEqual({
      trace_id: first.traceId,
      name: res.body.data[0].root_span.name,
      start_time: new Date(first.startMs).toISOString(),
      end_time: new Date(first.endMs).toISOString(),
      duration_ms: first.endMs - first.startMs,
      span_count: first.spans,
      root_span: { name: expect.stringMatching(/^root-/), attributes: { i: expect.any(Number) } },
      llm_summary: { model: first.model, tokens_input: first.tokensIn, tokens_output: first.tokensOut, cost: expect.closeTo(first.cost, 9) },
      status: first.error ? 'error' : 'ok',
      session_id: null,
      user_id: null,
    });
  });

  it('pages through every trace exactly once with the opaque cursor', async () => {
    const got = await all({ limit: 7 });
    expect(got.map((t) => t.trace_id)).toEqual([...expected].sort(order).map((e) => e.traceId));
  });

  it.each([
    ['model', (q: Record<string, string | number>) => (q.model = 'claude-sonnet-4-5'), (e: Expected) => e.models.includes('claude-sonnet-4-5')],
    ['status error', (q: Record<string, string | number>) => (q.status = 'error'), (e: Expected) => e.error],
    ['status ok', (q: Record<string, string | number>) => (q.status = 'ok'), (e: Expected) => !e.error],
    ['min_latency_ms', (q: Record<string, string | number>) => (q.min_latency_ms = 2500), (e: Expected) => e.endMs - e.startMs >= 2500],
    ['min_cost', (q: Record<string, string | number>) => (q.min_cost = 0.08), (e: Expected) => e.cost >= 0.08],
    ['start_time', (q: Record<string, string | number>) => (q.start_time = new Date(T0 + 20 * 60_000).toISOString()), (e: Expected) => e.startMs >= T0 + 20 * 60_000],
    ['end_time', (q: Record<string, string | number>) => (q.end_time = new Date(T0 + 15 * 60_000).toISOString()), (e: Expected) => e.endMs <= T0 + 15 * 60_000],
    [
      'all filters together',
      (q: Record<string, string | number>) => Object.assign(q, { model: 'gpt-4o', min_latency_ms: 1000, start_time: new Date(T0 + 5 * 60_000).toISOString(), end_time: '2026-11-22T00:00:00Z' }),
      (e: Expected) => e.models.includes('gpt-4o') && e.endMs - e.startMs >= 1000 && e.startMs >= T0 + 5 * 60_000,
    ],
  ])('filters by %s, across pages', async (_label, setQuery, keep) => {
    const query: Record<string, string | number> = { limit: 10 };
    setQuery(query);
    const got = await all(query);
    const want = expected.filter(keep).sort(order).map((e) => e.traceId);
    expect(want.length).toBeGreaterThan(0);
    expect(got.map((t) => t.trace_id)).toEqual(want);
  });

  it('keeps paging stable while traces are being ingested: no repeats, no skips', async () => {
    const before = [...expected].sort(order).map((e) => e.traceId);
    const seen: string[] = [];
    let cursor: string | undefined;
    let inserted = 0;
    for (;;) {
      const res = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ limit: 9, ...(cursor ? { cursor } : {}) });
      seen.push(...res.body.data.map((t: { trace_id: string }) => t.trace_id));
      // Between pages: traces newer than everything (before the cursor) and older than everything (after it).
      const newer = { trace_id: traceId(), spans: [span({ start: T0 + 10 * 86_400_000 + inserted, durationMs: 1 })] };
      const older = { trace_id: traceId(), spans: [span({ start: T0 - 86_400_000 - inserted, durationMs: 1 })] };
      expect((await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces: [newer, older] })).status).toBe(202);
      inserted++;
      if (!res.body.pagination.has_more) break;
      cursor = res.body.pagination.next_cursor;
    }
    expect(new Set(seen).size).toBe(seen.length);
    // Every trace stored when paging began is seen, in order; new older traces come after them.
    expect(seen.slice(0, before.length)).toEqual(before);
    expect(seen.length).toBeGreaterThan(before.length);
  });

  it.each([
    ['limit 0', { limit: 0 }],
    ['limit 101', { limit: 101 }],
    ['a non-numeric limit', { limit: 'ten' }],
    ['an unknown status', { status: 'failed' }],
    ['an unknown parameter', { sort: 'asc' }],
    ['a malformed start_time', { start_time: 'yesterday' }],
    ['a negative min_cost', { min_cost: -1 }],
    ['end_time not after start_time', { start_time: '2026-11-22T00:00:00Z', end_time: '2026-11-22T00:00:00Z' }],
    ['a garbage cursor', { cursor: '!!!' }],
    ['a base64 cursor of something else', { cursor: Buffer.from('{"x":1}').toString('base64url') }],
    ['a tampered cursor', { cursor: Buffer.from('{"t":"2026-11-22T00:00:00.000Z","id":"not-a-trace-id"}').toString('base64url') }],
  ])('answers 400 invalid_request for %s', async (_label, query) => {
    const res = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query(query);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
  });

  it('caps the page at 100', async () => {
    const res = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ limit: 100 });
    expect(res.body.data).toHaveLength(100);
    expect(res.body.pagination.limit).toBe(100);
  });

  it("is empty for another project of the same organization (traces are the key's project's)", async () => {
    const other = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Other');
    const res = await ctx.platform.get('/v1/traces').set(bearer(other.key));
    expect(res.body).toMatchObject({ data: [], pagination: { limit: 50, has_more: false, next_cursor: null } });
  });
});

describe('GET /v1/traces/{trace_id}', () => {
  it('returns every span ordered by start time then span id', async () => {
    const tid = traceId();
    const ids = [spanId(), spanId(), spanId()].sort();
    const spans = [
      span({ span_id: ids[2], start: T0 + 5, durationMs: 1 }),
      span({ span_id: ids[1], start: T0, durationMs: 10 }),
      span({ span_id: ids[0], start: T0, durationMs: 3 }),
    ];
    await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces: [{ trace_id: tid, spans }] });
    const res = await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key));
    expect(res.body.data.spans.map((s: { span_id: string }) => s.span_id)).toEqual([ids[0], ids[1], ids[2]]);
    expect(res.body.data).toMatchObject({ start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 10).toISOString(), duration_ms: 10 });
  });

  it('answers 404 not_found for an unknown trace and 400 invalid_request for a malformed id', async () => {
    const missing = await ctx.platform.get(`/v1/traces/${traceId()}`).set(bearer(p.key));
    expect(missing.status).toBe(404);
    expect(missing.body.error).toEqual({ code: 'not_found', message: 'Trace not found', details: null });
    for (const bad of ['XYZ', traceId().toUpperCase(), `${traceId()}0`]) {
      const res = await ctx.platform.get(`/v1/traces/${bad}`).set(bearer(p.key));
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
    }
  });
});
