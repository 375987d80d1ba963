/**
 * `npm run bench:checkout`: the merchant API's hot paths against a floor, on PostgreSQL, by server
 * CPU per request measured in the same run (issue 21: a ratio that holds on a noisy machine where
 * req/s swings by tens of percent).
 *
 * One Kassa API process (scripts/bench/checkout-server.ts: the production listeners plus the floor
 * route, on its own throw-away database) and a load generator in a second process
 * (scripts/bench/load.ts, autocannon). At each connection count (BENCH_CONNECTIONS, default 16,64),
 * the same closed-loop load on:
 * - floor: `POST /__bench/floor`, one single-row INSERT in autocommit on the same server, pool and
 *   middleware (tools/bench-floor.ts): the least a durable create can cost;
 * - read: `GET /__bench/read/{id}` over a copy of the 200 seeded sessions (tools/bench-floor.ts):
 *   one prepared SELECT by primary key answered as the row's JSON, no authentication: the least a
 *   read by id can cost on this stack. Its ratio to the floor is printed as a reference, not a target;
 * - create: `POST /v1/checkout-sessions` with a fresh Idempotency-Key per request;
 * - get: `GET /v1/checkout-sessions/{id}` over 200 seeded sessions;
 * - order: `GET /v1/orders/{id}` over 100 paid orders (a catalog product, paid on the hosted page);
 * - orders: `GET /v1/orders` (the first page, 20 of those orders);
 * - entitlement: `GET /v1/entitlements/check?customer_id=…&product_id=…` over their buyers.
 * The routes take turns in BENCH_ROUNDS short rounds (default 3), so that a drift of the machine's
 * speed hits them alike; each ratio is the median of the rounds' (their spread is printed).
 *
 * Targets (issue 21): every read at server CPU per request ≤ the floor's (floor/read ≥ 1); create
 * ≥ 0.5 of the floor by server CPU per request; create p99 ≤ 50 ms when held to half its saturated
 * rate at 64 connections (saturated latency is reported, not targeted).
 *
 * `--json` prints one machine-readable summary (scripts/bench/summary.ts); `--short` (or
 * BENCH_SHORT=1) a CI-sized run. BENCH_POSTGRES_URL (default
 * postgres://postgres@127.0.0.1:5432/postgres), BENCH_DURATION (seconds per route and connection
 * count, split over the rounds; default 12), BENCH_ROUNDS, BENCH_CONNECTIONS, BENCH_POOL_MAX
 * (server's DATABASE_POOL_MAX, default 10), BENCH_SCENARIOS (a subset such as `get`, for
 * profiling with BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof").
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { BENCH_FLOOR_TABLE_SQL, BENCH_READ_TABLE_SQL } from '../../tools/bench-floor.js';
import { DEFAULT_SERVER_URL, ONE_TIME, REPO_ROOT, createCheckout, createDatabase, http, newDeployment, payOnHostedPage, provisionMerchant, startKassa } from '../../tools/cluster.js';
import type { LoadResult, LoadScenario } from './load.js';
import { postgresCpuSeconds } from './postgres-cpu.js';
import { emit, machine, median, report, round, shortRun, summary, target, type Target } from './summary.js';

const serverUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER_URL;
const duration = Number(process.env.BENCH_DURATION ?? (shortRun ? 4 : 12));
const connectionCounts = (process.env.BENCH_CONNECTIONS ?? (shortRun ? '64' : '16,64')).split(',').map(Number);
const poolMax = process.env.BENCH_POOL_MAX ?? '10';
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? (shortRun ? 2 : 3)));

const READS = ['get', 'order', 'orders', 'entitlement'] as const;
const LABELS: Record<string, string> = {
  floor: 'floor  POST /__bench/floor',
  read: 'read   GET /__bench/read/{id}',
  create: 'create POST /v1/checkout-sessions',
  get: 'get    GET /v1/checkout-sessions/{id}',
  order: 'order  GET /v1/orders/{id}',
  orders: 'orders GET /v1/orders (first page)',
  entitlement: 'entitl GET /v1/entitlements/check',
};

interface Row {
  name: string;
  connections: number;
  requests: number;
  seconds: number;
  /** Per round, in order: the ratios pair a route's round with the floor's. */
  rates: number[];
  cpuPerRequest: number[];
  p50s: number[];
  p99s: number[];
  max: number;
  non2xx: number;
  failed: number;
  serverCpuMs: number;
  /** NaN when PostgreSQL's processes cannot be read from /proc (another machine). */
  pgCpuMs: number;
  loadCpuMs: number;
}

