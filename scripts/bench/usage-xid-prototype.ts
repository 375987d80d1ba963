/**
 * `npx tsx scripts/bench/usage-xid-prototype.ts` (issue 38, round 23): a statement-level prototype
 * of ingest WITHOUT the per-event queue writes, against today's shape, alternated in one run.
 *
 * - QUEUE (today): the production ingest statement (captured from KnexUsageEventRepository.insertNew:
 *   claim the ids, insert the events, append the per-(meter, customer, hour) deltas to the two
 *   queues), then the production fold (foldRollupDeltas passes of 20,000 rows, then the queues'
 *   VACUUM the worker runs every 100,000 folded rows).
 * - XID (prototype): the same claim and event insert, each event row stamped with its inserting
 *   transaction's id (`pg_current_xact_id()`, xid8) and no queue write; the fold reads the
 *   organization's events whose xid lies in [watermark, pg_snapshot_xmin(pg_current_snapshot()))
 *   — every transaction below the snapshot's xmin has ended, so no event can still appear below
 *   it — aggregates them by meter as ingest's queue append did (the same rollupSelect) and upserts
 *   the rollup, then moves the watermark, in one transaction. A read would take the unfolded tail
 *   from the events (customer, xid ≥ watermark). Prototype DDL, in the bench database only:
 *   `usage_events.xid xid8` and two partial indexes (WHERE xid IS NOT NULL, so QUEUE's rows,
 *   xid NULL, are not in them): (org_id, customer_id, xid) for the reads' tail and (org_id, xid)
 *   for the fold.
 *
 * Each arm runs on its own connection (its own backend), BEGIN; the organization's shared meter
 * lock; the statement; COMMIT — per batch; the backend's on-CPU time from /proc/<pid>/schedstat.
 * Per round and arm: BATCHES batches of 1,000 events (bench:usage's: each of 1,000 customers
 * once, by id, two meters over `llm`), then its fold, then TAIL_READS reads of one customer's
 * unfolded tail measured before the fold (QUEUE: the customer's queued delta rows of both meters,
 * as CUSTOMER_QUANTITY_SQL reads them; XID: the customer's events past the watermark, both meters'
 * worth); the WAL of the arm's ingest and fold by the server's LSN (cluster-wide: other databases'
 * writes count too). Rounds alternate the arms' order (A B, B A, …).
 *
 * The data set: bench:usage's, seeded by `BENCH_USAGE_DATABASE=kassa_bench_xid BENCH_USAGE_SEED_ONLY=1
 * npm run bench:usage` (BENCH_USAGE_DATABASE here too). PostgreSQL must run on this machine (/proc).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { openDatabase, migrateLatest } from '../../src/db/knex.js';
import { KnexUsageEventRepository, rollupSelect, HOURS_COLUMNS, VALUES_COLUMNS, MERGE_HOURS } from '../../src/usage/usage.repository.js';
import { DEFAULT_SERVER_URL } from '../../tools/cluster.js';
import { machine } from './summary.js';

const serverUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER_URL;
const DATABASE = process.env.BENCH_USAGE_DATABASE ?? 'kassa_bench_xid';
const BATCHES = Number(process.env.BENCH_XID_BATCHES ?? 30);
const ROUNDS = Number(process.env.BENCH_XID_ROUNDS ?? 4);
const TAIL_READS = Number(process.env.BENCH_XID_READS ?? 200);
const BATCH = 1000;

const onCpuNs = (pid: number): number => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);

const PROTO_DDL = [
  'ALTER TABLE usage_events ADD COLUMN IF NOT EXISTS xid xid8',
  'CREATE INDEX IF NOT EXISTS proto_usage_events_tail ON usage_events (org_id, customer_id, xid) WHERE xid IS NOT NULL',
  'CREATE INDEX IF NOT EXISTS proto_usage_events_fold ON usage_events (org_id, xid) WHERE xid IS NOT NULL',
  'CREATE TABLE IF NOT EXISTS proto_fold_watermark (org_id text COLLATE "C" PRIMARY KEY, lo xid8 NOT NULL)',
];

const XID_INSERT = `WITH batch AS (
   SELECT r.id, r.customer_id, r.name, r.ts, r.properties
   FROM jsonb_to_recordset($1::jsonb) AS r(id text, customer_id text, name text, ts timestamptz, properties jsonb)
 ), claimed AS (
   INSERT INTO usage_event_ids (org_id, id, ts) SELECT $2, id, ts FROM batch
   ON CONFLICT (org_id, id) DO NOTHING
   RETURNING id
 ), inserted AS (
   INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at, xid)
   SELECT $2, b.id, b.customer_id, b.name, b.ts, b.properties, $3, pg_current_xact_id()
   FROM batch b JOIN claimed c ON c.id = b.id
   RETURNING id
 )
 SELECT id FROM inserted`;

/** The prototype fold's source: the organization's events stamped in [lo, hi). */
const XID_SOURCE = '(SELECT org_id, id, customer_id, name, ts, properties FROM usage_events WHERE org_id = $1 AND xid >= $2::xid8 AND xid < $3::xid8 AND xid IS NOT NULL)';

