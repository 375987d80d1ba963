/**
 * The trace list inside a time range reads a page's worth of traces, not every trace of the range,
 * when it sorts by something else than the start (cost) or filters on a value (model): plans on
 * weekly partitions (migration 0390) with 40,000 traces over two weeks (~2,860 a day), analyzed
 * (the partitions are smaller than ANALYZE's sample, so the statistics and the plans are
 * deterministic). By cost, the planner walks the partition's cost index and drops the traces out
 * of range (~7 × 51 read on a week's last day, whatever the traffic); a model filter walks the
 * start-time index from the newest (~4 × 51 with one model in four). A narrow range (few traces)
 * is read whole and sorted. The figures at 1M and 10M spans: docs/benchmarks.md, "Explorer at 10M
 * spans". Both databases (PGlite is PostgreSQL too).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createWeekPartitions } from '../../src/db/partitions.js';
import { KnexTraceRepository, type TraceSearch } from '../../src/telemetry/traces.repository.js';
import { createProjectWithKey } from './helpers.js';

let ctx: TestContext;
let projectId: string;
const DAY = 86_400_000;
const FROM = Date.parse('2026-11-16T00:00:00Z'); // a Monday: two weeks, two partitions
const TRACES = 40_000;
const MODELS = ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet', 'llama-3'];

const db = () => ctx.testDb.database.db;
const rows = async (sql: string, bindings: unknown[] = []) => (await db().raw(sql, bindings as never)).rows as Array<Record<string, unknown>>;

beforeAll(async () => {
  ctx = await createTestContext();
  projectId = (await createProjectWithKey(ctx, ctx.orgA.orgId, 'Trace list plans')).projectId;
  await db().transaction((trx) => createWeekPartitions(trx, 'telemetry_traces', [FROM, FROM + 7 * DAY]));
  // Evenly over the two weeks; cost unrelated to time; one model of four per trace; a span document
  // of ~800 bytes that does not compress (rows as wide as real traces': a heap page per few traces).
  await db().raw(
    `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
       tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, attribute_pairs, partition_start)
     SELECT ?, md5('t' || i), st, st, 0, 1, 'r', '{}', m, ARRAY[m], 0, 0, ((i * 7919) % 10007) / 1e4, false,
            (SELECT string_agg(md5(i || '.' || k), '') FROM generate_series(1, 24) k), st, st, '{}', st
       FROM (SELECT i, to_timestamp((?::float8 + i * ?::float8) / 1000) AS st, (?::text[])[1 + i % 4] AS m FROM generate_series(0, ? - 1) i) x`,
    [projectId, FROM, (14 * DAY) / TRACES, MODELS, TRACES],
  );
  await db().raw('ANALYZE telemetry_traces');
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

/** The repository's query for `search`, run under EXPLAIN ANALYZE: its plan, and the traces the scans read. */
async function explained(search: Omit<TraceSearch, 'projectId'>): Promise<{ plan: string; scanned: number; page: string[] }> {
  const queries: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => queries.push({ sql: q.sql.replace(/\$\d+/g, '?'), bindings: q.bindings ?? [] });
  db().on('query', listener);
  let page: string[];
  try {
    page = (await new KnexTraceRepository(db()).searchTraces({ projectId, ...search })).map((t) => t.traceId);
  } finally {
    db().off('query', listener);
  }
  const lines = (await rows(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ${queries[0]!.sql}`, queries[0]!.bindings)).map((r) => r['QUERY PLAN'] as string);
  // Rows each scan node handed up plus those its filter dropped: the traces it read.
  let scanned = 0;
  lines.forEach((line, i) => {
    if (!/Scan on telemetry_traces_p/.test(line)) return;
    const kept = /actual rows=(\d+) loops=(\d+)/.exec(line);
    if (kept) scanned += Number(kept[1]) * Number(kept[2]);
    const removed = /Rows Removed by Filter: (\d+)/.exec(lines[i + 1] ?? '') ?? /Rows Removed by Filter: (\d+)/.exec(lines[i + 2] ?? '');
    if (removed) scanned += Number(removed[1]);
  });
  return { plan: lines.join('\n'), scanned, page };
}

describe('trace list plans in a time range', () => {
  // The last day of the second week: ~2,860 traces in the range, 20,000 in its partition.
  const lastDay = new Date(FROM + 13 * DAY);

  it('by cost over a day walks the cost index of the range’s partition and stops after the page', async () => {
    const { plan, scanned, page } = await explained({ limit: 51, sort: '-cost', startTime: lastDay });
    const inRange = Number((await rows(`SELECT count(*) AS n FROM telemetry_traces WHERE project_id = ? AND start_time >= ?`, [projectId, lastDay]))[0]!.n);
    expect(inRange).toBeGreaterThan(2_500);
    expect(plan, plan).toMatch(/Index Scan using telemetry_traces_p20261123_project_id_cost_trace_id_idx/);
    expect(plan, plan).not.toMatch(/Sort \(actual/);
    // A seventh of the partition is in range: ~7 × 51 traces read, not the range's ~2,860.
    expect(scanned, plan).toBeLessThan(1_000);
    const expected = (await rows(`SELECT trace_id FROM telemetry_traces WHERE project_id = ? AND start_time >= ? ORDER BY cost DESC, trace_id DESC LIMIT 51`, [projectId, lastDay])).map((r) => r.trace_id);
    expect(page).toEqual(expected);
  });

  it('a model filter over a day walks the start-time index from the newest and stops after the page', async () => {
    const { plan, scanned, page } = await explained({ limit: 51, sort: '-start_time', model: 'claude-sonnet', startTime: lastDay });
    expect(plan, plan).not.toMatch(/Sort \(actual/);
    expect(plan, plan).toMatch(/Index Scan using telemetry_traces_p20261123_project_id_start_time_trace_id_idx/);
    // One trace in four carries the model: ~4 × 51 read.
    expect(scanned, plan).toBeLessThan(400);
    const expected = (await rows(`SELECT trace_id FROM telemetry_traces WHERE project_id = ? AND start_time >= ? AND 'claude-sonnet' = ANY(models) ORDER BY start_time DESC, trace_id DESC LIMIT 51`, [projectId, lastDay])).map((r) => r.trace_id);
    expect(page).toEqual(expected);
  });

  it('the newest page over a narrow range still reads the range by start time (few rows: no walk of the cost index)', async () => {
    const hour = new Date(FROM + 14 * DAY - 3_600_000);
    const { plan, scanned } = await explained({ limit: 51, sort: '-cost', startTime: hour });
    // ~120 traces in the last hour: reading them all by the start-time index and sorting is the cheaper plan.
    expect(plan, plan).toMatch(/telemetry_traces_p20261123_project_id_start_time_trace_id_idx/);
    expect(plan, plan).toMatch(/Sort \(actual/);
    expect(scanned, plan).toBeLessThan(400);
  });
});
