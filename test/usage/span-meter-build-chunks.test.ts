/**
 * A span meter's background build is bounded by a number of traces, not by hours: a project with
 * more traces in one hour than the chunk size builds in several chunks, each reading at most the
 * chunk's traces (plus the few long traces that reach into its hours from before), stopping
 * mid-hour and going on from the exact trace it stopped after. Before, a chunk ran to the end of
 * the hour holding its N-th trace, so one busy hour was one chunk whatever its size (at 100,000
 * traces an hour it hit the statement timeout, kept nothing and was tried again for ever).
 *
 * Exactness (count, sum, max, unique, last): quantities equal an independent recomputation from the
 * raw spans, and the rollup's rows equal those of a twin meter built in one chunk — with ingest
 * between chunks while the cursor stands inside the hour (new traces either side of it, a late root
 * after it, a re-sent span before it, a trace moved across it by an earlier or later start), and
 * with a chunk killed before its commit and the build taken on by a new worker (no double count).
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnexSpanMeterRollups } from '../../src/telemetry/span-meters.repository.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey } from '../telemetry/helpers.js';
import { buy, oneTimePrice, setExternalId } from './helpers.js';

let ctx: TestContext;
let db: Knex;
const customers: Array<{ id: string; externalId: string }> = [];
const H0 = Date.parse('2026-11-25T09:00:00.000Z');
const HOUR = 3_600_000;
const MINUTE = 60_000;
const USER = 'app.user';
const CHUNK = 5;

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
  const once = await oneTimePrice(ctx, ctx.orgA.orgId);
  for (let i = 0; i < 3; i++) {
    const { customerId } = await buy(ctx, `chunker${i}@example.com`, once, ctx.orgA.apiKey);
    expect((await setExternalId(ctx, customerId, `ck_${i}`, ctx.orgA.apiKey)).status).toBe(200);
    customers.push({ id: customerId, externalId: `ck_${i}` });
  }
  ctx.clock.set('2026-11-28T12:00:00.000Z');
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

type Value = number | string;
interface SentSpan {
  traceId: string;
  spanId: string;
  parent: string | null;
  start: number;
  duration: number;
  attributes: Record<string, Value>;
}
type Kind = 'count' | 'sum' | 'max' | 'unique' | 'last';
const KINDS: Kind[] = ['count', 'sum', 'max', 'unique', 'last'];

/** The independent recomputation (as span-meter-rollup.test.ts): final spans per trace, the root by the ingest rule, the key from the span or the root. */
function recompute(sent: Map<string, SentSpan>, kind: Kind, keys: Set<string>, from: number, to: number): number {
  const traces = new Map<string, SentSpan[]>();
  for (const s of sent.values()) (traces.get(s.traceId) ?? traces.set(s.traceId, []).get(s.traceId)!).push(s);
  const matched: Array<{ at: number; id: string; v: Value | undefined }> = [];
  for (const [traceId, spans] of traces) {
    const root = [...spans].sort((a, b) => Number(a.parent !== null) - Number(b.parent !== null) || a.start - b.start || (a.spanId < b.spanId ? -1 : 1))[0]!;
    for (const s of spans) {
      if (typeof s.attributes['gen_ai.request.model'] !== 'string' || s.start < from || s.start >= to) continue;
      const key = s.attributes[USER] !== undefined ? s.attributes[USER] : root.attributes[USER];
      if (typeof key !== 'string' || !keys.has(key)) continue;
      matched.push({ at: s.start, id: `${traceId}:${s.spanId}`, v: kind === 'count' ? undefined : s.attributes['app.units'] });
    }
  }
  const numbers = matched.filter((m) => typeof m.v === 'number').map((m) => ({ ...m, v: m.v as number }));
  if (kind === 'count') return matched.length;
  if (kind === 'sum') return numbers.reduce((n, m) => n + m.v, 0);
  if (kind === 'max') return numbers.length === 0 ? 0 : Math.max(...numbers.map((m) => m.v));
  if (kind === 'unique') return new Set(matched.filter((m) => m.v !== undefined).map((m) => JSON.stringify(m.v))).size;
  const latest = [...numbers].sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1))[0];
  return latest ? latest.v : 0;
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');

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

