/**
 * A newest-first trace list not bounded in time reads the recent weeks first and the older weeks
 * only when the recent page is not enough (KnexTraceRepository.searchTraces). Property: on random
 * traces over several weekly partitions (and the default one) — starts moved earlier than the
 * partition key, ties on the start, every filter — the split repository returns exactly the pages
 * of the single read, for every sort, range and cursor walk, whatever "now" is. And the plan: the
 * first page, when the recent week fills it, is one statement whose plan scans only the recent
 * week's partition (and those after it), pruned at planning. Both databases (PGlite is PostgreSQL too).
 *
 * Round 22: the lists whose plan does not depend on their values (a user's or a session's traces
 * by start, every trace by duration or cost) run as prepared statements. The property compares
 * both repositories with the pages computed here from the seeded traces (an oracle independent
 * of the SQL), and on PostgreSQL runs every walk a second time with generic plans forced (what a
 * prepared statement runs after its fifth call); a plan test checks that such a list is one
 * prepared statement whose generic plan reads each week's partition through the index that holds
 * its filter and order.
 */
import fc from 'fast-check';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createWeekPartitions, partitionName, weekStart } from '../../src/db/partitions.js';
import { KnexTraceRepository, TRACE_SORTS, type TraceSearch } from '../../src/telemetry/traces.repository.js';
import { createProjectWithKey } from './helpers.js';

let ctx: TestContext;
let projectId: string;
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
const DAY = 86_400_000;
const WEEK = 7 * DAY;
const W0 = Date.parse('2026-10-05T00:00:00Z'); // a Monday
const PARTITIONED_WEEKS = 6; // the seventh week (and later) is in the default partition
const db = () => ctx.testDb.database.db;

beforeAll(async () => {
  ctx = await createTestContext();
  projectId = (await createProjectWithKey(ctx, ctx.orgA.orgId, 'Trace list split')).projectId;
  await db().transaction((trx) => createWeekPartitions(trx, 'telemetry_traces', Array.from({ length: PARTITIONED_WEEKS }, (_, i) => W0 + i * WEEK)));
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

interface SeedTrace {
  partitionStart: number;
  movedEarlier: number;
  durationMs: number;
  cost: number;
  model: number;
  error: boolean;
  session: number | null;
  user: number | null;
  tier: number;
}

const traceArb: fc.Arbitrary<SeedTrace> = fc.record({
  // Hours over seven and a half weeks: ties on the start (hours) are common.
  partitionStart: fc.integer({ min: 0, max: 7 * 24 * 7 + 84 }).map((h) => W0 + h * 3_600_000),
  // Mostly stored at its start; some traces' start moved earlier by a later batch, across weeks too.
  movedEarlier: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 20 * DAY }) }),
  durationMs: fc.integer({ min: 0, max: 40_000 }),
  cost: fc.integer({ min: 0, max: 50 }).map((c) => c / 10),
  model: fc.integer({ min: 0, max: 2 }),
  error: fc.boolean(),
  session: fc.option(fc.integer({ min: 0, max: 4 })),
  user: fc.option(fc.integer({ min: 0, max: 3 })),
  tier: fc.integer({ min: 0, max: 1 }),
});

const time = fc.integer({ min: W0 - WEEK, max: W0 + 9 * WEEK }).map((ms) => new Date(ms));
const FILTERS = {
  startTime: time,
  endTime: time,
  model: fc.constantFrom('m0', 'm1', 'm2'),
  minLatencyMs: fc.integer({ min: 0, max: 40_000 }),
  status: fc.constantFrom('ok' as const, 'error' as const),
  attributePair: fc.constantFrom('tier=0', 'tier=1'),
  sessionId: fc.constantFrom('s0', 's1', 's2', 's3', 's4'),
  userId: fc.constantFrom('u0', 'u1', 'u2', 'u3'),
};
// Mostly newest first with no filter or one or two (many filters at once leave a page or less).
const searchArb = fc
  .tuple(
    fc.constantFrom(...TRACE_SORTS, '-start_time', '-start_time', '-start_time'),
    fc.integer({ min: 1, max: 25 }),
    fc.record(FILTERS),
    fc.subarray(Object.keys(FILTERS) as Array<keyof typeof FILTERS>, { maxLength: 2 }),
  )
  .map(([sort, limit, values, keys]) => ({ sort, limit, ...Object.fromEntries(keys.map((k) => [k, values[k]])) }) as Omit<TraceSearch, 'projectId'>);
