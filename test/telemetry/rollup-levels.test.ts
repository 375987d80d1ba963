/**
 * The rollup resolutions added after the first release, five-minute (migration 0088) and
 * ten-second cells (0089): ingest keeps each cell equal to the merge of its finer cells, re-sent
 * spans included; metric queries read them only from the recorded `complete_from` on, and tile
 * earlier parts of a range without them (as before the migrations).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateLatest } from '../../src/db/knex.js';
import { migrationSource } from '../../src/db/migrations/index.js';
import { CellStats } from '../../src/telemetry/cell-stats.js';
import { MetricsService } from '../../src/telemetry/metrics.service.js';
import { KnexProjectRepository } from '../../src/telemetry/projects.repository.js';
import { KnexRollupRepository } from '../../src/telemetry/rollups.repository.js';
import { decompose } from '../../src/telemetry/rollups.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, prng, span, traceId, type TelemetryKeyFixture } from './helpers.js';

const DAY = 86_400_000;
const DAY0 = Date.parse('2026-11-10T00:00:00.000Z');
const MODELS = ['gpt-4o', 'claude-sonnet-4-5'];

let ctx: TestContext;
let p: TelemetryKeyFixture;
/** Final start time of every model-call span (re-sends overwrite), for the expected counts. */
const starts = new Map<string, number>();
const db = () => ctx.testDb.database.db;

beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
  const rand = prng(5);
  const traces: Array<{ trace_id: string; spans: unknown[] }> = [];
  for (let i = 0; i < 600; i++) {
    const tid = traceId();
    const start = DAY0 + Math.floor(rand() * 2 * DAY);
    const s = span({ start, durationMs: 1 + Math.floor(rand() * 5000), attributes: { 'llm.model': MODELS[i % 2]!, 'llm.tokens.input': i }, status: rand() < 0.1 ? 'ERROR' : 'OK' });
    starts.set(`${tid}:${s.span_id}`, start);
    traces.push({ trace_id: tid, spans: [s] });
  }
  // Calls 30 s past an hour on the second day: where the query below reads ten-second cells.
  for (let h = 1; h <= 5; h++) {
    const tid = traceId();
    const s = span({ start: DAY0 + DAY + h * 3_600_000 + 30_000, durationMs: 40, attributes: { 'llm.model': MODELS[0]! } });
    starts.set(`${tid}:${s.span_id}`, DAY0 + DAY + h * 3_600_000 + 30_000);
    traces.push({ trace_id: tid, spans: [s] });
  }
  for (let i = 0; i < traces.length; i += 200) {
    expect((await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces: traces.slice(i, i + 200) })).status).toBe(202);
  }
  // Re-sends that move spans to other minutes: the recompute path rebuilds their five-minute cells.
  for (const t of traces.slice(0, 40)) {
    const old = t.spans[0] as { span_id: string };
    const start = DAY0 + Math.floor(rand() * 2 * DAY);
    const moved = span({ span_id: old.span_id, start, durationMs: 7, attributes: { 'llm.model': MODELS[0]! } });
    starts.set(`${t.trace_id}:${old.span_id}`, start);
    expect((await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces: [{ trace_id: t.trace_id, spans: [moved] }] })).status).toBe(202);
  }
}, 120_000);

afterAll(async () => {
  await ctx?.close();
});

interface Cell {
  resolution: string;
  bucket_start: Date | string;
  model: string;
  vendor: string;
  requests: number | string;
  errors: number | string;
  dist_latency: Uint8Array;
  dist_tokens_input: Uint8Array;
  dist_tokens_output: Uint8Array;
  dist_tokens_total: Uint8Array;
  dist_cost: Uint8Array;
}
const decode = (c: Cell) => CellStats.decode(Number(c.requests), Number(c.errors), [c.dist_latency, c.dist_tokens_input, c.dist_tokens_output, c.dist_tokens_total, c.dist_cost]);
const summary = (s: CellStats) => ({
  requests: s.requests,
  errors: s.errors,
  dists: s.dists.map((d) => ({ count: d.count, min: d.min, max: d.max, sum: Math.round(d.sum * 1e6) / 1e6, p50: d.quantile(0.5), p99: d.quantile(0.99) })),
});

const completeFrom = async (resolution: string) =>
  new Date(((await db()('telemetry_rollup_levels').where({ resolution }).first('complete_from')) as { complete_from: Date | string }).complete_from).toISOString();

