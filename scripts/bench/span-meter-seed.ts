/**
 * A span meter data set of any size in SQL (issue 38: "the same for a meter over 10M spans";
 * ingest seeds ~500 spans/s here, and the explorer's generator more than 20 minutes for 10M):
 * `npx tsx scripts/bench/span-meter-seed.ts <database> <spans>` makes the database (kept), an
 * organization and two telemetry projects through the bench server, then writes the traces with
 * `generate_series` INSERTs straight into telemetry_traces (its weekly partitions made by
 * src/db/partitions.ts) and telemetry_trace_ids: a large project of <spans> spans and a small one
 * of a tenth, over the last 30 days, as `bench_explorer_set` for `npm run bench:span-meter`.
 *
 * Each trace is three spans in the stored document shape (traces.repository's toSpanDocument): a
 * `request` root carrying `user.id` (user_0 … user_{max(100, spans/200) − 1}, the explorer's
 * count) and two model calls (`llm.model`, `llm.vendor`, `gen_ai.usage.input_tokens`) without it,
 * so the meter's fallback to the root is what is read. Only what span meters read is written: no
 * model-call rows, telemetry rollups, sessions or users (the explorer's data set has those). The
 * meters' rollups are then built by the bench with the real build (KnexSpanMeterRollups.buildChunk).
 *
 *   npx tsx scripts/bench/span-meter-seed.ts kassa_bench_spanmeter_1m 1000000
 *   BENCH_EXPLORER_DATABASE=kassa_bench_spanmeter_1m npm run bench:span-meter
 */
import pg from 'pg';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { createWeekPartitions, weekStart, WEEK_MS } from '../../src/db/partitions.js';
import { createNamedDatabase, startServer, type BenchProject } from './common.js';

const DAY = 86_400_000;
const TRACES_PER_STATEMENT = 100_000;

async function main(): Promise<void> {
  const [name, spansArg] = process.argv.slice(2);
  if (!name || !spansArg) throw new Error('usage: span-meter-seed.ts <database> <spans>');
  const spans = Number(spansArg);
  const database = await createNamedDatabase(name);
  const server = await startServer(database.url, { BENCH_API_WORKERS: '0', BENCH_ENVIRONMENTS: 'production,staging' });
  const [largeProject, smallProject] = server.projects as [BenchProject, BenchProject];
  const orgId = server.orgId;
  await server.stop();
  const { db, close } = await openDatabase({ databaseUrl: database.url });
  const raw = new pg.Client({ connectionString: database.url });
  await raw.connect();
  try {
    await migrateLatest(db);
    const nowMs = Date.now();
    const fromMs = nowMs - 30 * DAY;
    const weeks: number[] = [];
    for (let w = weekStart(fromMs - DAY); w <= nowMs + DAY; w += WEEK_MS) weeks.push(w);
    await db.transaction((trx) => createWeekPartitions(trx, 'telemetry_traces', weeks));
    const seed = async (projectId: string, projectSpans: number, tag: number) => {
      const traces = Math.ceil(projectSpans / 3);
      const users = Math.max(100, Math.round(projectSpans / 200));
      const step = (nowMs - fromMs) / traces;
      const started = performance.now();
      for (let first = 0; first < traces; first += TRACES_PER_STATEMENT) {
        const last = Math.min(traces, first + TRACES_PER_STATEMENT) - 1;
        // i: the trace; s: its start (ms); u: its user; a, b: the two model calls' input tokens.
        // One statement per 100,000 traces, on a connection of its own (no pool timeouts).
        await raw.query(
          `WITH g AS (
             SELECT i, s, 'user_' || ((i::bigint * 7919) % $1) AS u, 100 + (i * 37) % 900 AS a, 50 + (i * 13) % 500 AS b,
               lpad(to_hex($2::int), 8, '0') || lpad(to_hex(i), 24, '0') AS trace_id
             FROM (SELECT i, ($3::bigint + floor(i * $4::float8))::bigint + (i % 997) AS s FROM generate_series($5::int, $6::int) i) x
           ), docs AS (
             SELECT g.*, jsonb_build_object('user.id', u, 'service.name', 'support-bot') AS root,
               jsonb_build_array(
                 jsonb_build_object('span_id', lpad(to_hex(i * 3), 16, '0'), 'name', 'request', 'kind', 'SERVER', 'start_ms', s, 'end_ms', s + 2500,
                   'status_code', 'OK', 'attributes', jsonb_build_object('user.id', u, 'service.name', 'support-bot')),
                 jsonb_build_object('span_id', lpad(to_hex(i * 3 + 1), 16, '0'), 'parent_span_id', lpad(to_hex(i * 3), 16, '0'), 'name', 'openai.chat', 'kind', 'CLIENT',
                   'start_ms', s + 100, 'end_ms', s + 1000, 'status_code', 'OK',
                   'attributes', jsonb_build_object('llm.model', 'gpt-4o-mini', 'llm.vendor', 'openai', 'gen_ai.usage.input_tokens', a, 'gen_ai.usage.output_tokens', 40)),
                 jsonb_build_object('span_id', lpad(to_hex(i * 3 + 2), 16, '0'), 'parent_span_id', lpad(to_hex(i * 3), 16, '0'), 'name', 'openai.chat', 'kind', 'CLIENT',
                   'start_ms', s + 1200, 'end_ms', s + 2400, 'status_code', 'OK',
                   'attributes', jsonb_build_object('llm.model', 'gpt-4o-mini', 'llm.vendor', 'openai', 'gen_ai.usage.input_tokens', b, 'gen_ai.usage.output_tokens', 40))
               ) AS doc
             FROM g
           ), ids AS (
             INSERT INTO telemetry_trace_ids (project_id, trace_id, partition_start) SELECT $7, trace_id, to_timestamp(s / 1000.0) FROM docs
           )
           INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
             tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, session_id, user_id, attribute_pairs, partition_start)
           SELECT $8, trace_id, to_timestamp(s / 1000.0), to_timestamp((s + 2500) / 1000.0), 2500, 3, 'request', root::text, 'gpt-4o-mini', '{gpt-4o-mini}',
             a + b, 80, 0.0001, false, doc::text, now(), now(), NULL, u, '{}', to_timestamp(s / 1000.0)
           FROM docs`,
          [users, tag, fromMs, step, first, last, projectId, projectId],
        );
        process.stderr.write(`  ${projectId}: ${((last + 1) * 3).toLocaleString('en')} spans (${((performance.now() - started) / 1000).toFixed(0)} s)\n`);
      }
      return { projectId, spans: traces * 3, traces, modelCalls: traces * 2, seconds: Math.round((performance.now() - started) / 1000) };
    };
    const small = await seed(smallProject.projectId, Math.round(spans / 10), 2);
    const large = await seed(largeProject.projectId, spans, 1);
    await raw.query('ANALYZE telemetry_traces, telemetry_trace_ids');
    await db.raw('CREATE TABLE IF NOT EXISTS bench_explorer_set (set jsonb NOT NULL)');
    await db.raw('INSERT INTO bench_explorer_set (set) VALUES (?::jsonb)', [JSON.stringify({ orgId, nowMs, large, small, seededBy: 'sql' })]);
    process.stderr.write(`data set in database ${name}: ${large.spans.toLocaleString('en')} + ${small.spans.toLocaleString('en')} spans\n`);
  } finally {
    await raw.end();
    await close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