async function main(): Promise<void> {
  const url = new URL(serverUrl);
  url.pathname = `/${DATABASE}`;
  const direct = new pg.Client({ connectionString: url.toString() });
  await direct.connect();
  const state = (await direct.query<{ org_id: string }>('SELECT org_id FROM bench_usage_state').catch(() => ({ rows: [] }))).rows[0];
  if (!state) throw new Error(`${DATABASE} holds no bench:usage data set (BENCH_USAGE_DATABASE=${DATABASE} BENCH_USAGE_SEED_ONLY=1 npm run bench:usage)`);
  const orgId = state.org_id;
  const migrator = await openDatabase({ databaseUrl: url.toString(), poolMax: 2 });
  await migrateLatest(migrator.db);
  await migrator.close();
  for (const ddl of PROTO_DDL) await direct.query(ddl);
  // BENCH_XID_NO_FOLD_INDEX=1: without the (org_id, xid) index, to read its share of XID's ingest
  // (the fold then finds its events by the tail index's full range: its figure is not the design's).
  if (process.env.BENCH_XID_NO_FOLD_INDEX === '1') await direct.query('DROP INDEX IF EXISTS proto_usage_events_fold');
  const customers = (await direct.query<{ id: string }>('SELECT id FROM customers WHERE org_id = $1 AND external_id IS NOT NULL ORDER BY id LIMIT 1000', [orgId])).rows.map((r) => r.id);

  // QUEUE's statement text, captured from the production repository (one warm-up batch).
  let queueSql: string | undefined;
  type Query = (this: pg.Client, config: unknown, values?: unknown, callback?: unknown) => unknown;
  const query = pg.Client.prototype.query as unknown as Query;
  (pg.Client.prototype as unknown as { query: Query }).query = function (this: pg.Client, config, values, callback) {
    const sql = typeof config === 'string' ? config : (config as { text?: string }).text;
    if (!queueSql && sql?.includes('INSERT INTO usage_event_ids') && sql.includes('usage_meter_hour_deltas')) queueSql = sql;
    return query.call(this, config, values, callback);
  };
  // The production fold on a pool of one connection (its backend measured like the arms').
  const foldDb = await openDatabase({ databaseUrl: url.toString(), poolMax: 1 });
  const repo = new KnexUsageEventRepository(foldDb.db);
  const foldPid = Number((await foldDb.db.raw('SELECT pg_backend_pid() AS pid')).rows[0].pid);

  let n = 0;
  const makeBatch = () => {
    const now = Date.now();
    return Array.from({ length: BATCH }, () => {
      const i = n++;
      return { id: `xp_${i}_${randomUUID().slice(0, 8)}`, customer_id: customers[(i * 7919) % customers.length]!, name: 'llm', ts: new Date(now - (i % 3_000_000)).toISOString(), properties: { tokens: (i % 977) + 1, model: i % 3 === 0 ? 'gpt-4o' : 'gpt-4o-mini' } };
    });
  };
  // Warm-up through the production path (captures QUEUE's text, creates the week's partition).
  const warm = makeBatch();
  await repo.insertNew(warm.map((e) => ({ id: e.id, orgId, customerId: e.customer_id, name: e.name, timestamp: new Date(e.ts), properties: e.properties, receivedAt: new Date() })));
  if (!queueSql) throw new Error('the production insert statement was not captured');
  while ((await repo.foldRollupDeltas(20_000)) > 0);

  const arms = {
    QUEUE: new pg.Client({ connectionString: url.toString() }),
    XID: new pg.Client({ connectionString: url.toString() }),
  };
  for (const c of Object.values(arms)) {
    await c.connect();
    await c.query('SET jit = off');
  }
  const pidOf = async (c: pg.Client) => Number((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  const pids = { QUEUE: await pidOf(arms.QUEUE), XID: await pidOf(arms.XID) };
  await direct.query(`INSERT INTO proto_fold_watermark VALUES ($1, '0') ON CONFLICT DO NOTHING`, [orgId]);
  const lock = `SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`;

  const ingest = async (arm: 'QUEUE' | 'XID', batch: ReturnType<typeof makeBatch>) => {
    const c = arms[arm];
    await c.query('BEGIN');
    await c.query(lock, [`usage-meters:${orgId}`]);
    await c.query(arm === 'QUEUE' ? queueSql! : XID_INSERT, arm === 'QUEUE' ? [JSON.stringify(batch), orgId, orgId, new Date()] : [JSON.stringify(batch), orgId, new Date()]);
    await c.query('COMMIT');
  };

  // The source binds $1–$3 by number (named twice in the hours' select: its `last` and other branches).
  const { hours, values } = rollupSelect(XID_SOURCE, "m.status = 'ACTIVE'");
  const xidFold = async (): Promise<number> => {
    const c = arms.XID;
    await c.query('BEGIN');
    await c.query(lock, [`usage-meters:${orgId}`]);
    const { rows } = await c.query<{ lo: string; hi: string }>('SELECT lo::text, pg_snapshot_xmin(pg_current_snapshot())::text AS hi FROM proto_fold_watermark WHERE org_id = $1 FOR UPDATE', [orgId]);
    const { lo, hi } = rows[0]!;
    const h = await c.query(`INSERT INTO usage_meter_hours AS h (${HOURS_COLUMNS}) ${hours} ${MERGE_HOURS}`, [orgId, lo, hi]);
    await c.query(`INSERT INTO usage_meter_hour_values (${VALUES_COLUMNS}) ${values} ON CONFLICT DO NOTHING`, [orgId, lo, hi]);
    await c.query('UPDATE proto_fold_watermark SET lo = $2::xid8 WHERE org_id = $1', [orgId, hi]);
    await c.query('COMMIT');
    return h.rowCount ?? 0;
  };

  const tailRead = {
    QUEUE: `SELECT coalesce(sum(events), 0) AS events, coalesce(sum(total), 0) AS total FROM usage_meter_hour_deltas
             WHERE org_id = $1 AND meter_id = ANY($3::text[]) AND customer_id = $2 AND hour >= now() - interval '30 days' AND hour < now()`,
    XID: `SELECT count(*) AS events, coalesce(sum((properties ->> 'tokens')::numeric), 0) AS total FROM usage_events
           WHERE org_id = $1 AND customer_id = $2 AND xid >= (SELECT lo FROM proto_fold_watermark WHERE org_id = $1) AND xid IS NOT NULL AND name = 'llm'`,
  };
  const meterIds = (await direct.query<{ id: string }>("SELECT id FROM meters WHERE org_id = $1 AND status = 'ACTIVE'", [orgId])).rows.map((r) => r.id);
  const walLsn = async () => (await direct.query<{ lsn: string }>('SELECT pg_current_wal_lsn() AS lsn')).rows[0]!.lsn;
  const walSince = async (lsn: string) => Number((await direct.query<{ b: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1) AS b', [lsn])).rows[0]!.b);

  // Warm both arms once (plans, caches), not measured.
  await ingest('QUEUE', makeBatch());
  await ingest('XID', makeBatch());
  while ((await repo.foldRollupDeltas(20_000)) > 0);
  await repo.vacuumRollupQueues();
  await xidFold();

  const events = BATCHES * BATCH;
  const lines: string[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const order: Array<'QUEUE' | 'XID'> = r % 2 === 0 ? ['QUEUE', 'XID'] : ['XID', 'QUEUE'];
    for (const arm of order) {
      const batches = Array.from({ length: BATCHES }, makeBatch);
      const pid = pids[arm];
      const lsn0 = await walLsn();
      const c0 = onCpuNs(pid);
      const t0 = performance.now();
      for (const b of batches) await ingest(arm, b);
      const ingestNs = onCpuNs(pid) - c0;
      const seconds = (performance.now() - t0) / 1000;
      const ingestWal = await walSince(lsn0);
      // Tail reads before the fold: the arm's unfolded rows for one customer at a time.
      const r0 = onCpuNs(pid);
      for (let i = 0; i < TAIL_READS; i++) {
        const customer = customers[(i * 37) % customers.length]!;
        await arms[arm].query(tailRead[arm], arm === 'QUEUE' ? [orgId, customer, meterIds] : [orgId, customer]);
      }
      const readUs = (onCpuNs(pid) - r0) / 1000 / TAIL_READS;
      const lsn1 = await walLsn();
      let foldNs: number;
      let folded = 0;
      if (arm === 'QUEUE') {
        const f0 = onCpuNs(foldPid);
        for (let k; (k = await repo.foldRollupDeltas(20_000)) > 0; ) folded += k;
        await repo.vacuumRollupQueues();
        foldNs = onCpuNs(foldPid) - f0;
      } else {
        const f0 = onCpuNs(pid);
        folded = await xidFold();
        foldNs = onCpuNs(pid) - f0;
      }
      const foldWal = await walSince(lsn1);
      const us = (ns: number) => (ns / 1000 / events).toFixed(1);
      lines.push(
        `| ${r + 1} | ${arm} | ${us(ingestNs)} | ${us(foldNs)} | **${us(ingestNs + foldNs)}** | ${readUs.toFixed(0)} µs | ${(ingestWal / events).toFixed(0)} + ${(foldWal / events).toFixed(0)} B/event | ${folded} | ${(events / seconds).toFixed(0)} | ${machine().loadAverage[0]!.toFixed(1)} |`,
      );
      process.stderr.write(`${lines.at(-1)}\n`);
    }
  }
  process.stdout.write(
    [
      `usage ingest prototype (queue vs xid watermark), ${ROUNDS} rounds × ${BATCHES} batches of ${BATCH} per arm, ${machine().cpus} CPUs`,
      '',
      '| round | arm | ingest backend µs/event | fold backend µs/event | ingest + fold | tail read (one customer, backend CPU) | WAL cluster-wide, ingest + fold | rows folded | events/s one connection | load |',
      '|---|---|---|---|---|---|---|---|---|---|',
      ...lines,
    ].join('\n') + '\n',
  );
  for (const c of Object.values(arms)) await c.end();
  await foldDb.close();
  await direct.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
