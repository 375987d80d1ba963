/**
 * Time partitions of the usage events (issue 40 item 6, migration 0380), on PostgreSQL with a data
 * set seeded in SQL (generate_series, not HTTP): `--events` rows (default 3,000,000) over the last
 * six weeks, one organization, 1,000 customers.
 *
 * 1. migration 0380's online conversion of the plain table while a writer ingests a 20-event batch
 *    every few ms — first as the previous version does (`ON CONFLICT (org_id, id)` on the plain
 *    table), after the swap as the new one (the id claimed in usage_event_ids): the conversion's
 *    steps, the writer's longest batch, and how many of its batches failed (the previous
 *    version's inserts after the swap, retried by the new statement);
 * 2. the sizes: bytes per event of usage_events and of usage_event_ids;
 * 3. retention of the oldest week: a chunked DELETE (5,000 rows a statement) on a plain copy
 *    against the job's path: the week's ids deleted (row by row, found through the partition's rows
 *    and the primary key: the cost the deduplication table adds), then DROP of the partition —
 *    wall time, PostgreSQL CPU, WAL written.
 *
 * Usage: tsx scripts/bench/usage-partitions.ts [--events 3000000] [--keep]
 */
import pg from 'pg';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { down as unpartition, partitionUsageEvents } from '../../src/db/migrations/0380_usage_event_partitions.js';
import { createWeekPartitions, WEEK_MS, weekStart } from '../../src/db/partitions.js';
import { KnexUsageEventStorage } from '../../src/usage/event-storage.repository.js';
import { createDatabase, percentile } from './common.js';
import { postgresCpuSeconds } from './postgres-cpu.js';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const EVENTS = arg('events', 3_000_000);
const KEEP = process.argv.includes('--keep');
const NOW = new Date();
const WEEKS = 6;
const FROM = weekStart(NOW.getTime()) - (WEEKS - 1) * WEEK_MS;

