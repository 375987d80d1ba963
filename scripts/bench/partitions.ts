/**
 * Time partitions of the span rows (issue 40 item 6), on PostgreSQL with a data set seeded in SQL
 * (generate_series, not HTTP): `--spans` model-call rows (default 3,000,000) over the last six
 * weeks, four projects.
 *
 * 1. the explorer's sample queries (one day of one project; a week of one project aggregated) on
 *    the plain table, as before migration 0290;
 * 2. migration 0290's online conversion on that table while a writer inserts a row every few ms:
 *    the conversion's duration and the writer's longest insert (what the lock costs ingest);
 * 3. the same data in weekly partitions: the explorer's queries again;
 * 4. retention of the oldest week: today's chunked DELETE (5,000 rows a statement, per project) on a
 *    plain copy against DROP of the week's partition — wall time, PostgreSQL CPU, WAL written.
 * CPU is PostgreSQL's (from /proc) per query, next to a floor (SELECT 1) measured in the same run:
 * the machine is shared, read the figures against the floor.
 *
 * Usage: tsx scripts/bench/partitions.ts [--spans 3000000] [--keep]
 */
import pg from 'pg';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { down as unpartition, partitionModelCalls } from '../../src/db/migrations/0290_telemetry_span_partitions.js';
import { createWeekPartitions, WEEK_MS, weekStart } from '../../src/db/partitions.js';
import { createDatabase, percentile } from './common.js';
import { postgresCpuSeconds } from './postgres-cpu.js';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SPANS = arg('spans', 3_000_000);
const ROUNDS = arg('rounds', 30);
const KEEP = process.argv.includes('--keep');
const NOW = new Date();
const WEEKS = 6;
const FROM = weekStart(NOW.getTime()) - (WEEKS - 1) * WEEK_MS;

