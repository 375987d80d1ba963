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
 *
 * The data set (a large project of N spans and a small one of N/10 in the same tables: the growth
 * ratios of issue 32) is kept when `BENCH_EXPLORER_DATABASE=name` is set, and found there again
 * on the next run: `--generate` makes it and stops, so that it can be measured at a quiet moment.
 */
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { KnexTraceRepository } from '../../src/telemetry/traces.repository.js';
import { writeBigTrace } from './big-trace.js';
import { benchWaterfall, WATERFALL_TARGET_MS } from './waterfall.js';
import { TraceService, type TraceQuery } from '../../src/telemetry/traces.service.js';
import { MetricsService } from '../../src/telemetry/metrics.service.js';
import { KnexRollupRepository } from '../../src/telemetry/rollups.repository.js';
import { KnexProjectRepository } from '../../src/telemetry/projects.repository.js';
import { presentSession, presentSpan, presentSummary, presentUser } from '../../src/telemetry/telemetry.handlers.js';
import { loadavg } from 'node:os';
import { createDatabase, createNamedDatabase, databaseExists, databaseUrl, startServer, type BenchProject } from './common.js';
import { bytesPerSpan, generateSpans } from './spans.js';
import { emit, median, report, round, shortRun, summary, target, waitForQuiet } from './summary.js';

const SPANS = Number(process.env.BENCH_EXPLORER_SPANS ?? (shortRun ? 100_000 : 1_000_000));
const RUNS = shortRun ? 6 : 10;
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

/** A generated data set: kept in its database so that a quiet moment can measure it again. */
interface ExplorerDataSet {
  orgId: string;
  /** The data set's "now": the newest traces start just before it. */
  nowMs: number;
  large: { projectId: string; spans: number; traces: number; modelCalls: number; seconds: number };
  /** A tenth of the large project's spans, in the same tables: the growth ratios' baseline (issue 32). */
  small: { projectId: string; spans: number; traces: number; modelCalls: number; seconds: number };
  bigTrace: string;
}

/**
 * Finds the data set in `BENCH_EXPLORER_DATABASE` (a database this bench made and kept), or makes
 * one: a new database, or that name when given, with a large project of SPANS spans and a small
 * one of SPANS/10 over the same 30 days, plus the 5,000-span trace.
 */
