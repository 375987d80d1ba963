/**
 * Weekly time partitions of the span rows (telemetry_model_calls, migration 0290): ingest into a
 * week with no partition yet, the default partition for spans far out of range, retention by DROP
 * with the newer data kept exactly, re-sends across partitions, and partition pruning of the
 * explorer's sample queries. Both databases (PGlite is PostgreSQL too).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { down as unpartition, partitionModelCalls } from '../../src/db/migrations/0290_telemetry_span_partitions.js';
import { listPartitions } from '../../src/db/partitions.js';
import { bearer, createProjectWithKey, span, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;
const DAY = 86_400_000;
const at = (iso: string) => Date.parse(iso);

beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Partitions');
});
afterAll(async () => {
  await ctx?.close();
});

const db = () => ctx.testDb.database.db;
const rows = async (sql: string, bindings: unknown[] = []) => (await db().raw(sql, bindings as never)).rows as Array<Record<string, unknown>>;
const partitionNames = async () => (await listPartitions(db(), 'telemetry_model_calls')).map((x) => x.name);
const countIn = async (table: string) => Number((await rows(`SELECT count(*) AS n FROM ONLY ${table} WHERE project_id = ?`, [p.projectId]))[0]!.n);
const calls = async () =>
  (await rows(`SELECT trace_id, span_id, start_time FROM telemetry_model_calls WHERE project_id = ? ORDER BY start_time`, [p.projectId])).map(
    (r) => `${r.trace_id as string}/${r.span_id as string}@${new Date(r.start_time as Date).toISOString()}`,
  );

async function ingest(tid: string, spans: Array<ReturnType<typeof span>>): Promise<void> {
  const res = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces: [{ trace_id: tid, spans }] });
  expect(res.status).toBe(202);
}
const modelSpan = (startMs: number, spanId?: string) => span({ ...(spanId ? { span_id: spanId } : {}), start: startMs, durationMs: 50, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 5 } });

describe('span-row partitions', () => {
  it('the table is partitioned by week, with a default partition', async () => {
    expect((await rows(`SELECT relkind FROM pg_class WHERE relname = 'telemetry_model_calls'`))[0]!.relkind).toBe('p');
    expect(await partitionNames()).toContain('telemetry_model_calls_default');
  });

  it('a re-sent model call with a new start time replaces its row only, whatever other partitions hold at the same place', async () => {
    // Each week's first row sits at ctid (0,1) of its own partition: a delete by ctid alone
    // would remove the other week's row too.
    const a = traceId();
    const b = traceId();
    const reSent = modelSpan(at('2026-08-03T10:00:00Z'));
    await ingest(a, [reSent]);
    await ingest(b, [modelSpan(at('2026-08-10T10:00:00Z'))]);
    expect(await partitionNames()).toEqual(expect.arrayContaining(['telemetry_model_calls_p20260803', 'telemetry_model_calls_p20260810']));
    await ingest(a, [{ ...reSent, start_time: '2026-08-04T10:00:00.000Z', end_time: '2026-08-04T10:00:00.050Z' }]);
    expect(await calls()).toEqual([`${a}/${reSent.span_id}@2026-08-04T10:00:00.000Z`, expect.stringMatching(new RegExp(`^${b}/.*@2026-08-10T10:00:00.000Z$`))]);
  });

  it('ingests into a week with no partition yet (created on demand) and far out of range into the default partition', async () => {
    expect(await partitionNames()).not.toContain('telemetry_model_calls_p20261019');
    await ingest(traceId(), [modelSpan(at('2026-10-22T12:00:00Z'))]);
    expect(await partitionNames()).toContain('telemetry_model_calls_p20261019');
    expect(await countIn('telemetry_model_calls_p20261019')).toBe(1);
    // 60 days after the clock: past the on-demand window, kept in the default partition.
    const future = ctx.clock.now().getTime() + 60 * DAY;
    const tid = traceId();
    await ingest(tid, [modelSpan(future)]);
    expect(await countIn('telemetry_model_calls_default')).toBe(1);
    expect((await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key))).status).toBe(200);
  });

  it('the partition job creates weeks ahead and moves a week’s rows out of the default partition', async () => {
    const before = await calls();
    const later = new Date(ctx.clock.now().getTime() + 55 * DAY);
    const created = await ctx.services.telemetry.partitions.createAhead(later);
    expect(created).toContain('telemetry_model_calls_p20270118');
    expect(await countIn('telemetry_model_calls_default')).toBe(0);
    expect(await countIn('telemetry_model_calls_p20270118')).toBe(1);
    expect(await calls()).toEqual(before);
  });

  it('the explorer’s sample query reads only the partitions of its range (run-time pruning)', async () => {
    await ingest(traceId(), [modelSpan(at('2026-11-17T08:00:00Z'))]);
    const plan = (
      await rows(
        `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
         SELECT x.i, s.* FROM json_to_recordset(?::json) AS x(i int, f timestamptz, t timestamptz)
          CROSS JOIN LATERAL (SELECT project_id, model FROM telemetry_model_calls
                               WHERE project_id = ANY(?::text[]) AND start_time >= x.f AND start_time < x.t OFFSET 0) s`,
        [JSON.stringify([{ i: 0, f: '2026-11-17T00:00:00Z', t: '2026-11-18T00:00:00Z' }]), `{${p.projectId}}`],
      )
    ).map((r) => r['QUERY PLAN'] as string);
    const scans = plan.filter((l) => /on telemetry_model_calls_/.test(l));
    expect(scans.length).toBeGreaterThan(1);
    for (const line of scans) {
      if (line.includes('telemetry_model_calls_p20261116')) expect(line).not.toContain('never executed');
      else expect(line, plan.join('\n')).toContain('never executed');
    }
  });

  it('retention drops whole weeks past every cutoff, deletes the boundary week’s expired rows, keeps the newer rows exactly', async () => {
    // Clock 2026-11-22T09:00Z, retention 30 days: cutoff 2026-10-23T00:00Z. Week 2026-10-19 holds
    // the cutoff; everything before it goes by DROP.
    await ingest(traceId(), [modelSpan(at('2026-10-14T12:00:00Z'))]);
    await ingest(traceId(), [modelSpan(at('2026-10-23T00:00:00Z'))]);
    await ingest(traceId(), [modelSpan(at('2026-11-10T12:00:00Z'))]);
    const kept = (await calls()).filter((c) => c.split('@')[1]! >= '2026-10-23');
    expect(await partitionNames()).toEqual(expect.arrayContaining(['telemetry_model_calls_p20261012', 'telemetry_model_calls_p20260803']));

    expect(await ctx.services.telemetry.retention.run()).toBe(false);

    const names = await partitionNames();
    for (const gone of ['telemetry_model_calls_p20260803', 'telemetry_model_calls_p20260810', 'telemetry_model_calls_p20261012']) expect(names).not.toContain(gone);
    expect(names).toContain('telemetry_model_calls_p20261019');
    expect(await countIn('telemetry_model_calls_p20261019')).toBe(1); // 10-22T12:00 deleted, 10-23T00:00 kept
    expect(await calls()).toEqual(kept);
  });

  it('migration 0290 converts a table with data in place: the old table becomes the MINVALUE partition, rows ahead of it move, none is lost', async () => {
    await ingest(traceId(), [modelSpan(at('2026-12-20T08:00:00Z'))]);
    const before = await calls();
    await unpartition(db());
    expect((await rows(`SELECT relkind FROM pg_class WHERE relname = 'telemetry_model_calls'`))[0]!.relkind).toBe('r');
    // Clock 2026-11-22 (a Sunday): the old table keeps everything before Monday 2026-11-23.
    await partitionModelCalls(db(), ctx.clock.now());
    const parts = await listPartitions(db(), 'telemetry_model_calls');
    const legacy = parts.find((x) => x.name === 'telemetry_model_calls_legacy')!;
    expect(legacy.from).toBeNull();
    expect(legacy.to!.toISOString()).toBe('2026-11-23T00:00:00.000Z');
    expect(parts.map((x) => x.name)).toEqual(expect.arrayContaining(['telemetry_model_calls_p20261123', 'telemetry_model_calls_p20261130', 'telemetry_model_calls_default']));
    expect(await calls()).toEqual(before);
    expect(await countIn('telemetry_model_calls_legacy')).toBe(before.filter((c) => c.split('@')[1]! < '2026-11-23').length);
    // Weeks from 2026-12-07 on have no partition of their own yet (the migration creates this week's and the next two).
    expect(await countIn('telemetry_model_calls_default')).toBe(before.filter((c) => c.split('@')[1]! >= '2026-12-07').length);
    expect(await countIn('telemetry_model_calls_default')).toBeGreaterThanOrEqual(1);
    // Ingest goes on into the new partitions; the old table ages out through retention.
    await ingest(traceId(), [modelSpan(at('2026-11-24T08:00:00Z'))]);
    expect(await countIn('telemetry_model_calls_p20261123')).toBe(1);
  });
});
