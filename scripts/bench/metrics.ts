/**
 * `npm run bench:metrics`: metric and trace-search latency on a large data set, against PostgreSQL.
 *
 * Creates its own database on BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432),
 * starts the telemetry API as a child process, and seeds BENCH_SPANS spans (default 5,000,000, about
 * three minutes on this 2-core box when nothing else runs; lower it on a busy machine) spread over
 * the last 7 days, through POST /v1/ingest, so the rollups are built by the real ingest path.
 * Then it measures:
 * - GET /v1/metrics: 7-day `llm.latency_ms` p99 grouped by model at 1h (the issue's query), with an
 *   hour-aligned range and with an unaligned one (start at hh:mm:ss.mmm), and the same at 1d;
 * - GET /v1/traces with filters (model + latency, status, cost, time window, a deep cursor page).
 * Prints p50/p95 per query and the span count used, then drops the database.
 */
import pg from 'pg';
import { createDatabase, makeBatch, percentile, prng, startServer, table } from './common.js';
import { emit, report, round, shortRun, summary, target } from './summary.js';

const SPANS = Number(process.env.BENCH_SPANS ?? (shortRun ? 200_000 : 5_000_000));
const BATCH_SPANS = 1000;
const RUNS = Number(process.env.BENCH_RUNS ?? (shortRun ? 15 : 40));
const METRICS_TARGET_MS = 150;
const SEARCH_TARGET_MS = 50;
const DAY = 86_400_000;