const target = await createDatabase('kassa_bench_partitions');
const database = await openDatabase({ databaseUrl: target.url });
const db = database.db;
const meter = new pg.Client({ connectionString: target.url });
await meter.connect();
const cpu = async () => (await postgresCpuSeconds(meter, target.name)) ?? NaN;
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
const wal = async () => (await meter.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
const walBytes = async (from: string) => Number((await meter.query<{ n: string }>(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn) AS n`, [from])).rows[0]!.n);
const out: string[] = [];
/** A statement without the pool's timeouts (seeding, copies), on the meter's own connection. */
const heavy = async (sql: string, bindings: unknown[] = []) => {
  let n = 0;
  await meter.query(sql.replace(/\?/g, () => `$${++n}`), bindings);
};
const say = (line: string) => {
  out.push(line);
  console.log(line);
};

try {
  await migrateLatest(db);
  await unpartition(db); // the table as before migration 0290
  await db.raw(`INSERT INTO organizations (id, name, created_at, updated_at) VALUES ('org_bench', 'Bench', now(), now())`);
  for (let p = 0; p < 4; p++) {
    await db.raw(`INSERT INTO telemetry_projects (id, org_id, name, slug, environment, created_at, updated_at) VALUES (?, 'org_bench', ?, ?, 'production', now(), now())`, [`proj_${p}`, `P${p}`, `p${p}`]);
  }
  let t = process.hrtime.bigint();
  await heavy(
    `INSERT INTO telemetry_model_calls (project_id, start_time, trace_id, span_id, model, vendor, duration_ms, tokens_input, tokens_output, cost, is_error)
     SELECT 'proj_' || (i % 4), to_timestamp(? / 1000.0 + (i::float8 / ?) * ? / 1000.0), md5(i::text), substr(md5((i + 1)::text), 1, 16),
            (ARRAY['gpt-4o', 'gpt-4o-mini', 'claude-sonnet', 'llama-3'])[1 + i % 4], 'openai', 50 + i % 900, 100 + i % 1000, 20 + i % 300, (i % 1000) / 1e5, i % 37 = 0
       FROM generate_series(1, ?) AS i`,
    [FROM, SPANS, NOW.getTime() - FROM, SPANS],
  );
  await meter.query('VACUUM ANALYZE telemetry_model_calls');
  const size = Number((await db.raw(`SELECT pg_total_relation_size('telemetry_model_calls') AS n`)).rows[0].n);
  say(`seeded ${SPANS.toLocaleString('en')} span rows over ${WEEKS} weeks in ${(ms(t) / 1000).toFixed(1)} s: ${(size / 1e6).toFixed(0)} MB with index (${(size / SPANS).toFixed(0)} B/row, ${((size / WEEKS) / 1e6).toFixed(0)} MB/week)`);

  const day = weekStart(NOW.getTime()) - 3 * WEEK_MS + 2 * 86_400_000;
  const QUERIES: Record<string, [string, unknown[]]> = {
    'floor (SELECT 1)': ['SELECT 1', []],
    'samples, 1 day, 1 project': [
      `SELECT x.i, s.* FROM json_to_recordset($1::json) AS x(i int, f timestamptz, t timestamptz)
        CROSS JOIN LATERAL (SELECT project_id, model, vendor, duration_ms, tokens_input, tokens_output, cost, is_error
                              FROM telemetry_model_calls WHERE project_id = ANY($2::text[]) AND start_time >= x.f AND start_time < x.t OFFSET 0) s`,
      [JSON.stringify([{ i: 0, f: new Date(day).toISOString(), t: new Date(day + 86_400_000).toISOString() }]), '{proj_1}'],
    ],
    'aggregate, 7 days, 1 project': [
      `SELECT x.i, s.* FROM json_to_recordset($1::json) AS x(i int, f timestamptz, t timestamptz)
        CROSS JOIN LATERAL (SELECT project_id, model, vendor, count(*) AS requests, count(*) FILTER (WHERE is_error) AS errors
                              FROM telemetry_model_calls WHERE project_id = ANY($2::text[]) AND start_time >= x.f AND start_time < x.t
                             GROUP BY project_id, model, vendor) s`,
      [JSON.stringify([{ i: 0, f: new Date(day).toISOString(), t: new Date(day + 7 * 86_400_000).toISOString() }]), '{proj_1}'],
    ],
  };
  const client = new pg.Client({ connectionString: target.url });
  await client.connect();
  await client.query('SET jit = off'); // as Kassa's pool sets it (src/db/knex.ts)
  const explorer = async (label: string) => {
    for (const [name, [sql, params]] of Object.entries(QUERIES)) {
      for (let i = 0; i < 3; i++) await client.query(sql, params);
      const times: number[] = [];
      const c0 = await cpu();
      for (let i = 0; i < ROUNDS; i++) {
        const s = process.hrtime.bigint();
        await client.query(sql, params);
        times.push(ms(s));
      }
      const c = ((await cpu()) - c0) / ROUNDS;
      times.sort((a, b) => a - b);
      say(`${label.padEnd(12)} ${name.padEnd(30)} median ${percentile(times, 0.5).toFixed(2).padStart(7)} ms  PostgreSQL CPU ${(c * 1000).toFixed(2).padStart(6)} ms/query`);
    }
  };
  await explorer('plain');

  // 2. Online conversion with a writer running.
  const writer = new pg.Client({ connectionString: target.url });
  await writer.connect();
  let writing = true;
  const latencies: number[] = [];
  const writes = (async () => {
    let n = 0;
    while (writing) {
      const s = process.hrtime.bigint();
      await writer.query(
        `INSERT INTO telemetry_model_calls (project_id, start_time, trace_id, span_id, model, vendor, duration_ms, tokens_input, tokens_output, cost, is_error)
         VALUES ('proj_0', now(), md5($1), 'writer', 'gpt-4o', 'openai', 10, 1, 1, 0, false)`,
        [`w${n++}`],
      );
      latencies.push(ms(s));
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  await new Promise((r) => setTimeout(r, 300));
  t = process.hrtime.bigint();
  const c0 = await cpu();
  await partitionModelCalls(db, NOW);
  const conversion = ms(t);
  const conversionCpu = (await cpu()) - c0;
  await new Promise((r) => setTimeout(r, 300));
  writing = false;
  await writes;
  await writer.end();
  latencies.sort((a, b) => a - b);
  say(
    `migration 0290 on ${SPANS.toLocaleString('en')} rows: ${(conversion / 1000).toFixed(2)} s (PostgreSQL CPU ${conversionCpu.toFixed(2)} s); ` +
      `a writer inserting every 5 ms meanwhile: ${latencies.length} inserts, none lost, median ${percentile(latencies, 0.5).toFixed(1)} ms, longest ${latencies.at(-1)!.toFixed(0)} ms`,
  );
  const total = Number((await meter.query(`SELECT count(*) AS n FROM telemetry_model_calls`)).rows[0].n);
  if (total !== SPANS + latencies.length) throw new Error(`rows after migration ${total}, expected ${SPANS + latencies.length}`);
  await explorer('legacy part.');

  // 3. The same rows in weekly partitions (what a new install, or an old one after its legacy
  // partition aged out, holds); and a plain copy for today's DELETE.
  await heavy('CREATE TABLE bench_plain AS SELECT * FROM telemetry_model_calls_legacy');
  await heavy('CREATE INDEX ON bench_plain (project_id, start_time)');
  await db.raw('ALTER TABLE telemetry_model_calls DETACH PARTITION telemetry_model_calls_legacy');
  await db.transaction((trx) => createWeekPartitions(trx, 'telemetry_model_calls', Array.from({ length: WEEKS }, (_, i) => FROM + i * WEEK_MS)));
  await heavy('INSERT INTO telemetry_model_calls SELECT * FROM telemetry_model_calls_legacy');
  await db.raw('DROP TABLE telemetry_model_calls_legacy');
  await meter.query('VACUUM ANALYZE telemetry_model_calls, bench_plain');
  await explorer('weekly');

  // 4. Retention of the oldest week.
  const cutoff = new Date(FROM + WEEK_MS);
  const expired = Number((await meter.query(`SELECT count(*) AS n FROM bench_plain WHERE start_time < $1`, [cutoff])).rows[0].n);
  let w = await wal();
  let c1 = await cpu();
  t = process.hrtime.bigint();
  let statements = 0;
  for (let p = 0; p < 4; p++) {
    for (;;) {
      statements++;
      const r = await db.raw(
        `DELETE FROM bench_plain WHERE ctid IN (SELECT ctid FROM bench_plain WHERE project_id = ? AND start_time < ? LIMIT 5000) RETURNING 1`,
        [`proj_${p}`, cutoff],
      );
      if (r.rows.length < 5000) break;
    }
  }
  say(
    `retention DELETE of ${expired.toLocaleString('en')} rows (one week, ${statements} statements): ${(ms(t) / 1000).toFixed(2)} s, ` +
      `PostgreSQL CPU ${((await cpu()) - c1).toFixed(2)} s, WAL ${((await walBytes(w)) / 1e6).toFixed(0)} MB (and a VACUUM to come)`,
  );
  w = await wal();
  c1 = await cpu();
  t = process.hrtime.bigint();
  await db.raw(`DROP TABLE telemetry_model_calls_p${new Date(FROM).toISOString().slice(0, 10).replaceAll('-', '')}`);
  say(`retention DROP of the same week's partition: ${ms(t).toFixed(1)} ms, PostgreSQL CPU ${(((await cpu()) - c1) * 1000).toFixed(0)} ms, WAL ${((await walBytes(w)) / 1e3).toFixed(0)} kB`);
  await client.end();
} finally {
  await meter.end();
  await db.destroy();
  if (!KEEP) await target.drop();
}
console.log(`\n${out.join('\n')}`);
