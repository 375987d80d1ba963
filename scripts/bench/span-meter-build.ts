/**
 * A span meter's background build over a busy hour (issue 38; the build chunk used to run to the
 * end of the hour holding its N-th trace, so an hour of 100,000 traces was one chunk whatever N,
 * past the 15 s statement timeout). On PostgreSQL:
 *
 *   npx tsx scripts/bench/span-meter-build.ts [database] [traces in the hour] [chunk]
 *
 * makes the database (kept; default kassa_bench_spanbuild), an organization and a project through
 * the bench server, writes <traces> traces (default 100,000: 300,000 spans, the seed's shape of
 * scripts/bench/span-meter-seed.ts: a `request` root with `user.id` and two model calls) inside one
 * UTC hour in SQL, then builds a `sum` and a `unique` meter of the input tokens with the real build
 * (KnexSpanMeterRollups.buildChunk) twice each: in chunks of <chunk> traces (default 20,000, the
 * job's ROLLUP_CHUNK_EVENTS) and in one chunk of the whole hour (what every chunk of that hour was
 * before). Printed per chunk: the traces it covered (its new points / 2), its statements, its wall
 * time and the PostgreSQL CPU of its backend; with a floor measured in the same run: the CPU of
 * unpacking one chunk's trace documents (jsonb_array_elements) and nothing else. Load average before
 * and after. The build runs on a pool of the API's settings (15 s statement timeout): a chunk that
 * hits it is printed as such (the job would keep nothing and try it again).
 */
import os from 'node:os';
import pg from 'pg';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { createWeekPartitions, weekStart, WEEK_MS } from '../../src/db/partitions.js';
import { KnexSpanMeterRollups } from '../../src/telemetry/span-meters.repository.js';
import { ROLLUP_CHUNK_EVENTS } from '../../src/usage/meters.service.js';
import { KnexMeterRepository } from '../../src/usage/usage.repository.js';
import { createNamedDatabase, databaseExists, databaseUrl, startServer, type BenchProject } from './common.js';
import { postgresCpuSeconds } from './postgres-cpu.js';

const HOUR = 3_600_000;
const [NAME = 'kassa_bench_spanbuild', TRACES = '100000', CHUNK = String(ROLLUP_CHUNK_EVENTS)] = process.argv.slice(2);
const traces = Number(TRACES);
const chunkTraces = Number(CHUNK);
const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');

async function seed(): Promise<{ orgId: string; projectId: string; hour: number }> {
  const database = await createNamedDatabase(NAME);
  const server = await startServer(database.url, { BENCH_API_WORKERS: '0' });
  const [project] = server.projects as [BenchProject];
  const orgId = server.orgId;
  await server.stop();
  const { db, close } = await openDatabase({ databaseUrl: database.url });
  const raw = new pg.Client({ connectionString: database.url });
  await raw.connect();
  try {
    await migrateLatest(db);
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 24 * HOUR;
    await db.transaction((trx) => createWeekPartitions(trx, 'telemetry_traces', [weekStart(hour) - WEEK_MS, weekStart(hour), weekStart(hour) + WEEK_MS]));
    // Starts spread over the hour (the last ones' model calls end in the next); 1,000 users.
    await raw.query(
      `WITH g AS (
         SELECT i, $1::bigint + (i::bigint * 3599000) / $2 AS s, 'user_' || ((i::bigint * 7919) % 1000) AS u, 100 + (i * 37) % 900 AS a, 50 + (i * 13) % 500 AS b,
           lpad(to_hex(i), 32, '0') AS trace_id
         FROM generate_series(0, $2 - 1) i
       ), docs AS (
         SELECT g.*, jsonb_build_object('user.id', u) AS root,
           jsonb_build_array(
             jsonb_build_object('span_id', lpad(to_hex(i * 3), 16, '0'), 'name', 'request', 'kind', 'SERVER', 'start_ms', s, 'end_ms', s + 2500, 'status_code', 'OK', 'attributes', jsonb_build_object('user.id', u)),
             jsonb_build_object('span_id', lpad(to_hex(i * 3 + 1), 16, '0'), 'parent_span_id', lpad(to_hex(i * 3), 16, '0'), 'name', 'openai.chat', 'kind', 'CLIENT', 'start_ms', s + 100, 'end_ms', s + 1000,
               'status_code', 'OK', 'attributes', jsonb_build_object('llm.model', 'gpt-4o-mini', 'llm.vendor', 'openai', 'gen_ai.usage.input_tokens', a)),
             jsonb_build_object('span_id', lpad(to_hex(i * 3 + 2), 16, '0'), 'parent_span_id', lpad(to_hex(i * 3), 16, '0'), 'name', 'openai.chat', 'kind', 'CLIENT', 'start_ms', s + 1200, 'end_ms', s + 2400,
               'status_code', 'OK', 'attributes', jsonb_build_object('llm.model', 'gpt-4o-mini', 'llm.vendor', 'openai', 'gen_ai.usage.input_tokens', b))
           ) AS doc
         FROM g
       ), ids AS (
         INSERT INTO telemetry_trace_ids (project_id, trace_id, partition_start) SELECT $3, trace_id, to_timestamp(s / 1000.0) FROM docs
       )
       INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
         tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, session_id, user_id, attribute_pairs, partition_start)
       SELECT $3, trace_id, to_timestamp(s / 1000.0), to_timestamp((s + 2500) / 1000.0), 2500, 3, 'request', root::text, 'gpt-4o-mini', '{gpt-4o-mini}',
         a + b, 0, 0.0001, false, doc::text, now(), now(), NULL, u, '{}', to_timestamp(s / 1000.0)
       FROM docs`,
      [hour, traces, project.projectId],
    );
    await raw.query('ANALYZE telemetry_traces, telemetry_trace_ids');
    await db.raw('CREATE TABLE bench_span_build_set (set jsonb NOT NULL)');
    await db.raw('INSERT INTO bench_span_build_set VALUES (?::jsonb)', [JSON.stringify({ orgId, projectId: project.projectId, hour, traces })]);
    return { orgId, projectId: project.projectId, hour };
  } finally {
    await raw.end();
    await close();
  }
}