async function main(): Promise<void> {
  const db = await createDatabase('kassa_bench_metrics');
  const server = await startServer(db.url, { BENCH_API_WORKERS: '2' });
  try {
    const { key } = server.projects[0]!;
    const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
    const now = Date.now();
    const from = now - 7 * DAY;

    // Seed in time order (as traffic arrives), each batch covering its slice of the 7 days.
    const batches = Math.ceil(SPANS / BATCH_SPANS);
    const slice = (7 * DAY) / batches;
    const rand = prng(7);
    let next = 0;
    let seeded = 0;
    const t0 = performance.now();
    let lastReport = t0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < batches) {
          const i = next++;
          const batch = makeBatch(rand, BATCH_SPANS, from + i * slice, from + (i + 1) * slice);
          const res = await fetch(`${server.apiUrl}/v1/ingest`, { method: 'POST', headers, body: batch.body });
          if (res.status !== 202) throw new Error(`seeding: ingest answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
          await res.arrayBuffer();
          seeded += batch.spans;
          if (performance.now() - lastReport > 10_000) {
            lastReport = performance.now();
            process.stderr.write(`  seeded ${seeded.toLocaleString('en-US')} spans (${Math.round(seeded / ((lastReport - t0) / 1000))} spans/s)\n`);
          }
        }
      }),
    );
    const seedSeconds = (performance.now() - t0) / 1000;
    // Fresh statistics, as autovacuum's analyze would have them on a database in steady state
    // (it runs within a minute of a bulk load like this one).
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query('ANALYZE');
    await admin.end();
    process.stderr.write(`seeded ${seeded.toLocaleString('en-US')} spans in ${seedSeconds.toFixed(0)} s; measuring...\n`);

    const get = async (path: string): Promise<number> => {
      const start = performance.now();
      const res = await fetch(`${server.apiUrl}${path}`, { headers });
      const body = await res.text();
      if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${body.slice(0, 300)}`);
      return performance.now() - start;
    };
    const measure = async (paths: string[]): Promise<number[]> => {
      for (const p of paths.slice(0, 3)) await get(p); // warm-up
      const times: number[] = [];
      for (let i = 0; i < RUNS; i++) times.push(await get(paths[i % paths.length]!));
      return times.sort((a, b) => a - b);
    };

    const hour = 3_600_000;
    const alignedEnd = Math.floor(now / hour) * hour + hour;
    const metricsQuery = (start: number, end: number, interval: string) =>
      `/v1/metrics?metric=llm.latency_ms&aggregation=p99&group_by=model&interval=${interval}` +
      `&start_time=${new Date(start).toISOString()}&end_time=${new Date(end).toISOString()}`;
    const metricsAligned = await measure([metricsQuery(alignedEnd - 7 * DAY, alignedEnd, '1h')]);
    // "The last 7 days" as a dashboard asks for it: both ends at an arbitrary millisecond.
    const metricsUnaligned = await measure(Array.from({ length: 5 }, (_, i) => metricsQuery(now - 7 * DAY - i * 7_919, now - i * 7_919, '1h')));
    const metricsDaily = await measure([metricsQuery(alignedEnd - 7 * DAY, alignedEnd, '1d')]);

    // A cursor deep in the list: page 20 of 50.
    let cursor = '';
    for (let page = 0; page < 20; page++) {
      const res = await fetch(`${server.apiUrl}/v1/traces?limit=50${cursor ? `&cursor=${cursor}` : ''}`, { headers });
      cursor = ((await res.json()) as { pagination: { next_cursor: string } }).pagination.next_cursor;
    }
    const searches: Array<[string, string]> = [
      ['traces: newest 50, no filter', '/v1/traces'],
      ['traces: model + min_latency_ms', '/v1/traces?model=claude-sonnet-4-5&min_latency_ms=2000'],
      ['traces: status=error', '/v1/traces?status=error'],
      ['traces: min_cost', '/v1/traces?min_cost=0.01'],
      ['traces: 1-day window + model', `/v1/traces?model=gpt-4o&start_time=${new Date(now - 3 * DAY).toISOString()}&end_time=${new Date(now - 2 * DAY).toISOString()}`],
      ['traces: page 21 via cursor', `/v1/traces?limit=50&cursor=${cursor}`],
    ];
    const searchResults: Array<[string, number[]]> = [];
    for (const [label, path] of searches) searchResults.push([label, await measure([path])]);
    const allSearch = searchResults.flatMap(([, t]) => t).sort((a, b) => a - b);

    const ms = (v: number) => v.toFixed(1);
    const row = (label: string, t: number[]): [string, string] => [label, `p50 ${ms(percentile(t, 0.5))}  p95 ${ms(percentile(t, 0.95))}`];
    const p95Metrics = percentile(metricsAligned, 0.95);
    const p95Search = percentile(allSearch, 0.95);
    report(
      `\nKassa telemetry query benchmark (PostgreSQL; latency in ms over ${RUNS} runs each)\n${table([
        ['spans seeded (7 days)', seeded.toLocaleString('en-US')],
        ['seeding time (s) / spans/s', `${seedSeconds.toFixed(0)} / ${Math.round(seeded / seedSeconds).toLocaleString('en-US')}`],
        row('metrics: 7d llm.latency_ms p99 by model, 1h, aligned', metricsAligned),
        row('metrics: same, unaligned ends', metricsUnaligned),
        row('metrics: 7d llm.latency_ms p99 by model, 1d', metricsDaily),
        ...searchResults.map(([label, t]) => row(label, t)),
        row('traces: all searches together', allSearch),
        ['target metrics p95 <= 150 ms (aligned 1h)', `${ms(p95Metrics)} ${p95Metrics <= METRICS_TARGET_MS ? '(met)' : '(NOT met)'}`],
        ['target trace search p95 <= 50 ms', `${ms(p95Search)} ${p95Search <= SEARCH_TARGET_MS ? '(met)' : '(NOT met)'}`],
      ])}\n`,
    );
    const p95 = (t: number[]) => round(percentile(t, 0.95));
    emit(
      summary('metrics', {
        settings: { spans: seeded, runs: RUNS },
        figures: {
          metricsAlignedHourly: { p50Ms: round(percentile(metricsAligned, 0.5)), p95Ms: p95(metricsAligned) },
          metricsUnaligned: { p50Ms: round(percentile(metricsUnaligned, 0.5)), p95Ms: p95(metricsUnaligned) },
          metricsDaily: { p50Ms: round(percentile(metricsDaily, 0.5)), p95Ms: p95(metricsDaily) },
          traceSearches: Object.fromEntries(searchResults.map(([label, t]) => [label, { p50Ms: round(percentile(t, 0.5)), p95Ms: p95(t) }])),
        },
        floors: {},
        targets: [
          target(`metrics p95, aligned 1h, ${seeded} spans`, p95Metrics, 'ms', METRICS_TARGET_MS, true),
          target(`metrics p95, unaligned ends, ${seeded} spans`, percentile(metricsUnaligned, 0.95), 'ms', METRICS_TARGET_MS, true),
          target('trace search p95', p95Search, 'ms', SEARCH_TARGET_MS, true),
        ],
      }),
    );
  } finally {
    await server.stop();
    // BENCH_KEEP=1 leaves the database for inspection (its name is printed).
    if (process.env.BENCH_KEEP === '1') process.stderr.write(`kept database ${db.name} (${server.projects[0]!.projectId})\n`);
    else await db.drop();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