async function dataSet(): Promise<{ url: string; name: string; set: ExplorerDataSet; drop?: () => Promise<void>; migrated?: { migrations: number; seconds: number } }> {
  const reuse = process.env.BENCH_EXPLORER_DATABASE;
  if (reuse) {
    const url = databaseUrl(reuse);
    if (await databaseExists(reuse)) {
      const { db, close } = await openDatabase({ databaseUrl: url });
      try {
        const { rows } = await db.raw<{ rows: Array<{ set: ExplorerDataSet }> }>('SELECT set FROM bench_explorer_set').catch(() => ({ rows: [] as Array<{ set: ExplorerDataSet }> }));
        if (rows[0] && rows[0].set.large.spans >= SPANS) {
          report(`reusing ${reuse}: ${rows[0].set.large.spans.toLocaleString('en-US')} + ${rows[0].set.small.spans.toLocaleString('en-US')} spans`);
          // Migrations added since the data set was made run on it here, as on an upgraded install.
          const t0 = performance.now();
          const applied = await migrateLatest(db);
          if (applied > 0) {
            report(`  ${applied} new migration(s) on the kept data set: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
            await db.raw('VACUUM ANALYZE telemetry_sessions, telemetry_users');
          }
          return { url, name: reuse, set: rows[0].set, migrated: applied > 0 ? { migrations: applied, seconds: round((performance.now() - t0) / 1000) } : undefined };
        }
      } finally {
        await close();
      }
    }
  }
  const database = reuse ? await createNamedDatabase(reuse) : await createDatabase('kassa_explorer');
  const server = await startServer(database.url, { BENCH_API_WORKERS: '0', BENCH_ENVIRONMENTS: 'production,staging' });
  const [largeProject, smallProject] = server.projects as [BenchProject, BenchProject];
  await server.stop();
  const { db, close } = await openDatabase({ databaseUrl: database.url });
  try {
    const nowMs = Date.now();
    const generate = async (projectId: string, spans: number, seed: number) => {
      report(`generating ${spans.toLocaleString('en-US')} spans over 30 days …`);
      let last = 0;
      const set = await generateSpans(db, {
        orgId: server.orgId,
        projectId,
        spans,
        fromMs: nowMs - 30 * DAY,
        toMs: nowMs,
        seed,
        progress: (n) => {
          if (n - last >= 1_000_000) report(`  ${(last = n).toLocaleString('en-US')} spans (${new Date().toISOString().slice(11, 19)})`);
        },
      });
      report(`generated ${set.spans.toLocaleString('en-US')} spans, ${set.traces.toLocaleString('en-US')} traces in ${Math.round(set.seconds)} s`);
      return { projectId, spans: set.spans, traces: set.traces, modelCalls: set.modelCalls, seconds: Math.round(set.seconds) };
    };
    const small = await generate(smallProject.projectId, Math.round(SPANS / 10), 2);
    const large = await generate(largeProject.projectId, SPANS, 1);
    const bigTrace = await writeBigTrace(db, large.projectId, 5000, nowMs - 2 * 3_600_000);
    await db.raw('VACUUM ANALYZE telemetry_traces, telemetry_model_calls, telemetry_rollups, telemetry_sessions, telemetry_users');
    const set: ExplorerDataSet = { orgId: server.orgId, nowMs, large, small, bigTrace };
    await db.raw('CREATE TABLE bench_explorer_set (set jsonb NOT NULL)');
    await db.raw('INSERT INTO bench_explorer_set (set) VALUES (?::jsonb)', [JSON.stringify(set)]);
    return { url: database.url, name: database.name, set, drop: reuse ? undefined : database.drop };
  } finally {
    await close();
  }
}

async function main(): Promise<void> {
  const data = await dataSet();
  // `--generate`: make (or find) the data set and stop; measure later, at a quiet moment.
  if (process.argv.includes('--generate')) return report(`data set in database ${data.name}`);
  const { set } = data;
  const { db, close } = await openDatabase({ databaseUrl: data.url });
  try {
    await waitForQuiet('explorer');
    const now = set.nowMs;
    const bigTrace = set.bigTrace;
    const size = await bytesPerSpan(db, set.large.spans + set.small.spans + 5000);
    const project = { projectId: set.large.projectId };
    const server = { orgId: set.orgId };
    const traces = new TraceService(new KnexTraceRepository(db));
    const metrics = new MetricsService(new KnexRollupRepository(db), new KnexProjectRepository(db));
    const day = new Date(now - DAY).toISOString();
    const large = set.large.projectId;
    const small = set.small.projectId;
    // Per project: a trace of the last 24 h, its session and user (the filters' values).
    const samples = new Map<string, { traceId: string; session: string; user: string }>();
    for (const projectId of [large, small]) {
      const sample = (await traces.search(projectId, { start_time: day, limit: 1 })).traces[0]!;
      samples.set(projectId, { traceId: sample.traceId, session: sample.sessionId!, user: sample.userId! });
    }
    const listCases: Array<[string, (projectId: string) => TraceQuery]> = [
      ['first page, last 24 h', () => ({ start_time: day })],
      ['first page, all time', () => ({})],
      ['status=error, 24 h', () => ({ start_time: day, status: 'error' })],
      ['model=claude-haiku-4-5, 24 h', () => ({ start_time: day, model: 'claude-haiku-4-5' })],
      ['min_latency_ms=10000, 24 h', () => ({ start_time: day, min_latency_ms: 10_000 })],
      ['min_cost=0.02, 24 h', () => ({ start_time: day, min_cost: 0.02 })],
      ['attribute user.tier=pro, 24 h', () => ({ start_time: day, attribute_key: 'user.tier', attribute_value: 'pro' })],
      ['attribute gen_ai.tool.name=run_sql, 24 h', () => ({ start_time: day, attribute_key: 'gen_ai.tool.name', attribute_value: 'run_sql' })],
      ['trace_id', (p) => ({ trace_id: samples.get(p)!.traceId })],
      ['session_id, in order', (p) => ({ session_id: samples.get(p)!.session, sort: 'start_time' })],
      ['user_id, 24 h', (p) => ({ start_time: day, user_id: samples.get(p)!.user })],
      ['sort -duration_ms, 24 h', () => ({ start_time: day, sort: '-duration_ms' })],
      ['sort -cost, 24 h', () => ({ start_time: day, sort: '-cost' })],
      ['sort -cost, all time', () => ({ sort: '-cost' })],
    ];
    const list = (q: TraceQuery) => async (projectId: string) => JSON.stringify((await traces.search(projectId, q)).traces.map(presentSummary));
    const cases: Array<[string, (projectId: string) => Promise<unknown>]> = listCases.map(([label, q]) => [`traces ${label}`, (p: string) => list(q(p))(p)]);
    const cursors = new Map<string, string>();
    for (const projectId of [large, small]) {
      const next = (await traces.search(projectId, { start_time: day, sort: '-cost' })).nextCursor;
      if (next) cursors.set(projectId, next);
    }
    if (cursors.size === 2) cases.push(['traces sort -cost, page 2 via cursor', (p) => list({ start_time: day, sort: '-cost', cursor: cursors.get(p)! })(p)]);
    cases.push(['sessions, 24 h', async (p) => JSON.stringify((await traces.sessions(p, { start_time: day })).sessions.map(presentSession))]);
    cases.push(['users, 24 h', async (p) => JSON.stringify((await traces.users(p, { start_time: day })).users.map(presentUser))]);
    const weekAgo = { start_time: new Date(now - 8 * DAY).toISOString(), end_time: new Date(now - 7 * DAY).toISOString() };
    cases.push(['sessions, a day a week ago', async (p) => JSON.stringify((await traces.sessions(p, weekAgo)).sessions.map(presentSession))]);
    cases.push(['users, a day a week ago', async (p) => JSON.stringify((await traces.users(p, weekAgo)).users.map(presentUser))]);
    cases.push(["a user's sessions, all time", async (p) => JSON.stringify((await traces.sessions(p, { user_id: samples.get(p)!.user })).sessions.map(presentSession))]);
    cases.push(['a trace by id (read + JSON)', async (p) => JSON.stringify((await traces.get(p, samples.get(p)!.traceId)).spans.map(presentSpan))]);

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
    const dayStart = new Date(now - 30 * DAY);
    dayStart.setUTCHours(0, 0, 0, 0);
    const month = { start_time: dayStart.toISOString(), end_time: new Date(dayStart.getTime() + 30 * DAY).toISOString(), interval: '1d' };
    const hourStart = Math.floor((now - DAY) / 3_600_000) * 3_600_000;
    const oneDay = { start_time: new Date(hourStart).toISOString(), end_time: new Date(hourStart + DAY).toISOString(), interval: '1h' };
    const dashboardOf = (range: { start_time: string; end_time: string; interval: string }) => async (p: string) => {
      await Promise.all(dashboard.map((d) => metrics.query(set.orgId, { ...range, ...d, project_id: p })));
    };
    cases.push(['metrics dashboard, 30 days by day (8 queries)', dashboardOf(month)]);
    cases.push(['metrics dashboard, 1 day by hour (8 queries)', dashboardOf(oneDay)]);
    cases.push(['metrics, 30 days unaligned hourly (1 query)', async (p) => {
      await metrics.query(set.orgId, { metric: 'llm.requests.total', group_by: 'model', project_id: p, start_time: new Date(now - 30 * DAY).toISOString(), end_time: new Date(now).toISOString(), interval: '1h' });
    }]);

    // Each round measures every case on both projects, the large one first in even rounds and the
    // small one first in odd rounds: the first of a pair follows the previous case's work (the
    // unaligned metrics query, 60-80 ms, left the first case of the next round ×2 slower).
    const rounds: Record<string, { large: number[]; small: number[] }> = {};
    for (const [label] of cases) rounds[label] = { large: [], small: [] };
    for (const [, fn] of cases) { await fn(large); await fn(small); } // warm: plan cache, buffers
    for (let r = 0; r < RUNS; r++) {
      for (const [label, fn] of cases) {
        const pair = [['large', large], ['small', small]] as const;
        for (const [which, p] of r % 2 === 0 ? pair : [pair[1], pair[0]]) {
          const t0 = performance.now();
          await fn(p);
          rounds[label]![which].push(performance.now() - t0);
        }
      }
    }
    const bigRounds = await time(async () => JSON.stringify((await traces.get(large, bigTrace)).spans.map(presentSpan)));

    report('rendering the 5,000-span waterfall in headless Chromium …');
    const waterfall = await benchWaterfall(5000);

    const m = (label: string, which: 'large' | 'small') => median(rounds[label]![which]);
    const ratio = (label: string) => m(label, 'large') / m(label, 'small');
    const firstPages = listCases.map(([label]) => `traces ${label}`);
    const listWorst = Math.max(...firstPages.map((label) => m(label, 'large')));
    const ms = (x: number) => `${x.toFixed(1)} ms`;
    const load = loadavg().map((x) => Math.round(x * 100) / 100);
    report(
      [
        `\nKassa telemetry explorer (PostgreSQL; a project of ${set.large.spans.toLocaleString('en-US')} spans / ${set.large.traces.toLocaleString('en-US')} traces and one of ${set.small.spans.toLocaleString('en-US')} / ${set.small.traces.toLocaleString('en-US')} in the same tables, 30 days; server time, median of ${RUNS}; load average ${load.join(' / ')})`,
        `  ${'query'.padEnd(52)} ${'large'.padStart(10)} ${'small'.padStart(10)}  ratio`,
        ...cases.map(([label]) => `  ${label.padEnd(52)} ${ms(m(label, 'large')).padStart(10)} ${ms(m(label, 'small')).padStart(10)}  ${ratio(label).toFixed(2)}×`),
        `  trace of 5,000 spans (read + JSON)                   ${ms(median(bigRounds))}`,
        `  waterfall of 5,000 spans, Chromium render            ${ms(waterfall.renderMs)} (after the answer; navigation to waterfall ${ms(waterfall.navigationMs)})`,
        `  storage per span (traces + model calls + rollups, with indexes and TOAST): ${Math.round(size.perSpan)} bytes`,
      ].join('\n'),
    );
    emit(
      summary('explorer', {
        settings: { spans: set.large.spans, traces: set.large.traces, smallSpans: set.small.spans, smallTraces: set.small.traces, days: 30, runs: RUNS, loadAverage: load },
        figures: {
          largeMs: Object.fromEntries(cases.map(([label]) => [label, round(m(label, 'large'))])),
          smallMs: Object.fromEntries(cases.map(([label]) => [label, round(m(label, 'small'))])),
          traceOf5000SpansMs: round(median(bigRounds)),
          waterfallOf5000SpansRenderMs: waterfall.renderMs,
          waterfallOf5000SpansNavigationMs: waterfall.navigationMs,
          bytesPerSpan: Math.round(size.perSpan),
          bytes: size.tables,
          generateSeconds: { large: set.large.seconds, small: set.small.seconds },
          ...(data.migrated ? { migratedOnKeptDataSet: data.migrated } : {}),
        },
        floors: {},
        targets: [
          target(`trace list, slowest first page or filter (${set.large.spans} spans)`, listWorst, 'ms', LIST_TARGET_MS, true),
          target('trace of 5,000 spans', median(bigRounds), 'ms', TRACE_TARGET_MS, true, { rounds: bigRounds }),
          target('waterfall of 5,000 spans, Chromium render', waterfall.renderMs, 'ms', WATERFALL_TARGET_MS, true, { rounds: waterfall.renderRuns }),
          target('metrics dashboard, 30 days', m('metrics dashboard, 30 days by day (8 queries)', 'large'), 'ms', METRICS_TARGET_MS, true, { rounds: rounds['metrics dashboard, 30 days by day (8 queries)']!.large }),
          ...[...firstPages, 'traces sort -cost, page 2 via cursor', 'a trace by id (read + JSON)'].filter((label) => rounds[label]).map((label) =>
            target(`growth ${set.small.spans} → ${set.large.spans} spans: ${label}`, ratio(label), '×', 2, true),
          ),
        ],
      }),
    );
  } finally {
    await close();
    if (data.drop && process.env.BENCH_KEEP !== '1') await data.drop();
    else process.stderr.write(`kept database ${data.name}\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