describe('five-minute and ten-second rollup cells', () => {
  for (const [fine, coarse, ms] of [
    ['10s', 'm', 60_000],
    ['m', '5m', 300_000],
  ] as const) {
    it(`each ${coarse} cell equals the merge of its ${fine} cells after ingest and re-sends`, async () => {
      const rows = (await db()('telemetry_rollups').where({ project_id: p.projectId }).whereIn('resolution', [fine, coarse])) as Cell[];
      const coarseCells = new Map<string, CellStats>();
      const fromFine = new Map<string, CellStats>();
      for (const row of rows) {
        const at = new Date(row.bucket_start).getTime();
        const key = `${Math.floor(at / ms) * ms}|${row.model}|${row.vendor}`;
        if (row.resolution === coarse) {
          expect(at % ms).toBe(0);
          coarseCells.set(key, decode(row));
        } else {
          const merged = fromFine.get(key) ?? new CellStats();
          merged.merge(decode(row));
          fromFine.set(key, merged);
        }
      }
      expect(coarseCells.size).toBeGreaterThan(100);
      expect([...coarseCells.keys()].sort()).toEqual([...fromFine.keys()].sort());
      for (const [key, cell] of coarseCells) expect(summary(cell), key).toEqual(summary(fromFine.get(key)!));
    });
  }

  it('an unaligned range is tiled with the new resolutions only from their complete_from on', () => {
    const boundary = DAY0 + DAY;
    const levels = { '5m': boundary, '10s': boundary };
    const before = decompose(boundary - 3_600_000 + 17_000, boundary - 17_000, levels);
    expect(before['5m']).toEqual([]);
    expect(before['10s']).toEqual([]);
    expect(before.m).toEqual([{ fromMs: boundary - 3_600_000 + 60_000, toMs: boundary - 60_000 }]);
    expect(before.raw).toEqual([
      { fromMs: boundary - 3_600_000 + 17_000, toMs: boundary - 3_600_000 + 60_000 },
      { fromMs: boundary - 60_000, toMs: boundary - 17_000 },
    ]);
    const after = decompose(boundary + 17_000, boundary + 3_600_000 - 17_000, levels);
    expect(after['5m']).toEqual([{ fromMs: boundary + 300_000, toMs: boundary + 3_300_000 }]);
    expect(after.m).toEqual([
      { fromMs: boundary + 60_000, toMs: boundary + 300_000 },
      { fromMs: boundary + 3_300_000, toMs: boundary + 3_540_000 },
    ]);
    expect(after['10s']).toEqual([
      { fromMs: boundary + 20_000, toMs: boundary + 60_000 },
      { fromMs: boundary + 3_540_000, toMs: boundary + 3_580_000 },
    ]);
    expect(after.raw).toEqual([
      { fromMs: boundary + 17_000, toMs: boundary + 20_000 },
      { fromMs: boundary + 3_580_000, toMs: boundary + 3_583_000 },
    ]);
    // Across the boundary: minutes before it, five-minute cells after it, nothing lost.
    const across = decompose(boundary - 600_000, boundary + 600_000, levels);
    expect(across.m).toEqual([{ fromMs: boundary - 600_000, toMs: boundary }]);
    expect(across['5m']).toEqual([{ fromMs: boundary, toMs: boundary + 600_000 }]);
    // Without a recorded point, from the start.
    expect(decompose(boundary + 17_000, boundary + 60_000)['10s']).toEqual([{ fromMs: boundary + 20_000, toMs: boundary + 60_000 }]);
  });

  it('a query reads five-minute and ten-second cells from complete_from on, and neither before it', async () => {
    const boundary = DAY0 + DAY;
    await db()('telemetry_rollup_levels').update({ complete_from: new Date(boundary) });
    const metrics = () => new MetricsService(new KnexRollupRepository(db()), new KnexProjectRepository(db()));
    const start = DAY0 + 1_234;
    const end = DAY0 + 2 * DAY - 56_789;
    const query = async () =>
      (await metrics().query(ctx.orgA.orgId, { metric: 'llm.requests.total', aggregation: 'sum', interval: '1h', start_time: new Date(start).toISOString(), end_time: new Date(end).toISOString() }))
        .series[0]!.datapoints.map((d) => d.value);
    const expected = Array.from({ length: Math.ceil((end - start) / 3_600_000) }, () => 0);
    for (const t of starts.values()) if (t >= start && t < end) expected[Math.floor((t - start) / 3_600_000)]!++;

    // Cells of the new resolutions before the boundary are not complete by definition: remove
    // them, and the answer must not change.
    await db()('telemetry_rollups').where({ project_id: p.projectId }).whereIn('resolution', ['5m', '10s']).andWhere('bucket_start', '<', new Date(boundary)).delete();
    expect(await query()).toEqual(expected);

    // From the boundary on they are what the query reads: without them, those buckets lose calls.
    const firstAfter = Math.ceil((boundary - start) / 3_600_000);
    const total = (values: Array<number | null>) => values.reduce((a, b) => a! + b!, 0)!;
    for (const resolution of ['10s', '5m']) {
      const before = await query();
      await db()('telemetry_rollups').where({ project_id: p.projectId, resolution }).delete();
      const without = await query();
      expect(without.slice(0, firstAfter - 1)).toEqual(expected.slice(0, firstAfter - 1));
      expect(total(without.slice(firstAfter)), resolution).toBeLessThan(total(before.slice(firstAfter)));
    }
  });
});

describe('migrations 0088 and 0089 (five-minute and ten-second cells)', () => {
  it('on a database without rollups, their cells are complete from the start', async () => {
    const empty = await createTestContext();
    try {
      const rows = (await empty.testDb.database.db('telemetry_rollup_levels').orderBy('resolution').select('resolution', 'complete_from')) as Array<{ resolution: string; complete_from: Date }>;
      expect(rows.map((r) => [r.resolution, new Date(r.complete_from).toISOString()])).toEqual([
        ['10s', '1970-01-01T00:00:00.000Z'],
        ['5m', '1970-01-01T00:00:00.000Z'],
      ]);
    } finally {
      await empty.close();
    }
  });

  it('on a database with rollups, from the start of the next UTC day (rolled back: no such cells)', async () => {
    await db().migrate.down({ migrationSource, name: '0089_telemetry_ten_second_rollups' });
    await db().migrate.down({ migrationSource, name: '0088_telemetry_five_minute_rollups' });
    const count = async () => Number(((await db()('telemetry_rollups').whereIn('resolution', ['5m', '10s']).count('* as n').first()) as { n: number | string }).n);
    expect(await count()).toBe(0);
    const before = Date.now();
    expect(await migrateLatest(db())).toBe(2);
    for (const resolution of ['5m', '10s']) {
      const from = Date.parse(await completeFrom(resolution));
      expect(from % DAY).toBe(0);
      expect(from).toBeGreaterThan(before);
      expect(from).toBeLessThanOrEqual(before + DAY);
    }
  });
});
