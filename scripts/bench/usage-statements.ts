/**
 * `npx tsx scripts/bench/usage-statements.ts`: where PostgreSQL's CPU goes when one usage-event
 * batch is ingested (issue 38, ingest ≥ 30,000 events/s) — per statement, not per request.
 *
 * It runs the production ingest path (UsageEventService.ingest, the services as the API builds
 * them) in this process on a pool of ONE connection, so every statement runs on one PostgreSQL
 * backend, one after another. Around each statement (at the driver: knex's and the named prepared ones)
 * it reads the backend's CPU time from /proc/<pid>/schedstat (nanoseconds, on-CPU time), and sums
 * it per statement text. The backend's idle time between statements costs nothing, so the sum of
 * the statements is the backend's CPU per batch; the background writers (WAL writer, background
 * writer, checkpointer, autovacuum) are read as a whole over the run, as bench:usage reads them.
 *
 * The data set is bench:usage's, in a database kept for the purpose (BENCH_USAGE_DATABASE,
 * default kassa_bench_usage_statements, seeded by `BENCH_USAGE_DATABASE=… BENCH_USAGE_SEED_ONLY=1
 * BENCH_USAGE_SIZES=0 npm run bench:usage` when missing): 1,000 customers with an externalId, two
 * meters over `llm` (sum of `tokens`, count), 20 subscribers of a metered price. The batches are
 * bench:usage's: 1,000 events, every customer named once by externalId, timestamps over the last
 * 50 minutes. BENCH_STATEMENT_BATCHES (default 40) batches are measured after 5 of warm-up.
 * PostgreSQL must run on this machine (/proc).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { systemClock } from '../../src/kernel/clock.js';
import { createServices } from '../../src/services.js';
import { DEFAULT_SERVER_URL } from '../../tools/cluster.js';
import { postgresCpuSeconds } from './postgres-cpu.js';
import { machine } from './summary.js';

const serverUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER_URL;
const DATABASE = process.env.BENCH_USAGE_DATABASE ?? 'kassa_bench_usage_statements';
const BATCHES = Number(process.env.BENCH_STATEMENT_BATCHES ?? 40);
const BATCH = 1000;
const CUSTOMERS = 1000;

const onCpuNs = (pid: number): number => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);

/** A statement's text with its literal lists folded, so each statement of a batch is one line. */
const shape = (sql: string): string =>
  sql
    .replace(/\s+/g, ' ')
    .replace(/\(\$\d+(, \$\d+)*\)/g, '(…)')
    .replace(/\$\d+/g, '?')
    .trim()
    .slice(0, 110);

