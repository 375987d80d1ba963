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
 *    PostgreSQL CPU per request (from /proc) against a floor (SELECT 1), with the load average.
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
 * Usage: tsx scripts/bench/trace-partitions.ts [--spans 10000000] [--small 200000] [--keep] [--migration]
 */
import { loadavg } from 'node:os';
import pg from 'pg';
import knexFactory from 'knex';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { createWeekPartitions, WEEK_MS, weekStart } from '../../src/db/partitions.js';
import { KnexTraceRepository, type TraceSearch } from '../../src/telemetry/traces.repository.js';
import { KnexRetentionRepository } from '../../src/telemetry/retention.repository.js';
import { down as unpartitionTraces, partitionTraces } from '../../src/db/migrations/0390_telemetry_trace_partitions.js';
import { createDatabase, percentile } from './common.js';
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
const NOW = new Date();
const WEEKS = 5;
const TO = NOW.getTime();
const FROM = weekStart(TO) - (WEEKS - 1) * WEEK_MS;
const DAY = 86_400_000;

const target = await createDatabase('kassa_bench_traceparts');
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

/** Seeds one project's traces (ids, span rows) evenly over [FROM, TO). */
async function seed(projectId: string, spans: number): Promise<void> {
  const traces = Math.round(spans / SPANS_PER_TRACE);
  // Ten spans per document (~200 B each before compression: ids, times, a few attributes).
  await heavy(
    `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models,
       tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, session_id, user_id, attribute_pairs, partition_start)
     SELECT ?, md5(? || i), st, st + make_interval(secs => d / 1000.0), d, ${SPANS_PER_TRACE}, 'chat ' || (i % 50), '{"service.name":"bench"}',
            m, ARRAY[m], 100 + i % 1000, 20 + i % 300, (i % 1000) / 1e5, i % 37 = 0,
            (SELECT '[' || string_agg(format('{"span_id":"%s","parent_span_id":null,"name":"step %s","kind":"internal","start_ms":%s,"end_ms":%s,"status_code":"ok","status_message":null,"attributes":{"llm.model":"%s","llm.tokens.input":%s}}',
                      substr(md5(i || '.' || k), 1, 16), k, (extract(epoch FROM st) * 1000)::bigint + k, (extract(epoch FROM st) * 1000)::bigint + k + 10, m, k), ',') || ']'
               FROM generate_series(1, ${SPANS_PER_TRACE}) k),
            st, st, CASE WHEN i % 2 = 0 THEN 's' || (i / 10) END, 'u' || (i % 1000), ARRAY['env=prod', 'tier=' || (i % 10)], st
       FROM (SELECT i, to_timestamp((? + (i::float8 / ?) * ?) / 1000.0) AS st, 50 + (i * 7919) % 20000 AS d,
                    (ARRAY['gpt-4o', 'gpt-4o-mini', 'claude-sonnet', 'llama-3'])[1 + i % 4] AS m
               FROM generate_series(1, ?) AS i) x`,
    [projectId, projectId, FROM, traces, TO - FROM - 60_000, traces],
  );
  await heavy(`INSERT INTO telemetry_trace_ids (project_id, trace_id, partition_start) SELECT project_id, trace_id, partition_start FROM telemetry_traces WHERE project_id = ?`, [projectId]);
  await heavy(
    `INSERT INTO telemetry_model_calls (project_id, start_time, trace_id, span_id, model, vendor, duration_ms, tokens_input, tokens_output, cost, is_error)
     SELECT project_id, start_time + make_interval(secs => k / 1000.0), trace_id, substr(md5(trace_id || k), 1, 16), model, 'openai', 10, k, k, 0.001, has_error
       FROM telemetry_traces, generate_series(1, 3) k WHERE project_id = ?`,
    [projectId],
  );
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
  await db.raw(`INSERT INTO organizations (id, name, created_at, updated_at) VALUES ('org_bench', 'Bench', now(), now())`);
  for (const p of ['proj_large', 'proj_small']) {
    await db.raw(`INSERT INTO telemetry_projects (id, org_id, name, slug, environment, created_at, updated_at) VALUES (?, 'org_bench', ?, ?, 'production', now(), now())`, [p, p, p]);
  }
  const weeks = Array.from({ length: WEEKS }, (_, i) => FROM + i * WEEK_MS);
  for (const table of ['telemetry_traces', 'telemetry_model_calls'] as const) await db.transaction((trx) => createWeekPartitions(trx, table, weeks));
  let t = process.hrtime.bigint();
  await seed('proj_small', SMALL);
  await seed('proj_large', SPANS);
  await meter.query('VACUUM ANALYZE telemetry_traces, telemetry_trace_ids, telemetry_model_calls');
  const size = async (sql: string) => Number((await meter.query(sql)).rows[0].n);
  const tracesSize = await size(`SELECT sum(pg_total_relation_size(inhrelid)) AS n FROM pg_inherits WHERE inhparent = 'telemetry_traces'::regclass`);
  const callsSize = await size(`SELECT sum(pg_total_relation_size(inhrelid)) AS n FROM pg_inherits WHERE inhparent = 'telemetry_model_calls'::regclass`);
  const idsSize = await size(`SELECT pg_total_relation_size('telemetry_trace_ids') AS n`);
  const total = SPANS + SMALL;
  say(
    `seeded ${SPANS.toLocaleString('en')} + ${SMALL.toLocaleString('en')} spans (${(total / SPANS_PER_TRACE).toLocaleString('en')} traces, ${((3 * total) / SPANS_PER_TRACE).toLocaleString('en')} span rows) over ${WEEKS} weeks in ${(ms(t) / 1000).toFixed(0)} s: ` +
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
  const repo = new KnexTraceRepository(db);
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
    'filter user': { limit: 51, sort: '-start_time', userId: 'u7' },
    'filter attribute': { limit: 51, sort: '-start_time', attributePair: 'tier=3' },
  };
  const sampleTrace = async (projectId: string) =>
    (await meter.query(`SELECT trace_id, session_id FROM telemetry_traces WHERE project_id = $1 AND session_id IS NOT NULL ORDER BY start_time DESC LIMIT 1 OFFSET 1000`, [projectId])).rows[0] as { trace_id: string; session_id: string };
  const floorCpu = async () => {
    const c0 = await cpu();
    for (let i = 0; i < ROUNDS; i++) await db.raw('SELECT 1');
    return ((await cpu()) - c0) / ROUNDS;
  };
  const measure = async (projectId: string) => {
    const sample = await sampleTrace(projectId);
    const calls: Record<string, () => Promise<unknown>> = {};
    for (const [name, s] of Object.entries(searches)) calls[name] = () => repo.searchTraces({ projectId, ...s });
    calls['filter session'] = () => repo.searchTraces({ projectId, limit: 51, sort: '-start_time', sessionId: sample.session_id });
    calls['trace detail'] = () => repo.findTrace(projectId, sample.trace_id);
    const figures: Record<string, { buffers: number; rows: number; cpuMs: number }> = {};
    for (const [name, fn] of Object.entries(calls)) {
      const [q] = await captured(fn);
      for (let i = 0; i < 3; i++) await fn();
      const { rows } = await db.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${q!.sql}`, q!.bindings as never);
      const plan = (rows[0]['QUERY PLAN'] as Array<{ Plan: Plan }>)[0]!.Plan;
      const c0 = await cpu();
      for (let i = 0; i < ROUNDS; i++) await fn();
      figures[name] = { buffers: plan['Shared Hit Blocks'] + plan['Shared Read Blocks'], rows: plan['Actual Rows'], cpuMs: (((await cpu()) - c0) / ROUNDS) * 1000 };
    }
    return figures;
  };
  say(`load average before measuring: ${load()}`);
  const floor = (await floorCpu()) * 1000;
  const small = await measure('proj_small');
  const large = await measure('proj_large');
  const floorAfter = (await floorCpu()) * 1000;
  say(`PostgreSQL CPU floor (SELECT 1): ${floor.toFixed(2)} / ${floorAfter.toFixed(2)} ms per query; load average ${load()}`);
  say(`| query | buffers small | buffers large | large/small | rows small / large | PG CPU small | PG CPU large (ms) |`);
  say(`|---|---|---|---|---|---|---|`);
  for (const name of Object.keys(large)) {
    const s = small[name]!;
    const l = large[name]!;
    say(`| ${name} | ${s.buffers} | ${l.buffers} | ${(l.buffers / s.buffers).toFixed(2)}× | ${s.rows} / ${l.rows} | ${s.cpuMs.toFixed(2)} | ${l.cpuMs.toFixed(2)} |`);
  }

  // 2. Retention of the oldest week at the large size.
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
} finally {
  await meter.end();
  await db.destroy();
  if (!KEEP) await target.drop();
}
console.log(`\n${out.join('\n')}`);
