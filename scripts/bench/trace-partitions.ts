/**
 * Time partitions of the traces (issue 40 item 6, migration 0390), on PostgreSQL with a data set
 * seeded in SQL (generate_series, not HTTP, so 10M spans take minutes): a large project of
 * `--spans` spans (default 10,000,000) and a small one of `--small` spans (default 200,000), both
 * over the last five weeks, 10 spans per trace, 3 model calls per trace, traces and span rows in
 * weekly partitions as ingest writes them (ids in telemetry_trace_ids).
 *
 * 1. The explorer's trace queries, built by the repository itself (KnexTraceRepository, captured
 *    and run again under EXPLAIN (ANALYZE, BUFFERS)): shared buffers hit + read and rows returned
 *    by each, large against small — deterministic, unlike wall time on a shared machine; plus
 *    PostgreSQL CPU per request (from /proc) and the bench process's own CPU (the repository's
 *    row mapping) against a floor (SELECT 1 through the same pool), with the load average.
 * 2. Retention of the oldest week at the large size: today's row-by-row DELETE (the retention
 *    job's own statements, chunks of 5,000, run in a transaction that is rolled back) against
 *    DROP of the week's trace and span-row partitions (with the traces' ids and session-total
 *    changes, as the job does it): duration, PostgreSQL CPU, WAL bytes.
 *
 * 3. With `--migration`, instead of 1 and 2: the seeded traces put back into one plain table (as
 *    before migration 0390), then migration 0390's online conversion while a writer inserts a
 *    trace every 5 ms as the previous release does (stopped before the swap, as the migration
 *    requires): the conversion's duration and the writer's longest insert.
 *
 * 4. With `--plain`, instead of 2: the queries of 1 again on the same traces copied back into one
 *    plain table (migration 0390's `down`), each list in one read: what the partitions cost or save.
 *    `--unbounded` measures 1 with every list in one read over all weeks (no newest-first split).
 *
 * The seed is checked against ingest before the large project is written (`checkSeedShape`);
 * `--check-seed` stops there. `--keep` keeps the database, `--reuse NAME` measures a kept one
 * again without seeding, `--no-retention` skips 2, `--progress` prints the seed's chunks.
 *
 * Usage: tsx scripts/bench/trace-partitions.ts [--spans 10000000] [--small 200000] [--rounds 20] [--keep]
 *        [--reuse NAME] [--no-retention] [--plain] [--unbounded] [--migration] [--check-seed] [--seed-only] [--progress]
 */
import { loadavg } from 'node:os';
import pg from 'pg';
import knexFactory from 'knex';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { createWeekPartitions, isPartitioned, WEEK_MS, weekStart } from '../../src/db/partitions.js';
import { KnexTraceRepository, KnexTraceWriter, type TraceSearch } from '../../src/telemetry/traces.repository.js';
import { normalizeIngest } from '../../src/telemetry/normalize.js';
import { summarize } from '../../src/telemetry/ingest.service.js';
import { PriceTable } from '../../src/telemetry/prices.js';
import { KnexRetentionRepository } from '../../src/telemetry/retention.repository.js';
import { down as unpartitionTraces, partitionTraces, TRACE_TABLE_COLUMNS } from '../../src/db/migrations/0390_telemetry_trace_partitions.js';
import { createDatabase, databaseUrl, percentile } from './common.js';
import { postgresCpuSeconds } from './postgres-cpu.js';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SPANS = arg('spans', 10_000_000);
const SMALL = arg('small', 200_000);
const ROUNDS = arg('rounds', 20);
const KEEP = process.argv.includes('--keep');
const SPANS_PER_TRACE = 10;
const SEED_CHUNK = 100_000;
const SEED_PROGRESS = process.argv.includes('--progress');
const WEEKS = 5;
/** `--reuse NAME`: a data set this bench seeded and kept (`--keep`), measured again without seeding. */
const REUSE = process.argv.includes('--reuse') ? process.argv[process.argv.indexOf('--reuse') + 1]! : undefined;
let NOW = new Date();
let TO = NOW.getTime();
let FROM = weekStart(TO) - (WEEKS - 1) * WEEK_MS;
const DAY = 86_400_000;