async function main(): Promise<void> {
  const url = new URL(serverUrl);
  url.pathname = `/${DATABASE}`;
  const direct = new pg.Client({ connectionString: url.toString() });
  await direct.connect();
  const state = (await direct.query<{ org_id: string }>('SELECT org_id FROM bench_usage_state').catch(() => ({ rows: [] }))).rows[0];
  if (!state) throw new Error(`${DATABASE} holds no bench:usage data set: seed it with BENCH_USAGE_DATABASE=${DATABASE} BENCH_USAGE_SEED_ONLY=1 BENCH_USAGE_SIZES=0 npm run bench:usage`);
  // Migrations (this checkout's, e.g. a new index) on a pool of their own: migrateLatest holds a connection for its lock.
  const migrator = await openDatabase({ databaseUrl: url.toString(), poolMax: 2 });
  await migrateLatest(migrator.db);
  await migrator.close();
  const database = await openDatabase({ databaseUrl: url.toString(), poolMax: 1 });
  const services = createServices({ db: database.db, clock: systemClock, secretBox: new SecretBox(randomBytes(32)) });
  const pid = Number((await database.db.raw('SELECT pg_backend_pid() AS pid')).rows[0].pid);

  const perShape = new Map<string, { ns: number; calls: number }>();
  let measuring = false;
  /** The batch's insert statement, kept to be EXPLAINed once more with fresh ids. */
  let largest: { sql: string; bindings: unknown[] } | undefined;
  const record = (sql: string, at: number) => {
    const key = shape(sql);
    const s = perShape.get(key) ?? { ns: 0, calls: 0 };
    s.ns += onCpuNs(pid) - at;
    s.calls++;
    perShape.set(key, s);
  };
  // Every statement of the pool's one connection, whether knex sends it or a named prepared
  // statement (src/db/knex.ts runStatement, which knex's query events do not see): timed at the
  // driver, from the call to the answer.
  type Query = (this: pg.Client, config: unknown, values?: unknown, callback?: unknown) => unknown;
  const query = pg.Client.prototype.query as unknown as Query;
  (pg.Client.prototype as unknown as { query: Query }).query = function (this: pg.Client, config, values, callback) {
    if (!measuring || this === direct) return query.call(this, config, values, callback);
    const sql = typeof config === 'string' ? config : (config as { text: string }).text;
    const bindings = Array.isArray(values) ? values : ((config as { values?: unknown[] }).values ?? []);
    if (sql.includes('INSERT INTO usage_event_ids')) largest = { sql, bindings };
    const at = onCpuNs(pid);
    const finish = () => record(sql, at);
    if (typeof values === 'function') return query.call(this, config, (err: unknown, res: unknown) => (finish(), (values as (e: unknown, r: unknown) => void)(err, res)));
    if (typeof callback === 'function') return query.call(this, config, values, (err: unknown, res: unknown) => (finish(), (callback as (e: unknown, r: unknown) => void)(err, res)));
    const result = query.call(this, config, values) as Promise<unknown> | undefined;
    result?.then(finish, finish);
    return result;
  };

  let n = 0;
  const makeBatch = () => {
    const now = Date.now();
    return Array.from({ length: BATCH }, () => {
      const i = n++;
      return {
        id: `st_${i}_${randomUUID().slice(0, 8)}`,
        customer: { externalId: `user_${(i * 7919) % CUSTOMERS}` },
        name: 'llm',
        timestamp: new Date(now - (i % 3_000_000)).toISOString(),
        properties: { tokens: (i % 977) + 1, model: i % 3 === 0 ? 'gpt-4o' : 'gpt-4o-mini' },
      };
    });
  };
  for (let i = 0; i < 5; i++) await services.modules.usage.events.ingest(state.org_id, makeBatch());
  // Nothing queued before the measured batches: the fold below folds exactly their deltas (migration 0395).
  while (await services.modules.usage.events.foldRollups());
  const batches = Array.from({ length: BATCHES }, makeBatch);
  const wal0 = (await direct.query<{ lsn: string }>('SELECT pg_current_wal_lsn() AS lsn')).rows[0]!.lsn;
  const backend0 = onCpuNs(pid);
  const all0 = await postgresCpuSeconds(direct, DATABASE);
  const t0 = performance.now();
  const node0 = process.cpuUsage();
  measuring = true;
  let accepted = 0;
  for (const batch of batches) accepted += (await services.modules.usage.events.ingest(state.org_id, batch)).accepted;
  measuring = false;
  // This process's CPU over the measured batches: the service, the repositories and the driver
  // (no HTTP, no request validation), with the harness's /proc read per statement.
  const nodeCpu = process.cpuUsage(node0);
  const seconds = (performance.now() - t0) / 1000;
  const backendNs = onCpuNs(pid) - backend0;
  const all1 = await postgresCpuSeconds(direct, DATABASE);
  const walBytes = Number((await direct.query<{ bytes: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1) AS bytes', [wal0])).rows[0]!.bytes);
  const events = BATCHES * BATCH;
  const us = (ns: number) => (ns / 1000 / events).toFixed(2);
  // BENCH_STATEMENT_ROUNDS=n: n more rounds of BATCHES batches after the measured one, each with
  // its own line (the insert statement's and the backend's CPU per event, the queue's rows, the
  // server's WAL and full-page images, checkpoints, the queue's autovacuums): whether PostgreSQL's
  // cost per event grows as the run goes on. BENCH_STATEMENT_FOLD=1 folds the queue between rounds
  // (what a worker does beside ingest), its CPU on its own line.
  const ROUNDS = Number(process.env.BENCH_STATEMENT_ROUNDS ?? 0);
  const FOLD_BETWEEN = process.env.BENCH_STATEMENT_FOLD === '1';
  const roundLines: string[] = [];
  const walStats = async () =>
    (
      await direct.query<{ lsn: string; fpi: string; ckpt: string; vac: string; ana: string; queued: string }>(
        `SELECT pg_current_wal_lsn() AS lsn, (SELECT wal_fpi FROM pg_stat_wal) AS fpi,
           (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter) AS ckpt,
           (SELECT sum(autovacuum_count) FROM pg_stat_user_tables WHERE relname LIKE 'usage_meter_hour%deltas') AS vac,
           (SELECT sum(autoanalyze_count) FROM pg_stat_user_tables WHERE relname LIKE 'usage_meter_hour%deltas') AS ana,
           (SELECT count(*) FROM usage_meter_hour_deltas) AS queued`,
      )
    ).rows[0]!;
  for (let r = 0; r < ROUNDS; r++) {
    let foldUs = '';
    if (FOLD_BETWEEN) {
      const f0 = onCpuNs(pid);
      while (await services.modules.usage.events.foldRollups());
      foldUs = `, fold before it ${((onCpuNs(pid) - f0) / 1000 / events).toFixed(2)} µs/event`;
    }
    const roundBatches = Array.from({ length: BATCHES }, makeBatch);
    const s0 = await walStats();
    perShape.clear();
    const b0 = onCpuNs(pid);
    const a0 = await postgresCpuSeconds(direct, DATABASE);
    const r0 = performance.now();
    measuring = true;
    for (const batch of roundBatches) await services.modules.usage.events.ingest(state.org_id, batch);
    measuring = false;
    const rs = (performance.now() - r0) / 1000;
    const bNs = onCpuNs(pid) - b0;
    const a1 = await postgresCpuSeconds(direct, DATABASE);
    const s1 = await walStats();
    const wal = Number((await direct.query<{ bytes: string }>('SELECT pg_wal_lsn_diff($1, $2) AS bytes', [s1.lsn, s0.lsn])).rows[0]!.bytes);
    const insertNs = [...perShape.entries()].filter(([k]) => k.startsWith('WITH batch AS')).reduce((a, [, v]) => a + v.ns, 0);
    roundLines.push(
      `round ${r + 2}: insert statement ${us(insertNs)} µs/event, backend ${us(bNs)}, all processes ${a0 === null || a1 === null ? 'n/a' : (((a1 - a0) * 1e6) / events).toFixed(2)}; queue ${s0.queued} → ${s1.queued} rows; WAL ${(wal / events).toFixed(0)} B/event, FPI ${((Number(s1.fpi) - Number(s0.fpi)) / events).toFixed(3)}/event (cluster), checkpoints +${Number(s1.ckpt) - Number(s0.ckpt)}, queue autovacuums +${Number(s1.vac) - Number(s0.vac)}, autoanalyzes +${Number(s1.ana) - Number(s0.ana)}; ${(events / rs).toFixed(0)} events/s${foldUs}; load ${machine().loadAverage[0]!.toFixed(1)}`,
    );
    process.stderr.write(`${roundLines.at(-1)}\n`);
    if (process.env.BENCH_STATEMENT_EXPLAIN === 'rounds' && largest) {
      // One more batch's insert, EXPLAINed (its own WAL and full-page images, per plan node) and rolled back.
      const bindings = largest.bindings.map((b, i) => (i === 0 && typeof b === 'string' ? b.replace(/"id":"st_/g, `"id":"ex${r}_`) : b));
      await direct.query('SET jit = off');
      await direct.query('BEGIN');
      const { rows } = await direct.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, WAL) ${largest.sql}`, bindings);
      await direct.query('ROLLBACK');
      process.stderr.write(`${rows.map((x) => x['QUERY PLAN']).filter((l) => /Insert on|WAL:|Execution|Planning Time|Buffers: shared/.test(l)).join('\n')}\n`);
    }
  }
  // The rollup's share, off the ingest path: the usage-meter-fold job's passes over the measured
  // batches' queued deltas, on the same backend (its CPU per ingested event, and the passes' count).
  const queuedRows = Number((await direct.query<{ n: string }>('SELECT (SELECT count(*) FROM usage_meter_hour_deltas) + (SELECT count(*) FROM usage_meter_hour_value_deltas) AS n')).rows[0]!.n);
  const fold0 = onCpuNs(pid);
  const foldAll0 = await postgresCpuSeconds(direct, DATABASE);
  let passes = 0;
  while (await services.modules.usage.events.foldRollups()) passes++;
  const foldNs = onCpuNs(pid) - fold0;
  // The events whose deltas that fold took: the last round's, or every round's when none folded between.
  const foldEvents = FOLD_BETWEEN ? events : events * (ROUNDS + 1);
  const foldAll1 = await postgresCpuSeconds(direct, DATABASE);

  const lines = [
    `usage ingest, PostgreSQL CPU per statement — ${BATCHES} batches of ${BATCH} events (${accepted} accepted), one connection, ${machine().cpus} CPUs, load average ${machine().loadAverage.map((x) => x.toFixed(1)).join(' / ')}`,
    '',
    '| statement | calls per batch | backend CPU µs/event |',
    '|---|---|---|',
    ...[...perShape.entries()].sort((a, b) => b[1].ns - a[1].ns).map(([sql, s]) => `| \`${sql}\` | ${(s.calls / BATCHES).toFixed(1)} | ${us(s.ns)} |`),
    '',
    `fold (usage-meter-fold, ${queuedRows} queued delta rows in ${passes} passes): backend ${(foldNs / 1000 / foldEvents).toFixed(2)} µs/event; all of the database's processes ${foldAll0 === null || foldAll1 === null ? 'n/a' : (((foldAll1 - foldAll0) * 1e6) / foldEvents).toFixed(2)} µs/event`,
    ...roundLines,
    `Node (this process: service, repositories, driver): ${((nodeCpu.user + nodeCpu.system) / events).toFixed(2)} µs/event`,
    `backend: ${us(backendNs)} µs/event (statements: ${us([...perShape.values()].reduce((a, s) => a + s.ns, 0))}); all of the database's processes with the writers: ${all0 === null || all1 === null ? 'n/a' : (((all1 - all0) * 1e6) / events).toFixed(2)} µs/event; WAL ${(walBytes / events).toFixed(0)} B/event; ${(events / seconds).toFixed(0)} events/s on one connection`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (process.env.BENCH_STATEMENT_EXPLAIN === '1' && largest) {
    // The same statement once more, its ids made new (the batch's JSON parameter is the first binding).
    const bindings = largest.bindings.map((b, i) => (i === 0 && typeof b === 'string' ? b.replace(/"id":"st_/g, '"id":"ex_') : b));
    await direct.query('SET jit = off');
    await direct.query('BEGIN');
    const { rows } = await direct.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, WAL, VERBOSE) ${largest.sql}`, bindings);
    await direct.query('ROLLBACK');
    process.stdout.write(`\n${rows.map((r) => r['QUERY PLAN']).join('\n')}\n`);
  }
  await direct.end();
  await database.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
