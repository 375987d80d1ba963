/**
 * A span meter's quantity for one customer (issue 38: "the same for a meter over 10M spans"), on
 * PostgreSQL, by server CPU against a floor measured in the same run, on the explorer's kept data
 * set: `BENCH_EXPLORER_DATABASE=name` (required; made by `scripts/bench/explorer.ts --generate`,
 * spans written by the ingest code, scripts/bench/spans.ts): a large project of N spans and a small
 * one of N/10 in the same tables, over 30 days.
 *
 * One Kassa API process (scripts/bench/checkout-server.ts: the production listeners plus the floor
 * route) on that database. The organization gets a merchant API key (admin API) and one customer
 * per generated user (`externalId` = the spans' `user.id`, `user_<n>`, seeded in SQL); per project
 * a meter `source: SPANS`, sum of `gen_ai.usage.input_tokens`, `customerAttribute: user.id` (set on
 * each trace's request span: the meter's fallback to the root span is what is read), made through
 * `POST /v1/meters`. A span meter's quantity reads its hourly rollup (migration 0381) for the
 * range's whole hours and its points (0391) for the partial hours at its edges, in one prepared
 * statement with the meter and the customer (CUSTOMER_QUANTITY_SQL); the bench builds the rollups
 * to READY first (KnexSpanMeterRollups.buildChunk, the background job's step, timed; chunk size
 * BENCH_SPAN_METER_BUILD_CHUNK), and prints the rows' sizes and EXPLAIN (ANALYZE, BUFFERS) of that
 * statement. A data set of any size in SQL: scripts/bench/span-meter-seed.ts.
 * Measured, for each project:
 * - floor: `POST /__bench/floor`, one single-row INSERT on the same server, pool and middleware;
 * - quantity: `GET /v1/meters/{id}/quantities?customer=user_<n>` over the last 30 days, customers
 *   in turn, BENCH_SPAN_METER_CONCURRENCY (default 2) in flight, BENCH_SPAN_METER_READS per round.
 * Server CPU (the API process, from its /metrics) and PostgreSQL CPU (its backends, /proc) per
 * request, wall time per request, and failures (any status but 200: a statement timeout answers 5xx).
 *
 *   BENCH_EXPLORER_DATABASE=kassa_bench_spanmeter npm run bench:span-meter
 */
import pg from 'pg';
import { openDatabase } from '../../src/db/knex.js';
import { KnexSpanMeterRollups } from '../../src/telemetry/span-meters.repository.js';
import { CUSTOMER_QUANTITY_SQL } from '../../src/usage/usage.repository.js';
import { BENCH_FLOOR_TABLE_SQL } from '../../tools/bench-floor.js';
import { http, newDeployment, startKassa } from '../../tools/cluster.js';
import { databaseUrl } from './common.js';
import { postgresCpuSeconds } from './postgres-cpu.js';
import { machine, median, report, round } from './summary.js';

const NAME = process.env.BENCH_EXPLORER_DATABASE;
const READS = Number(process.env.BENCH_SPAN_METER_READS ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_SPAN_METER_CONCURRENCY ?? 2);
const DAY = 86_400_000;
/** Traces per build chunk (the job's is 20,000; larger for a 10M data set seeded in SQL). */
const BUILD_CHUNK = Number(process.env.BENCH_SPAN_METER_BUILD_CHUNK ?? 20_000);

interface ExplorerSet {
  orgId: string;
  nowMs: number;
  large: { projectId: string; spans: number; traces: number; modelCalls: number };
  small: { projectId: string; spans: number; traces: number; modelCalls: number };
}

interface State {
  api_key: string;
  encryption_key: string;
  meter_large: string;
  meter_small: string;
}

async function drive(count: number, concurrency: number, send: (i: number) => Promise<number>, ok: number): Promise<number> {
  let next = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const status = await send(next++);
        if (status !== ok) failed++;
      }
    }),
  );
  return failed;
}