function load(scenario: LoadScenario): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/bench/load.ts', JSON.stringify(scenario)], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`load generator exited with ${code}`));
      resolve(JSON.parse(out.trim().split('\n').pop()!) as LoadResult);
    });
  });
}

/** Paid one-time orders of a catalog product (so that they grant access), through the hosted page. */
async function seedPaidOrders(server: { adminUrl: string; merchantUrl: string }, adminToken: string, merchant: { orgId: string; apiKey: string }, count: number) {
  const auth = { Authorization: `Bearer ${adminToken}` };
  const product = await http('POST', `${server.adminUrl}/v1/orgs/${merchant.orgId}/products`, { headers: auth, body: { name: 'Bench product' } });
  if (product.status !== 201) throw new Error(`product create: ${product.status} ${product.text}`);
  const productId = product.json.data.productId as string;
  const price = await http('POST', `${server.adminUrl}/v1/products/${productId}/prices`, { headers: auth, body: { amount: 1500, currency: 'USD' } });
  if (price.status !== 201) throw new Error(`price create: ${price.status} ${price.text}`);
  const pricingId = price.json.data.pricingId as string;
  const orders: Array<{ orderId: string; customerId: string }> = [];
  for (let i = 0; i < count; i++) {
    const session = await createCheckout(server.merchantUrl, merchant.apiKey, { pricingId, customerEmail: `buyer${i}@example.com` }, randomUUID());
    const status = await payOnHostedPage(session.url);
    if (status !== 303) throw new Error(`hosted page payment answered ${status}`);
    const read = await http('GET', `${server.merchantUrl}/v1/checkout-sessions/${session.id}`, { headers: { 'X-API-Key': merchant.apiKey } });
    const orderId = read.json.data.orderId as string;
    const order = await http('GET', `${server.merchantUrl}/v1/orders/${orderId}`, { headers: { 'X-API-Key': merchant.apiKey } });
    orders.push({ orderId, customerId: order.json.data.customerId as string });
  }
  return { productId, orders };
}

