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
 * Targets: ingest ≤ 30 µs of server CPU per event; quantity ≤ 2 ms of server CPU per request, and
 * ≤ 2× from the first size to the last.
 */
import { randomUUID } from 'node:crypto';
import knex from 'knex';
import pg from 'pg';
import { createWeekPartitions, isPartitioned, WEEK_MS, weekStart } from '../../src/db/partitions.js';
import { rebuildMeterRollup } from '../../src/usage/usage.repository.js';
import { BENCH_FLOOR_TABLE_SQL } from '../../tools/bench-floor.js';
import { DEFAULT_SERVER_URL, createDatabase, http, newDeployment, provisionMerchant, startKassa } from '../../tools/cluster.js';
import { postgresCpuSeconds } from './postgres-cpu.js';
import { emit, machine, median, report, round, shortRun, summary, target, type Target } from './summary.js';

const serverUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER_URL;
const CUSTOMERS = Number(process.env.BENCH_USAGE_CUSTOMERS ?? 1000);
const BATCH = Number(process.env.BENCH_USAGE_BATCH ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_USAGE_CONCURRENCY ?? 4);
const BATCHES = Number(process.env.BENCH_USAGE_BATCHES ?? (shortRun ? 40 : 200));
const READS = Number(process.env.BENCH_USAGE_READS ?? (shortRun ? 200 : 1000));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (shortRun ? 2 : 3));
const SIZES = (process.env.BENCH_USAGE_SIZES ?? '1000000').split(',').map(Number);
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

