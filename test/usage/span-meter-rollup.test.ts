/**
 * Span meter rollups (migration 0381): a span meter's quantities equal an independent
 * recomputation from the raw spans (fast-check on both databases: traces sent over several
 * batches, late root spans carrying the customer attribute, re-sent spans with changed values,
 * out-of-order spans, unknown users, meters made before the spans (kept by ingest), after them
 * (built in chunks), refiltered (rebuilt) and archived (raw reads), ranges not aligned to hours,
 * every aggregation and interval); a killed build chunk leaves nothing; on PostgreSQL, rounds of
 * concurrent ingest (new traces and changes of stored ones) racing the background build and each
 * other; and the plan of the one-customer read (the rollup's primary key, not the spans).
 */
import fc from 'fast-check';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnexSpanMeterRollups, spanMeterHoursSql } from '../../src/telemetry/span-meters.repository.js';
import { CUSTOMER_QUANTITY_SQL } from '../../src/usage/usage.repository.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { bearer, createProjectWithKey } from '../telemetry/helpers.js';
import { buy, oneTimePrice, setExternalId } from './helpers.js';

let ctx: TestContext;
let db: Knex;
const customers: Array<{ id: string; externalId: string }> = [];
const NOW = '2026-11-28T12:00:00.000Z';
const BASE = Date.parse('2026-11-25T09:00:00.000Z');
const HOUR = 3_600_000;
const USER = 'app.user';
const postgres = process.env.TEST_DATABASE_URL !== undefined;

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
  const once = await oneTimePrice(ctx, ctx.orgA.orgId);
  for (let i = 0; i < 3; i++) {
    const { customerId } = await buy(ctx, `spanner${i}@example.com`, once, ctx.orgA.apiKey);
    expect((await setExternalId(ctx, customerId, `sp_${i}`, ctx.orgA.apiKey)).status).toBe(200);
    customers.push({ id: customerId, externalId: `sp_${i}` });
  }
  ctx.clock.set(NOW);
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

type Value = number | string;
/** A span as the test sent it last (a re-sent span id replaces it). */
interface SentSpan {
  traceId: string;
  spanId: string;
  parent: string | null;
  start: number;
  duration: number;
  attributes: Record<string, Value>;
}
type Kind = 'count' | 'sum' | 'max' | 'unique' | 'last';
interface Definition {
  kind: Kind;
  property: string | null;
  model?: string;
  tier?: string;
}

/** The independent recomputation: the final spans of each trace, its root by the ingest rule, the key from the span or the root. */
function recompute(sent: Map<string, SentSpan>, d: Definition, keys: Set<string>, from: number, to: number): number {
  const traces = new Map<string, SentSpan[]>();
  for (const s of sent.values()) (traces.get(s.traceId) ?? traces.set(s.traceId, []).get(s.traceId)!).push(s);
  const matched: Array<{ at: number; id: string; v: Value | undefined }> = [];
  for (const [traceId, spans] of traces) {
    const root = [...spans].sort((a, b) => Number(a.parent !== null) - Number(b.parent !== null) || a.start - b.start || (a.spanId < b.spanId ? -1 : 1))[0]!;
    for (const s of spans) {
      if (typeof s.attributes['gen_ai.request.model'] !== 'string') continue;
      if (s.start < from || s.start >= to) continue;
      if (d.model !== undefined && s.attributes['gen_ai.request.model'] !== d.model) continue;
      if (d.tier !== undefined && s.attributes['app.tier'] !== d.tier) continue;
      const own = s.attributes[USER];
      const key = own !== undefined ? own : root.attributes[USER];
      if (typeof key !== 'string' || !keys.has(key)) continue;
      matched.push({ at: s.start, id: `${traceId}:${s.spanId}`, v: d.property === null ? undefined : d.property === 'duration_ms' ? s.duration : s.attributes[d.property] });
    }
  }
  const numbers = matched.filter((m) => typeof m.v === 'number');
  switch (d.kind) {
    case 'count':
      return matched.length;
    case 'sum':
      return numbers.reduce((n, m) => n + (m.v as number), 0);
    case 'max':
      return numbers.length === 0 ? 0 : Math.max(...numbers.map((m) => m.v as number));
    case 'unique':
      return new Set(matched.filter((m) => m.v !== undefined).map((m) => JSON.stringify(m.v))).size;
    case 'last': {
      const latest = [...numbers].sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1))[0];
      return latest ? (latest.v as number) : 0;
    }
  }
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
let traceSeq = 0;