async function main(): Promise<void> {
  const db = await createDatabase(serverUrl, 'kassa_bench');
  const direct = new pg.Client({ connectionString: db.url });
  await direct.connect();
  await direct.query(BENCH_FLOOR_TABLE_SQL);
  const deployment = newDeployment(db.url, {
    LOG_LEVEL: 'warn',
    MERCHANT_RATE_LIMIT_PER_MINUTE: '0',
    // The seeding pays on the hosted page from one address.
    HOSTED_RATE_LIMIT_PER_MINUTE: '0',
    HOSTED_WRITE_RATE_LIMIT_PER_MINUTE: '0',
    DATABASE_POOL_MAX: poolMax,
    // DATABASE_PREPARED_STATEMENTS=false measures the server without named statements.
    ...(process.env.DATABASE_PREPARED_STATEMENTS ? { DATABASE_PREPARED_STATEMENTS: process.env.DATABASE_PREPARED_STATEMENTS } : {}),
  });
  // BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=…" profiles the server.
  const nodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean);
  const server = await startKassa(deployment, { role: 'api', name: 'bench-api', echo: !shortRun, nodeArgs, entry: 'scripts/bench/checkout-server.ts' });
  try {
    const merchant = await provisionMerchant(server.adminUrl, deployment.adminToken, 'Bench');
    const sessionIds: string[] = [];
    for (let i = 0; i < 200; i++) sessionIds.push((await createCheckout(server.merchantUrl, merchant.apiKey, ONE_TIME, randomUUID())).id);
    const paid = await seedPaidOrders(server, deployment.adminToken, merchant, 100);
    await direct.query(BENCH_READ_TABLE_SQL);
    const body = JSON.stringify(ONE_TIME);
    const read = { method: 'GET', headers: { 'x-api-key': merchant.apiKey } } as const;
    const scenarios = {
      floor: { method: 'POST', paths: ['/__bench/floor'], headers: { 'content-type': 'application/json' }, body: '{}' },
      read: { method: 'GET', headers: {}, paths: sessionIds.map((id) => `/__bench/read/${id}`) },
      create: { method: 'POST', paths: ['/v1/checkout-sessions'], headers: { 'content-type': 'application/json', 'x-api-key': merchant.apiKey }, body, freshIdempotencyKey: true },
      get: { ...read, paths: sessionIds.map((id) => `/v1/checkout-sessions/${id}`) },
      order: { ...read, paths: paid.orders.map((o) => `/v1/orders/${o.orderId}`) },
      orders: { ...read, paths: ['/v1/orders'] },
      entitlement: { ...read, paths: paid.orders.map((o) => `/v1/entitlements/check?customer_id=${o.customerId}&product_id=${paid.productId}`) },
    } as const;
    // BENCH_SCENARIOS=get (say) runs a subset, for profiling; the ratios need the floor.
    const only = process.env.BENCH_SCENARIOS?.split(',');
    const selected = Object.entries(scenarios).filter(([name]) => !only || only.includes(name));

    // Warm-up: JIT, pool connections, validator caches.
    for (const [, s] of selected) await load({ url: server.merchantUrl, connections: 8, durationSeconds: 2, ...s, paths: [...s.paths] });

    // The server's own CPU time per request (from its /metrics): unlike req/s, it does not depend
    // on how much CPU the rest of the machine leaves to the server.
    const cpuSeconds = async () => {
      const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
      return Number(/^kassa_process_cpu_seconds_total\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? NaN);
    };
    const databaseName = new URL(db.url).pathname.slice(1);
    // The scenarios take turns in short rounds: this machine's speed drifts by tens of percent
    // within a minute, and a ratio of two runs taken a minute apart measures the drift. Ratios are
    // the median of the rounds' ratios; req/s and CPU are totals over the rounds.
    const rows: Row[] = [];
    const roundSeconds = Math.max(1, Math.round(duration / rounds));
    for (const connections of connectionCounts) {
      for (let round = 0; round < rounds; round++) {
        for (const [name, s] of selected) {
          const cpuBefore = await cpuSeconds();
          const pgBefore = await postgresCpuSeconds(direct, databaseName);
          const result = await load({ url: server.merchantUrl, connections, durationSeconds: roundSeconds, ...s, paths: [...s.paths] });
          const serverCpuMs = ((await cpuSeconds()) - cpuBefore) * 1000;
          const pgAfter = await postgresCpuSeconds(direct, databaseName);
          let row = rows.find((r) => r.name === name && r.connections === connections);
          if (!row) rows.push((row = { name, connections, requests: 0, seconds: 0, rates: [], cpuPerRequest: [], p50s: [], p99s: [], max: 0, non2xx: 0, failed: 0, serverCpuMs: 0, pgCpuMs: 0, loadCpuMs: 0 }));
          row.requests += result.requests;
          row.seconds += result.requests / result.requestsPerSecond;
          row.rates.push(result.requestsPerSecond);
          row.cpuPerRequest.push(serverCpuMs / Math.max(1, result.requests));
          row.p50s.push(result.p50);
          row.p99s.push(result.p99);
          row.max = Math.max(row.max, result.max);
          row.non2xx += result.non2xx;
          row.failed += result.errors + result.timeouts;
          row.serverCpuMs += serverCpuMs;
          row.pgCpuMs = pgBefore === null || pgAfter === null || Number.isNaN(row.pgCpuMs) ? NaN : row.pgCpuMs + (pgAfter - pgBefore) * 1000;
          row.loadCpuMs += result.cpuMsPerRequest * result.requests;
          process.stderr.write(`  ${name} @${connections} round ${round + 1}/${rounds}: ${result.requestsPerSecond.toFixed(0)} req/s, server ${(serverCpuMs / Math.max(1, result.requests)).toFixed(3)} ms/req, p50 ${result.p50} ms, p99 ${result.p99} ms\n`);
        }
      }
    }
    // Latency below saturation: at 64 connections, creation held to half the rate it reached
    // flat out. A closed loop at saturation measures the queue (Little's law); this is the latency
    // a caller sees when the service has headroom.
    const saturated = rows.find((r) => r.name === 'create' && r.connections === 64);
    let steady: { offered: number; result: LoadResult } | undefined;
    if (saturated) {
      const offered = Math.max(1, Math.round(saturated.requests / saturated.seconds / 2));
      const result = await load({ url: server.merchantUrl, connections: 64, durationSeconds: duration, ...scenarios.create, paths: [...scenarios.create.paths], overallRate: offered });
      steady = { offered, result };
      process.stderr.write(`  create @64 steady at ${offered} req/s: p50 ${result.p50} ms, p99 ${result.p99} ms\n`);
    }
    const created = Number((await direct.query(`SELECT count(*) AS n FROM checkout_sessions`)).rows[0].n);

    const pad = (s: string, n: number) => s.padStart(n);
    const perRequest = (ms: number, r: Row) => (Number.isNaN(ms) ? 'n/a' : (ms / r.requests).toFixed(3));
    const { cpus } = machine();
    const lines = [
      '',
      `bench:checkout — PostgreSQL, 1 API process (pool ${poolMax}), load from a second process; ${cpus} CPUs, load average ${machine().loadAverage[0]} at the end; ${rounds} rounds of ${roundSeconds} s per route, the routes taking turns`,
      '',
      `${'route'.padEnd(38)}${pad('conns', 6)}${pad('req/s', 8)}${pad('p50 ms', 8)}${pad('p99 ms', 8)}${pad('max ms', 8)}${pad('CPU ms/req: server', 20)}${pad('PostgreSQL', 12)}${pad('load gen', 10)}${pad('non-2xx', 9)}${pad('errors', 8)}`,
      ...rows.map((r) =>
        `${LABELS[r.name]!.padEnd(38)}${pad(String(r.connections), 6)}${pad((r.requests / r.seconds).toFixed(0), 8)}${pad(String(median(r.p50s)), 8)}${pad(String(Math.max(...r.p99s)), 8)}${pad(String(r.max), 8)}${pad(perRequest(r.serverCpuMs, r), 20)}${pad(perRequest(r.pgCpuMs, r), 12)}${pad(perRequest(r.loadCpuMs, r), 10)}${pad(String(r.non2xx), 9)}${pad(String(r.failed), 8)}`,
      ),
      '(req/s and CPU over all rounds; p50 the median of the rounds\', p99 the worst round\'s)',
      '',
    ];
    const targets: Target[] = [];
    const hasFloor = rows.some((r) => r.name === 'floor');
    for (const connections of hasFloor ? connectionCounts : []) {
      const of = (name: string) => rows.find((r) => r.name === name && r.connections === connections);
      const floor = of('floor')!;
      // floor CPU / route CPU, round by round: ≥ 1 means the route costs the server no more than the floor.
      const cpuRatios = (row: Row) => row.cpuPerRequest.map((ms, i) => floor.cpuPerRequest[i]! / ms);
      const minimalRead = of('read');
      if (minimalRead) {
        const ratios = cpuRatios(minimalRead);
        lines.push(`reference @${connections} (not a target): floor / minimal read (one prepared SELECT by id, no auth) server CPU per request ${median(ratios).toFixed(3)}; rounds ${ratios.map((r) => r.toFixed(3)).join(', ')}`);
      }
      const create = of('create');
      if (create) targets.push(target(`create @${connections}: floor / create server CPU per request`, median(cpuRatios(create)), 'ratio', 0.5, false, { rounds: cpuRatios(create) }));
      for (const name of READS) {
        const row = of(name);
        if (row) targets.push(target(`${name} @${connections}: floor / read server CPU per request`, median(cpuRatios(row)), 'ratio', 1, false, { rounds: cpuRatios(row) }));
      }
      if (connections === 64 && create) {
        const [serverMs, pgMs, loadMs] = [create.serverCpuMs, create.pgCpuMs, create.loadCpuMs].map((ms) => ms / create.requests) as [number, number, number];
        lines.push(`@64 connections, saturated (reported, not targeted): create ${(create.requests / create.seconds).toFixed(0)} req/s at p99 ${Math.max(...create.p99s)} ms; the floor ${(floor.requests / floor.seconds).toFixed(0)} req/s at p99 ${Math.max(...floor.p99s)} ms`);
        if (!Number.isNaN(pgMs)) {
          lines.push(
            `  CPU per create: server ${serverMs.toFixed(2)} + PostgreSQL ${pgMs.toFixed(2)} + load generator ${loadMs.toFixed(2)} ms on ${cpus} cores: at most ${((cpus * 1000) / (serverMs + pgMs + loadMs)).toFixed(0)} req/s`,
          );
        }
      }
    }
    if (steady) {
      const r = steady.result;
      lines.push(
        `@64 connections, steady: create offered ${steady.offered} req/s (half its saturated rate) for ${duration} s: ${r.requestsPerSecond.toFixed(0)} req/s answered, ` +
          `p50 ${r.p50} ms, p99 ${r.p99} ms, max ${r.max} ms (latency from when each request was due); ${r.non2xx + r.errors + r.timeouts} failed`,
      );
      targets.push(target('create @64 held at half its saturated rate: p99 latency', r.p99, 'ms', 50, true, { note: `${steady.offered} req/s offered` }));
    }
    const failures = rows.reduce((n, r) => n + r.non2xx + r.failed, 0) + (steady ? steady.result.non2xx + steady.result.errors + steady.result.timeouts : 0);
    lines.push(`${created} checkout sessions in the database; ${failures} failed requests in total`);
    lines.push('(the load generator, the server and PostgreSQL share these CPUs; on a loaded machine every figure is pessimistic)');
    report(lines.join('\n'));
    const figures: Record<string, unknown> = Object.fromEntries(
      rows.map((r) => [
        `${r.name}@${r.connections}`,
        {
          route: LABELS[r.name]!.slice(7).trim(),
          connections: r.connections,
          requestsPerSecond: round(r.requests / r.seconds),
          p50Ms: median(r.p50s),
          p99Ms: Math.max(...r.p99s),
          serverCpuMsPerRequest: round(r.serverCpuMs / r.requests),
          serverCpuMsPerRequestByRound: r.cpuPerRequest.map(round),
          postgresCpuMsPerRequest: Number.isNaN(r.pgCpuMs) ? null : round(r.pgCpuMs / r.requests),
          loadGeneratorCpuMsPerRequest: round(r.loadCpuMs / r.requests),
          failed: r.non2xx + r.failed,
        },
      ]),
    );
    if (steady) figures['create@64 steady'] = { offered: steady.offered, requestsPerSecond: round(steady.result.requestsPerSecond), p50Ms: steady.result.p50, p99Ms: steady.result.p99 };
    const floors = Object.fromEntries(rows.filter((r) => r.name === 'floor').map((r) => [`floor@${r.connections}`, { what: 'one-row INSERT route, same server, pool and middleware', serverCpuMsPerRequest: round(r.serverCpuMs / r.requests) }]));
    const result = summary('checkout', { settings: { rounds, roundSeconds, connections: connectionCounts, poolMax, scenarios: selected.map(([n]) => n) }, figures, floors, targets });
    emit(result);
    process.exitCode = result.allTargetsMet && failures === 0 ? 0 : 1;
  } finally {
    await server.stop();
    await direct.end();
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
