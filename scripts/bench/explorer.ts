/**
 * The telemetry explorer's queries at scale (issue 31): with N spans in one project (default
 * 1,000,000; `BENCH_EXPLORER_SPANS=10000000` for the 10 million; `--short` 100,000), the
 * server time of the trace list's first page and of each filter and sort, sessions and users, a
 * 5,000-span trace and its waterfall's render in headless Chromium (scripts/bench/waterfall.ts),
 * and the metrics dashboard over 30 days; and the storage bytes per span.
 *
 * Server time is the service call plus the JSON the handler writes, in process against
 * PostgreSQL (no HTTP, no network): the figure the targets are about. The data set is
 * written by scripts/bench/spans.ts (the ingest code's own normalize, summarize and COPY paths).
 *
 *   npm run bench -- --only explorer          (writes docs/benchmarks.md's section)
 *   npx tsx scripts/bench/explorer.ts         (prints only)
 */
import { openDatabase } from '../../src/db/knex.js';
import { KnexTraceRepository } from '../../src/telemetry/traces.repository.js';
import { writeBigTrace } from './big-trace.js';
import { benchWaterfall, WATERFALL_TARGET_MS } from './waterfall.js';
import { TraceService, type TraceQuery } from '../../src/telemetry/traces.service.js';
import { MetricsService } from '../../src/telemetry/metrics.service.js';
import { KnexRollupRepository } from '../../src/telemetry/rollups.repository.js';
import { KnexProjectRepository } from '../../src/telemetry/projects.repository.js';
import { presentSession, presentSpan, presentSummary, presentUser } from '../../src/telemetry/telemetry.handlers.js';
import { createDatabase, startServer } from './common.js';
import { bytesPerSpan, generateSpans } from './spans.js';
import { emit, median, report, round, shortRun, summary, target } from './summary.js';

const SPANS = Number(process.env.BENCH_EXPLORER_SPANS ?? (shortRun ? 100_000 : 1_000_000));
const RUNS = shortRun ? 5 : 9;
const DAY = 86_400_000;
const LIST_TARGET_MS = 100;
const TRACE_TARGET_MS = 200;
const METRICS_TARGET_MS = 150;

async function time(fn: () => Promise<unknown>): Promise<number[]> {
  await fn(); // warm: plan cache, buffers
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out;
}

