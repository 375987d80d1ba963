/**
 * `npm run bench:usage`: usage-event ingest and meter quantity reads (issue 38), on PostgreSQL, by
 * server CPU against a floor measured in the same run.
 *
 * One Kassa API process (scripts/bench/checkout-server.ts: the production listeners plus the floor
 * route), an organization with BENCH_USAGE_CUSTOMERS customers (seeded in SQL, each with an
 * externalId) and two meters over the event name `llm` (sum of `tokens`, count).
 * - floor: `POST /__bench/floor`, one single-row INSERT on the same server, pool and middleware;
 * - ingest: `POST /v1/usage-events`, distinct batches of BENCH_USAGE_BATCH events (customers by
 *   externalId, fresh ids), BENCH_USAGE_CONCURRENCY in flight; server CPU per event, the rollups
 *   of both meters kept by every insert;
 * - quantity: `GET /v1/meters/{id}/quantities` for one customer over the last 30 days (cut mid-hour
 *   at both ends, so the edge hours are read from the events), after the organization was grown in
 *   SQL (generate_series, not HTTP) to each size of BENCH_USAGE_SIZES (default 1M; 1M,10M for the
 *   flatness target), the meters' rollups rebuilt from the events as a filter change does (directly:
 *   over millions of events the rebuild outlasts the API's statement timeout).
 * The ingest rounds run the fold beside them (BENCH_USAGE_FOLD, below); the reads follow BENCH_USAGE_TAIL_BATCHES (default 30) batches that no fold merged (migration 0395:
 * the bench runs no worker), so each read also takes that tail of queued rollup deltas.
 * Targets: ingest ≤ 30 µs of server CPU per event; quantity ≤ 2 ms of server CPU per request, and
 * ≤ 2× from the first size to the last.
 *
 * BENCH_USAGE_CLOSE=n closes n metered periods at the end, in a copy of the database made for the
 * purpose (CREATE DATABASE … TEMPLATE, dropped afterwards): the close's subscriptions, orders and
 * webhook events never reach the measured (or kept) database, whose ingest reads its customers'
 * subscriptions on every batch (a kept database once held 20,220 close copies, and ingest cost
 * 196 µs of server CPU per event instead of 17).
 *
 * BENCH_USAGE_DATABASE=name keeps the database (created when missing) and reuses it on the next
 * run: the organization, its API key, the meters and the seeded events (table bench_usage_state),
 * so 10M events are seeded and rolled up once (20–40 minutes here), then measured as often as
 * needed. BENCH_USAGE_SEED_ONLY=1 seeds and rebuilds the rollups to the last size, then stops.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import knex from 'knex';
import pg from 'pg';
import { createWeekPartitions, isPartitioned, WEEK_MS, weekStart } from '../../src/db/partitions.js';
import { QUEUE_VACUUM_ROWS, UsageEventService } from '../../src/usage/usage-events.service.js';
import { systemClock } from '../../src/kernel/clock.js';
import { KnexUsageEventRepository, rebuildMeterRollup } from '../../src/usage/usage.repository.js';
import { BENCH_FLOOR_TABLE_SQL } from '../../tools/bench-floor.js';
import { DEFAULT_SERVER_URL, createDatabase, databaseUrlOn, http, newDeployment, provisionMerchant, startKassa } from '../../tools/cluster.js';
import { postgresCpuSeconds, postgresCpuSplit } from './postgres-cpu.js';
import { emit, machine, median, report, round, shortRun, summary, target, type Target } from './summary.js';

const serverUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER_URL;
const CUSTOMERS = Number(process.env.BENCH_USAGE_CUSTOMERS ?? 1000);
const BATCH = Number(process.env.BENCH_USAGE_BATCH ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_USAGE_CONCURRENCY ?? 4);
const BATCHES = Number(process.env.BENCH_USAGE_BATCHES ?? (shortRun ? 40 : 200));
const READS = Number(process.env.BENCH_USAGE_READS ?? (shortRun ? 200 : 1000));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (shortRun ? 2 : 3));
const SIZES = (process.env.BENCH_USAGE_SIZES ?? '1000000').split(',').map(Number);
/** BENCH_USAGE_CLOSE=10000: that many metered subscriptions whose period ended 2 h ago, closed by the worker(s). */
const CLOSE = Number(process.env.BENCH_USAGE_CLOSE ?? 0);
/** Worker processes closing them (each takes due subscriptions with SKIP LOCKED). */
const CLOSE_WORKERS = Number(process.env.BENCH_USAGE_CLOSE_WORKERS ?? 1);
/** Seeded customers with a metered subscription (the access check's and the balances' reads). */
const SUBSCRIBERS = Number(process.env.BENCH_USAGE_SUBSCRIBERS ?? 20);
/** Batches ingested right before the reads and not folded (a fold every few seconds leaves about that many at 30k events/s). */
const TAIL = Number(process.env.BENCH_USAGE_TAIL_BATCHES ?? 30);
/**
 * The usage-meter-fold job runs beside ingest (default since round 22), as in an installation (a
 * worker folds the queue every 500 ms, at once again while it finds rows, and vacuums the queues):
 * here a loop in the bench process on a connection of its own, whose PostgreSQL CPU is counted
 * with ingest's (a backend of the database), and each round ends when its queue is folded; its
 * Node CPU (one statement per pass) is the bench process's, not the server's.
 * BENCH_USAGE_FOLD=0: no fold, the queue only grows during the ingest rounds (the bench before round 22).
 */