const target = await createDatabase('kassa_bench_usage_partitions');
const database = await openDatabase({ databaseUrl: target.url });
const db = database.db;
const meter = new pg.Client({ connectionString: target.url });
await meter.connect();
const cpu = async () => (await postgresCpuSeconds(meter, target.name)) ?? NaN;
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
const wal = async () => (await meter.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
const walBytes = async (from: string) => Number((await meter.query<{ n: string }>(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn) AS n`, [from])).rows[0]!.n);
const size = async (relation: string) => Number((await meter.query<{ n: string }>(`SELECT pg_total_relation_size($1) AS n`, [relation])).rows[0]!.n);
const out: string[] = [];
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
  await unpartition(db); // the table as before migration 0380
  await db.raw(`INSERT INTO organizations (id, name, created_at, updated_at) VALUES ('org_bench', 'Bench', now(), now())`);
  let t = process.hrtime.bigint();
  await heavy(
    `INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at)
     SELECT 'org_bench', 'ev_' || i, 'CUS_' || lpad((i % 1000)::text, 24, '0'), 'llm', to_timestamp(? / 1000.0 + (i::float8 / ?) * ? / 1000.0),
            jsonb_build_object('tokens', i % 977 + 1, 'model', CASE WHEN i % 3 = 0 THEN 'gpt-4o' ELSE 'gpt-4o-mini' END), now()
       FROM generate_series(1, ?) AS i`,
    [FROM, EVENTS, NOW.getTime() - 60_000 - FROM, EVENTS],
  );
  await meter.query('VACUUM ANALYZE usage_events');
  const plainSize = await size('usage_events');
  say(`seeded ${EVENTS.toLocaleString('en')} usage events over ${WEEKS} weeks in ${(ms(t) / 1000).toFixed(1)} s: ${(plainSize / 1e6).toFixed(0)} MB with its primary key and index (${(plainSize / EVENTS).toFixed(0)} B/event)`);

  // 1. Online conversion with a writer running.
  const writer = new pg.Client({ connectionString: target.url });
  await writer.connect();
  let writing = true;
  let migrated = false;
  let failed = 0;
  let written = 0;
  const latencies: number[] = [];
  const writes = (async () => {
    let n = 0;
    while (writing) {
      const batch = JSON.stringify(Array.from({ length: 20 }, (_, i) => ({ id: `w${n}_${i}`, ts: new Date().toISOString() })));
      n++;
      const s = process.hrtime.bigint();
      try {
        if (!migrated) {
          await writer.query(
            `INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at)
             SELECT 'org_bench', r.id, 'CUS_writer', 'llm', r.ts, '{"tokens": 1}', now() FROM jsonb_to_recordset($1::jsonb) AS r(id text, ts timestamptz)
             ON CONFLICT (org_id, id) DO NOTHING`,
            [batch],
          );
        } else {
          await writer.query(
            `WITH b AS (SELECT r.id, r.ts FROM jsonb_to_recordset($1::jsonb) AS r(id text, ts timestamptz)),
                  c AS (INSERT INTO usage_event_ids (org_id, id, ts) SELECT 'org_bench', id, ts FROM b ON CONFLICT (org_id, id) DO NOTHING RETURNING id)
             INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at)
             SELECT 'org_bench', b.id, 'CUS_writer', 'llm', b.ts, '{"tokens": 1}', now() FROM b JOIN c USING (id)`,
            [batch],
          );
        }
        written += 20;
        latencies.push(ms(s));
      } catch (err) {
        // The previous version's statement on the partitioned table (no index to arbitrate on): the new one from now on, this batch again.
        if ((err as { code?: string }).code !== '42P10') throw err;
        failed++;
        migrated = true;
        n--;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  await new Promise((r) => setTimeout(r, 300));
  t = process.hrtime.bigint();
  const c0 = await cpu();
  await partitionUsageEvents(db, NOW);
  const conversion = ms(t);
  const conversionCpu = (await cpu()) - c0;
  await new Promise((r) => setTimeout(r, 300));
  writing = false;
  await writes;
  await writer.end();
  latencies.sort((a, b) => a - b);
  say(
    `migration 0380 on ${EVENTS.toLocaleString('en')} events: ${(conversion / 1000).toFixed(2)} s (PostgreSQL CPU ${conversionCpu.toFixed(2)} s, mostly the copy of the ids); ` +
      `a writer ingesting 20 events every 5 ms meanwhile: ${latencies.length} batches, median ${percentile(latencies, 0.5).toFixed(1)} ms, longest ${latencies.at(-1)!.toFixed(0)} ms; ` +
      `${failed} batch of the previous version's statement failed after the swap (retried with the new one, stored once)`,
  );
  const total = Number((await meter.query(`SELECT count(*) AS n FROM usage_events`)).rows[0].n);
  const ids = Number((await meter.query(`SELECT count(*) AS n FROM usage_event_ids`)).rows[0].n);
  if (total !== EVENTS + written || ids !== total) throw new Error(`after migration: ${total} events, ${ids} ids, expected ${EVENTS + written}`);

  // 2. The same rows in weekly partitions, and a plain copy for the DELETE.
  await heavy('CREATE TABLE bench_plain AS SELECT * FROM usage_events_legacy');
  await heavy('CREATE INDEX ON bench_plain (org_id, customer_id, name, ts)');
  await heavy('ALTER TABLE bench_plain ADD PRIMARY KEY (org_id, id)');
  await db.raw('ALTER TABLE usage_events DETACH PARTITION usage_events_legacy');
  await db.transaction((trx) => createWeekPartitions(trx, 'usage_events', Array.from({ length: WEEKS }, (_, i) => FROM + i * WEEK_MS)));
  await heavy('INSERT INTO usage_events SELECT * FROM usage_events_legacy');
  await db.raw('DROP TABLE usage_events_legacy');
  await meter.query('VACUUM ANALYZE usage_events, usage_event_ids, bench_plain');
  const partitionedSize = Number((await meter.query<{ n: string }>(`SELECT sum(pg_total_relation_size(inhrelid)) AS n FROM pg_inherits WHERE inhparent = 'usage_events'::regclass`)).rows[0]!.n);
  const idsSize = await size('usage_event_ids');
  say(
    `sizes at ${total.toLocaleString('en')} events: usage_events in weekly partitions ${(partitionedSize / total).toFixed(0)} B/event (the plain table with its primary key ${(plainSize / EVENTS).toFixed(0)}), ` +
      `usage_event_ids ${(idsSize / total).toFixed(0)} B/event (with its primary key)`,
  );

  // 3. Retention of the oldest week.
  const cutoff = new Date(FROM + WEEK_MS);
  const expired = Number((await meter.query(`SELECT count(*) AS n FROM bench_plain WHERE ts < $1`, [cutoff])).rows[0].n);
  let w = await wal();
  let c1 = await cpu();
  t = process.hrtime.bigint();
  let statements = 0;
  for (;;) {
    statements++;
    const r = await db.raw(`DELETE FROM bench_plain WHERE ctid IN (SELECT ctid FROM bench_plain WHERE org_id = 'org_bench' AND ts < ? LIMIT 5000) RETURNING 1`, [cutoff]);
    if (r.rows.length < 5000) break;
  }
  say(
    `retention DELETE of ${expired.toLocaleString('en')} events (one week, ${statements} statements): ${(ms(t) / 1000).toFixed(2)} s, ` +
      `PostgreSQL CPU ${((await cpu()) - c1).toFixed(2)} s, WAL ${((await walBytes(w)) / 1e6).toFixed(0)} MB (and a VACUUM to come)`,
  );
  // The ids of the week first (through the partition's rows and the primary key), then DROP: the job's order.
  const storage = new KnexUsageEventStorage(db);
  const idsBefore = Number((await meter.query(`SELECT count(*) AS n FROM usage_event_ids`)).rows[0].n);
  w = await wal();
  c1 = await cpu();
  t = process.hrtime.bigint();
  const dropped = await storage.dropPartitionsBefore(cutoff);
  const idsAfter = Number((await meter.query(`SELECT count(*) AS n FROM usage_event_ids`)).rows[0].n);
  say(
    `retention by the job's path (${dropped.join(', ')}): the week's ${(idsBefore - idsAfter).toLocaleString('en')} ids deleted, then DROP: ${(ms(t) / 1000).toFixed(2)} s, ` +
      `PostgreSQL CPU ${((await cpu()) - c1).toFixed(2)} s, WAL ${((await walBytes(w)) / 1e6).toFixed(0)} MB`,
  );
} finally {
  await meter.end();
  await db.destroy();
  if (!KEEP) await target.drop();
}
console.log(`\n${out.join('\n')}`);
