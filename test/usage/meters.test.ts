/**
 * Meters (issue 38 §4): create, list, get, update, archive; quantities over usage events equal an
 * independent recomputation from the raw events (fast-check: random, late, duplicated and
 * out-of-order events, every aggregation, filters, customers by id or externalId, intervals); and
 * a meter over a telemetry project's spans, the customer mapped from a span attribute.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, span, traceId } from '../telemetry/helpers.js';
import { buy, monthlyPrice, oneTimePrice, setExternalId } from './helpers.js';

let ctx: TestContext;
const customers: Array<{ id: string; externalId: string }> = [];
const NOW = '2026-11-28T12:00:00.000Z';
const FROM = Date.parse('2026-11-22T09:00:00.000Z');
const TO = Date.parse('2026-11-28T12:00:00.000Z');

beforeAll(async () => {
  ctx = await createTestContext();
  const once = await oneTimePrice(ctx, ctx.orgA.orgId);
  const plan = await monthlyPrice(ctx, ctx.orgA.orgId);
  for (const [email, price] of [['u1@example.com', plan.priceId], ['u2@example.com', once], ['u3@example.com', once]] as const) {
    const { customerId } = await buy(ctx, email, price, ctx.orgA.apiKey);
    const externalId = `ext_${email.split('@')[0]}`;
    expect((await setExternalId(ctx, customerId, externalId, ctx.orgA.apiKey)).status).toBe(200);
    customers.push({ id: customerId, externalId });
  }
  ctx.clock.set(NOW);
});
afterAll(async () => {
  await ctx?.close();
});

const api = (apiKey = ctx.orgA.apiKey) => ({
  create: (body: object) => ctx.merchant.post('/v1/meters').set('X-API-Key', apiKey).send(body),
  get: (id: string) => ctx.merchant.get(`/v1/meters/${id}`).set('X-API-Key', apiKey),
  list: (query: object = {}) => ctx.merchant.get('/v1/meters').query(query).set('X-API-Key', apiKey),
  update: (id: string, body: object) => ctx.merchant.patch(`/v1/meters/${id}`).set('X-API-Key', apiKey).send(body),
  archive: (id: string) => ctx.merchant.post(`/v1/meters/${id}/archive`).set('X-API-Key', apiKey),
  quantities: (id: string, query: Record<string, string>) => ctx.merchant.get(`/v1/meters/${id}/quantities`).query(query).set('X-API-Key', apiKey),
});

describe('meter management', () => {
  it('creates, lists, reads, updates and archives; an archived meter cannot change (409) and leaves the default list', async () => {
    const created = await api().create({ name: ' Tokens ', source: 'EVENTS', filter: { eventName: 'llm', properties: { tier: 'paid' } }, aggregation: 'sum', property: 'tokens' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const meter = created.body.data;
    expect(meter).toMatchObject({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm', properties: { tier: 'paid' } }, aggregation: 'sum', property: 'tokens', customerAttribute: null, status: 'ACTIVE', archivedAt: null });
    expect(meter.id).toMatch(/^MTR_[0-9A-Za-z]{24}$/);
    expect((await api().get(meter.id)).body.data).toEqual(meter);
    expect((await api().list()).body.data.records.map((m: { id: string }) => m.id)).toContain(meter.id);

    const updated = await api().update(meter.id, { name: 'Paid tokens', filter: { eventName: 'llm2' } });
    expect(updated.status).toBe(200);
    expect(updated.body.data).toMatchObject({ name: 'Paid tokens', filter: { eventName: 'llm2', properties: {} }, aggregation: 'sum' });
    expect((await api().update(meter.id, { filter: { projectId: 'PRJ_x' } })).status).toBe(400);
    expect((await api().update(meter.id, {})).status).toBe(400);

    const archived = await api().archive(meter.id);
    expect(archived.status).toBe(200);
    expect(archived.body.data).toMatchObject({ status: 'ARCHIVED', archivedAt: NOW });
    expect((await api().archive(meter.id)).body.data).toEqual(archived.body.data);
    const refused = await api().update(meter.id, { name: 'again' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('CONFLICT');
    expect((await api().list()).body.data.records.map((m: { id: string }) => m.id)).not.toContain(meter.id);
    expect((await api().list({ status: 'ARCHIVED' })).body.data.records.map((m: { id: string }) => m.id)).toEqual([meter.id]);
    // Quantities of an archived meter stay readable.
    expect((await api().quantities(meter.id, { start: '2026-11-01T00:00:00Z', end: '2026-12-01T00:00:00Z' })).status).toBe(200);
  });

  it('refuses inconsistent definitions (400)', async () => {
    const bad = [
      { name: 'x', source: 'EVENTS', filter: {}, aggregation: 'count' },
      { name: 'x', source: 'EVENTS', filter: { eventName: 'e' }, aggregation: 'sum' },
      { name: 'x', source: 'EVENTS', filter: { eventName: 'e' }, aggregation: 'count', property: 'tokens' },
      { name: 'x', source: 'EVENTS', filter: { eventName: 'e', projectId: 'PRJ_1' }, aggregation: 'count' },
      { name: 'x', source: 'EVENTS', filter: { eventName: 'e' }, aggregation: 'count', customerAttribute: 'user.id' },
      { name: 'x', source: 'SPANS', filter: { projectId: 'PRJ_nope' }, aggregation: 'count', customerAttribute: 'user.id' },
      { name: 'x', source: 'SPANS', filter: { eventName: 'e' }, aggregation: 'count', customerAttribute: 'user.id' },
      { name: 'x', source: 'SPANS', filter: {}, aggregation: 'count' },
      { name: '   ', source: 'EVENTS', filter: { eventName: 'e' }, aggregation: 'count' },
      { name: 'x', source: 'EVENTS', filter: { eventName: 'e' }, aggregation: 'median', property: 'p' },
    ];
    for (const body of bad) expect((await api().create(body)).status, JSON.stringify(body)).toBe(400);
  });

  it('is tenant-scoped (404), needs meters:read / meters:write (403), and checks the quantities query (400, 404)', async () => {
    const meter = (await api().create({ name: 'Requests', source: 'EVENTS', filter: { eventName: 'req' }, aggregation: 'count' })).body.data;
    expect((await api(ctx.orgB.apiKey).get(meter.id)).status).toBe(404);
    expect((await api(ctx.orgB.apiKey).update(meter.id, { name: 'mine' })).status).toBe(404);
    expect((await api(ctx.orgB.apiKey).archive(meter.id)).status).toBe(404);
    expect((await api(ctx.orgB.apiKey).quantities(meter.id, { start: '2026-11-01T00:00:00Z', end: '2026-11-02T00:00:00Z' })).status).toBe(404);
    const readOnly = (await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'read', permissions: ['meters:read'] })).key;
    expect((await api(readOnly).get(meter.id)).status).toBe(200);
    expect((await api(readOnly).create({ name: 'n', source: 'EVENTS', filter: { eventName: 'e' }, aggregation: 'count' })).status).toBe(403);
    const noMeters = (await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'usage', permissions: ['usage:write'] })).key;
    expect((await api(noMeters).list()).status).toBe(403);

    expect((await api().quantities(meter.id, { start: '2026-11-02T00:00:00Z', end: '2026-11-01T00:00:00Z' })).status).toBe(400);
    expect((await api().quantities(meter.id, { start: '2026-01-01T00:00:00Z', end: '2026-12-01T00:00:00Z', interval: 'hour' })).status).toBe(400);
    expect((await api().quantities(meter.id, { start: 'soon', end: '2026-12-01T00:00:00Z' })).status).toBe(400);
    expect((await api().quantities(meter.id, { start: '2026-11-01T00:00:00Z', end: '2026-12-01T00:00:00Z', customer: 'nobody' })).status).toBe(404);
    const quiet = await api().quantities(meter.id, { start: '2026-11-01T00:00:00Z', end: '2026-11-03T00:00:00Z', interval: 'day', customer: customers[0]!.externalId });
    expect(quiet.body.data).toEqual({
      meterId: meter.id,
      customerId: customers[0]!.id,
      start: '2026-11-01T00:00:00.000Z',
      end: '2026-11-03T00:00:00.000Z',
      interval: 'day',
      total: 0,
      buckets: [
        { start: '2026-11-01T00:00:00.000Z', end: '2026-11-02T00:00:00.000Z', quantity: 0 },
        { start: '2026-11-02T00:00:00.000Z', end: '2026-11-03T00:00:00.000Z', quantity: 0 },
      ],
    });
  });
});

// ---------- the independent recomputation ----------

type Value = number | string | boolean;
interface Stored {
  id: string;
  customerId: string;
  name: string;
  at: number;
  properties: Record<string, Value>;
}
type Kind = 'count' | 'sum' | 'max' | 'unique' | 'last';

function recompute(events: Stored[], kind: Kind, property: string | null, keep: (e: Stored) => boolean): number {
  const rows = events.filter(keep);
  const values = rows.map((e) => (property === null ? undefined : e.properties[property]));
  const numbers = rows.flatMap((e) => (property !== null && typeof e.properties[property] === 'number' ? [{ at: e.at, id: e.id, v: e.properties[property] as number }] : []));
  switch (kind) {
    case 'count':
      return rows.length;
    case 'sum':
      return numbers.reduce((s, x) => s + x.v, 0);
    case 'max':
      return numbers.length === 0 ? 0 : Math.max(...numbers.map((x) => x.v));
    case 'unique':
      return new Set(values.filter((v) => v !== undefined).map((v) => JSON.stringify(v))).size;
    case 'last': {
      const sorted = [...numbers].sort((a, b) => (a.at !== b.at ? b.at - a.at : a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
      return sorted[0]?.v ?? 0;
    }
  }
}

const HOUR = 3_600_000;
function utcBucket(at: number, interval: 'hour' | 'day' | 'month'): number {
  const d = new Date(at);
  if (interval === 'month') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  if (interval === 'day') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours());
}

let run = 0;

describe('quantities over usage events equal a recomputation from the raw events', () => {
  it('for random batches (late, duplicated, out of order, unknown customers, future stamps) and random meters and ranges', async () => {
    const value = fc.oneof(fc.integer({ min: -50, max: 1000 }), fc.constantFrom('a', 'b', 'c'), fc.boolean());
    const rawEvent = fc.record({
      idIndex: fc.integer({ min: 0, max: 40 }),
      customer: fc.integer({ min: 0, max: customers.length }), // customers.length: unknown
      byExternalId: fc.boolean(),
      name: fc.constantFrom('llm', 'req'),
      at: fc.oneof(fc.integer({ min: FROM, max: TO }), fc.integer({ min: TO + 6 * 60_000, max: TO + 3 * HOUR })),
      tokens: fc.option(value, { nil: undefined }),
      tier: fc.option(fc.constantFrom('free', 'paid'), { nil: undefined }),
    });
    const meterSpec = fc.record({
      kind: fc.constantFrom<Kind>('count', 'sum', 'max', 'unique', 'last'),
      name: fc.constantFrom('llm', 'req'),
      tier: fc.option(fc.constantFrom('free', 'paid'), { nil: undefined }),
      // The rollup path: a meter made before the events (ingest keeps its rollup), after them (its
      // rollup built from the events), or before them with another filter changed afterwards
      // (rebuilt); archived ones are read from the events.
      made: fc.constantFrom<'before' | 'after' | 'refiltered' | 'archived'>('before', 'after', 'refiltered', 'archived'),
    });
    const rangeSpec = fc.record({
      a: fc.integer({ min: FROM - 2 * HOUR, max: TO + HOUR }),
      b: fc.integer({ min: FROM - 2 * HOUR, max: TO + HOUR }),
      interval: fc.constantFrom<'hour' | 'day' | 'month' | undefined>('hour', 'day', 'month', undefined),
      customer: fc.integer({ min: 0, max: customers.length }), // customers.length: everyone
      byExternalId: fc.boolean(),
    });

    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(rawEvent, { minLength: 1, maxLength: 25 }), { minLength: 1, maxLength: 4 }), fc.array(fc.tuple(meterSpec, rangeSpec), { minLength: 1, maxLength: 3 }), async (batches, queries) => {
        const tag = `r${++run}`;
        const stored = new Map<string, Stored>();
        const now = Date.parse(NOW);
        const createMeter = async (m: (typeof queries)[number][0], eventName: string) => {
          const properties = m.tier !== undefined ? { tier: m.tier } : {};
          const property = m.kind === 'count' ? undefined : 'tokens';
          const meter = await ctx.merchant
            .post('/v1/meters')
            .set('X-API-Key', ctx.orgA.apiKey)
            .send({ name: 'prop', source: 'EVENTS', filter: { eventName, properties }, aggregation: m.kind, ...(property ? { property } : {}) });
          expect(meter.status).toBe(201);
          return meter.body.data.id as string;
        };
        const early = new Map<number, string>();
        for (const [i, [m]] of queries.entries()) {
          if (m.made === 'before' || m.made === 'archived') early.set(i, await createMeter(m, `${tag}_${m.name}`));
          if (m.made === 'refiltered') early.set(i, await createMeter(m, `${tag}_${m.name === 'llm' ? 'req' : 'llm'}`));
        }
        for (const batch of batches) {
          const events = batch.map((e) => {
            const c = customers[e.customer];
            const properties: Record<string, Value> = {};
            if (e.tokens !== undefined) properties.tokens = e.tokens;
            if (e.tier !== undefined) properties.tier = e.tier;
            return {
              id: `${tag}_${e.idIndex}`,
              customer: c ? (e.byExternalId ? { externalId: c.externalId } : { customerId: c.id }) : { externalId: `${tag}_ghost` },
              name: `${tag}_${e.name}`,
              timestamp: new Date(e.at).toISOString(),
              properties,
              known: c,
              at: e.at,
            };
          });
          const res = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', ctx.orgA.apiKey).send({ events: events.map(({ known: _k, at: _a, ...e }) => e) });
          expect(res.status).toBe(200);
          // The expected answer, event by event: the first accepted version of an id is the event.
          const expected = events.map((e) => {
            if (stored.has(e.id)) return 'DUPLICATE';
            if (!e.known) return 'REJECTED';
            if (e.at > now + 5 * 60_000) return 'REJECTED';
            stored.set(e.id, { id: e.id, customerId: e.known.id, name: e.name, at: e.at, properties: e.properties });
            return 'ACCEPTED';
          });
          expect(res.body.data.results.map((r: { status: string }) => r.status)).toEqual(expected);
        }
        const all = [...stored.values()];
        for (const [i, [m, r]] of queries.entries()) {
          const property = m.kind === 'count' ? undefined : 'tokens';
          const meterId = early.get(i) ?? (await createMeter(m, `${tag}_${m.name}`));
          if (m.made === 'refiltered') {
            const properties = m.tier !== undefined ? { tier: m.tier } : {};
            expect((await api().update(meterId, { filter: { eventName: `${tag}_${m.name}`, properties } })).status).toBe(200);
          }
          if (m.made === 'archived') expect((await api().archive(meterId)).status).toBe(200);
          const start = Math.min(r.a, r.b);
          const end = Math.max(r.a, r.b) + 1;
          const c = customers[r.customer];
          const query: Record<string, string> = { start: new Date(start).toISOString(), end: new Date(end).toISOString() };
          if (r.interval) query.interval = r.interval;
          if (c) query.customer = r.byExternalId ? c.externalId : c.id;
          const res = await ctx.merchant.get(`/v1/meters/${meterId}/quantities`).query(query).set('X-API-Key', ctx.orgA.apiKey);
          expect(res.status, JSON.stringify(res.body)).toBe(200);
          const keep = (from: number, to: number) => (e: Stored) =>
            e.name === `${tag}_${m.name}` && (m.tier === undefined || e.properties.tier === m.tier) && (!c || e.customerId === c.id) && e.at >= from && e.at < to;
          const context = JSON.stringify({ m, r, events: all.filter(keep(start, end)) });
          expect(res.body.data.total, context).toBe(recompute(all, m.kind, property ?? null, keep(start, end)));
          expect(res.body.data.customerId).toBe(c?.id ?? null);
          if (r.interval) {
            const expectedBuckets = [];
            for (let k = utcBucket(start, r.interval); k < end; ) {
              const next = r.interval === 'hour' ? k + HOUR : r.interval === 'day' ? k + 24 * HOUR : Date.UTC(new Date(k).getUTCFullYear(), new Date(k).getUTCMonth() + 1, 1);
              const from = Math.max(k, start);
              const to = Math.min(next, end);
              expectedBuckets.push({ start: new Date(from).toISOString(), end: new Date(to).toISOString(), quantity: recompute(all, m.kind, property ?? null, keep(from, to)) });
              k = next;
            }
            expect(res.body.data.buckets, context).toEqual(expectedBuckets);
          } else {
            expect(res.body.data.buckets).toEqual([]);
          }
        }
      }),
      { numRuns: Number(process.env.KASSA_USAGE_PROPERTY_RUNS ?? 12) },
    );
    ctx.clock.set(NOW);
  }, 600_000);
});

describe('a meter over a telemetry project\'s spans', () => {
  it('sums a token attribute per customer, the customer taken from a span (or root span) attribute mapped through externalId', async () => {
    const project = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Metered app');
    const base = Date.parse('2026-11-25T10:00:00.000Z');
    const made: Array<{ user: string | null; model: string; tokens: number; at: number; onRoot: boolean }> = [];
    const traces = [];
    for (let i = 0; i < 24; i++) {
      const user = i % 6 === 5 ? null : i % 6 === 4 ? 'stranger' : customers[i % 3]!.externalId;
      const model = i % 4 === 0 ? 'gpt-4o' : 'gpt-4o-mini';
      const at = base + i * 20 * 60_000;
      const onRoot = i % 2 === 0;
      const userAttr = user === null ? {} : { 'traceloop.association.properties.user_id': user };
      const root = span({ start: at, durationMs: 1000, name: 'chat', attributes: onRoot ? userAttr : {} });
      const call = span({
        parent_span_id: root.span_id,
        start: at + 10,
        durationMs: 200 + i,
        name: 'openai.chat',
        attributes: { 'gen_ai.system': 'openai', 'gen_ai.request.model': model, 'gen_ai.usage.input_tokens': 100 + i, 'gen_ai.usage.output_tokens': 5, ...(onRoot ? {} : userAttr) },
      });
      traces.push({ trace_id: traceId(), spans: [root, call] });
      made.push({ user, model, tokens: 100 + i, at: at + 10, onRoot });
    }
    const ingested = await ctx.platform.post('/v1/ingest').set(bearer(project.key)).send({ traces });
    expect(ingested.status).toBe(202);

    const create = (body: object) => api().create({ name: 'Input tokens', source: 'SPANS', customerAttribute: 'traceloop.association.properties.user_id', ...body });
    const sum = (await create({ filter: { projectId: project.projectId }, aggregation: 'sum', property: 'gen_ai.usage.input_tokens' })).body.data;
    const mini = (await create({ filter: { projectId: project.projectId, model: 'gpt-4o-mini', vendor: 'openai' }, aggregation: 'count' })).body.data;
    const longest = (await create({ filter: { projectId: project.projectId }, aggregation: 'max', property: 'duration_ms' })).body.data;
    const latest = (await create({ filter: { projectId: project.projectId }, aggregation: 'last', property: 'gen_ai.usage.input_tokens' })).body.data;
    const models = (await create({ filter: { projectId: project.projectId }, aggregation: 'unique', property: 'gen_ai.request.model' })).body.data;
    const big = (await create({ filter: { projectId: project.projectId, attributes: { 'gen_ai.request.model': 'gpt-4o' } }, aggregation: 'count' })).body.data;
    expect(sum.filter).toEqual({ projectId: project.projectId, attributes: {} });
    const range = { start: '2026-11-25T00:00:00Z', end: '2026-11-26T00:00:00Z' };
    for (const c of customers) {
      const mine = made.filter((s) => s.user === c.externalId);
      const bySum = await api().quantities(sum.id, { ...range, customer: c.externalId, interval: 'hour' });
      expect(bySum.status).toBe(200);
      expect(bySum.body.data.total).toBe(mine.reduce((s, x) => s + x.tokens, 0));
      const hourly = new Map<number, number>();
      for (const s of mine) hourly.set(Math.floor(s.at / HOUR) * HOUR, (hourly.get(Math.floor(s.at / HOUR) * HOUR) ?? 0) + s.tokens);
      for (const b of bySum.body.data.buckets) expect(b.quantity).toBe(hourly.get(Date.parse(b.start)) ?? 0);
      expect((await api().quantities(mini.id, { ...range, customer: c.id })).body.data.total).toBe(mine.filter((s) => s.model === 'gpt-4o-mini').length);
      expect((await api().quantities(longest.id, { ...range, customer: c.id })).body.data.total).toBe(Math.max(...mine.map((s) => 200 + made.indexOf(s))));
      expect((await api().quantities(latest.id, { ...range, customer: c.externalId })).body.data.total).toBe([...mine].sort((a, b) => b.at - a.at)[0]!.tokens);
      const byDay = await api().quantities(models.id, { ...range, customer: c.externalId, interval: 'day' });
      expect(byDay.body.data.total).toBe(new Set(mine.map((s) => s.model)).size);
      expect(byDay.body.data.buckets.map((b: { quantity: number }) => b.quantity)).toEqual([new Set(mine.map((s) => s.model)).size]);
      expect((await api().quantities(big.id, { ...range, customer: c.id })).body.data.total).toBe(mine.filter((s) => s.model === 'gpt-4o').length);
    }
    // Everyone: spans of unknown users ("stranger") or without the attribute count for nobody.
    const everyone = await api().quantities(sum.id, range);
    expect(everyone.body.data.total).toBe(made.filter((s) => s.user !== null && s.user !== 'stranger').reduce((s, x) => s + x.tokens, 0));
    // Another organization's project is not a source.
    const foreign = await createProjectWithKey(ctx, ctx.orgB.orgId, 'Theirs');
    expect((await create({ filter: { projectId: foreign.projectId }, aggregation: 'count' })).status).toBe(400);
  });
});