const root = (traceId: string, start: number, user?: string): SentSpan => ({ traceId, spanId: hex(1, 16), parent: null, start, duration: 1000, attributes: user !== undefined ? { [USER]: user } : {} });
const call = (traceId: string, n: number, start: number, units: Value, user?: string): SentSpan => ({
  traceId,
  spanId: hex(n + 1, 16),
  parent: hex(1, 16),
  start,
  duration: 40 + n,
  attributes: { 'gen_ai.system': 'openai', 'gen_ai.request.model': 'gpt-4o', 'app.units': units, ...(user !== undefined ? { [USER]: user } : {}) },
});

/**
 * The project's traces: 3 in hour H0, 2 long ones from the end of H0 into H0+2, and 40 in hour
 * H0+1 (eight chunks' worth), two of them with a model call in H0+2; the unit values repeat
 * (distinct values meet again across chunks of one hour) and a few are strings.
 */
function seed(tag: number): { spans: SentSpan[]; busy: string[] } {
  const id = (i: number) => hex(tag, 8) + hex(i, 24);
  const user = (i: number) => (i % 4 === 3 ? customers[i % 3]!.id : customers[i % 3]!.externalId);
  const spans: SentSpan[] = [];
  for (let i = 0; i < 3; i++) spans.push(root(id(i), H0 + (10 + 10 * i) * MINUTE, user(i)), call(id(i), 1, H0 + (12 + 10 * i) * MINUTE, i + 1));
  for (let i = 3; i < 5; i++) spans.push(root(id(i), H0 + (47 + i) * MINUTE, user(i)), call(id(i), 1, H0 + HOUR + 30 * MINUTE + i, 7 + i), call(id(i), 2, H0 + 2 * HOUR + 10 * MINUTE, 3));
  const busy: string[] = [];
  for (let i = 0; i < 40; i++) {
    const t = id(100 + i);
    busy.push(t);
    const start = H0 + HOUR + i * MINUTE + (i % 7) * 1000;
    spans.push(root(t, start, user(i)), call(t, 1, start + 500, i % 6 === 5 ? 'big' : (i * 7) % 11));
    // Traces near the end of the hour run into the next one.
    if (i === 36 || i === 38) spans.push(call(t, 2, H0 + 2 * HOUR + i * 1000, i, customers[(i + 1) % 3]!.externalId));
  }
  return { spans, busy };
}