const target = REUSE ? { name: REUSE, url: databaseUrl(REUSE), drop: async () => {} } : await createDatabase('kassa_bench_traceparts');
const database = await openDatabase({ databaseUrl: target.url });
const db = database.db;
const meter = new pg.Client({ connectionString: target.url });
await meter.connect();
const cpu = async () => (await postgresCpuSeconds(meter, target.name)) ?? NaN;
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
const wal = async () => (await meter.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
const walBytes = async (from: string) => Number((await meter.query<{ n: string }>(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn) AS n`, [from])).rows[0]!.n);
const out: string[] = [];
const heavy = async (sql: string, bindings: unknown[] = []) => {
  let n = 0;
  await meter.query(sql.replace(/\?/g, () => `$${++n}`), bindings);
};
const say = (line: string) => {
  out.push(line);
  console.log(line);
};
const load = () => loadavg().map((x) => x.toFixed(2)).join(' / ');

/**
 * Seeds one project's traces evenly over [FROM, TO) in chunks of CHUNK traces, as ingest stores
 * them (scripts/bench/trace-partitions.ts checks it: `checkSeedShape`). Each trace is one request
 * of an LLM application, 10 spans in one batch: a server root (route, session, user, tier), a
 * retrieval, three model calls (GenAI attributes with their llm.* mapping and cost, as
 * normalizeIngest stores them; the third on a cheaper model in one trace of five; in one trace of
 * 37 it fails, and in one of 74 the request too), two tool calls, and three short steps. The
 * summary columns (model, models, tokens, cost, error, session, user, attribute pairs) are derived
 * as ingest's `summarize` derives them; the span rows are the model calls of the documents.
 */
async function seed(projectId: string, spans: number): Promise<void> {
  const traces = Math.round(spans / SPANS_PER_TRACE);
  const users = Math.max(100, Math.round(traces / 100));
  const span = TO - FROM - 60_000;
  for (let lo = 1; lo <= traces; lo += SEED_CHUNK) {
    const hi = Math.min(traces, lo + SEED_CHUNK - 1);
    await heavy(
      `WITH base AS (
         SELECT i, md5(? || ':' || i) AS tid, (?::bigint + floor(i::float8 * ? / ?))::bigint AS st, 400 + (i::bigint * 7919) % 20000 AS d,
                (ARRAY['gpt-4o', 'gpt-4o-mini', 'claude-sonnet', 'llama-3'])[1 + i % 4] AS m,
                CASE WHEN i % 5 = 0 THEN 'gpt-4o-mini' ELSE (ARRAY['gpt-4o', 'gpt-4o-mini', 'claude-sonnet', 'llama-3'])[1 + i % 4] END AS m3,
                'user-' || ((i * 7) % ?) AS u, (ARRAY['free', 'pro', 'enterprise'])[1 + ((i * 7) % ?) % 3] AS tier,
                CASE WHEN i % 3 = 0 THEN '/v1/agent' ELSE '/v1/chat' END AS route
           FROM generate_series(?::int, ?::int) AS i
       ), calls AS (
         SELECT b.*, k, CASE WHEN k = 3 THEN m3 ELSE m END AS cm, 200 + (i * 31 + k * 97) % 3000 AS tin, 20 + (i * 17 + k * 53) % 600 AS tout
           FROM base b, generate_series(1, 3) k
       ), priced AS (
         SELECT c.*, CASE cm WHEN 'claude-sonnet' THEN 'anthropic' WHEN 'llama-3' THEN 'meta' ELSE 'openai' END AS vendor,
                trim_scale(((tin * 2 + tout * 8) / 1000000.0)::numeric)::text AS cost_text,
                substr(md5(tid || ':' || (1 + 2 * k)), 1, 16) AS sid, st + 45 + ((d - 60) / 6) * (2 * k - 2) AS cs, (d - 60) / 6 AS cd,
                i % 37 = 0 AND k = 3 AS failed
           FROM calls c
       ), called AS (
         SELECT i, array_agg(format('{"span_id":"%s","parent_span_id":"%s","name":"chat %s","kind":"client","start_ms":%s,"end_ms":%s,"status_code":"%s","status_message":%s,"attributes":{"gen_ai.system":"%s","gen_ai.request.model":"%s","gen_ai.operation.name":"chat","gen_ai.usage.input_tokens":%s,"gen_ai.usage.output_tokens":%s,"llm.cost":%s,"llm.vendor":"%s","llm.model":"%s","llm.tokens.input":%s,"llm.tokens.output":%s,"llm.operation":"chat"}}',
                          sid, substr(md5(tid || ':1'), 1, 16), cm, cs, cs + cd, CASE WHEN failed THEN 'ERROR' ELSE 'UNSET' END, CASE WHEN failed THEN '"rate limited"' ELSE 'null' END,
                          vendor, cm, tin, tout, cost_text, vendor, cm, tin, tout) ORDER BY k) AS call_docs,
                sum(tin) AS tokens_in, sum(tout) AS tokens_out, array_agg(cost_text ORDER BY k) AS costs
           FROM priced GROUP BY i
       ), traced AS (
         SELECT b.*, c.call_docs, c.tokens_in, c.tokens_out, c.costs, substr(md5(b.tid || ':1'), 1, 16) AS root,
                format('{"service.name":"support-bot","http.route":"%s","session.id":"%s","user.id":"%s","user.tier":"%s"}', route, 'sess-' || u || '-' || (st / 1800000), u, tier) AS root_attrs
           FROM base b JOIN called c USING (i)
       ), documented AS (
         SELECT t.*, '[' || concat_ws(',',
             format('{"span_id":"%s","parent_span_id":null,"name":"POST %s","kind":"server","start_ms":%s,"end_ms":%s,"status_code":"%s","status_message":%s,"attributes":%s}',
                    root, route, st, st + d, CASE WHEN i % 74 = 0 THEN 'ERROR' ELSE 'UNSET' END, CASE WHEN i % 74 = 0 THEN '"upstream model failed"' ELSE 'null' END, root_attrs),
             format('{"span_id":"%s","parent_span_id":"%s","name":"retrieve documents","kind":"internal","start_ms":%s,"end_ms":%s,"status_code":"UNSET","status_message":null,"attributes":{"db.system":"pgvector","retrieval.top_k":5}}',
                    substr(md5(tid || ':2'), 1, 16), root, st + 3, st + 43),
             call_docs[1],
             format('{"span_id":"%s","parent_span_id":"%s","name":"tool run_sql","kind":"internal","start_ms":%s,"end_ms":%s,"status_code":"UNSET","status_message":null,"attributes":{"gen_ai.tool.name":"run_sql"}}',
                    substr(md5(tid || ':4'), 1, 16), root, st + 45 + (d - 60) / 6, st + 45 + 2 * ((d - 60) / 6)),
             call_docs[2],
             format('{"span_id":"%s","parent_span_id":"%s","name":"tool search_docs","kind":"internal","start_ms":%s,"end_ms":%s,"status_code":"UNSET","status_message":null,"attributes":{"gen_ai.tool.name":"search_docs"}}',
                    substr(md5(tid || ':6'), 1, 16), root, st + 45 + 3 * ((d - 60) / 6), st + 45 + 4 * ((d - 60) / 6)),
             call_docs[3],
             format('{"span_id":"%s","parent_span_id":"%s","name":"format answer","kind":"internal","start_ms":%s,"end_ms":%s,"status_code":"UNSET","status_message":null,"attributes":{"step":"format"}}',
                    substr(md5(tid || ':8'), 1, 16), root, st + 45 + 5 * ((d - 60) / 6), st + 45 + 6 * ((d - 60) / 6)),
             format('{"span_id":"%s","parent_span_id":"%s","name":"guardrail check","kind":"internal","start_ms":%s,"end_ms":%s,"status_code":"UNSET","status_message":null,"attributes":{"guardrail.passed":true}}',
                    substr(md5(tid || ':9'), 1, 16), root, st + d - 14, st + d - 8),
             format('{"span_id":"%s","parent_span_id":"%s","name":"send response","kind":"internal","start_ms":%s,"end_ms":%s,"status_code":"UNSET","status_message":null,"attributes":{"http.status_code":200}}',
                    substr(md5(tid || ':10'), 1, 16), root, st + d - 7, st + d - 1)) || ']' AS doc
           FROM traced t
       )
       INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
         tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, session_id, user_id, attribute_pairs, partition_start)
       SELECT ?, tid, to_timestamp(st / 1000.0), to_timestamp((st + d) / 1000.0), d, ${SPANS_PER_TRACE}, 'POST ' || route, root_attrs, m,
              ARRAY(SELECT DISTINCT x COLLATE "C" FROM unnest(ARRAY[m, m3]) x ORDER BY 1), tokens_in, tokens_out,
              costs[1]::float8 + costs[2]::float8 + costs[3]::float8, i % 37 = 0, doc,
              to_timestamp((st + d + 2000) / 1000.0), to_timestamp((st + d + 2000) / 1000.0), 'sess-' || u || '-' || (st / 1800000), u,
              ARRAY(SELECT DISTINCT (a.key || '=' || (a.value #>> '{}')) COLLATE "C" AS pair
                      FROM jsonb_array_elements(doc::jsonb) s, jsonb_each(s -> 'attributes') a
                     WHERE jsonb_typeof(a.value) IN ('string', 'number', 'boolean') ORDER BY 1),
              to_timestamp(st / 1000.0)
         FROM documented`,
      [projectId, FROM, span, traces, users, users, lo, hi, projectId],
    );
    if (SEED_PROGRESS) console.log(`  ${projectId}: ${hi.toLocaleString('en')} of ${traces.toLocaleString('en')} traces (${new Date().toISOString().slice(11, 19)})`);
  }
  await heavy(`INSERT INTO telemetry_trace_ids (project_id, trace_id, partition_start) SELECT project_id, trace_id, partition_start FROM telemetry_traces WHERE project_id = ?`, [projectId]);
  // The span rows are the documents' model calls, as ingest writes them (toModelCall).
  await heavy(
    `INSERT INTO telemetry_model_calls (project_id, start_time, trace_id, span_id, model, vendor, duration_ms, tokens_input, tokens_output, cost, is_error)
     SELECT project_id, to_timestamp((s ->> 'start_ms')::bigint / 1000.0), trace_id, s ->> 'span_id', s -> 'attributes' ->> 'llm.model', s -> 'attributes' ->> 'llm.vendor',
            (s ->> 'end_ms')::bigint - (s ->> 'start_ms')::bigint, (s -> 'attributes' ->> 'llm.tokens.input')::bigint, (s -> 'attributes' ->> 'llm.tokens.output')::bigint,
            (s -> 'attributes' ->> 'llm.cost')::float8, s ->> 'status_code' = 'ERROR'
       FROM telemetry_traces, jsonb_array_elements(spans::jsonb) s
      WHERE project_id = ? AND jsonb_exists(s -> 'attributes', 'llm.model')`,
    [projectId],
  );
}

/**
 * The seed against ingest: a few seeded traces are sent again, span for span (the documents read
 * back as a native ingest request, the app's GenAI attributes and cost), through ingest's own
 * normalizeIngest, summarize and trace writer (COPY) into a scratch project; every column of the
 * two rows must be equal (the span documents as JSON), and the seeded span rows must be the
 * normalized model calls. Returns the differences (none: the seed is what ingest would write).
 */
async function checkSeedShape(projectId: string): Promise<string[]> {
  const problems: string[] = [];
  const { rows } = await meter.query<{ trace_id: string; spans: string }>(
    `SELECT trace_id, spans FROM telemetry_traces WHERE project_id = $1 AND trace_id IN (md5($1 || ':1'), md5($1 || ':37'), md5($1 || ':74'), md5($1 || ':1000'), md5($1 || ':1005'))`,
    [projectId],
  );
  if (rows.length !== 5) problems.push(`expected 5 sample traces, found ${rows.length}`);
  const derived = new Set(['llm.vendor', 'llm.model', 'llm.tokens.input', 'llm.tokens.output', 'llm.operation']);
  const iso = (ms: number) => new Date(ms).toISOString();
  const request = {
    traces: rows.map((r) => ({
      trace_id: r.trace_id,
      spans: (JSON.parse(r.spans) as Array<Record<string, unknown> & { attributes: Record<string, unknown> }>).map((s) => ({
        span_id: s.span_id as string,
        parent_span_id: s.parent_span_id as string | null,
        name: s.name as string,
        kind: s.kind as string,
        start_time: iso(s.start_ms as number),
        end_time: iso(s.end_ms as number),
        ...(s.status_code !== 'UNSET' ? { status: { code: s.status_code, ...(s.status_message ? { message: s.status_message } : {}) } } : {}),
        attributes: Object.fromEntries(Object.entries(s.attributes).filter(([k]) => !derived.has(k))),
      })),
    })),
  };
  const batch = normalizeIngest(request as never, new PriceTable());
  await db.transaction(async (trx) => {
    const writes = batch.traces.map((t) => ({ ...summarize(t), spans: t.spans }));
    await new KnexTraceWriter(trx, true).claimTraces('proj_check', writes, NOW, { optimistic: true });
  });
  const columns = TRACE_TABLE_COLUMNS.split(', ').filter((c) => !['project_id', 'trace_id', 'spans', 'created_at', 'updated_at'].includes(c));
  const diff = await meter.query<{ trace_id: string; column: string; seeded: string; ingested: string }>(
    `SELECT s.trace_id, c.col AS column, c.seeded, c.ingested
       FROM telemetry_traces s JOIN telemetry_traces i ON i.project_id = 'proj_check' AND i.trace_id = s.trace_id,
            LATERAL (VALUES ${columns.map((c) => `('${c}', s.${c}::text, i.${c}::text)`).join(', ')}, ('spans (as JSON)', s.spans::jsonb::text, i.spans::jsonb::text)) AS c(col, seeded, ingested)
      WHERE s.project_id = $1 AND c.seeded IS DISTINCT FROM c.ingested`,
    [projectId],
  );
  for (const d of diff.rows) problems.push(`${d.trace_id} ${d.column}: seeded ${d.seeded.slice(0, 200)} / ingest ${d.ingested.slice(0, 200)}`);
  const stored = Number((await meter.query(`SELECT count(*) AS n FROM telemetry_traces WHERE project_id = 'proj_check'`)).rows[0].n);
  if (stored !== rows.length) problems.push(`ingest stored ${stored} of ${rows.length} traces`);
  const sameText = Number((await meter.query(
    `SELECT count(*) AS n FROM telemetry_traces s JOIN telemetry_traces i ON i.project_id = 'proj_check' AND i.trace_id = s.trace_id WHERE s.project_id = $1 AND s.spans = i.spans`, [projectId])).rows[0].n);
  if (sameText !== rows.length) problems.push(`span documents byte-equal for ${sameText} of ${rows.length}`);
  // The span rows: what ingest's toModelCall makes of the normalized model-call spans.
  const expected = batch.traces.flatMap((t) => t.spans.filter((s) => s.model !== null).map((s) =>
    [t.traceId, s.spanId, iso(s.startMs), s.model, s.vendor, s.endMs - s.startMs, s.tokensInput, s.tokensOutput, s.cost, s.statusCode === 'ERROR'].join('|')));
  const seededCalls = (await meter.query<{ line: string }>(
    `SELECT concat_ws('|', trace_id, span_id, to_char(start_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), model, vendor, duration_ms, tokens_input, tokens_output, cost, is_error) AS line
       FROM telemetry_model_calls WHERE project_id = $1 AND trace_id = ANY($2)`,
    [projectId, rows.map((r) => r.trace_id)],
  )).rows.map((r) => r.line.replace(/\|t$/, '|true').replace(/\|f$/, '|false'));
  const a = [...expected].sort();
  const b = seededCalls.sort();
  if (JSON.stringify(a) !== JSON.stringify(b)) problems.push(`span rows differ: ingest ${JSON.stringify(a.slice(0, 3))} / seeded ${JSON.stringify(b.slice(0, 3))}`);
  await meter.query(`DELETE FROM telemetry_traces WHERE project_id = 'proj_check'`);
  await meter.query(`DELETE FROM telemetry_trace_ids WHERE project_id = 'proj_check'`);
  return problems;
}

/** The SQL the repository sends for `fn`, captured (positional parameters back to knex's). */
async function captured(fn: () => Promise<unknown>): Promise<Array<{ sql: string; bindings: unknown[] }>> {
  const queries: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => queries.push({ sql: q.sql.replace(/\$\d+/g, '?'), bindings: q.bindings ?? [] });
  db.on('query', listener);
  try {
    await fn();
  } finally {
    db.off('query', listener);
  }
  return queries;
}

interface Plan {
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  'Actual Rows': number;
  Plans?: Plan[];
}

try {
  await migrateLatest(db);
  let t = process.hrtime.bigint();
  if (REUSE) {
    // The seed's "now": its newest trace starts a minute before it.
    const newest = (await meter.query<{ ms: string }>(`SELECT (extract(epoch FROM max(partition_start)) * 1000)::bigint AS ms FROM telemetry_traces WHERE project_id = 'proj_small'`)).rows[0]!.ms;
    TO = Number(newest) + 60_000;
    NOW = new Date(TO);
    FROM = weekStart(TO) - (WEEKS - 1) * WEEK_MS;
    say(`reusing ${REUSE} (seeded up to ${NOW.toISOString()})`);
  } else {
  await db.raw(`INSERT INTO organizations (id, name, created_at, updated_at) VALUES ('org_bench', 'Bench', now(), now())`);
  for (const p of ['proj_large', 'proj_small', 'proj_check']) {
    await db.raw(`INSERT INTO telemetry_projects (id, org_id, name, slug, environment, created_at, updated_at) VALUES (?, 'org_bench', ?, ?, 'production', now(), now())`, [p, p, p]);
  }
  const weeks = Array.from({ length: WEEKS }, (_, i) => FROM + i * WEEK_MS);
  for (const table of ['telemetry_traces', 'telemetry_model_calls'] as const) await db.transaction((trx) => createWeekPartitions(trx, table, weeks));
  await seed('proj_small', SMALL);
  const problems = await checkSeedShape('proj_small');
  say(problems.length === 0 ? 'seed checked against ingest (5 traces sent again through normalizeIngest, summarize and the trace writer): every column equal, span documents byte-equal, span rows equal' : `seed differs from ingest:\n  ${problems.join('\n  ')}`);
  if (process.argv.includes('--check-seed')) {
    await meter.end();
    await db.destroy();
    if (!KEEP) await target.drop();
    process.exit(problems.length === 0 ? 0 : 1);
  }
  await seed('proj_large', SPANS);
  await meter.query('VACUUM ANALYZE telemetry_traces, telemetry_trace_ids, telemetry_model_calls');
  if (process.argv.includes('--seed-only')) {
    say(`seeded and kept: ${target.name}`);
    await meter.end();
    await db.destroy();
    process.exit(0);
  }
  }
  const size = async (sql: string) => Number((await meter.query(sql)).rows[0].n);
  const tracesSize = await size(
    `SELECT coalesce((SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'telemetry_traces'::regclass), pg_total_relation_size('telemetry_traces')) AS n`,
  );
  const callsSize = await size(`SELECT sum(pg_total_relation_size(inhrelid)) AS n FROM pg_inherits WHERE inhparent = 'telemetry_model_calls'::regclass`);
  const idsSize = await size(`SELECT coalesce(pg_total_relation_size(to_regclass('telemetry_trace_ids')), 0) AS n`);
  const total = SPANS + SMALL;
  say(
    `${REUSE ? 'data set' : 'seeded'} ${SPANS.toLocaleString('en')} + ${SMALL.toLocaleString('en')} spans (${(total / SPANS_PER_TRACE).toLocaleString('en')} traces, ${((3 * total) / SPANS_PER_TRACE).toLocaleString('en')} span rows) over ${WEEKS} weeks in ${(ms(t) / 1000).toFixed(0)} s: ` +
      `traces ${(tracesSize / 1e6).toFixed(0)} MB, span rows ${(callsSize / 1e6).toFixed(0)} MB, trace ids ${(idsSize / 1e6).toFixed(0)} MB (${((tracesSize + callsSize + idsSize) / total).toFixed(0)} B/span)`,
  );

  if (process.argv.includes('--migration')) {
    // The copy back into one table runs without the pool's statement timeout (a bench-only step).
    const untimed = knexFactory({ client: 'pg', connection: target.url, pool: { min: 1, max: 1 } });
    await unpartitionTraces(untimed);
    await untimed.destroy();
    await meter.query('VACUUM ANALYZE telemetry_traces');
    const writer = new pg.Client({ connectionString: target.url });
    await writer.connect();
    let writing = true;
    const latencies: number[] = [];
    let n = 0;
    const writes = (async () => {
      while (writing) {
        const s = process.hrtime.bigint();
        await writer.query(
          `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
             tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at)
           VALUES ('proj_large', md5($1), now(), now(), 1, 1, 'old', '{}', NULL, '{}', 0, 0, 0, false, '[]', now(), now())`,
          [`w${n++}`],
        );
        latencies.push(ms(s));
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    t = process.hrtime.bigint();
    const c0 = await cpu();
    let beforeSwap = 0;
    await partitionTraces(db, NOW, {
      beforeSwap: async () => {
        writing = false;
        await writes;
        beforeSwap = ms(t);
      },
    });
    const conversion = ms(t);
    await writer.end();
    latencies.sort((a, b) => a - b);
    const count = Number((await meter.query(`SELECT count(*) AS n FROM telemetry_traces`)).rows[0].n);
    const ids = Number((await meter.query(`SELECT count(*) AS n FROM telemetry_trace_ids`)).rows[0].n);
    say(
      `migration 0390 on ${(total / SPANS_PER_TRACE).toLocaleString('en')} traces (${total.toLocaleString('en')} spans, ${(tracesSize / 1e6).toFixed(0)} MB): ${(conversion / 1000).toFixed(2)} s ` +
        `(PostgreSQL CPU ${((await cpu()) - c0).toFixed(2)} s; the swap ${((conversion - beforeSwap) / 1000).toFixed(2)} s); a writer inserting every 5 ms until the swap: ${latencies.length} inserts, ` +
        `median ${percentile(latencies, 0.5).toFixed(1)} ms, longest ${latencies.at(-1)!.toFixed(0)} ms; traces after ${count.toLocaleString('en')} (expected ${(total / SPANS_PER_TRACE + latencies.length).toLocaleString('en')}), ids ${ids.toLocaleString('en')}; load average ${load()}`,
    );
    process.exitCode = count === total / SPANS_PER_TRACE + latencies.length && ids === count ? 0 : 1;
  } else {
  // 1. The explorer's trace queries, large against small.
  // Newest-first lists split on the partition key from the seed's "now" (`--unbounded`: one read over every week, as before).
  const splitRepo = new KnexTraceRepository(db, process.argv.includes('--unbounded') ? undefined : { now: () => NOW });
  const unboundedRepo = new KnexTraceRepository(db);
  const lastDay = { startTime: new Date(TO - DAY), endTime: new Date(TO) };
  const midWeek = { startTime: new Date(FROM + 2 * WEEK_MS), endTime: new Date(FROM + 2 * WEEK_MS + DAY) };
  const searches: Record<string, Omit<TraceSearch, 'projectId'>> = {
    'list, first page (newest)': { limit: 51, sort: '-start_time' },
    'list, last 24 h': { limit: 51, sort: '-start_time', ...lastDay },
    'list, one day 2 weeks back': { limit: 51, sort: '-start_time', ...midWeek },
    'list, by duration': { limit: 51, sort: '-duration_ms' },
    'list, by cost, last 24 h': { limit: 51, sort: '-cost', ...lastDay },
    'filter model, last 24 h': { limit: 51, sort: '-start_time', model: 'claude-sonnet', ...lastDay },
    'filter errors': { limit: 51, sort: '-start_time', status: 'error' },
    'filter min latency 15 s': { limit: 51, sort: '-start_time', minLatencyMs: 15_000 },
    'filter user': { limit: 51, sort: '-start_time', userId: 'user-7' },
    'filter attribute': { limit: 51, sort: '-start_time', attributePair: 'user.tier=enterprise' },
  };
  const sampleTrace = async (projectId: string) =>
    (await meter.query(`SELECT trace_id, session_id FROM telemetry_traces WHERE project_id = $1 AND session_id IS NOT NULL ORDER BY start_time DESC LIMIT 1 OFFSET 1000`, [projectId])).rows[0] as { trace_id: string; session_id: string };
  const floorCpu = async () => {
    const c0 = await cpu();
    const n0 = process.cpuUsage();
    for (let i = 0; i < ROUNDS * 4; i++) await db.raw('SELECT 1');
    const n1 = process.cpuUsage(n0);
    return { pg: ((await cpu()) - c0) / (ROUNDS * 4), node: (n1.user + n1.system) / 1e6 / (ROUNDS * 4) };
  };
  const measure = async (projectId: string, repo: KnexTraceRepository) => {
    const sample = await sampleTrace(projectId);
    const calls: Record<string, () => Promise<unknown>> = {};
    for (const [name, s] of Object.entries(searches)) calls[name] = () => repo.searchTraces({ projectId, ...s });
    calls['filter session'] = () => repo.searchTraces({ projectId, limit: 51, sort: '-start_time', sessionId: sample.session_id });
    calls['trace detail'] = () => repo.findTrace(projectId, sample.trace_id);
    const figures: Record<string, { buffers: number; rows: number; statements: number; cpuMs: number; nodeMs: number }> = {};
    for (const [name, fn] of Object.entries(calls)) {
      const statements = await captured(fn);
      for (let i = 0; i < 3; i++) await fn();
      // Every statement the call sent (a split list sends one or two), buffers summed.
      let buffers = 0;
      for (const q of statements) {
        const { rows } = await db.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${q.sql}`, q.bindings as never);
        const plan = (rows[0]['QUERY PLAN'] as Array<{ Plan: Plan }>)[0]!.Plan;
        buffers += plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
      }
      const result = await fn();
      const c0 = await cpu();
      const n0 = process.cpuUsage();
      for (let i = 0; i < ROUNDS; i++) await fn();
      const n1 = process.cpuUsage(n0);
      figures[name] = { buffers, rows: Array.isArray(result) ? result.length : result ? 1 : 0, statements: statements.length, cpuMs: (((await cpu()) - c0) / ROUNDS) * 1000, nodeMs: (n1.user + n1.system) / 1000 / ROUNDS };
    }
    return figures;
  };
  const table = async (label: string, repo: KnexTraceRepository) => {
    say(`${label}: load average before measuring: ${load()}`);
    const floor = await floorCpu();
    const small = await measure('proj_small', repo);
    const large = await measure('proj_large', repo);
    const floorAfter = await floorCpu();
    say(
      `floors (SELECT 1 through the pool): PostgreSQL CPU ${(floor.pg * 1000).toFixed(2)} / ${(floorAfter.pg * 1000).toFixed(2)} ms, Node CPU ${(floor.node * 1000).toFixed(2)} / ${(floorAfter.node * 1000).toFixed(2)} ms per query; load average ${load()}`,
    );
    say(`| query | buffers small | buffers large | large/small | rows small / large | statements small / large | PG CPU small / large (ms) | Node CPU small / large (ms) |`);
    say(`|---|---|---|---|---|---|---|---|`);
    for (const name of Object.keys(large)) {
      const s = small[name]!;
      const l = large[name]!;
      say(`| ${name} | ${s.buffers} | ${l.buffers} | ${(l.buffers / s.buffers).toFixed(2)}× | ${s.rows} / ${l.rows} | ${s.statements} / ${l.statements} | ${s.cpuMs.toFixed(2)} / ${l.cpuMs.toFixed(2)} | ${s.nodeMs.toFixed(2)} / ${l.nodeMs.toFixed(2)} |`);
    }
    return { small, large };
  };
  const partitioned = await isPartitioned(db, 'telemetry_traces');
  if (partitioned) await table(process.argv.includes('--unbounded') ? 'weekly partitions, one read over every week' : 'weekly partitions, newest-first lists split on the partition key', splitRepo);
  if (process.argv.includes('--plain')) {
    // The same traces in one plain table, as before migration 0390 (its `down`): the partitions' cost.
    if (partitioned) {
      const untimed = knexFactory({ client: 'pg', connection: target.url, pool: { min: 1, max: 1 } });
      t = process.hrtime.bigint();
      await unpartitionTraces(untimed);
      await untimed.destroy();
      // The repository's queries name partition_start (their pruning clause): a copy of start_time here.
      await meter.query('ALTER TABLE telemetry_traces ADD COLUMN partition_start timestamptz(3) GENERATED ALWAYS AS (start_time) STORED');
      say(`traces copied back into one plain table in ${(ms(t) / 1000).toFixed(0)} s`);
    }
    // The detail's lookup goes through the id table (dropped by the down): rebuilt from the traces.
    await meter.query(`CREATE TABLE IF NOT EXISTS telemetry_trace_ids AS SELECT project_id, trace_id, partition_start FROM telemetry_traces`);
    await meter.query(`DO $$ BEGIN ALTER TABLE telemetry_trace_ids ADD PRIMARY KEY (project_id, trace_id); EXCEPTION WHEN invalid_table_definition THEN NULL; END $$`);
    await meter.query('VACUUM ANALYZE telemetry_traces, telemetry_trace_ids');
    await table('one plain table (before 0390), one read', unboundedRepo);
  }

  // 2. Retention of the oldest week at the large size.
  if (!process.argv.includes('--no-retention') && !process.argv.includes('--plain')) {
  const cutoff = new Date(FROM + WEEK_MS);
  const counts = (await meter.query(
    `SELECT (SELECT count(*) FROM telemetry_traces WHERE start_time < $1) AS traces, (SELECT count(*) FROM telemetry_model_calls WHERE start_time < $1) AS calls`,
    [cutoff],
  )).rows[0] as { traces: string; calls: string };
  say(`retention of the oldest week: ${Number(counts.traces).toLocaleString('en')} traces (${(Number(counts.traces) * SPANS_PER_TRACE).toLocaleString('en')} spans), ${Number(counts.calls).toLocaleString('en')} span rows`);
  const clock = { now: () => NOW };
  class Rollback extends Error {}
  let w = await wal();
  let c1 = await cpu();
  t = process.hrtime.bigint();
  let statements = 0;
  let deleteFigures = '';
  await db
    .transaction(async (trx) => {
      const expired = new KnexRetentionRepository(trx as never, clock as never);
      for (const p of ['proj_large', 'proj_small']) {
        while ((await expired.deleteExpiredTraces(p, cutoff, 5000)) === 5000) statements++;
        while ((await expired.deleteExpiredModelCalls(p, cutoff, 5000)) === 5000) statements++;
        statements += 2;
      }
      deleteFigures = `today's DELETE (${statements} chunks of 5,000): ${(ms(t) / 1000).toFixed(2)} s, PostgreSQL CPU ${((await cpu()) - c1).toFixed(2)} s, WAL ${((await walBytes(w)) / 1e6).toFixed(0)} MB (then a VACUUM of the rows; rolled back here)`;
      throw new Rollback();
    })
    .catch((err) => {
      if (!(err instanceof Rollback)) throw err;
    });
  say(deleteFigures);
  w = await wal();
  c1 = await cpu();
  t = process.hrtime.bigint();
  const dropped = await new KnexRetentionRepository(db, clock as never).dropExpiredPartitions(cutoff);
  say(
    `DROP of the week's partitions (${dropped.join(', ')}; the traces' ids deleted and their session changes queued first): ${(ms(t) / 1000).toFixed(2)} s, ` +
      `PostgreSQL CPU ${((await cpu()) - c1).toFixed(2)} s, WAL ${((await walBytes(w)) / 1e6).toFixed(1)} MB; load average ${load()}`,
  );
  }
  }
} finally {
  await meter.end();
  await db.destroy();
  if (!KEEP) await target.drop();
}
console.log(`\n${out.join('\n')}`);
