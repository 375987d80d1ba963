/** The retention job: data older than each project's data_retention_days goes, the rest stays. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { workerJobs } from '../../src/jobs.js';
import { bearer, createProjectWithKey, span, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let short: TelemetryKeyFixture;
let long: TelemetryKeyFixture;
const DAY = 86_400_000;
const NOW = Date.parse('2026-11-22T09:00:00.000Z');

beforeAll(async () => {
  ctx = await createTestContext();
  short = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Short');
  long = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Long');
  await ctx.platform.patch(`/v1/projects/${short.projectId}`).set(bearer(short.key)).send({ settings: { data_retention_days: 7 } });
});
afterAll(async () => {
  await ctx?.close();
});

const countOf = async (table: string, projectId: string) =>
  Number((await ctx.testDb.database.db(table).where({ project_id: projectId }).count({ n: '*' }).first())!.n);

async function seed(p: TelemetryKeyFixture, startMs: number): Promise<string> {
  const tid = traceId();
  const root = span({ start: startMs, durationMs: 100 });
  const res = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({
    traces: [{ trace_id: tid, spans: [root, span({ parent_span_id: root.span_id, start: startMs + 10, durationMs: 50, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 5 } })] }],
    metrics: [{ name: 'depth', value: 1, timestamp: new Date(startMs).toISOString() }],
  });
  expect(res.status).toBe(202);
  return tid;
}

describe('retention job', () => {
  it('is one of the worker jobs', () => {
    expect(workerJobs(ctx.deps).map((j) => j.name)).toContain('telemetry-retention');
  });

  it("deletes traces, spans, metric points and rollups before 00:00 UTC of (now − retention), per project", async () => {
    // Cutoff for 7 days: 2026-11-15T00:00Z. For 30 days: 2026-10-23T00:00Z.
    const expired = await seed(short, Date.parse('2026-11-14T23:59:59.000Z'));
    const kept = await seed(short, Date.parse('2026-11-15T00:00:00.000Z'));
    const keptLong = await seed(long, NOW - 20 * DAY);
    const expiredLong = await seed(long, NOW - 40 * DAY);
    expect(await countOf('telemetry_traces', short.projectId)).toBe(2);
    expect(await countOf('telemetry_model_calls', short.projectId)).toBe(2);

    expect(await ctx.services.telemetry.retention.run()).toBe(false);

    const status = async (p: TelemetryKeyFixture, id: string) => (await ctx.platform.get(`/v1/traces/${id}`).set(bearer(p.key))).status;
    expect(await status(short, expired)).toBe(404);
    expect(await status(short, kept)).toBe(200);
    expect(await status(long, keptLong)).toBe(200);
    expect(await status(long, expiredLong)).toBe(404);
    expect(await countOf('telemetry_traces', short.projectId)).toBe(1);
    expect(await countOf('telemetry_model_calls', short.projectId)).toBe(1);
    expect(await countOf('telemetry_metric_points', short.projectId)).toBe(1);
    const rollups = await ctx.testDb.database.db('telemetry_rollups').where({ project_id: short.projectId }).select('bucket_start');
    // The kept model call's ten-second, minute, five-minute, hour and day cells.
    expect(rollups.length).toBe(5);
    for (const r of rollups) expect(new Date(r.bucket_start).getTime()).toBeGreaterThanOrEqual(Date.parse('2026-11-15T00:00:00.000Z'));

    // Metrics no longer count the deleted data.
    const res = await ctx.platform.get('/v1/metrics').set(bearer(short.key)).query({ metric: 'llm.requests.total', interval: '1d', start_time: '2026-11-14T00:00:00Z', end_time: '2026-11-16T00:00:00Z', group_by: 'project' });
    const mine = res.body.data.series.find((s: { group: { project: string } }) => s.group.project === short.projectId);
    expect(mine.datapoints.map((d: { value: number }) => d.value)).toEqual([0, 1]);
  });

  it('applies a shortened retention from the next run', async () => {
    await ctx.platform.patch(`/v1/projects/${long.projectId}`).set(bearer(long.key)).send({ settings: { data_retention_days: 1 } });
    await ctx.services.telemetry.retention.run();
    expect(await countOf('telemetry_traces', long.projectId)).toBe(0);
    expect(await countOf('telemetry_model_calls', long.projectId)).toBe(0);
    expect(await countOf('telemetry_rollups', long.projectId)).toBe(0);
  });

  it('works through large backlogs in chunks, reporting more work while there is some', async () => {
    const p = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Backlog');
    // A project keeping ten years: no week is past every cutoff, so nothing goes by dropping a
    // partition (test/telemetry/trace-partitions.test.ts) and the backlog is deleted row by row.
    const keeper = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Keeper');
    await ctx.platform.patch(`/v1/projects/${keeper.projectId}`).set(bearer(keeper.key)).send({ settings: { data_retention_days: 3650 } });
    const old = NOW - 60 * DAY;
    for (let batch = 0; batch < 6; batch++) {
      const traces = Array.from({ length: 1000 }, (_, i) => ({ trace_id: traceId(), spans: [span({ start: old + batch * 1000 + i, durationMs: 1 })] }));
      expect((await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces })).status).toBe(202);
    }
    expect(await ctx.services.telemetry.retention.run()).toBe(true);
    expect(await countOf('telemetry_traces', p.projectId)).toBe(1000);
    expect(await ctx.services.telemetry.retention.run()).toBe(false);
    expect(await countOf('telemetry_traces', p.projectId)).toBe(0);
    // Each trace's id (its identity, migration 0390) went with it.
    expect(await countOf('telemetry_trace_ids', p.projectId)).toBe(0);
  });
});