async function main(): Promise<void> {
  const db = await createDatabase(serverUrl, 'kassa_bench_usage');
  const direct = new pg.Client({ connectionString: db.url });
  await direct.connect();
  await direct.query(BENCH_FLOOR_TABLE_SQL);
  const deployment = newDeployment(db.url, { LOG_LEVEL: 'warn', MERCHANT_RATE_LIMIT_PER_MINUTE: '0', DATABASE_POOL_MAX: '10' });
  // BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=…" profiles the server.
  const nodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean);
  const server = await startKassa(deployment, { role: 'api', name: 'bench-usage', echo: !shortRun, nodeArgs, entry: 'scripts/bench/checkout-server.ts' });
  const databaseName = new URL(db.url).pathname.slice(1);
  try {
    const merchant = await provisionMerchant(server.adminUrl, deployment.adminToken, 'Usage bench');
    await direct.query(
      `INSERT INTO customers (id, org_id, email, created_at, external_id)
       SELECT 'CUS_' || lpad(i::text, 24, '0'), $1, 'user' || i || '@example.com', now(), 'user_' || i FROM generate_series(0, $2 - 1) i`,
      [merchant.orgId, CUSTOMERS],
    );
    const headers = { 'X-API-Key': merchant.apiKey };
    const jsonHeaders = { ...headers, 'content-type': 'application/json' };
    const meters: Record<'sum' | 'count', string> = { sum: '', count: '' };
    for (const aggregation of ['sum', 'count'] as const) {
      const res = await http('POST', `${server.merchantUrl}/v1/meters`, {
        headers,
        body: { name: `bench ${aggregation}`, source: 'EVENTS', filter: { eventName: 'llm' }, aggregation, ...(aggregation === 'sum' ? { property: 'tokens' } : {}) },
      });
      if (res.status !== 201) throw new Error(`meter create: ${res.status} ${res.text}`);
      meters[aggregation] = res.json.data.id as string;
    }

    const cpuSeconds = async () => {
      const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
      return Number(/^kassa_process_cpu_seconds_total\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? NaN);
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

    const ingestPerEvent: number[] = [];
    const ingestPgPerEvent: number[] = [];
    const ingestRates: number[] = [];
    const floorPerRequest: number[] = [];
    let failures = 0;
    const perRound = Math.max(1, Math.round(BATCHES / ROUNDS));
    for (let r = 0; r < ROUNDS; r++) {
      const bodies = Array.from({ length: perRound }, makeBody);
      const floor = await measure(() => drive(500, CONCURRENCY, () => post('/__bench/floor', '{}'), 201));
      floorPerRequest.push(floor.serverMs / 500);
      const ingest = await measure(() => drive(bodies.length, CONCURRENCY, (i) => post('/v1/usage-events', bodies[i]!), 200));
      const events = bodies.length * BATCH;
      ingestPerEvent.push((ingest.serverMs * 1000) / events);
      ingestPgPerEvent.push((ingest.pgMs * 1000) / events);
      ingestRates.push(events / ingest.seconds);
      failures += floor.failed + ingest.failed;
      process.stderr.write(
        `  round ${r + 1}/${ROUNDS}: ingest ${(events / ingest.seconds).toFixed(0)} events/s, server ${((ingest.serverMs * 1000) / events).toFixed(1)} µs/event, PostgreSQL ${((ingest.pgMs * 1000) / events).toFixed(1)} µs/event; floor ${(floor.serverMs / 500).toFixed(3)} ms/request\n`,
      );
    }

    // Quantities at each size of the organization.
    const quantity: Array<{ events: number; seedSeconds: number; rebuildSeconds: number; serverMsPerRequest: number; pgMsPerRequest: number; floorMsPerRequest: number }> = [];
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
        }
        await direct.query('ANALYZE usage_events');
      }
      const seedSeconds = (performance.now() - seedStarted) / 1000;
      // The rollups of the events seeded behind the API's back: rebuilt as a filter change rebuilds
      // them, here without the API's statement timeout (a rebuild over millions of events outlasts it).
      const rebuildStarted = performance.now();
      const builder = knex({ client: 'pg', connection: db.url });
      try {
        for (const id of Object.values(meters)) await builder.transaction((trx) => rebuildMeterRollup(trx, merchant.orgId, id));
      } finally {
        await builder.destroy();
      }
      await direct.query('ANALYZE usage_meter_hours');
      const rebuildSeconds = (performance.now() - rebuildStarted) / 1000;
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
      quantity.push({ events: size, seedSeconds: round(seedSeconds), rebuildSeconds: round(rebuildSeconds), serverMsPerRequest: round(median(reads)), pgMsPerRequest: round(median(pgReads)), floorMsPerRequest: round(median(floors)) });
      process.stderr.write(`  ${size} events: quantity server ${median(reads).toFixed(3)} ms/request, PostgreSQL ${median(pgReads).toFixed(3)} ms; floor ${median(floors).toFixed(3)} ms; seeded in ${seedSeconds.toFixed(0)} s, rollups rebuilt in ${rebuildSeconds.toFixed(0)} s\n`);
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
      `${failures} failed requests`,
      '(the bench, the server and PostgreSQL share these CPUs; on a loaded machine every figure is pessimistic)',
    ];
    report(lines.join('\n'));
    const targets: Target[] = [target('ingest: server CPU per event', round(median(ingestPerEvent)), 'µs', 30, true, { rounds: ingestPerEvent.map(round) })];
    for (const q of quantity) targets.push(target(`quantity at ${q.events} events: server CPU per request`, q.serverMsPerRequest, 'ms', 2, true));
    if (quantity.length > 1) targets.push(target(`quantity: last size / first size, server CPU`, round(quantity.at(-1)!.serverMsPerRequest / quantity[0]!.serverMsPerRequest), 'ratio', 2, true));
    emit(
      summary('usage', {
        settings: { customers: CUSTOMERS, batch: BATCH, concurrency: CONCURRENCY, batches: BATCHES, reads: READS, rounds: ROUNDS, sizes: SIZES },
        figures: { ingest: { eventsPerSecond: round(median(ingestRates)), serverCpuUsPerEvent: round(median(ingestPerEvent)), postgresCpuUsPerEvent: round(median(ingestPgPerEvent)) }, quantity, failures },
        floors: { floor: { what: 'one-row INSERT route, same server, pool and middleware', serverCpuMsPerRequest: round(median(floorPerRequest)) } },
        targets,
      }),
    );
  } finally {
    await direct.end();
    await server.stop();
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