async function main(): Promise<void> {
  process.stderr.write(`load average before: ${load()}\n`);
  let set: { orgId: string; projectId: string; hour: number; traces: number } | undefined;
  if (await databaseExists(NAME)) {
    const c = new pg.Client({ connectionString: databaseUrl(NAME) });
    await c.connect();
    set = await c.query('SELECT set FROM bench_span_build_set').then((r) => r.rows[0]?.set, () => undefined);
    await c.end();
  }
  if (!set || set.traces !== traces) set = { ...(await seed()), traces };
  const { db, close } = await openDatabase({ databaseUrl: databaseUrl(NAME), poolMax: 1 });
  const probe = new pg.Client({ connectionString: databaseUrl(NAME) });
  await probe.connect();
  const cpu = async () => (await postgresCpuSeconds(probe, NAME)) ?? NaN;
  const lines: string[] = [];
  try {
    // The floor: unpacking one chunk's trace documents, nothing else.
    const f0 = await cpu();
    await db.raw(
      `SELECT count(*) FROM (SELECT spans FROM telemetry_traces WHERE project_id = ? ORDER BY start_time, trace_id LIMIT ?) t CROSS JOIN LATERAL jsonb_array_elements(t.spans::jsonb) s`,
      [set.projectId, chunkTraces],
    );
    const floor = (await cpu()) - f0;
    lines.push(`floor: unpacking ${chunkTraces.toLocaleString('en')} traces' documents: PostgreSQL CPU ${floor.toFixed(2)} s`);
    const meters = new KnexMeterRepository(db);
    const rollups = new KnexSpanMeterRollups(db);
    let statements = 0;
    db.on('query', () => statements++);
    for (const aggregation of ['sum', 'unique'] as const) {
      for (const size of [chunkTraces, traces]) {
        const id = `MTR_bench_build_${aggregation}_${size}_${Date.now()}`;
        const now = new Date();
        await meters.insert({ id, orgId: set.orgId, name: id, source: 'SPANS', filter: { projectId: set.projectId }, aggregation, property: 'gen_ai.usage.input_tokens', customerAttribute: 'user.id', status: 'ACTIVE', rollupStatus: 'BUILDING', createdAt: now, updatedAt: now, archivedAt: null });
        const per: string[] = [];
        let points = 0;
        for (let step = 'chunk'; step === 'chunk'; ) {
          statements = 0;
          const [c0, t0] = [await cpu(), performance.now()];
          try {
            step = await rollups.buildChunk(set.orgId, id, size);
          } catch (err) {
            per.push(`failed after ${((performance.now() - t0) / 1000).toFixed(2)} s wall, ${((await cpu()) - c0).toFixed(2)} s PostgreSQL CPU: ${(err as Error).message.slice(-80)}`);
            break;
          }
          const [c1, t1] = [await cpu(), performance.now()];
          const after = Number((await probe.query('SELECT count(*) AS n FROM span_meter_points WHERE meter_id = $1', [id])).rows[0].n);
          per.push(`${((after - points) / 2).toLocaleString('en')} traces, ${statements} statements, ${((t1 - t0) / 1000).toFixed(2)} s wall, ${(c1 - c0).toFixed(2)} s PostgreSQL CPU`);
          points = after;
        }
        lines.push(`${aggregation}, chunks of ${size.toLocaleString('en')} traces: ${per.length} chunks (the last finds no more traces, or failed)`, ...per.map((p, i) => `  chunk ${i + 1}: ${p}`));
        await db('meters').where('id', id).del();
      }
    }
  } finally {
    await probe.end();
    await close();
  }
  lines.push(`${traces.toLocaleString('en')} traces (${(traces * 3).toLocaleString('en')} spans) in one hour; ${os.cpus().length} CPUs; load average after: ${load()}`);
  console.log(lines.join('\n'));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