async function main(): Promise<void> {
  const database = await createDatabase('kassa_explorer');
  const server = await startServer(database.url, { BENCH_API_WORKERS: '0' });
  const project = server.projects[0]!;
  await server.stop();
  const { db, close } = await openDatabase({ databaseUrl: database.url });
  try {
    const now = Date.now();
    report(`generating ${SPANS.toLocaleString('en-US')} spans over 30 days …`);
    const set = await generateSpans(db, { orgId: server.orgId, projectId: project.projectId, spans: SPANS, fromMs: now - 30 * DAY, toMs: now });
    const bigTrace = await writeBigTrace(db, project.projectId, 5000, now - 2 * 3_600_000);
    await db.raw('VACUUM ANALYZE telemetry_traces, telemetry_model_calls, telemetry_rollups');
    const size = await bytesPerSpan(db, set.spans);
    report(`generated ${set.spans.toLocaleString('en-US')} spans, ${set.traces.toLocaleString('en-US')} traces in ${Math.round(set.seconds)} s; ${Math.round(size.perSpan)} bytes per span`);

    const traces = new TraceService(new KnexTraceRepository(db));
    const projectId = project.projectId;
    const day = new Date(now - DAY).toISOString();
    const sample = (await traces.search(projectId, { start_time: day, limit: 1 })).traces[0]!;
    const session = sample.sessionId!;
    const user = sample.userId!;
    const list = (q: TraceQuery) => async () => JSON.stringify((await traces.search(projectId, q)).traces.map(presentSummary));
    const listCases: Array<[string, TraceQuery]> = [
      ['first page, last 24 h', { start_time: day }],
      ['first page, all time', {}],
      ['status=error, 24 h', { start_time: day, status: 'error' }],
      ['model=claude-haiku-4-5, 24 h', { start_time: day, model: 'claude-haiku-4-5' }],
      ['min_latency_ms=10000, 24 h', { start_time: day, min_latency_ms: 10_000 }],
      ['min_cost=0.02, 24 h', { start_time: day, min_cost: 0.02 }],
      ['attribute user.tier=pro, 24 h', { start_time: day, attribute_key: 'user.tier', attribute_value: 'pro' }],
      ['attribute gen_ai.tool.name=run_sql, 24 h', { start_time: day, attribute_key: 'gen_ai.tool.name', attribute_value: 'run_sql' }],
      ['trace_id', { trace_id: sample.traceId }],
      ['session_id, in order', { session_id: session, sort: 'start_time' }],
      ['user_id, 24 h', { start_time: day, user_id: user }],
      ['sort -duration_ms, 24 h', { start_time: day, sort: '-duration_ms' }],
      ['sort -cost, 24 h', { start_time: day, sort: '-cost' }],
      ['sort -cost, all time', { sort: '-cost' }],
    ];
    const results: Record<string, number> = {};
    const rounds: Record<string, number[]> = {};
    for (const [label, q] of listCases) {
      const t = await time(list(q));
      rounds[label] = t;
      results[label] = median(t);
    }
    const cursorPage = (await traces.search(projectId, { start_time: day, sort: '-cost' })).nextCursor!;
    rounds['sort -cost, page 2 via cursor'] = await time(list({ start_time: day, sort: '-cost', cursor: cursorPage }));
    results['sort -cost, page 2 via cursor'] = median(rounds['sort -cost, page 2 via cursor']);
    for (const [label, fn] of [
      ['sessions, 24 h', async () => JSON.stringify((await traces.sessions(projectId, { start_time: day })).sessions.map(presentSession))],
      ['users, 24 h', async () => JSON.stringify((await traces.users(projectId, { start_time: day })).users.map(presentUser))],
      ["a user's sessions, all time", async () => JSON.stringify((await traces.sessions(projectId, { user_id: user })).sessions.map(presentSession))],
    ] as const) {
      rounds[label] = await time(fn);
      results[label] = median(rounds[label]);
    }
    const traceRounds = await time(async () => JSON.stringify((await traces.get(projectId, bigTrace)).spans.map(presentSpan)));

    const metrics = new MetricsService(new KnexRollupRepository(db), new KnexProjectRepository(db));
    const start = new Date(now - 30 * DAY);
    start.setUTCHours(0, 0, 0, 0);
    const range = { start_time: start.toISOString(), end_time: new Date(start.getTime() + 30 * DAY).toISOString(), interval: '1d', project_id: projectId };
    // The dashboard: requests, errors, tokens in/out and cost by model, latency p50/p95/p99.
    const dashboard = [
      { metric: 'llm.requests.total', group_by: 'model' as const },
      { metric: 'llm.requests.errors', group_by: 'model' as const },
      { metric: 'llm.tokens.input', group_by: 'model' as const },
      { metric: 'llm.tokens.output', group_by: 'model' as const },
      { metric: 'llm.cost.total', group_by: 'model' as const },
      { metric: 'llm.latency_ms', aggregation: 'p50' },
      { metric: 'llm.latency_ms', aggregation: 'p95' },
      { metric: 'llm.latency_ms', aggregation: 'p99' },
    ];
    const metricsRounds = await time(async () => {
      await Promise.all(dashboard.map((d) => metrics.query(server.orgId, { ...range, ...d })));
    });
    const unalignedRounds = await time(async () => {
      await Promise.all(dashboard.slice(0, 1).map((d) => metrics.query(server.orgId, { ...range, ...d, start_time: new Date(now - 30 * DAY).toISOString(), end_time: new Date(now).toISOString(), interval: '1h' })));
    });

    report('rendering the 5,000-span waterfall in headless Chromium …');
    const waterfall = await benchWaterfall(5000);

    const listWorst = Math.max(...listCases.map(([label]) => results[label]!));
    const ms = (x: number) => `${x.toFixed(1)} ms`;
    report(
      [
        `\nKassa telemetry explorer (PostgreSQL, ${set.spans.toLocaleString('en-US')} spans / ${set.traces.toLocaleString('en-US')} traces in one project, 30 days; server time, median of ${RUNS})`,
        ...Object.entries(results).map(([label, v]) => `  traces ${label.padEnd(44)} ${ms(v)}`),
        `  trace of 5,000 spans (read + JSON)                 ${ms(median(traceRounds))}`,
        `  waterfall of 5,000 spans, Chromium render          ${ms(waterfall.renderMs)} (after the answer; navigation to waterfall ${ms(waterfall.navigationMs)})`,
        `  metrics dashboard, 30 days by day (8 queries)      ${ms(median(metricsRounds))}`,
        `  metrics, 30 days unaligned hourly (1 query)        ${ms(median(unalignedRounds))}`,
        `  storage per span (traces + model calls + rollups, with indexes and TOAST): ${Math.round(size.perSpan)} bytes`,
      ].join('\n'),
    );
    emit(
      summary('explorer', {
        settings: { spans: set.spans, traces: set.traces, days: 30, runs: RUNS },
        figures: {
          listMs: Object.fromEntries(Object.entries(results).map(([k, v]) => [k, round(v)])),
          traceOf5000SpansMs: round(median(traceRounds)),
          waterfallOf5000SpansRenderMs: waterfall.renderMs,
          waterfallOf5000SpansNavigationMs: waterfall.navigationMs,
          metricsDashboard30dMs: round(median(metricsRounds)),
          metricsUnaligned30dHourlyMs: round(median(unalignedRounds)),
          bytesPerSpan: Math.round(size.perSpan),
          bytes: size.tables,
          generateSeconds: Math.round(set.seconds),
        },
        floors: {},
        targets: [
          target(`trace list, slowest first page or filter (${set.spans} spans)`, listWorst, 'ms', LIST_TARGET_MS, true),
          target('trace of 5,000 spans', median(traceRounds), 'ms', TRACE_TARGET_MS, true, { rounds: traceRounds }),
          target('waterfall of 5,000 spans, Chromium render', waterfall.renderMs, 'ms', WATERFALL_TARGET_MS, true, { rounds: waterfall.renderRuns }),
          target('metrics dashboard, 30 days', median(metricsRounds), 'ms', METRICS_TARGET_MS, true, { rounds: metricsRounds }),
        ],
      }),
    );
  } finally {
    await close();
    if (process.env.BENCH_KEEP === '1') process.stderr.write(`kept database ${database.name} (${project.projectId})\n`);
    else await database.drop();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
