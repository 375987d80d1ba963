/**
 * Weekly time partitions of the traces (telemetry_traces, migration 0390): partitioned by the
 * start a trace was first stored with (never moves), its displayed start moving earlier across a
 * week boundary without a second row, identity across partitions under concurrent first batches,
 * retention by DROP consistent with the span rows, the session totals and the id table, pruning
 * of a time-bounded trace list (EXPLAIN), and the online migration of a table with traces while
 * writes go on. Both databases (PGlite is PostgreSQL too).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { down as unpartition, partitionTraces } from '../../src/db/migrations/0390_telemetry_trace_partitions.js';
import { listPartitions } from '../../src/db/partitions.js';
import { bearer, createProjectWithKey, span, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;
const at = (iso: string) => Date.parse(iso);

beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Trace partitions');
});
afterAll(async () => {
  await ctx?.close();
});

const db = () => ctx.testDb.database.db;
const rows = async (sql: string, bindings: unknown[] = []) => (await db().raw(sql, bindings as never)).rows as Array<Record<string, unknown>>;
const partitionNames = async () => (await listPartitions(db(), 'telemetry_traces')).map((x) => x.name);
const traceRows = async (tid: string) =>
  rows(`SELECT tableoid::regclass::text AS part, start_time, partition_start, span_count FROM telemetry_traces WHERE project_id = ? AND trace_id = ?`, [p.projectId, tid]);
const idRow = async (tid: string) => (await rows(`SELECT partition_start FROM telemetry_trace_ids WHERE project_id = ? AND trace_id = ?`, [p.projectId, tid]))[0];

async function ingest(traces: Array<{ trace_id: string; spans: Array<ReturnType<typeof span>> }>, key = p.key): Promise<void> {
  const res = await ctx.platform.post('/v1/ingest').set(bearer(key)).send({ traces });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
}
const modelSpan = (startMs: number, attributes: Record<string, string | number> = {}) =>
  span({ start: startMs, durationMs: 50, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 5, ...attributes } });

describe('trace partitions', () => {
  it('the table is partitioned by the first-stored start, with a default partition and the id table', async () => {
    const key = await rows(
      `SELECT a.attname FROM pg_partitioned_table pt JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = pt.partattrs[0]
        WHERE pt.partrelid = 'telemetry_traces'::regclass`,
    );
    expect(key.map((r) => r.attname)).toEqual(['partition_start']);
    expect(await partitionNames()).toContain('telemetry_traces_default');
    expect((await rows(`SELECT relkind FROM pg_class WHERE relname = 'telemetry_trace_ids'`))[0]!.relkind).toBe('r');
  });

  it('a trace whose start moves into an earlier week stays one row in its first week’s partition, listed by its new start', async () => {
    const tid = traceId();
    await ingest([{ trace_id: tid, spans: [modelSpan(at('2026-11-17T10:00:00Z'))] }]);
    expect(await traceRows(tid)).toEqual([expect.objectContaining({ part: 'telemetry_traces_p20261116', span_count: 1 })]);
    // A later batch brings a span from the week before: the displayed start moves, the row does not.
    await ingest([{ trace_id: tid, spans: [modelSpan(at('2026-11-12T10:00:00Z'))] }]);
    const [row] = await traceRows(tid);
    expect(await traceRows(tid)).toHaveLength(1);
    expect(row).toMatchObject({ part: 'telemetry_traces_p20261116', span_count: 2 });
    expect(new Date(row!.start_time as Date).toISOString()).toBe('2026-11-12T10:00:00.000Z');
    expect(new Date(row!.partition_start as Date).toISOString()).toBe('2026-11-17T10:00:00.000Z');
    expect(new Date((await idRow(tid))!.partition_start as Date).toISOString()).toBe('2026-11-17T10:00:00.000Z');
    // The explorer: listed in a range holding the new start only, and in detail with both spans.
    const list = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ start_time: '2026-11-12T00:00:00Z', end_time: '2026-11-18T00:00:00Z' });
    expect(list.status).toBe(200);
    expect(list.body.data.map((t: { trace_id: string }) => t.trace_id)).toEqual([tid]);
    const later = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ start_time: '2026-11-13T00:00:00Z', end_time: '2026-11-18T00:00:00Z' });
    expect(later.body.data.map((t: { trace_id: string }) => t.trace_id)).not.toContain(tid);
    const detail = await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key));
    expect(detail.status).toBe(200);
    expect(detail.body.data.spans).toHaveLength(2);
  });

  it('concurrent first batches of one new trace with starts in different weeks store it once (rounds)', async () => {
    for (let round = 0; round < 8; round++) {
      const tid = traceId();
      const starts = ['2026-11-08T23:59:00Z', '2026-11-09T00:01:00Z', '2026-11-16T08:00:00Z', '2026-11-03T08:00:00Z'];
      await Promise.all(starts.map((s) => ingest([{ trace_id: tid, spans: [modelSpan(at(s))] }])));
      const stored = await traceRows(tid);
      expect(stored, `round ${round}`).toHaveLength(1);
      expect(stored[0]!.span_count).toBe(4);
      expect(new Date(stored[0]!.start_time as Date).toISOString()).toBe('2026-11-03T08:00:00.000Z');
      expect(new Date((await idRow(tid))!.partition_start as Date).getTime()).toBe(new Date(stored[0]!.partition_start as Date).getTime());
    }
  });

  it('a time-bounded trace list reads only the partitions from its start on; a trace’s detail reads one partition', async () => {
    await ingest([{ trace_id: traceId(), spans: [modelSpan(at('2026-10-28T08:00:00Z'))] }]);
    const queries: Array<{ sql: string; bindings: unknown[] }> = [];
    const listener = (q: { sql: string; bindings?: unknown[] }) => {
      // Positional ($1…, in order) back to knex's placeholders.
      if (/from "telemetry_traces"/i.test(q.sql)) queries.push({ sql: q.sql.replace(/\$\d+/g, '?'), bindings: q.bindings ?? [] });
    };
    db().on('query', listener);
    try {
      const res = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ start_time: '2026-11-16T00:00:00Z', end_time: '2026-11-20T00:00:00Z' });
      expect(res.status).toBe(200);
    } finally {
      db().off('query', listener);
    }
    expect(queries).toHaveLength(1);
    const plan = (await rows(`EXPLAIN (COSTS OFF) ${queries[0]!.sql}`, queries[0]!.bindings)).map((r) => r['QUERY PLAN'] as string).join('\n');
    expect(plan).toContain('telemetry_traces_p20261116');
    for (const week of ['telemetry_traces_p20261026', 'telemetry_traces_p20261102', 'telemetry_traces_p20261109']) expect(plan, plan).not.toContain(week);

    const tid = traceId();
    await ingest([{ trace_id: tid, spans: [modelSpan(at('2026-11-10T08:00:00Z'))] }]);
    const detailPlan = (
      await rows(
        `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
         SELECT t.* FROM telemetry_trace_ids i
          CROSS JOIN LATERAL (SELECT trace_id, spans FROM telemetry_traces
                               WHERE project_id = i.project_id AND trace_id = i.trace_id AND partition_start = i.partition_start OFFSET 0) t
          WHERE i.project_id = ? AND i.trace_id = ?`,
        [p.projectId, tid],
      )
    ).map((r) => r['QUERY PLAN'] as string);
    const scans = detailPlan.filter((l) => /on telemetry_traces_/.test(l));
    expect(scans.filter((l) => !l.includes('never executed')), detailPlan.join('\n')).toEqual([expect.stringContaining('telemetry_traces_p20261109')]);
  });

  it('retention drops whole weeks of traces with their span rows, ids and session totals; keeps the newer traces exactly', async () => {
    // Clock 2026-11-22T09:00Z, retention 30 days: cutoff 2026-10-23T00:00Z; weeks ending by then go by DROP.
    const q = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Retention by week');
    const gone = traceId();
    const kept = traceId();
    const boundary = traceId();
    await ingest([{ trace_id: gone, spans: [modelSpan(at('2026-10-14T12:00:00Z'), { 'session.id': 's-1' })] }], q.key);
    await ingest([{ trace_id: boundary, spans: [modelSpan(at('2026-10-22T12:00:00Z'), { 'session.id': 's-1' })] }], q.key);
    await ingest([{ trace_id: kept, spans: [modelSpan(at('2026-11-10T12:00:00Z'), { 'session.id': 's-1' })] }], q.key);
    await ctx.services.telemetry.groupChanges.applyAll();
    expect(Number((await rows(`SELECT trace_count FROM telemetry_sessions WHERE project_id = ? AND session_id = 's-1'`, [q.projectId]))[0]!.trace_count)).toBe(3);
    expect(await partitionNames()).toContain('telemetry_traces_p20261012');

    expect(await ctx.services.telemetry.retention.run()).toBe(false);

    const names = await partitionNames();
    expect(names).not.toContain('telemetry_traces_p20261012');
    expect(names).toContain('telemetry_traces_p20261019');
    const ids = (await rows(`SELECT trace_id FROM telemetry_trace_ids WHERE project_id = ?`, [q.projectId])).map((r) => r.trace_id);
    const traces = (await rows(`SELECT trace_id FROM telemetry_traces WHERE project_id = ?`, [q.projectId])).map((r) => r.trace_id);
    expect(traces).toEqual([kept]);
    expect(ids).toEqual([kept]);
    // No trace without its span rows: the span rows of the dropped and deleted traces are gone too.
    const calls = (await rows(`SELECT trace_id FROM telemetry_model_calls WHERE project_id = ?`, [q.projectId])).map((r) => r.trace_id);
    expect(calls).toEqual([kept]);
    await ctx.services.telemetry.groupChanges.applyAll();
    const session = (await rows(`SELECT trace_count, first_start FROM telemetry_sessions WHERE project_id = ? AND session_id = 's-1'`, [q.projectId]))[0]!;
    expect(Number(session.trace_count)).toBe(1);
    expect(new Date(session.first_start as Date).toISOString()).toBe('2026-11-10T12:00:00.000Z');
    // The dropped trace's id is free again: a late span of it starts a new trace.
    expect((await ctx.platform.get(`/v1/traces/${gone}`).set(bearer(q.key))).status).toBe(404);
  });

  it('migration 0390 converts a table with traces in place while writes go on: none lost, one row and one id per trace', async () => {
    const before = new Map<string, number>();
    for (let i = 0; i < 6; i++) {
      const tid = traceId();
      await ingest([{ trace_id: tid, spans: [modelSpan(at('2026-11-18T08:00:00Z') + i * 60_000), modelSpan(at('2026-11-18T08:00:01Z') + i * 60_000)] }]);
      before.set(tid, 2);
    }
    // A trace sent with a future time (after the migration's boundary, Monday 2026-11-23).
    const future = traceId();
    await ingest([{ trace_id: future, spans: [modelSpan(at('2026-12-01T08:00:00Z'))] }]);
    before.set(future, 1);
    const all = async () =>
      new Map((await rows(`SELECT trace_id, span_count FROM telemetry_traces WHERE project_id = ?`, [p.projectId])).map((r) => [r.trace_id as string, Number(r.span_count)]));
    const existing = await all();
    await unpartition(db());
    expect((await rows(`SELECT relkind FROM pg_class WHERE relname = 'telemetry_traces'`))[0]!.relkind).toBe('r');

    // The previous version's writes meanwhile: inserts (no partition_start) and an update, from a
    // concurrent writer for the whole migration, as its ingest does them.
    let writing = true;
    const written: string[] = [];
    const writer = (async () => {
      let n = 0;
      while (writing) {
        const tid = traceId();
        await db().raw(
          `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
             tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at)
           VALUES (?, ?, ?, ?, 1, 1, 'old', '{}', NULL, '{}', 0, 0, 0, false, '[]', now(), now())`,
          [p.projectId, tid, new Date(at('2026-11-20T00:00:00Z') + n).toISOString(), new Date(at('2026-11-20T00:00:00Z') + n + 1).toISOString()],
        );
        written.push(tid);
        n++;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const updated = [...before.keys()][0]!;
    await partitionTraces(db(), ctx.clock.now(), {
      backfillChunk: 3,
      afterTrigger: async () => {
        await db().raw(`UPDATE telemetry_traces SET start_time = start_time - interval '1 day' WHERE project_id = ? AND trace_id = ?`, [p.projectId, updated]);
      },
      // A previous-version process must not write after the swap (migration 0390): the writer stops here.
      beforeSwap: async () => {
        writing = false;
        await writer;
        expect(written.length).toBeGreaterThan(0);
      },
    });

    const parts = await listPartitions(db(), 'telemetry_traces');
    const legacy = parts.find((x) => x.name === 'telemetry_traces_legacy')!;
    expect(legacy.from).toBeNull();
    expect(legacy.to!.toISOString()).toBe('2026-11-23T00:00:00.000Z');
    const after = await all();
    expect(after.size).toBe(existing.size + written.length);
    for (const [tid, count] of existing) expect(after.get(tid), tid).toBe(count);
    for (const tid of written) expect(after.get(tid)).toBe(1);
    // One id per trace, with the trace's partition key; the future trace's key is its start.
    const mismatched = await rows(
      `SELECT t.trace_id FROM telemetry_traces t LEFT JOIN telemetry_trace_ids i ON i.project_id = t.project_id AND i.trace_id = t.trace_id
        WHERE t.project_id = ? AND (i.trace_id IS NULL OR i.partition_start <> t.partition_start)`,
      [p.projectId],
    );
    expect(mismatched).toEqual([]);
    expect(Number((await rows(`SELECT count(*) AS n FROM telemetry_trace_ids WHERE project_id = ?`, [p.projectId]))[0]!.n)).toBe(after.size);
    expect((await traceRows(future))[0]).toMatchObject({ part: expect.stringMatching(/^telemetry_traces_(p20261130|default)$/) });
    // Ingest goes on: a legacy trace extended with an earlier span stays in the legacy partition; a new trace goes to its week.
    await ingest([{ trace_id: updated, spans: [modelSpan(at('2026-11-01T08:00:00Z'))] }]);
    expect(await traceRows(updated)).toEqual([expect.objectContaining({ part: 'telemetry_traces_legacy', span_count: 3 })]);
    const fresh = traceId();
    await ingest([{ trace_id: fresh, spans: [modelSpan(at('2026-11-24T08:00:00Z'))] }]);
    expect(await traceRows(fresh)).toEqual([expect.objectContaining({ part: 'telemetry_traces_p20261123' })]);
    const list = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ start_time: '2026-11-01T00:00:00Z', end_time: '2026-11-19T00:00:00Z', limit: 100 });
    expect(list.body.data.map((t: { trace_id: string }) => t.trace_id)).toContain(updated);
  });
});