const FOLD = process.env.BENCH_USAGE_FOLD !== '0';
const customerOf = (i: number) => `CUS_${String(i).padStart(24, '0')}`;
const HOUR = 3_600_000;

/** `count` requests, `concurrency` at a time; returns how many failed. */
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

const KEPT = process.env.BENCH_USAGE_DATABASE;
const SEED_ONLY = process.env.BENCH_USAGE_SEED_ONLY === '1';

interface BenchState {
  org_id: string;
  api_key: string;
  meter_sum: string;
  meter_count: string;
  /** Events in usage_events when both meters' rollups were last rebuilt (ingest keeps them since). */
  rolled_up: string | null;
  /** The deployment's ENCRYPTION_KEY: Kassa refuses a database sealed with another. */
  encryption_key: string | null;
}

/** The kept database (created when missing), or a throw-away one. */
async function openDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (!KEPT) return createDatabase(serverUrl, 'kassa_bench_usage');
  if (!/^[a-z_][a-z0-9_]*$/.test(KEPT)) throw new Error('BENCH_USAGE_DATABASE: lower-case letters, digits and _ only');
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [KEPT]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${KEPT}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${KEPT}`;
  return { url: url.toString(), drop: async () => {} };
}

async function dropDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

async function main(): Promise<void> {
  const db = await openDatabase();
  const direct = new pg.Client({ connectionString: db.url });
  await direct.connect();
  await direct.query(BENCH_FLOOR_TABLE_SQL);
  await direct.query('CREATE TABLE IF NOT EXISTS bench_usage_state (org_id text, api_key text, meter_sum text, meter_count text, rolled_up bigint, encryption_key text)');
  const kept = (await direct.query<BenchState>('SELECT * FROM bench_usage_state')).rows[0];
  const deployment = newDeployment(db.url, { LOG_LEVEL: 'warn', MERCHANT_RATE_LIMIT_PER_MINUTE: '0', DATABASE_POOL_MAX: '10' });
  if (kept?.encryption_key) deployment.encryptionKey = kept.encryption_key;
  else if (kept) await direct.query('UPDATE bench_usage_state SET encryption_key = $1', [deployment.encryptionKey]);
  // BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=…" profiles the server.
  const nodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean);
  const server = await startKassa(deployment, { role: 'api', name: 'bench-usage', echo: !shortRun, nodeArgs, entry: 'scripts/bench/checkout-server.ts' });
  const databaseName = new URL(db.url).pathname.slice(1);
  let serverStopped = false;
  let directEnded = false;
  try {
    const merchant = kept ? { orgId: kept.org_id, apiKey: kept.api_key } : await provisionMerchant(server.adminUrl, deployment.adminToken, 'Usage bench');
    if (!kept) await direct.query(
      `INSERT INTO customers (id, org_id, email, created_at, external_id)
       SELECT 'CUS_' || lpad(i::text, 24, '0'), $1, 'user' || i || '@example.com', now(), 'user_' || i FROM generate_series(0, $2 - 1) i`,
      [merchant.orgId, CUSTOMERS],
    );
    const headers = { 'X-API-Key': merchant.apiKey };
    const jsonHeaders = { ...headers, 'content-type': 'application/json' };
    const meters: Record<'sum' | 'count', string> = { sum: kept?.meter_sum ?? '', count: kept?.meter_count ?? '' };
    for (const aggregation of kept ? [] : (['sum', 'count'] as const)) {
      const res = await http('POST', `${server.merchantUrl}/v1/meters`, {
        headers,
        body: { name: `bench ${aggregation}`, source: 'EVENTS', filter: { eventName: 'llm' }, aggregation, ...(aggregation === 'sum' ? { property: 'tokens' } : {}) },
      });
      if (res.status !== 201) throw new Error(`meter create: ${res.status} ${res.text}`);
      meters[aggregation] = res.json.data.id as string;
    }
    if (!kept && KEPT) {
      await direct.query('INSERT INTO bench_usage_state VALUES ($1, $2, $3, $4, NULL, $5)', [merchant.orgId, merchant.apiKey, meters.sum, meters.count, deployment.encryptionKey]);
    }
    let rolledUp = kept?.rolled_up === null || kept?.rolled_up === undefined ? null : Number(kept.rolled_up);

    // The metered access check and the balances: a subscription price billing the sum meter, paid
    // on the sandbox card by SUBSCRIBERS seeded customers (checkout with their customerId), each
    // period moved back 29 days in SQL so that the read spans ~700 hour rows, as at a period's end.
    const adminHeaders = { Authorization: `Bearer ${deployment.adminToken}` };
    let productId = (
      await direct.query<{ id: string }>(
        "SELECT id FROM products p WHERE org_id = $1 AND name = $2 AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.org_id = p.org_id AND s.status = 'ACTIVE') ORDER BY created_at DESC LIMIT 1",
        [merchant.orgId, 'Metered plan'],
      )
    ).rows[0]?.id;
    if (!productId) {
      const product = await http('POST', `${server.adminUrl}/v1/orgs/${merchant.orgId}/products`, { headers: adminHeaders, body: { name: 'Metered plan' } });
      if (product.status !== 201) throw new Error(`product create: ${product.status} ${product.text}`);
      productId = product.json.data.productId as string;
      const price = await http('POST', `${server.adminUrl}/v1/products/${productId}/prices`, {
        headers: adminHeaders,
        body: { amount: 2000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', meteredComponents: [{ meterId: meters.sum, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } }] },
      });
      if (price.status !== 201) throw new Error(`price create: ${price.status} ${price.text}`);
      for (let i = 0; i < SUBSCRIBERS; i++) {
        const session = await http('POST', `${server.merchantUrl}/v1/checkout-sessions`, {
          headers: { ...headers, 'Idempotency-Key': `bench-usage-sub-${i}-${randomUUID()}` },
          body: { pricingId: price.json.data.pricingId, customerId: customerOf(i) },
        });
        if (session.status !== 201) throw new Error(`checkout: ${session.status} ${session.text}`);
        const paid = await fetch(`${session.json.data.url as string}/pay`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' }),
        });
        if (paid.status !== 303) throw new Error(`pay: ${paid.status} ${await paid.text()}`);
      }
      await direct.query(
        `UPDATE subscriptions SET current_period_start = now() - interval '29 days', current_period_end = now() + interval '1 day' WHERE org_id = $1 AND status = 'ACTIVE'`,
        [merchant.orgId],
      );
    }

    const cpuSeconds = async () => {
      const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
      return Number(/^kassa_process_cpu_seconds_total\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? NaN);
    };
    // The machine's CPU time (all cores) and its idle part, from /proc/stat (Linux; zeros elsewhere):
    // where the 2 cores went during a round, the bench's client included.
    const machineTicks = () => {
      try {
        const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
        return { total: fields.reduce((a, b) => a + b, 0), idle: fields[3]! + fields[4]! };
      } catch {
        return { total: 0, idle: 0 };
      }
    };
    const measure = async (work: () => Promise<number>) => {
      const cpu0 = await cpuSeconds();
      const pg0 = await postgresCpuSeconds(direct, databaseName);
      const started = performance.now();
      const failed = await work();
      const seconds = (performance.now() - started) / 1000;
      const serverMs = ((await cpuSeconds()) - cpu0) * 1000;
      const pg1 = await postgresCpuSeconds(direct, databaseName);
      return { serverMs, pgMs: pg0 === null || pg1 === null ? NaN : (pg1 - pg0) * 1000, seconds, failed };
    };

    // Distinct batches, built before the clock starts.
    let n = 0;
    const makeBody = () => {
      const now = Date.now();
      const events = Array.from({ length: BATCH }, () => {
        const i = n++;
        return {
          id: `ev_${i}_${randomUUID().slice(0, 8)}`,
          customer: { externalId: `user_${(i * 7919) % CUSTOMERS}` },
          name: 'llm',
          timestamp: new Date(now - (i % 3_000_000)).toISOString(),
          properties: { tokens: (i % 977) + 1, model: i % 3 === 0 ? 'gpt-4o' : 'gpt-4o-mini' },
        };
      });
      return JSON.stringify({ events });
    };
    const post = (path: string, body: string) => fetch(`${server.merchantUrl}${path}`, { method: 'POST', headers: jsonHeaders, body }).then(async (r) => (await r.arrayBuffer(), r.status));
    // Warm-up: JIT, pool connections, validator caches.
    await drive(10, CONCURRENCY, () => post('/v1/usage-events', makeBody()), 200);
    await drive(200, CONCURRENCY, () => post('/__bench/floor', '{}'), 201);

    // The usage-meter-fold job's loop (BENCH_USAGE_FOLD=1), as src/usage/index.ts and src/worker.ts run it.
    const foldDb = FOLD ? knex({ client: 'pg', connection: db.url, pool: { min: 1, max: 1 } }) : undefined;
    const ingestFold: Array<{ passes: number; rows: number }> = [];
    const startFold = () => {
      const service = foldService!;
      let running = true;
      const totals = { passes: 0, rows: 0 };
      const loop = (async () => {
        while (running) {
          const busy = await service.foldRound();
          totals.passes++;
          if (busy) totals.rows++;
          for (let waited = 0; !busy && running && waited < 500; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      // Stopped when the round's batches are in: the rest of the queue is folded then, so the round
      // counts the fold of every event it ingested.
      const stop = async () => {
        running = false;
        await loop;
        for (let rows = 1; rows > 0; ) {
          rows = (await service.foldRollups()) ? 1 : 0;
          totals.passes++;
        }
        return totals;
      };
      return { stop };
    };
    // The job's service as a worker builds it (its fold needs only the repository);
    // BENCH_USAGE_FOLD_VACUUM=0: the fold without its VACUUM of the queues (before round 22).
    const foldService = foldDb
      ? new UsageEventService(new KnexUsageEventRepository(foldDb), undefined as never, systemClock, undefined, undefined, process.env.BENCH_USAGE_FOLD_VACUUM === '0' ? Infinity : QUEUE_VACUUM_ROWS)
      : undefined;
    // The warm-up's queue folded before the first round, and the fold's connection opened.
    if (foldService) while (await foldService.foldRollups());
    const ingestPerEvent: number[] = [];
    const ingestPgPerEvent: number[] = [];
    const ingestRates: number[] = [];
    const floorPerRequest: number[] = [];
    let failures = 0;
    const perRound = Math.max(1, Math.round(BATCHES / ROUNDS));
    // What each round's PostgreSQL did besides running statements (does its cost per event grow
    // as the tables do?): blocks read into shared buffers (not found there) and hit, per event, in
    // this database; the server's checkpoints, buffers its backends had to write out themselves, and
    // its WAL and full-page images (cluster-wide: other databases' writers count too); the queue.
    const ioStats = async () =>
      (
        await direct.query<Record<string, string>>(
          `SELECT (SELECT sum(heap_blks_read + coalesce(idx_blks_read, 0)) FROM pg_statio_user_tables) AS read,
             (SELECT sum(heap_blks_hit + coalesce(idx_blks_hit, 0)) FROM pg_statio_user_tables) AS hit,
             (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter) AS ckpt,
             (SELECT buffers_backend FROM pg_stat_bgwriter) AS backend_writes,
             (SELECT wal_fpi FROM pg_stat_wal) AS fpi, (SELECT wal_bytes FROM pg_stat_wal) AS wal,
             (SELECT count(*) FROM usage_meter_hour_deltas) AS queued`,
        )
      ).rows[0]!;
    /** Blocks read and hit per table of this database (those that changed by at least 0.05 per event). */
    const tableIo = async () =>
      new Map(
        (
          await direct.query<{ relname: string; read: string; hit: string }>(
            `SELECT relname, heap_blks_read + coalesce(idx_blks_read, 0) AS read, heap_blks_hit + coalesce(idx_blks_hit, 0) AS hit FROM pg_statio_user_tables`,
          )
        ).rows.map((r) => [r.relname, { read: Number(r.read), hit: Number(r.hit) }]),
      );
    const tableIoLine = (a: Map<string, { read: number; hit: number }>, b: Map<string, { read: number; hit: number }>, events: number) =>
      [...b.entries()]
        .map(([name, v]) => ({ name, read: (v.read - (a.get(name)?.read ?? 0)) / events, hit: (v.hit - (a.get(name)?.hit ?? 0)) / events }))
        .filter((x) => x.read + x.hit >= 0.05)
        .sort((x, y) => y.hit + y.read - x.hit - x.read)
        .map((x) => `${x.name} ${x.hit.toFixed(2)} hit + ${x.read.toFixed(2)} read`)
        .join(', ');
    const ioLine = (a: Record<string, string>, b: Record<string, string>, events: number) => {
      const per = (k: string, digits = 2) => ((Number(b[k]) - Number(a[k])) / events).toFixed(digits);
      return `blocks read ${per('read')}/event, hit ${per('hit', 1)}/event; checkpoints +${Number(b.ckpt) - Number(a.ckpt)}, backend buffer writes ${per('backend_writes')}/event, WAL ${per('wal', 0)} B/event, FPI ${per('fpi', 3)}/event (cluster); queue ${a.queued} → ${b.queued} rows`;
    };
    for (let r = 0; r < (SEED_ONLY ? 0 : ROUNDS); r++) {
      const bodies = Array.from({ length: perRound }, makeBody);
      const floor = await measure(() => drive(500, CONCURRENCY, () => post('/__bench/floor', '{}'), 201));
      floorPerRequest.push(floor.serverMs / 500);
      const io0 = await ioStats();
      const tables0 = await tableIo();
      const split0 = await postgresCpuSplit(direct, databaseName);
      const fold = FOLD ? startFold() : undefined;
      const ticks0 = machineTicks();
      const client0 = process.cpuUsage();
      const ingest = await measure(async () => {
        const failed = await drive(bodies.length, CONCURRENCY, (i) => post('/v1/usage-events', bodies[i]!), 200);
        // The fold's last pass ends inside the measure (its backend's CPU is counted): the queue as a worker leaves it.
        if (fold) ingestFold.push(await fold.stop());
        return failed;
      });
      const ticks1 = machineTicks();
      const client1 = process.cpuUsage(client0);
      const split1 = await postgresCpuSplit(direct, databaseName);
      const events = bodies.length * BATCH;
      const idleShare = ticks1.total > ticks0.total ? (ticks1.idle - ticks0.idle) / (ticks1.total - ticks0.total) : NaN;
      const clientPerEvent = ((client1.user + client1.system) / events).toFixed(1);
      const splitLine = split0 && split1 ? `backends of the database ${(((split1.backends - split0.backends) * 1e6) / events).toFixed(1)} µs/event, the server's shared writers ${(((split1.writers - split0.writers) * 1e6) / events).toFixed(1)} µs/event; ` : '';
      process.stderr.write(`  round ${r + 1}: PostgreSQL ${splitLine}${ioLine(io0, await ioStats(), events)}${fold ? `; fold ${ingestFold.at(-1)!.passes} rounds and passes, ${ingestFold.at(-1)!.rows} rounds with a full pass` : ''}\n    per table: ${tableIoLine(tables0, await tableIo(), events)}\n`);
      ingestPerEvent.push((ingest.serverMs * 1000) / events);
      ingestPgPerEvent.push((ingest.pgMs * 1000) / events);
      ingestRates.push(events / ingest.seconds);
      failures += floor.failed + ingest.failed;
      process.stderr.write(
        `  round ${r + 1}/${ROUNDS}: ingest ${(events / ingest.seconds).toFixed(0)} events/s, server ${((ingest.serverMs * 1000) / events).toFixed(1)} µs/event, PostgreSQL ${((ingest.pgMs * 1000) / events).toFixed(1)} µs/event, the bench's client ${clientPerEvent} µs/event, the machine idle ${(idleShare * 100).toFixed(0)} %; floor ${(floor.serverMs / 500).toFixed(3)} ms/request\n`,
      );
    }

    await foldDb?.destroy();
    // Quantities at each size of the organization.
    const quantity: Array<{ events: number; seedSeconds: number; rebuildSeconds: number; serverMsPerRequest: number; pgMsPerRequest: number; floorMsPerRequest: number }> = [];
    const access: Array<{ events: number; checkServerMs: number; checkPgMs: number; balancesServerMs: number; balancesPgMs: number }> = [];
    const end = Math.floor(Date.now() / HOUR) * HOUR + 23 * 60_000 + 45_000;
    const start = end - 30 * 24 * HOUR;
    for (const size of SIZES) {
      const have = Number((await direct.query('SELECT count(*) AS n FROM usage_events')).rows[0].n);
      const seedStarted = performance.now();
      if (size > have) {
        // The weekly partitions of the 30 days (migration 0380), as ingest would have made them.
        const builder = knex({ client: 'pg', connection: db.url });
        try {
          if (await isPartitioned(builder, 'usage_events')) {
            await builder.transaction((trx) => createWeekPartitions(trx, 'usage_events', Array.from({ length: 6 }, (_, w) => weekStart(end - 30 * 24 * HOUR) + w * WEEK_MS)));
          }
        } finally {
          await builder.destroy();
        }
        // Spread over the 30 days and the customers, in chunks (one statement per million).
        for (let from = have; from < size; from += 1_000_000) {
          const to = Math.min(size, from + 1_000_000);
          await direct.query(
            `INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at)
             SELECT $1, 'seed_' || i, 'CUS_' || lpad((i % $2)::text, 24, '0'), 'llm',
               to_timestamp($3::double precision / 1000) - ((i * 2654435761::bigint) % 2592000000::bigint) * interval '1 millisecond',
               jsonb_build_object('tokens', i % 977 + 1), now()
             FROM generate_series($4::bigint, $5::bigint - 1) i`,
            [merchant.orgId, CUSTOMERS, end, from, to],
          );
          process.stderr.write(`  seeded ${to} events (${((performance.now() - seedStarted) / 1000).toFixed(0)} s)\n`);
        }
        await direct.query('ANALYZE usage_events');
      }
      const seedSeconds = (performance.now() - seedStarted) / 1000;
      // The rollups of the events seeded behind the API's back: rebuilt as a filter change rebuilds
      // them, here without the API's statement timeout (a rebuild over millions of events outlasts it).
      // A kept database whose rollups were rebuilt after its last seeding is complete (ingest keeps them).
      const rebuildStarted = performance.now();
      if (rolledUp === null || size > have) {
        const builder = knex({ client: 'pg', connection: db.url });
        try {
          for (const id of Object.values(meters)) await builder.transaction((trx) => rebuildMeterRollup(trx, merchant.orgId, id));
        } finally {
          await builder.destroy();
        }
        await direct.query('ANALYZE usage_meter_hours');
        rolledUp = Number((await direct.query('SELECT count(*) AS n FROM usage_events')).rows[0].n);
        await direct.query('UPDATE bench_usage_state SET rolled_up = $1', [rolledUp]);
      }
      const rebuildSeconds = (performance.now() - rebuildStarted) / 1000;
      process.stderr.write(`  ${size} events: seeded in ${seedSeconds.toFixed(0)} s, rollups rebuilt in ${rebuildSeconds.toFixed(0)} s\n`);
      if (SEED_ONLY) continue;
      // A realistic unfolded tail (migration 0395): TAIL batches ingested after the rebuild, which no
      // fold merges here (no worker runs): each customer's reads take that many queued delta rows per meter.
      for (let t = 0; t < TAIL; t++) await post('/v1/usage-events', makeBody());
      const queued = await direct.query<{ n: string }>('SELECT count(*) AS n FROM usage_meter_hour_deltas').then((r) => Number(r.rows[0]!.n), () => 0);
      process.stderr.write(`  read tail: ${TAIL} batches ingested after the rebuild, ${queued} delta rows queued\n`);
      const path = (i: number) =>
        `/v1/meters/${meters.sum}/quantities?customer=user_${(i * 31) % CUSTOMERS}&start=${new Date(start).toISOString()}&end=${new Date(end).toISOString()}`;
      const get = (i: number) => fetch(`${server.merchantUrl}${path(i)}`, { headers }).then(async (r) => (await r.arrayBuffer(), r.status));
      await drive(100, CONCURRENCY, get, 200);
      const floors: number[] = [];
      const reads: number[] = [];
      const pgReads: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const floor = await measure(() => drive(500, CONCURRENCY, () => post('/__bench/floor', '{}'), 201));
        floors.push(floor.serverMs / 500);
        const perRoundReads = Math.round(READS / ROUNDS);
        const read = await measure(() => drive(perRoundReads, CONCURRENCY, (i) => get(i + r * perRoundReads), 200));
        reads.push(read.serverMs / perRoundReads);
        pgReads.push(read.pgMs / perRoundReads);
        failures += floor.failed + read.failed;
      }
      // The metered access check and the balances of a subscriber, each against the same run's floor.
      const check = (i: number) =>
        fetch(`${server.merchantUrl}/v1/entitlements/check?customer_id=${customerOf(i % SUBSCRIBERS)}&product_id=${productId}`, { headers }).then(async (r) => {
          const body = (await r.json()) as { data?: { entitled?: boolean; meters?: unknown[] } };
          return r.status === 200 && body.data?.entitled === true && body.data.meters?.length === 1 ? 200 : 500;
        });
      const balance = (i: number) => fetch(`${server.merchantUrl}/v1/customers/${customerOf(i % SUBSCRIBERS)}/meter-balances`, { headers }).then(async (r) => (await r.arrayBuffer(), r.status));
      await drive(50, CONCURRENCY, check, 200);
      await drive(50, CONCURRENCY, balance, 200);
      const checks: number[] = [];
      const balances: number[] = [];
      const checkPg: number[] = [];
      const balancePg: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const perRoundReads = Math.round(READS / ROUNDS);
        const a = await measure(() => drive(perRoundReads, CONCURRENCY, (i) => check(i + r), 200));
        const b = await measure(() => drive(perRoundReads, CONCURRENCY, (i) => balance(i + r), 200));
        checks.push(a.serverMs / perRoundReads);
        checkPg.push(a.pgMs / perRoundReads);
        balances.push(b.serverMs / perRoundReads);
        balancePg.push(b.pgMs / perRoundReads);
        failures += a.failed + b.failed;
      }
      access.push({ events: Math.max(size, have), checkServerMs: round(median(checks)), checkPgMs: round(median(checkPg)), balancesServerMs: round(median(balances)), balancesPgMs: round(median(balancePg)) });
      process.stderr.write(`  ${Math.max(size, have)} events: access check server ${median(checks).toFixed(3)} ms/request (PostgreSQL ${median(checkPg).toFixed(3)}), balances ${median(balances).toFixed(3)} ms (PostgreSQL ${median(balancePg).toFixed(3)})\n`);
      quantity.push({ events: Math.max(size, have), seedSeconds: round(seedSeconds), rebuildSeconds: round(rebuildSeconds), serverMsPerRequest: round(median(reads)), pgMsPerRequest: round(median(pgReads)), floorMsPerRequest: round(median(floors)) });
      process.stderr.write(`  ${Math.max(size, have)} events: quantity server ${median(reads).toFixed(3)} ms/request, PostgreSQL ${median(pgReads).toFixed(3)} ms; floor ${median(floors).toFixed(3)} ms; seeded in ${seedSeconds.toFixed(0)} s, rollups rebuilt in ${rebuildSeconds.toFixed(0)} s\n`);
    }

    if (SEED_ONLY) return;

    // Closing periods: CLOSE copies (SQL) of a subscriber's metered subscription, spread over the
    // seeded customers, each period [end − 1 month, end) ended 2 h ago (past the 1-hour grace
    // window), so each close reads a month of its customer's usage (~720 hour rows) and charges
    // fee + usage on the sandbox card. One worker process (the production jobs) closes them all.
    // They go into a copy of this database (its events, rollups, customers and subscribers), made
    // once the API process has stopped (a template must have no other session) and dropped after.
    let close: { subscriptions: number; workers: number; seconds: number; renewed: number; orders: number; pgSeconds: number } | undefined;
    if (CLOSE > 0) {
      const tag = randomUUID().slice(0, 8);
      await server.stop();
      serverStopped = true;
      await direct.end();
      directEnded = true;
      const copyName = `kassa_bench_usage_close_${tag}`;
      const admin = new pg.Client({ connectionString: serverUrl });
      await admin.connect();
      try {
        // FILE_COPY: a checkpoint and a copy of the files, rather than the whole database through the WAL.
        await admin.query(`CREATE DATABASE ${copyName} TEMPLATE ${databaseName} STRATEGY = FILE_COPY`);
      } finally {
        await admin.end();
      }
      const copy = { url: databaseUrlOn(serverUrl, copyName), drop: () => dropDatabase(copyName) };
      const closeDb = new pg.Client({ connectionString: copy.url });
      await closeDb.connect();
      try {
        const template = (await closeDb.query<{ id: string }>("SELECT id FROM subscriptions WHERE org_id = $1 AND status = 'ACTIVE' AND price_id IS NOT NULL ORDER BY created_at LIMIT 1", [merchant.orgId])).rows[0]!.id;
        const periodEnd = new Date(Math.floor(Date.now() / 1000) * 1000 - 2 * HOUR);
        await closeDb.query(
          `INSERT INTO subscriptions
           SELECT (jsonb_populate_record(NULL::subscriptions, to_jsonb(s) || jsonb_build_object(
             'id', 'SUB_close_' || $2 || '_' || i, 'customer_id', 'CUS_' || lpad((i % $3)::text, 24, '0'),
             'checkout_session_id', 'bench_close_' || $2 || '_' || i, 'manage_token', 'bench_close_' || $2 || '_' || i,
             'current_period_start', $4::timestamptz - interval '1 month', 'current_period_end', $4::timestamptz, 'next_action_at', $4::timestamptz,
             'period_number', 0, 'usage_closed_period', NULL, 'failed_attempts', 0, 'processor_subscription_id', NULL))).*
           FROM subscriptions s, generate_series(0, $5::int - 1) i WHERE s.id = $1`,
          [template, tag, CUSTOMERS, periodEnd.toISOString(), CLOSE],
        );
        await closeDb.query('ANALYZE subscriptions');
        const renewedSql = `SELECT count(*) FILTER (WHERE period_number > 0) AS renewed FROM subscriptions WHERE id LIKE 'SUB_close_${tag}_%'`;
        const pg0 = await postgresCpuSeconds(closeDb, copyName);
        const closeDeployment = { ...deployment, databaseUrl: copy.url };
        const workers = await Promise.all(Array.from({ length: CLOSE_WORKERS }, (_, w) => startKassa(closeDeployment, { role: 'worker', name: `bench-usage-worker-${w}`, echo: !shortRun })));
        const started = performance.now();
        let renewed = 0;
        let polls = 0;
        let pg1: number | null = null;
        try {
          while (performance.now() - started < 30 * 60_000) {
            renewed = Number((await closeDb.query(renewedSql)).rows[0].renewed);
            if (renewed >= CLOSE) break;
            if (++polls % 10 === 0) process.stderr.write(`  close: ${renewed}/${CLOSE} after ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
            await new Promise((r) => setTimeout(r, 1000));
          }
          // Before the workers stop: their backends' CPU ends with their connections.
          pg1 = await postgresCpuSeconds(closeDb, copyName);
        } finally {
          await Promise.all(workers.map((w) => w.stop()));
        }
        const seconds = (performance.now() - started) / 1000;
        const orders = Number((await closeDb.query(`SELECT count(*) AS n FROM orders WHERE subscription_id LIKE 'SUB_close_${tag}_%'`)).rows[0].n);
        close = { subscriptions: CLOSE, workers: CLOSE_WORKERS, seconds: round(seconds), renewed, orders, pgSeconds: pg0 === null || pg1 === null ? NaN : round(pg1 - pg0) };
        process.stderr.write(`  close: ${renewed} of ${CLOSE} periods closed by ${CLOSE_WORKERS} worker(s) and renewed in ${seconds.toFixed(1)} s (${orders} orders), PostgreSQL CPU ${close.pgSeconds} s\n`);
      } finally {
        await closeDb.end();
        await copy.drop();
      }
    }

    const { cpus } = machine();
    const lines = [
      '',
      `bench:usage — PostgreSQL, 1 API process (pool 10), ${CUSTOMERS} customers, 2 meters; ${cpus} CPUs, load average ${machine().loadAverage[0]} at the end`,
      '',
      `ingest POST /v1/usage-events (${BATCH} events per request, ${CONCURRENCY} in flight): median ${median(ingestRates).toFixed(0)} events/s, server CPU ${median(ingestPerEvent).toFixed(1)} µs/event (rounds ${ingestPerEvent.map((x) => x.toFixed(1)).join(', ')}), PostgreSQL ${median(ingestPgPerEvent).toFixed(1)} µs/event`,
      `floor POST /__bench/floor (one-row INSERT): server CPU ${median(floorPerRequest).toFixed(3)} ms/request (rounds ${floorPerRequest.map((x) => x.toFixed(3)).join(', ')})`,
      ...quantity.map(
        (q) =>
          `quantity GET /v1/meters/{id}/quantities (one customer, 30 days cut mid-hour) at ${q.events.toLocaleString('en')} events: server CPU ${q.serverMsPerRequest} ms/request, PostgreSQL ${q.pgMsPerRequest} ms; floor ${q.floorMsPerRequest} ms (seeded in SQL in ${q.seedSeconds} s, both meters' rollups rebuilt in ${q.rebuildSeconds} s)`,
      ),
      ...access.map(
        (a) =>
          `metered access check GET /v1/entitlements/check (a subscriber, product with a metered component, period of 29 days so far) at ${a.events.toLocaleString('en')} events: server CPU ${a.checkServerMs} ms/request, PostgreSQL ${a.checkPgMs} ms; balances GET /v1/customers/{id}/meter-balances: server CPU ${a.balancesServerMs} ms/request, PostgreSQL ${a.balancesPgMs} ms`,
      ),
      ...(close ? [`closing ${close.subscriptions} metered periods (${close.workers} worker process(es), fee + usage on the sandbox card): ${close.renewed} renewed in ${close.seconds} s, ${close.orders} orders, PostgreSQL CPU ${close.pgSeconds} s`] : []),
      `${failures} failed requests`,
      '(the bench, the server and PostgreSQL share these CPUs; on a loaded machine every figure is pessimistic)',
    ];
    report(lines.join('\n'));
    const targets: Target[] = [target('ingest: server CPU per event', round(median(ingestPerEvent)), 'µs', 30, true, { rounds: ingestPerEvent.map(round) })];
    for (const q of quantity) targets.push(target(`quantity at ${q.events} events: server CPU per request`, q.serverMsPerRequest, 'ms', 2, true));
    for (const a of access) targets.push(target(`metered access check at ${a.events} events: server CPU per request`, a.checkServerMs, 'ms', 2, true));
    for (const a of access) targets.push(target(`meter balances at ${a.events} events: server CPU per request`, a.balancesServerMs, 'ms', 2, true));
    if (close) targets.push(target(`closing ${close.subscriptions} metered periods: wall time`, close.renewed >= close.subscriptions ? close.seconds : Infinity, 's', 60, true));
    if (quantity.length > 1) targets.push(target(`quantity: last size / first size, server CPU`, round(quantity.at(-1)!.serverMsPerRequest / quantity[0]!.serverMsPerRequest), 'ratio', 2, true));
    emit(
      summary('usage', {
        settings: { customers: CUSTOMERS, batch: BATCH, concurrency: CONCURRENCY, batches: BATCHES, reads: READS, rounds: ROUNDS, sizes: SIZES },
        figures: { ingest: { eventsPerSecond: round(median(ingestRates)), serverCpuUsPerEvent: round(median(ingestPerEvent)), postgresCpuUsPerEvent: round(median(ingestPgPerEvent)) }, quantity, access, close, failures },
        floors: { floor: { what: 'one-row INSERT route, same server, pool and middleware', serverCpuMsPerRequest: round(median(floorPerRequest)) } },
        targets,
      }),
    );
  } finally {
    if (!directEnded) await direct.end();
    if (!serverStopped) await server.stop();
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