/** Sends spans (grouped per trace) through OTLP-shaped ingest and records them as the store keeps them. */
async function send(key: string, spans: SentSpan[], sent: Map<string, SentSpan>): Promise<void> {
  const byTrace = new Map<string, SentSpan[]>();
  for (const s of spans) (byTrace.get(s.traceId) ?? byTrace.set(s.traceId, []).get(s.traceId)!).push(s);
  const traces = [...byTrace].map(([traceId, list]) => ({
    trace_id: traceId,
    spans: list.map((s) => ({
      span_id: s.spanId,
      ...(s.parent !== null ? { parent_span_id: s.parent } : {}),
      name: s.parent === null ? 'request' : 'openai.chat',
      start_time: new Date(s.start).toISOString(),
      end_time: new Date(s.start + s.duration).toISOString(),
      attributes: s.attributes,
    })),
  }));
  const res = await ctx.platform.post('/v1/ingest').set(bearer(key)).send({ traces });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  for (const s of spans) sent.set(`${s.traceId}:${s.spanId}`, s);
}

const createMeter = async (projectId: string, d: Definition) => {
  const filter = { projectId, ...(d.model !== undefined ? { model: d.model } : {}), ...(d.tier !== undefined ? { attributes: { 'app.tier': d.tier } } : {}) };
  const res = await ctx.merchant
    .post('/v1/meters')
    .set('X-API-Key', ctx.orgA.apiKey)
    .send({ name: 'span prop', source: 'SPANS', customerAttribute: USER, filter, aggregation: d.kind, ...(d.property !== null ? { property: d.property } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as { id: string; rollupStatus: string };
};

/** Rebuilds a meter's rollup in chunks of `chunk` traces (the background job's steps). */
async function build(meterId: string, chunk: number): Promise<void> {
  const rollups = new KnexSpanMeterRollups(db);
  await db('meters').where('id', meterId).update({ rollup_status: 'BUILDING', rollup_cursor: '' });
  for (let i = 0; i < 1000; i++) if ((await rollups.buildChunk(ctx.orgA.orgId, meterId, chunk)) === 'ready') return;
  throw new Error('build did not end');
}

const quantity = async (meterId: string, query: Record<string, string>) => {
  const res = await ctx.merchant.get(`/v1/meters/${meterId}/quantities`).query(query).set('X-API-Key', ctx.orgA.apiKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { total: number; buckets: Array<{ start: string; end: string; quantity: number }> };
};

/** Every customer key (a non-empty string), known customer or not. */
const ANY_KEY = { has: (k: string) => k !== '' } as Set<string>;
const keysOf = (c: { id: string; externalId: string } | undefined) => new Set(c ? [c.id, c.externalId] : customers.flatMap((x) => [x.id, x.externalId]));

describe('span meter quantities equal a recomputation from the raw spans', () => {
  it('for random traces over several batches (late roots, re-sent spans, out of order) and random meters and ranges', async () => {
    const userOf = fc.constantFrom<string | undefined>(undefined, 'stranger', ...customers.map((c) => c.externalId), ...customers.map((c) => c.id));
    const rawSpan = fc.record({
      trace: fc.integer({ min: 0, max: 5 }),
      span: fc.integer({ min: 0, max: 4 }), // 0: the root (no model), 1–4: model calls
      offset: fc.integer({ min: 0, max: 150 }), // minutes after the trace's start
      duration: fc.integer({ min: 1, max: 5000 }),
      user: userOf,
      units: fc.option(fc.oneof(fc.integer({ min: -5, max: 500 }), fc.constantFrom('a', 'b')), { nil: undefined }),
      model: fc.constantFrom('gpt-4o', 'gpt-4o-mini'),
      tier: fc.option(fc.constantFrom('free', 'paid'), { nil: undefined }),
    });
    const definition = fc.record({
      kind: fc.constantFrom<Kind>('count', 'sum', 'max', 'unique', 'last'),
      duration: fc.boolean(),
      model: fc.option(fc.constantFrom('gpt-4o', 'gpt-4o-mini'), { nil: undefined }),
      tier: fc.option(fc.constantFrom('free', 'paid'), { nil: undefined }),
      made: fc.constantFrom<'before' | 'after' | 'refiltered' | 'archived' | 'chunked'>('before', 'after', 'refiltered', 'archived', 'chunked'),
    });
    const range = fc.record({
      a: fc.integer({ min: -2 * 60, max: 12 * 60 }),
      b: fc.integer({ min: -2 * 60, max: 12 * 60 }),
      interval: fc.constantFrom<'hour' | 'day' | undefined>('hour', 'day', undefined),
      customer: fc.integer({ min: 0, max: customers.length }), // customers.length: everyone
      byExternalId: fc.boolean(),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(rawSpan, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 4 }), fc.array(fc.tuple(definition, range), { minLength: 1, maxLength: 3 }), async (batches, queries) => {
        const tag = ++run;
        // A project per run: a meter reads every span of its project.
        const project = await createProjectWithKey(ctx, ctx.orgA.orgId, `Span rollup property ${tag}`);
        const sent = new Map<string, SentSpan>();
        const traceIds = Array.from({ length: 6 }, (_, i) => hex(++traceSeq, 24) + hex(tag, 4) + hex(i, 4));
        const defs = queries.map(([d]): Definition => ({ kind: d.kind, property: d.kind === 'count' ? null : d.duration && d.kind !== 'unique' ? 'duration_ms' : 'app.units', model: d.model, tier: d.tier }));
        const early = new Map<number, string>();
        for (const [i, [d]] of queries.entries()) {
          if (d.made === 'before' || d.made === 'archived') early.set(i, (await createMeter(project.projectId, defs[i]!)).id);
          if (d.made === 'refiltered') early.set(i, (await createMeter(project.projectId, { ...defs[i]!, model: defs[i]!.model === 'gpt-4o' ? 'gpt-4o-mini' : 'gpt-4o' })).id);
        }
        for (const batch of batches) {
          const spans = new Map<string, SentSpan>();
          for (const r of batch) {
            const traceId = traceIds[r.trace]!;
            const attributes: Record<string, Value> = {};
            if (r.user !== undefined) attributes[USER] = r.user;
            if (r.span > 0) {
              attributes['gen_ai.system'] = 'openai';
              attributes['gen_ai.request.model'] = r.model;
              if (r.units !== undefined) attributes['app.units'] = r.units;
              if (r.tier !== undefined) attributes['app.tier'] = r.tier;
            }
            // Roots start the trace; model calls start up to 2.5 h later (the trace covers hours).
            const start = BASE + r.trace * 47 * 60_000 + (r.span === 0 ? 0 : r.offset * 60_000 + r.span * 1000);
            spans.set(`${traceId}:${r.span}`, { traceId, spanId: hex(r.span + 1, 16), parent: r.span === 0 ? null : hex(1, 16), start, duration: r.duration, attributes });
          }
          await send(project.key, [...spans.values()], sent);
        }
        for (const [i, [d, r]] of queries.entries()) {
          const def = defs[i]!;
          let meterId = early.get(i) ?? (await createMeter(project.projectId, def)).id;
          if (d.made === 'refiltered') {
            const filter = { projectId: project.projectId, ...(def.model !== undefined ? { model: def.model } : {}), ...(def.tier !== undefined ? { attributes: { 'app.tier': def.tier } } : {}) };
            expect((await ctx.merchant.patch(`/v1/meters/${meterId}`).set('X-API-Key', ctx.orgA.apiKey).send({ filter })).status).toBe(200);
          }
          if (d.made === 'archived') expect((await ctx.merchant.post(`/v1/meters/${meterId}/archive`).set('X-API-Key', ctx.orgA.apiKey)).status).toBe(200);
          if (d.made === 'chunked') await build(meterId, 1);
          const meter = (await ctx.merchant.get(`/v1/meters/${meterId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data as { rollupStatus: string; status: string };
          if (d.made !== 'archived') expect(meter.rollupStatus).toBe('READY');
          const start = BASE + Math.min(r.a, r.b) * 60_000 + 17_000;
          const end = BASE + Math.max(r.a, r.b) * 60_000 + 60_000 + 23_000;
          const c = customers[r.customer];
          const query: Record<string, string> = { start: new Date(start).toISOString(), end: new Date(end).toISOString() };
          if (r.interval) query.interval = r.interval;
          if (c) query.customer = r.byExternalId ? c.externalId : c.id;
          const got = await quantity(meterId, query);
          const keys = keysOf(c);
          const context = JSON.stringify({ d, def, r, start, end, spans: [...sent.values()] });
          expect(got.total, context).toBe(recompute(sent, def, keys, start, end));
          for (const b of got.buckets) expect(b.quantity, context).toBe(recompute(sent, def, keys, Date.parse(b.start), Date.parse(b.end)));
          // The whole hours alone: the rollup's rows only.
          const hourStart = Math.ceil(start / HOUR) * HOUR;
          const hourEnd = Math.floor(end / HOUR) * HOUR;
          if (c && hourEnd > hourStart) {
            const whole = await quantity(meterId, { customer: c.id, start: new Date(hourStart).toISOString(), end: new Date(hourEnd).toISOString() });
            expect(whole.total, context).toBe(recompute(sent, def, keys, hourStart, hourEnd));
          }
          // Every span the meter matched (any customer key) is one point, besides its hour cell (migration 0391).
          if (d.made !== 'archived') {
            const points = Number(((await db('span_meter_points').where('meter_id', meterId).count({ n: '*' })) as Array<{ n: string | number }>)[0]!.n);
            expect(points, context).toBe(recompute(sent, { ...def, kind: 'count' }, ANY_KEY, -Infinity, Infinity));
          }
          meterId = '';
        }
      }),
      { numRuns: postgres ? 25 : 20 },
    );
  }, 900_000);

  it('a build chunk killed before its commit leaves nothing; the next run goes on from the cursor', async () => {
    const project = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Span rollup chunks');
    const sent = new Map<string, SentSpan>();
    const spans: SentSpan[] = [];
    for (let t = 0; t < 12; t++) {
      const traceId = hex(++traceSeq, 24) + hex(9999, 8);
      spans.push({ traceId, spanId: hex(1, 16), parent: null, start: BASE + t * 40 * 60_000, duration: 100, attributes: { [USER]: customers[t % 3]!.externalId } });
      spans.push({ traceId, spanId: hex(2, 16), parent: hex(1, 16), start: BASE + t * 40 * 60_000 + 5, duration: 50, attributes: { 'gen_ai.system': 'openai', 'gen_ai.request.model': 'gpt-4o', 'app.units': t + 1 } });
    }
    await send(project.key, spans, sent);
    const meter = await createMeter(project.projectId, { kind: 'sum', property: 'app.units' });
    const rollups = new KnexSpanMeterRollups(db);
    await db('meters').where('id', meter.id).update({ rollup_status: 'BUILDING', rollup_cursor: '' });
    await db('span_meter_hours').where('meter_id', meter.id).update({ spans: 999, total: 999 }); // stale rows the build must replace
    expect(await rollups.buildChunk(ctx.orgA.orgId, meter.id, 3)).toBe('chunk');
    const cursor = (await db('meters').where('id', meter.id).first('rollup_cursor')).rollup_cursor as string;
    const before = await db('span_meter_hours').where('meter_id', meter.id).orderBy(['key', 'hour_ms']).select();
    await expect(rollups.buildChunk(ctx.orgA.orgId, meter.id, 3, async () => {
      throw new Error('killed');
    })).rejects.toThrow('killed');
    expect(await db('span_meter_hours').where('meter_id', meter.id).orderBy(['key', 'hour_ms']).select()).toEqual(before);
    expect((await db('meters').where('id', meter.id).first('rollup_cursor')).rollup_cursor).toBe(cursor);
    let steps = 0;
    while ((await rollups.buildChunk(ctx.orgA.orgId, meter.id, 3)) !== 'ready') steps++;
    expect(steps).toBeGreaterThan(0);
    const range = { start: new Date(BASE - HOUR).toISOString(), end: new Date(BASE + 12 * HOUR).toISOString() };
    for (const c of customers) expect((await quantity(meter.id, { ...range, customer: c.externalId })).total).toBe(recompute(sent, { kind: 'sum', property: 'app.units' }, keysOf(c), BASE - HOUR, BASE + 12 * HOUR));
    // An archived meter is no longer kept by ingest.
    expect((await ctx.merchant.post(`/v1/meters/${meter.id}/archive`).set('X-API-Key', ctx.orgA.apiKey)).status).toBe(200);
    const rowsBefore = await db('span_meter_hours').where('meter_id', meter.id).count({ n: '*' });
    await send(project.key, [{ traceId: hex(++traceSeq, 32), spanId: hex(2, 16), parent: null, start: BASE + 20 * HOUR, duration: 5, attributes: { [USER]: customers[0]!.externalId, 'gen_ai.system': 'openai', 'gen_ai.request.model': 'gpt-4o', 'app.units': 5 } }], sent);
    expect(await db('span_meter_hours').where('meter_id', meter.id).count({ n: '*' })).toEqual(rowsBefore);
  }, 300_000);

  it('the metered access check of a span-metered subscription counts its current period, cut at the purchase\'s millisecond, as the raw spans do', async () => {
    const project = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Span access check');
    const meter = await createMeter(project.projectId, { kind: 'sum', property: 'app.units' });
    expect(meter.rollupStatus).toBe('READY');
    const product = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Span-metered plan' })).id;
    const price = await ctx.admin.post(`/v1/products/${product}/prices`).send({
      amount: 2000,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'MONTH',
      meteredComponents: [{ meterId: meter.id, includedUnits: 30, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.01' } }],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    // Bought mid-hour: the period's first hour is partial, read from the meter's points.
    const bought = BASE + 23 * 60_000 + 17_345;
    ctx.clock.set(new Date(bought).toISOString());
    const { customerId } = await buy(ctx, 'span-check@example.com', price.body.data.pricingId, ctx.orgA.apiKey);
    expect((await setExternalId(ctx, customerId, 'sp_check', ctx.orgA.apiKey)).status).toBe(200);
    ctx.clock.set(NOW);
    const period = (await db('subscriptions').where({ customer_id: customerId }).first('current_period_start', 'current_period_end')) as { current_period_start: Date | string; current_period_end: Date | string };
    const [periodStart, periodEnd] = [new Date(period.current_period_start).getTime(), new Date(period.current_period_end).getTime()];
    expect(periodStart % HOUR).not.toBe(0);
    const sent = new Map<string, SentSpan>();
    const spans: SentSpan[] = [];
    // Model calls from 40 minutes before the purchase to two hours after, some a millisecond either side of it.
    const starts = [periodStart - 40 * 60_000, periodStart - 1, periodStart, periodStart + 1, periodStart + 20 * 60_000, ...Array.from({ length: 8 }, (_, i) => periodStart + (i + 1) * 15 * 60_000 + i)];
    for (const [i, start] of starts.entries()) {
      const traceId = hex(++traceSeq, 24) + hex(7777, 8);
      spans.push({ traceId, spanId: hex(1, 16), parent: null, start: start - 5, duration: 100, attributes: { [USER]: i % 2 === 0 ? 'sp_check' : customerId } });
      spans.push({ traceId, spanId: hex(2, 16), parent: hex(1, 16), start, duration: 50, attributes: { 'gen_ai.system': 'openai', 'gen_ai.request.model': 'gpt-4o', 'app.units': i + 1 } });
    }
    await send(project.key, spans, sent);
    const expected = recompute(sent, { kind: 'sum', property: 'app.units' }, new Set([customerId, 'sp_check']), periodStart, periodEnd);
    expect(expected).toBeGreaterThan(0);
    expect(expected).toBeLessThan(recompute(sent, { kind: 'sum', property: 'app.units' }, new Set([customerId, 'sp_check']), -Infinity, Infinity));
    for (const q of [`customer_id=${customerId}`, 'external_id=sp_check']) {
      const res = await ctx.merchant.get(`/v1/entitlements/check?${q}&product_id=${product}`).set('X-API-Key', ctx.orgA.apiKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data, JSON.stringify(res.body)).toMatchObject({ entitled: true, meters: [{ meterId: meter.id, basis: 'SUBSCRIPTION', consumedUnits: expected, includedUnits: 30 }] });
    }
  }, 300_000);
});

describe.skipIf(!postgres)(skippedUnless('span meter rollups on PostgreSQL', 'postgresOnly'), () => {
  it('concurrent ingest (new traces, late roots, re-sent spans) racing each other and the background build: every span counted once, in rounds', async () => {
    const ROUNDS = 8;
    for (let round = 0; round < ROUNDS; round++) {
      const project = await createProjectWithKey(ctx, ctx.orgA.orgId, `Span race ${round}`);
      const sent = new Map<string, SentSpan>();
      const traceIds = Array.from({ length: 8 }, (_, i) => hex(++traceSeq, 24) + hex(round, 4) + hex(i, 4));
      const call = (t: number, s: number, units: number, user?: string): SentSpan => ({
        traceId: traceIds[t]!,
        spanId: hex(s + 1, 16),
        parent: hex(1, 16),
        start: BASE + t * 20 * 60_000 + s * 7 * 60_000,
        duration: 10 + s,
        attributes: { 'gen_ai.system': 'openai', 'gen_ai.request.model': 'gpt-4o', 'app.units': units, ...(user !== undefined ? { [USER]: user } : {}) },
      });
      const root = (t: number, user: string): SentSpan => ({ traceId: traceIds[t]!, spanId: hex(1, 16), parent: null, start: BASE + t * 20 * 60_000, duration: 9 * 60_000, attributes: { [USER]: user } });
      // Stored before the meters exist (the build's part), half of them without their root yet.
      const first: SentSpan[] = [];
      for (let t = 0; t < 8; t++) {
        first.push(call(t, 1, t + 1), call(t, 2, 10 * t + 3, t % 3 === 0 ? customers[1]!.id : undefined));
        if (t % 2 === 0) first.push(root(t, customers[t % 3]!.externalId));
      }
      await send(project.key, first, sent);
      const defs: Definition[] = [{ kind: 'sum', property: 'app.units' }, { kind: 'max', property: 'app.units' }, { kind: 'last', property: 'app.units' }, { kind: 'unique', property: 'app.units' }, { kind: 'count', property: null }];
      const meters = [];
      for (const d of defs) meters.push((await createMeter(project.projectId, d)).id);
      await Promise.all(meters.map((id) => db('meters').where('id', id).update({ rollup_status: 'BUILDING', rollup_cursor: '' })));
      await db('span_meter_hours').whereIn('meter_id', meters).del();
      await db('span_meter_hour_values').whereIn('meter_id', meters).del();
      await db('span_meter_points').whereIn('meter_id', meters).del();
      // Concurrently: the build in small chunks, late roots, re-sent spans with new values, new traces.
      const rollups = new KnexSpanMeterRollups(db);
      const batches: SentSpan[][] = [];
      for (let t = 1; t < 8; t += 2) batches.push([root(t, customers[(t + round) % 3]!.externalId)]);
      for (let t = 0; t < 8; t += 3) batches.push([call(t, 1, 100 + t + round)]);
      for (let t = 0; t < 8; t++) batches.push([call(t, 3, 7 * t + round, customers[(t + 1) % 3]!.externalId)]);
      const fresh = Array.from({ length: 6 }, (_, i) => hex(++traceSeq, 24) + hex(round, 4) + hex(100 + i, 4));
      for (const [i, traceId] of fresh.entries()) {
        batches.push([
          { traceId, spanId: hex(1, 16), parent: null, start: BASE + i * 33 * 60_000, duration: 1000, attributes: { [USER]: customers[i % 3]!.id } },
          { traceId, spanId: hex(2, 16), parent: hex(1, 16), start: BASE + i * 33 * 60_000 + 500, duration: 20, attributes: { 'gen_ai.system': 'openai', 'gen_ai.request.model': 'gpt-4o', 'app.units': i + 50 } },
        ]);
      }
      // One builder (the job's pass goes meter by meter), four ingest requests in flight (the test pool's size bounds them).
      const builder = (async () => {
        for (const id of meters) while ((await rollups.buildChunk(ctx.orgA.orgId, id, 2)) !== 'ready');
      })();
      const sentNow = new Map<string, SentSpan>();
      const queue = [...batches].sort(() => Math.random() - 0.5);
      const senders = Array.from({ length: 4 }, async () => {
        for (let b = queue.shift(); b; b = queue.shift()) await send(project.key, b, sentNow);
      });
      await Promise.all([builder, ...senders]);
      // Sent concurrently: a span re-sent by two batches is not in this test (each span id once per round after `first`).
      for (const [k, s] of sentNow) sent.set(k, s);
      const range = { start: new Date(BASE - HOUR).toISOString(), end: new Date(BASE + 8 * HOUR).toISOString() };
      for (const [i, id] of meters.entries()) {
        for (const c of customers) {
          const got = (await quantity(id, { ...range, customer: c.externalId })).total;
          expect(got, `round ${round} ${defs[i]!.kind} ${c.externalId}`).toBe(recompute(sent, defs[i]!, keysOf(c), BASE - HOUR, BASE + 8 * HOUR));
        }
      }
    }
  }, 900_000);

  it('the one-customer read uses the rollup\'s primary key, not the spans', async () => {
    const project = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Span plan');
    const meter = await createMeter(project.projectId, { kind: 'sum', property: 'app.units' });
    const keys = [customers[0]!.id, customers[0]!.externalId];
    for (const distinct of [false, true]) {
      for (const interval of [undefined, 'day'] as const) {
        const edges = [[BASE - HOUR + 17_345, BASE], [BASE + 720 * HOUR, BASE + 720 * HOUR + 1_234]] as const;
        const { sql, bindings } = spanMeterHoursSql({ meterId: meter.id, from: BASE, to: BASE + 720 * HOUR, edges, keys, distinct, ...(interval ? { interval } : {}) });
        const text = await db.transaction(async (trx) => {
          await trx.raw('SET LOCAL enable_seqscan = off');
          const { rows } = (await trx.raw(`EXPLAIN (FORMAT JSON) ${sql}`, bindings)) as { rows: Array<{ 'QUERY PLAN': unknown }> };
          return JSON.stringify(rows[0]!['QUERY PLAN']);
        });
        expect(text).toContain(distinct ? 'span_meter_hour_values_pkey' : 'span_meter_hours_pkey');
        expect(text).toContain('span_meter_points_pkey');
        // The customer's keys are index conditions of every scan (not a filter over the meter's other keys).
        const conds = [...text.matchAll(/"Index Cond":\s*"([^"]*)"/g)].map((x) => x[1]!);
        expect(conds.length, text).toBe(6); // per key: the hours and the two edges
        for (const c of conds) expect(c, text).toMatch(/key = /);
        expect(text).not.toContain('telemetry_traces');
      }
    }
  }, 120_000);

  /**
   * The customer read of the quantity request, the balances and the access check: one prepared
   * statement (CUSTOMER_QUANTITY_SQL, as runStatement runs it), planned generically. For a span
   * meter it reads span_meter_hours (or its values) and span_meter_points by (meter, key, time),
   * never the raw spans; and no other statement runs (knex issues none).
   */
  for (const kind of ['sum', 'unique'] as const) {
    it(`${kind}: a span meter's customer read is one prepared statement over the rollup and the points, never the spans`, async () => {
      const project = await createProjectWithKey(ctx, ctx.orgA.orgId, `Span one statement ${kind}`);
      const meter = await createMeter(project.projectId, { kind, property: 'app.units' });
      const text = await db.transaction(async (trx) => {
        await trx.raw('SET LOCAL enable_seqscan = off');
        await trx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
        await trx.raw(`PREPARE span_customer_quantity AS ${CUSTOMER_QUANTITY_SQL}`);
        try {
          const [from, first, last, to] = [BASE - HOUR + 17_345, BASE, BASE + 720 * HOUR, BASE + 720 * HOUR + 1_234];
          const iso = (ms: number) => `'${new Date(ms).toISOString()}'`;
          const values = [`'${ctx.orgA.orgId}'`, `'${meter.id}'`, `'${customers[0]!.id}'`, iso(from), iso(to), iso(first), iso(last), first, last, from, to];
          const { rows } = await trx.raw(`EXPLAIN EXECUTE span_customer_quantity(${values.join(', ')})`);
          return (rows as Array<{ 'QUERY PLAN': string }>).map((l) => l['QUERY PLAN']).join('\n');
        } finally {
          await trx.raw('DEALLOCATE span_customer_quantity');
        }
      });
      const conds = text.split('\n').filter((l) => l.includes('Index Cond'));
      expect(text).toContain(kind === 'unique' ? 'span_meter_hour_values_pkey' : 'span_meter_hours_pkey');
      expect(text).toContain('span_meter_points_pkey');
      expect(text).not.toContain('telemetry_traces');
      expect(text).not.toMatch(/Seq Scan/);
      // The meter, the customer's keys and the time range are all index conditions.
      // (EXPLAIN names the initplans' results $N too: the key's is whatever number it got.)
      // Per key: span_meter_hours and span_meter_hour_values (one of them gated off at run time).
      expect(conds.filter((l) => /meter_id = \$2\) AND \(key = \(?\$\d+\)?(::text)?\) AND \(hour_ms >= \$8\) AND \(hour_ms < \$9\)/.test(l)).length, text).toBe(4);
      expect(conds.filter((l) => /meter_id = \$2\) AND \(key = \(?\$\d+\)?(::text)?\) AND \(st >= \$(10|9)\) AND \(st < \$(8|11)\)/.test(l)).length, text).toBe(4);
      // Through the service: no statement but the prepared one (runStatement issues no knex query).
      const captured: string[] = [];
      const listener = (q: { sql: string }) => captured.push(q.sql);
      db.on('query', listener);
      try {
        const read = await ctx.services.modules.usage.meters.quantities(ctx.orgA.orgId, meter.id, { customer: customers[0]!.externalId, start: new Date(BASE - HOUR + 17_345), end: new Date(BASE + 30 * HOUR + 5) });
        expect(read.total).toBe(0);
      } finally {
        db.off('query', listener);
      }
      expect(captured).toEqual([]);
    }, 120_000);
  }
});