const createMeter = async (projectId: string, kind: Kind) => {
  const res = await ctx.merchant
    .post('/v1/meters')
    .set('X-API-Key', ctx.orgA.apiKey)
    .send({ name: `chunked ${kind}`, source: 'SPANS', customerAttribute: USER, filter: { projectId }, aggregation: kind, ...(kind !== 'count' ? { property: 'app.units' } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data.id as string;
};

/** Sets a meter BUILDING from nothing (its rows gone), as after its creation over stored spans. */
async function restart(meterId: string): Promise<void> {
  await db('meters').where('id', meterId).update({ rollup_status: 'BUILDING', rollup_cursor: '' });
  for (const table of ['span_meter_hours', 'span_meter_hour_values', 'span_meter_points']) await db(table).where('meter_id', meterId).del();
}

const pointIds = async (meterId: string) => new Set((await db('span_meter_points').where('meter_id', meterId).pluck('id')) as string[]);
const cursorOf = async (meterId: string) => (await db('meters').where('id', meterId).first('rollup_cursor')).rollup_cursor as string | null;

/** One chunk; the traces whose points it wrote (new point ids) and the statements it ran. */
async function chunk(rollups: KnexSpanMeterRollups, meterId: string, size = CHUNK): Promise<{ step: string; traces: number; statements: number }> {
  const before = await pointIds(meterId);
  let statements = 0;
  const count = () => statements++;
  db.on('query', count);
  let step: string;
  try {
    step = await rollups.buildChunk(ctx.orgA.orgId, meterId, size);
  } finally {
    db.off('query', count);
  }
  const added = [...(await pointIds(meterId))].filter((p) => !before.has(p));
  return { step, traces: new Set(added.map((p) => p.split(':')[0])).size, statements };
}

/** The rollup's rows of a meter, without the meter id (to compare two meters). */
async function rowsOf(meterId: string) {
  const hours = await db('span_meter_hours').where('meter_id', meterId).orderBy(['key', 'hour_ms']).select('key', 'hour_ms', 'spans', 'total', 'maximum', 'last_at', 'last_id', 'last_value');
  const values = await db('span_meter_hour_values').where('meter_id', meterId).orderBy(['key', 'hour_ms', 'value']).select('key', 'hour_ms', 'value');
  const points = await db('span_meter_points').where('meter_id', meterId).orderBy(['key', 'st', 'id']).select('key', 'st', 'id', 'v');
  const n = (x: unknown) => (x === null ? null : Number(x));
  return {
    hours: hours.map((h) => ({ ...h, hour_ms: n(h.hour_ms), spans: n(h.spans), total: n(h.total), maximum: n(h.maximum), last_at: n(h.last_at), last_value: n(h.last_value) })),
    values: values.map((v) => ({ ...v, hour_ms: n(v.hour_ms) })),
    points: points.map((p) => ({ ...p, st: n(p.st) })),
  };
}

/** Every customer's quantity, whole and per hour, equals the recomputation; every matched span is one point. */
async function expectExact(meterId: string, kind: Kind, sent: Map<string, SentSpan>, label: string): Promise<void> {
  const [from, to] = [H0 - HOUR, H0 + 4 * HOUR];
  for (const c of customers) {
    const keys = new Set([c.id, c.externalId]);
    const res = await ctx.merchant.get(`/v1/meters/${meterId}/quantities`).query({ customer: c.externalId, start: new Date(from).toISOString(), end: new Date(to).toISOString(), interval: 'hour' }).set('X-API-Key', ctx.orgA.apiKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const got = res.body.data as { total: number; buckets: Array<{ start: string; end: string; quantity: number }> };
    expect(got.total, `${label} ${kind} ${c.externalId}`).toBe(recompute(sent, kind, keys, from, to));
    for (const b of got.buckets) expect(b.quantity, `${label} ${kind} ${c.externalId} ${b.start}`).toBe(recompute(sent, kind, keys, Date.parse(b.start), Date.parse(b.end)));
  }
  const all = { has: (k: string) => k !== '' } as Set<string>;
  expect((await pointIds(meterId)).size, `${label} ${kind} points`).toBe(recompute(sent, 'count', all, -Infinity, Infinity));
}

let tags = 0;

describe('a span meter build chunk is bounded by traces, not hours', () => {
  it('40 traces in one hour with chunks of 5: several chunks, each reads at most its traces (and the long ones from before), stops mid-hour; rows equal a one-chunk build and quantities the recomputation', async () => {
    const project = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Span chunks bounded');
    const sent = new Map<string, SentSpan>();
    await send(project.key, seed(++tags).spans, sent);
    const rollups = new KnexSpanMeterRollups(db);
    for (const kind of KINDS) {
      const meterId = await createMeter(project.projectId, kind);
      const twin = await createMeter(project.projectId, kind);
      await restart(twin);
      expect(await rollups.buildChunk(ctx.orgA.orgId, twin, 1_000_000)).toBe('ready');
      await restart(meterId);
      const steps: Array<{ step: string; traces: number; statements: number }> = [];
      const cursors: string[] = [];
      for (let i = 0; i < 100; i++) {
        const s = await chunk(rollups, meterId);
        steps.push(s);
        if (s.step === 'ready') break;
        cursors.push((await cursorOf(meterId))!);
      }
      expect(steps.at(-1)!.step).toBe('ready');
      // 45 traces, 5 a chunk: 9 chunks that end on a trace, and the last that finds none after it.
      expect(steps.length, JSON.stringify(steps)).toBe(10);
      // Each chunk: its own 5 traces, plus (for the hours it starts) the 2 long traces that reach into them.
      for (const s of steps) expect(s.traces, JSON.stringify(steps)).toBeLessThanOrEqual(CHUNK + 2);
      // Several of them stopped inside the busy hour.
      expect(cursors.filter((c) => c.startsWith(`${H0 + HOUR}|`)).length, JSON.stringify(cursors)).toBeGreaterThanOrEqual(7);
      // A fixed number of statements per chunk, whatever its size.
      for (const s of steps) expect(s.statements, JSON.stringify(steps)).toBeLessThanOrEqual(12);
      expect(await rowsOf(meterId), kind).toEqual(await rowsOf(twin));
      await expectExact(meterId, kind, sent, 'built');
    }
  }, 300_000);

  it('ingest between chunks while the cursor stands inside the hour: new traces either side, a late root after it, a re-sent span before it, traces moved across it — exact for every aggregation', async () => {
    const project = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Span chunks with ingest');
    const sent = new Map<string, SentSpan>();
    const { spans, busy } = seed(++tags);
    // busy[1]: its model calls late in the hour (its root will move after the cursor); busy[25]: no root yet (a late root comes).
    const seeded = spans.filter((s) => !(s.traceId === busy[25] && s.parent === null) && !(s.traceId === busy[1]));
    seeded.push(root(busy[1]!, H0 + HOUR + MINUTE, customers[1]!.externalId), call(busy[1]!, 1, H0 + HOUR + 45 * MINUTE, 4), call(busy[1]!, 2, H0 + 2 * HOUR + 5 * MINUTE, 9));
    await send(project.key, seeded, sent);
    const meters = new Map<Kind, string>();
    for (const kind of KINDS) {
      const id = await createMeter(project.projectId, kind);
      await restart(id);
      meters.set(kind, id);
    }
    const rollups = new KnexSpanMeterRollups(db);
    // 3 chunks: 15 traces built (3 of H0, the 2 long, 10 of the busy hour): the cursor stands after busy[9].
    for (const id of meters.values()) for (let i = 0; i < 3; i++) expect((await chunk(rollups, id)).step).toBe('chunk');
    for (const id of meters.values()) expect(await cursorOf(id)).toBe(`${H0 + HOUR}|${new Date(H0 + HOUR + 9 * MINUTE + 2000).toISOString()}|${busy[9]}`);
    const tag = hex(tags, 8);
    const batches: SentSpan[][] = [
      // A new trace before the cursor's position (ingest keeps it) and one after (the build adds it).
      [root(tag + hex(900, 24), H0 + HOUR + 3 * MINUTE + 1, customers[2]!.externalId), call(tag + hex(900, 24), 1, H0 + HOUR + 4 * MINUTE, 5)],
      [root(tag + hex(901, 24), H0 + HOUR + 30 * MINUTE + 1, customers[0]!.externalId), call(tag + hex(901, 24), 1, H0 + HOUR + 31 * MINUTE, 'big')],
      // A late root for a trace after the position: its model calls get their customer.
      [root(busy[25]!, H0 + HOUR + 25 * MINUTE + 4000, customers[0]!.id)],
      // A re-sent model call of a trace before the position, with a new value.
      [call(busy[4]!, 1, H0 + HOUR + 4 * MINUTE + 4500, 77)],
      // A trace after the position gets an earlier span: it moves before the position.
      [call(busy[30]!, 3, H0 + HOUR + 2 * MINUTE, 12)],
      // A trace before the position has its root re-sent later: it moves after the position.
      [root(busy[1]!, H0 + HOUR + 40 * MINUTE, customers[1]!.externalId)],
    ];
    for (const b of batches) await send(project.key, b, sent);
    for (const [kind, id] of meters) {
      for (let i = 0; i < 100 && (await chunk(rollups, id)).step !== 'ready'; i++);
      await expectExact(id, kind, sent, 'ingest mid-hour');
      const twin = await createMeter(project.projectId, kind);
      await restart(twin);
      expect(await rollups.buildChunk(ctx.orgA.orgId, twin, 1_000_000)).toBe('ready');
      expect(await rowsOf(id), kind).toEqual(await rowsOf(twin));
    }
  }, 300_000);

  it('a chunk killed before its commit inside the hour leaves nothing; a new worker goes on from the committed cursor without counting twice', async () => {
    const project = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Span chunks restart');
    const sent = new Map<string, SentSpan>();
    await send(project.key, seed(++tags).spans, sent);
    for (const kind of ['sum', 'unique', 'last'] as const) {
      const meterId = await createMeter(project.projectId, kind);
      await restart(meterId);
      const first = new KnexSpanMeterRollups(db);
      for (let i = 0; i < 2; i++) expect((await chunk(first, meterId)).step).toBe('chunk');
      const cursor = await cursorOf(meterId);
      expect(cursor).toMatch(new RegExp(`^${H0 + HOUR}\\|`));
      const before = await rowsOf(meterId);
      await expect(first.buildChunk(ctx.orgA.orgId, meterId, CHUNK, async () => {
        throw new Error('killed');
      })).rejects.toThrow('killed');
      expect(await rowsOf(meterId)).toEqual(before);
      expect(await cursorOf(meterId)).toBe(cursor);
      const second = new KnexSpanMeterRollups(db);
      let steps = 0;
      while ((await chunk(second, meterId)).step !== 'ready') steps++;
      expect(steps).toBe(7);
      await expectExact(meterId, kind, sent, 'restarted');
    }
  }, 300_000);
});