// "Now" mostly among the traces' weeks, sometimes before or after them all.
const nowArb = fc.oneof({ weight: 3, arbitrary: fc.integer({ min: W0 + WEEK, max: W0 + 8 * WEEK }).map((ms) => new Date(ms)) }, { weight: 1, arbitrary: time });

const traceIdOf = (i: number) => (i.toString(16).padStart(4, '0') + '0'.repeat(28)).split('').reverse().join('');

/** The pages of `search` over the seeded traces, computed without SQL: filter, sort by (column, trace id), cut into pages. */
function expectedPages(traces: SeedTrace[], search: Omit<TraceSearch, 'projectId'>): string[][] {
  const column = search.sort.replace('-', '') as 'start_time' | 'duration_ms' | 'cost';
  const sign = search.sort.startsWith('-') ? -1 : 1;
  const rows = traces
    .map((t, i) => ({ id: traceIdOf(i), start: t.partitionStart - t.movedEarlier, t }))
    .filter(({ start, t }) => {
      if (search.startTime && start < search.startTime.getTime()) return false;
      if (search.endTime && (start + t.durationMs > search.endTime.getTime() || start > search.endTime.getTime())) return false;
      if (search.model !== undefined && search.model !== `m${t.model}`) return false;
      if (search.minLatencyMs !== undefined && t.durationMs < search.minLatencyMs) return false;
      if (search.status !== undefined && t.error !== (search.status === 'error')) return false;
      if (search.attributePair !== undefined && search.attributePair !== `tier=${t.tier}`) return false;
      if (search.sessionId !== undefined && search.sessionId !== (t.session === null ? null : `s${t.session}`)) return false;
      if (search.userId !== undefined && search.userId !== (t.user === null ? null : `u${t.user}`)) return false;
      return true;
    })
    .map(({ id, start, t }) => ({ id, value: column === 'start_time' ? start : column === 'duration_ms' ? t.durationMs : t.cost }))
    .sort((a, b) => sign * (a.value - b.value) || sign * (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const pages: string[][] = [];
  for (let i = 0; ; i += search.limit) {
    const page = rows.slice(i, i + search.limit).map((r) => r.id);
    pages.push(page);
    if (page.length < search.limit) return pages;
  }
}

/** `fn` on one connection whose plans are all generic (what a prepared statement runs from its sixth call on). */
async function withGenericPlans<T>(fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return db().transaction(async (trx) => {
    await trx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
    return fn(trx);
  });
}

async function seed(traces: SeedTrace[]): Promise<void> {
  await db().raw('DELETE FROM telemetry_traces WHERE project_id = ?', [projectId]);
  const rows = traces.map((t, i) => {
    const start = t.partitionStart - t.movedEarlier;
    return {
      project_id: projectId,
      trace_id: traceIdOf(i),
      start_time: new Date(start),
      end_time: new Date(start + t.durationMs),
      duration_ms: t.durationMs,
      span_count: 1,
      root_name: 'r',
      root_attributes: '{}',
      model: `m${t.model}`,
      models: [`m${t.model}`],
      tokens_input: 0,
      tokens_output: 0,
      cost: t.cost,
      has_error: t.error,
      spans: '[]',
      created_at: new Date(start),
      updated_at: new Date(start),
      session_id: t.session === null ? null : `s${t.session}`,
      user_id: t.user === null ? null : `u${t.user}`,
      attribute_pairs: [`tier=${t.tier}`],
      partition_start: new Date(t.partitionStart),
    };
  });
  for (let i = 0; i < rows.length; i += 100) await db()('telemetry_traces').insert(rows.slice(i, i + 100));
}

/** Every page of `search` through `repo`, following the keyset cursor as the service does. */
async function walk(repo: KnexTraceRepository, search: Omit<TraceSearch, 'projectId'>): Promise<string[][]> {
  const pages: string[][] = [];
  let after: TraceSearch['after'];
  for (let n = 0; n < 400; n++) {
    const page = await repo.searchTraces({ projectId, ...search, after });
    pages.push(page.map((t) => t.traceId));
    if (page.length < search.limit) return pages;
    const last = page[page.length - 1]!;
    const column = search.sort.replace('-', '');
    after = { value: column === 'start_time' ? last.startTime : column === 'duration_ms' ? last.durationMs : last.cost, traceId: last.traceId };
  }
  throw new Error('the walk did not end');
}

describe('newest-first trace list split on the partition key', () => {
  it('returns the single read’s pages for every sort, filter, range and cursor, whatever now is (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(traceArb, { minLength: 0, maxLength: 160 }), fc.array(fc.tuple(searchArb, nowArb), { minLength: 1, maxLength: 6 }), async (traces, searches) => {
        await seed(traces);
        const single = new KnexTraceRepository(db());
        for (const [search, now] of searches) {
          const split = new KnexTraceRepository(db(), { now: () => now });
          const expected = expectedPages(traces, search);
          expect(await walk(single, search)).toEqual(expected);
          expect(await walk(split, search)).toEqual(expected);
          if (onPostgres) {
            // Generic plans, as the prepared lists run them after their fifth call on a connection.
            expect(await withGenericPlans((trx) => walk(new KnexTraceRepository(trx, { now: () => now }), search))).toEqual(expected);
          }
        }
      }),
      { numRuns: 40 },
    );
  }, 600_000);

  it('reads the older weeks when the recent page is full but a trace moved earlier than the split', async () => {
    const now = W0 + 5 * WEEK + 3 * DAY;
    const recent = weekStart(now);
    // Two traces stored this week whose starts moved back two weeks, one trace stored last week.
    await seed([
      { partitionStart: recent + DAY, movedEarlier: 14 * DAY, durationMs: 1, cost: 0, model: 0, error: false, session: null, user: null, tier: 0 },
      { partitionStart: recent + 2 * DAY, movedEarlier: 14 * DAY, durationMs: 1, cost: 0, model: 0, error: false, session: null, user: null, tier: 0 },
      { partitionStart: recent - DAY, movedEarlier: 0, durationMs: 1, cost: 0, model: 0, error: false, session: null, user: null, tier: 0 },
    ]);
    const page = await new KnexTraceRepository(db(), { now: () => new Date(now) }).searchTraces({ projectId, limit: 2, sort: '-start_time' });
    expect(page.map((t) => t.startTime.getTime())).toEqual([recent - DAY, recent + 2 * DAY - 14 * DAY]);
  });

  it('plan: a first page the recent week fills is one statement that scans none of the older weeks', async () => {
    const other = (await createProjectWithKey(ctx, ctx.orgA.orgId, 'Trace list split plan')).projectId;
    // 100 traces a week over the six partitioned weeks; now is mid-way through the last one.
    await db().raw(
      `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
         tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, attribute_pairs, partition_start)
       SELECT ?, md5('p' || i), st, st, 0, 1, 'r', '{}', NULL, '{}', 0, 0, 0, false, '[]', st, st, '{}', st
         FROM (SELECT i, to_timestamp((?::float8 + i * ?::float8) / 1000) AS st FROM generate_series(0, 599) i) x`,
      [other, W0, WEEK / 100],
    );
    const now = new Date(W0 + 5 * WEEK + 3 * DAY);
    const queries: Array<{ sql: string; bindings: unknown[] }> = [];
    const listener = (q: { sql: string; bindings?: unknown[] }) => queries.push({ sql: q.sql.replace(/\$\d+/g, '?'), bindings: q.bindings ?? [] });
    db().on('query', listener);
    let page: string[];
    try {
      page = (await new KnexTraceRepository(db(), { now: () => now }).searchTraces({ projectId: other, limit: 21, sort: '-start_time' })).map((t) => t.traceId);
    } finally {
      db().off('query', listener);
    }
    expect(page).toEqual((await new KnexTraceRepository(db()).searchTraces({ projectId: other, limit: 21, sort: '-start_time' })).map((t) => t.traceId));
    expect(queries).toHaveLength(1);
    const plan = ((await db().raw(`EXPLAIN (COSTS OFF) ${queries[0]!.sql}`, queries[0]!.bindings as never)).rows as Array<{ 'QUERY PLAN': string }>)
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan, plan).toContain(partitionName('telemetry_traces', W0 + 5 * WEEK));
    for (let week = 0; week < 5; week++) expect(plan, plan).not.toContain(partitionName('telemetry_traces', W0 + week * WEEK));
    // The single read over every week scans them all (what the split saves).
    const single = ((await db().raw(`EXPLAIN (COSTS OFF) SELECT trace_id FROM telemetry_traces WHERE project_id = ? ORDER BY start_time DESC, trace_id DESC LIMIT 21`, [other])).rows as Array<{ 'QUERY PLAN': string }>)
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    for (let week = 0; week < 6; week++) expect(single, single).toContain(partitionName('telemetry_traces', W0 + week * WEEK));
  });

  it('plan: a user’s and a session’s list are one statement; the lists by duration, by cost and by start with no filter are prepared, their generic plan reads each week down the index of its order', async () => {
    const other = (await createProjectWithKey(ctx, ctx.orgA.orgId, 'Trace list prepared plan')).projectId;
    // 1,000 traces a week over the six partitioned weeks (each week's heap many pages: an index is
    // the plan, as at scale), fifty users, a session per five traces.
    await db().raw(
      `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
         tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, attribute_pairs, partition_start, user_id, session_id)
       SELECT ?, md5('q' || i), st, st, i % 977, 1, 'r', '{}', NULL, '{}', 0, 0, (i % 89) / 10.0, false, '[]', st, st, '{}', st, 'u' || (i % 50), 's' || (i / 5)
         FROM (SELECT i, to_timestamp((?::float8 + i * ?::float8) / 1000) AS st FROM generate_series(0, 5999) i) x`,
      [other, W0, WEEK / 1000],
    );
    await db().raw('ANALYZE telemetry_traces');
    const now = new Date(W0 + 5 * WEEK + 3 * DAY);
    // [search, prepared, the index each week is read through (null: not checked)]
    const lists: Array<[Omit<TraceSearch, 'projectId'>, boolean, string | null]> = [
      [{ limit: 21, sort: '-start_time', userId: 'u7' }, false, null],
      [{ limit: 21, sort: '-start_time', sessionId: 's120' }, false, null],
      [{ limit: 21, sort: '-duration_ms' }, true, 'duration_ms_trace_id'],
      [{ limit: 21, sort: 'cost' }, true, 'cost_trace_id'],
      [{ limit: 21, sort: 'start_time', after: { value: new Date(W0 + 2 * WEEK), traceId: '' } }, true, 'start_time_trace_id'],
    ];
    for (const [search, prepared, index] of lists) {
      const queries: Array<{ sql: string; bindings: unknown[]; options?: { prepared?: boolean } }> = [];
      const listener = (q: { sql: string; bindings?: unknown[]; options?: { prepared?: boolean } }) => queries.push({ sql: q.sql, bindings: q.bindings ?? [], options: q.options });
      db().on('query', listener);
      let page: string[];
      try {
        page = (await new KnexTraceRepository(db(), { now: () => now }).searchTraces({ projectId: other, ...search })).map((t) => t.traceId);
      } finally {
        db().off('query', listener);
      }
      expect(page.length, JSON.stringify(search)).toBeGreaterThan(0);
      expect(queries, JSON.stringify(search)).toHaveLength(1);
      expect(Boolean(queries[0]!.options?.prepared), queries[0]!.sql).toBe(prepared);
      if (!prepared || index === null) continue;
      // The page size is in the text (a LIMIT parameter would cost the generic plan for a tenth of
      // the rows), rounded up to one of a few sizes (21 → 26); the page is cut to 21.
      expect(queries[0]!.sql).toMatch(/limit 26$/);
      expect(page).toHaveLength(21);
      const plan = await db().transaction(async (trx) => {
        await trx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
        await trx.raw(`PREPARE trace_list_plan AS ${queries[0]!.sql}`);
        // Literals: a utility statement (EXPLAIN) takes no bind parameters.
        const literal = (b: unknown) => (typeof b === 'number' ? String(b) : `'${(b instanceof Date ? b.toISOString() : String(b)).replaceAll("'", "''")}'`);
        const text = queries[0]!.bindings.map(literal).join(', ');
        const rows = (await trx.raw(`EXPLAIN (COSTS OFF) EXECUTE trace_list_plan(${text})`)).rows as Array<{ 'QUERY PLAN': string }>;
        await trx.raw('DEALLOCATE trace_list_plan');
        return rows.map((r) => r['QUERY PLAN']).join('\n');
      });
      // Ascending from a cursor two weeks in: the weeks before it are pruned when the plan starts.
      for (let week = search.after ? 2 : 0; week < 6; week++) {
        const partition = partitionName('telemetry_traces', W0 + week * WEEK);
        expect(plan, plan).toMatch(new RegExp(`Index Scan[^\n]* using ${partition}_project_id_${index}[^\n]* on ${partition}`));
      }
      // No sort of the weeks' rows (an Incremental Sort of ties on a presorted start stops after the page).
      expect(plan, plan).not.toMatch(/Seq Scan on telemetry_traces_p|(^|-> {2})Sort\b/m);
    }
  });
});