async function main(): Promise<void> {
  if (!NAME) throw new Error('BENCH_EXPLORER_DATABASE: the explorer bench\'s kept data set (scripts/bench/explorer.ts --generate)');
  const url = databaseUrl(NAME);
  const direct = new pg.Client({ connectionString: url });
  await direct.connect();
  const set = (await direct.query<{ set: ExplorerSet }>('SELECT set FROM bench_explorer_set')).rows[0]!.set;
  await direct.query(BENCH_FLOOR_TABLE_SQL);
  await direct.query('CREATE TABLE IF NOT EXISTS bench_span_meter_state (api_key text, encryption_key text, meter_large text, meter_small text)');
  const kept = (await direct.query<State>('SELECT * FROM bench_span_meter_state')).rows[0];
  // The generator's users: user_0 … user_{max(100, spans/200) − 1} per project (scripts/bench/spans.ts).
  // BENCH_SPAN_METER_USERS: the users the spans name, when the data set was copied in SQL (docs/benchmarks.md).
  const users = Number(process.env.BENCH_SPAN_METER_USERS ?? Math.max(100, Math.round(set.large.spans / 200)));
  const smallUsers = Number(process.env.BENCH_SPAN_METER_USERS ?? Math.max(100, Math.round(set.small.spans / 200)));
  await direct.query(
    `INSERT INTO customers (id, org_id, email, created_at, external_id)
     SELECT 'CUS_' || lpad(i::text, 24, '0'), $1, 'user' || i || '@example.com', now(), 'user_' || i FROM generate_series(0, $2 - 1) i
     WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE c.org_id = $1 AND c.external_id = 'user_' || i)`,
    [set.orgId, users],
  );
  const deployment = newDeployment(url, { LOG_LEVEL: 'warn', MERCHANT_RATE_LIMIT_PER_MINUTE: '0', DATABASE_POOL_MAX: '10' });
  if (kept) deployment.encryptionKey = kept.encryption_key;
  const server = await startKassa(deployment, { role: 'api', name: 'bench-span-meter', echo: false, entry: 'scripts/bench/checkout-server.ts' });
  try {
    let state = kept;
    if (!state) {
      const key = await http('POST', `${server.adminUrl}/v1/orgs/${set.orgId}/api-keys`, { headers: { Authorization: `Bearer ${deployment.adminToken}` }, body: { name: 'span meter bench' } });
      if (key.status !== 201) throw new Error(`api key create: ${key.status} ${key.text}`);
      const apiKey = key.json.data.key as string;
      const meter = async (projectId: string, name: string) => {
        const res = await http('POST', `${server.merchantUrl}/v1/meters`, {
          headers: { 'X-API-Key': apiKey },
          body: { name, source: 'SPANS', filter: { projectId }, aggregation: 'sum', property: 'gen_ai.usage.input_tokens', customerAttribute: 'user.id' },
        });
        if (res.status !== 201) throw new Error(`meter create: ${res.status} ${res.text}`);
        return res.json.data.id as string;
      };
      state = { api_key: apiKey, encryption_key: deployment.encryptionKey, meter_large: await meter(set.large.projectId, 'input tokens (large)'), meter_small: await meter(set.small.projectId, 'input tokens (small)') };
      await direct.query('INSERT INTO bench_span_meter_state VALUES ($1, $2, $3, $4)', [state.api_key, state.encryption_key, state.meter_large, state.meter_small]);
    }
    // The rollups to READY (the `usage-meter-rollups` job's chunks, run here: the bench's API process runs no jobs).
    const { db, close } = await openDatabase({ databaseUrl: url });
    const builds: string[] = [];
    const plans: string[] = [];
    try {
      const rollups = new KnexSpanMeterRollups(db);
      for (const meterId of [state.meter_small, state.meter_large]) {
        const started = performance.now();
        let chunks = 0;
        while ((await rollups.buildChunk(set.orgId, meterId, BUILD_CHUNK)) !== 'none') chunks++;
        const rows = (await direct.query<{ n: string }>('SELECT count(*) AS n FROM span_meter_hours WHERE meter_id = $1', [meterId])).rows[0]!.n;
        const points = (await direct.query<{ n: string }>('SELECT count(*) AS n FROM span_meter_points WHERE meter_id = $1', [meterId])).rows[0]!.n;
        builds.push(`${meterId}: ${chunks} chunks of ${BUILD_CHUNK} traces in ${((performance.now() - started) / 1000).toFixed(1)} s (0 = READY before), ${rows} hour rows, ${points} points`);
      }
      if (builds.some((b) => !b.includes('(0 = READY'))) await direct.query('VACUUM ANALYZE span_meter_hours, span_meter_points');
      const sizes = (await direct.query<{ t: string; bytes: string }>("SELECT t, pg_total_relation_size(t::regclass) AS bytes FROM unnest(ARRAY['span_meter_hours', 'span_meter_points']) t")).rows;
      builds.push(`sizes (tables + indexes, both meters): ${sizes.map((r) => `${r.t} ${(Number(r.bytes) / 1e6).toFixed(1)} MB`).join(', ')}`);
      // The customer read as the API runs it (CUSTOMER_QUANTITY_SQL, one statement), for the bench's range.
      const end = set.nowMs - 17 * 60_000;
      const start = end - 30 * DAY;
      const firstHour = Math.ceil(start / 3_600_000) * 3_600_000;
      const lastHour = Math.floor(end / 3_600_000) * 3_600_000;
      const iso = (ms: number) => new Date(ms).toISOString();
      for (const [label, meterId] of [['small', state.meter_small], ['large', state.meter_large]] as const) {
        const values = [set.orgId, meterId, 'user_7', iso(start), iso(end), iso(firstHour), iso(lastHour), firstHour, lastHour, start, end];
        const explained = (await direct.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, unknown>; 'Execution Time': number }> }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${CUSTOMER_QUANTITY_SQL}`, values)).rows;
        const top = explained[0]!['QUERY PLAN'][0]!;
        const buffers = (top.Plan['Shared Hit Blocks'] as number) + (top.Plan['Shared Read Blocks'] as number);
        const text = JSON.stringify(top);
        plans.push(
          `${label}: customer read (meter, customer, 30 days of hours and the two edges' points, one statement): ${buffers} buffers, ${top['Execution Time'].toFixed(2)} ms execution; reads telemetry_traces: ${text.includes('telemetry_traces')}`,
        );
      }
    } finally {
      await close();
    }
    process.stderr.write(`${builds.join('\n')}\n${plans.join('\n')}\n`);
    const headers = { 'X-API-Key': state.api_key };
    const jsonHeaders = { ...headers, 'content-type': 'application/json' };
    const cpuSeconds = async () => {
      const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
      return Number(/^kassa_process_cpu_seconds_total\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? NaN);
    };
    const measure = async (work: () => Promise<number>) => {
      const cpu0 = await cpuSeconds();
      const pg0 = await postgresCpuSeconds(direct, NAME);
      const started = performance.now();
      const failed = await work();
      const seconds = (performance.now() - started) / 1000;
      const serverMs = ((await cpuSeconds()) - cpu0) * 1000;
      const pg1 = await postgresCpuSeconds(direct, NAME);
      return { serverMs, pgMs: pg0 === null || pg1 === null ? NaN : (pg1 - pg0) * 1000, seconds, failed };
    };
    const floor = () => fetch(`${server.merchantUrl}/__bench/floor`, { method: 'POST', headers: jsonHeaders, body: '{}' }).then(async (r) => (await r.arrayBuffer(), r.status));
    // The range: the data set's last 30 days, cut mid-hour.
    const end = set.nowMs - 17 * 60_000;
    const start = end - 30 * DAY;
    const statuses = new Map<number, number>();
    const totals: number[] = [];
    const quantity = (meterId: string, customers: number) => async (i: number) => {
      const r = await fetch(`${server.merchantUrl}/v1/meters/${meterId}/quantities?customer=user_${(i * 31) % customers}&start=${new Date(start).toISOString()}&end=${new Date(end).toISOString()}`, { headers });
      const body = (await r.json()) as { data?: { total?: number } };
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status === 200 && typeof body.data?.total === 'number') totals.push(body.data.total);
      return r.status;
    };
    await drive(200, CONCURRENCY, floor, 201);
    const results: Array<{ project: string; spans: number; modelCalls: number; serverMs: number; pgMs: number; wallMs: number; floorMs: number; failed: number; rounds: number[] }> = [];
    // The small project first, then the large; each round a floor, then the reads.
    for (const [label, project, meterId, customers] of [
      ['small', set.small, state.meter_small, smallUsers],
      ['large', set.large, state.meter_large, users],
    ] as const) {
      await drive(2, CONCURRENCY, quantity(meterId, customers), 200);
      const floors: number[] = [];
      const reads: number[] = [];
      const pgReads: number[] = [];
      const walls: number[] = [];
      let failed = 0;
      for (let r = 0; r < ROUNDS; r++) {
        const f = await measure(() => drive(500, CONCURRENCY, floor, 201));
        floors.push(f.serverMs / 500);
        const q = await measure(() => drive(READS, CONCURRENCY, (i) => quantity(meterId, customers)(i + r * READS), 200));
        reads.push(q.serverMs / READS);
        pgReads.push(q.pgMs / READS);
        walls.push((q.seconds * 1000 * CONCURRENCY) / READS);
        failed += q.failed + f.failed;
        process.stderr.write(`  ${label} (${project.spans} spans) round ${r + 1}: server ${(q.serverMs / READS).toFixed(3)} ms/request, PostgreSQL ${(q.pgMs / READS).toFixed(1)} ms, wall ${((q.seconds * 1000 * CONCURRENCY) / READS).toFixed(0)} ms; floor ${(f.serverMs / 500).toFixed(3)} ms; failed ${q.failed}\n`);
      }
      results.push({ project: label, spans: project.spans, modelCalls: project.modelCalls, serverMs: round(median(reads)), pgMs: round(median(pgReads)), wallMs: round(median(walls)), floorMs: round(median(floors)), failed, rounds: reads.map(round) });
    }
    const load = machine().loadAverage;
    report(
      [
        '',
        `span meter quantity — PostgreSQL, 1 API process (pool 10), ${NAME}; ${machine().cpus} CPUs, load average ${load.join(' / ')} at the end, ${new Date().toISOString()}`,
        `GET /v1/meters/{id}/quantities?customer=… (sum of gen_ai.usage.input_tokens by user.id, 30 days), ${READS} reads × ${ROUNDS} rounds, ${CONCURRENCY} in flight`,
        ...results.map(
          (q) =>
            `  ${q.spans.toLocaleString('en')} spans (${q.modelCalls.toLocaleString('en')} model calls): server CPU ${q.serverMs} ms/request (rounds ${q.rounds.join(', ')}), PostgreSQL CPU ${q.pgMs} ms/request, wall ${q.wallMs} ms/request; floor ${q.floorMs} ms; ${q.failed} failed`,
        ),
        `  large / small: server CPU ${round(results[1]!.serverMs / results[0]!.serverMs)}×, PostgreSQL CPU ${round(results[1]!.pgMs / results[0]!.pgMs)}×`,
        `  statuses ${JSON.stringify(Object.fromEntries(statuses))}; quantities read e.g. ${totals.slice(0, 3).join(', ')}`,
        ...builds.map((b) => `  build ${b}`),
        ...plans.map((p) => `  EXPLAIN (ANALYZE, BUFFERS) ${p}`),
      ].join('\n'),
    );
  } finally {
    await direct.end();
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
