/**
 * `npm run bench:checkout`: checkout-session creation and reads against a floor, on PostgreSQL.
 *
 * One Kassa API process (scripts/bench/checkout-server.ts: the production listeners plus the floor
 * route, on its own throw-away database) and a load generator in a second process
 * (scripts/bench/load.ts, autocannon). At 16 and 64 connections, the same load on:
 * - floor: `POST /__bench/floor`, one single-row INSERT in a transaction on the same server, pool
 *   and middleware (tools/bench-floor.ts): the least a durable create can cost;
 * - create: `POST /v1/checkout-sessions` with a fresh Idempotency-Key per request;
 * - get: `GET /v1/checkout-sessions/{id}` over 200 seeded sessions.
 * The routes take turns in BENCH_ROUNDS short rounds (default 3), so that a drift of the
 * machine's speed hits them alike. Prints req/s, p50/p99 latency, CPU ms per request of the
 * server, of PostgreSQL (from /proc, when it runs on this machine) and of the load generator, the
 * create/floor ratio (median of the rounds'), and for 64 connections what Little's law and the
 * CPU per create allow on this machine, and creation's latency when held to half its saturated
 * rate (an open loop over the same 64 connections). Targets: create ≥ 50 % of the floor's
 * throughput and p99 ≤ 50 ms at 64 connections.
 *
 * BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_DURATION
 * (seconds per route and connection count, split over the rounds; default 12), BENCH_ROUNDS,
 * BENCH_CONNECTIONS (default "16,64"), BENCH_POOL_MAX (server's
 * DATABASE_POOL_MAX, default 10), BENCH_SCENARIOS (a subset such as `create`, for profiling with
 * BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof").
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { BENCH_FLOOR_TABLE_SQL } from '../../tools/bench-floor.js';
import { DEFAULT_SERVER_URL, ONE_TIME, REPO_ROOT, createCheckout, createDatabase, newDeployment, provisionMerchant, startKassa } from '../../tools/cluster.js';
import type { LoadResult, LoadScenario } from './load.js';
import { postgresCpuSeconds } from './postgres-cpu.js';

const serverUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER_URL;
const duration = Number(process.env.BENCH_DURATION ?? 12);
const connectionCounts = (process.env.BENCH_CONNECTIONS ?? '16,64').split(',').map(Number);
const poolMax = process.env.BENCH_POOL_MAX ?? '10';
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));

interface Row {
  name: string;
  connections: number;
  requests: number;
  seconds: number;
  /** req/s of each round, in order: the ratios pair a route's round with the floor's. */
  rates: number[];
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

const median = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

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

async function main(): Promise<void> {
  const db = await createDatabase(serverUrl, 'kassa_bench');
  const direct = new pg.Client({ connectionString: db.url });
  await direct.connect();
  await direct.query(BENCH_FLOOR_TABLE_SQL);
  const deployment = newDeployment(db.url, {
    LOG_LEVEL: 'warn',
    MERCHANT_RATE_LIMIT_PER_MINUTE: '0',
    DATABASE_POOL_MAX: poolMax,
    // DATABASE_PREPARED_STATEMENTS=false measures the server without named statements.
    ...(process.env.DATABASE_PREPARED_STATEMENTS ? { DATABASE_PREPARED_STATEMENTS: process.env.DATABASE_PREPARED_STATEMENTS } : {}),
  });
  // BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=…" profiles the server.
  const nodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean);
  const server = await startKassa(deployment, { role: 'api', name: 'bench-api', echo: true, nodeArgs, entry: 'scripts/bench/checkout-server.ts' });
  try {
    const merchant = await provisionMerchant(server.adminUrl, deployment.adminToken, 'Bench');
    const sessionIds: string[] = [];
    for (let i = 0; i < 200; i++) sessionIds.push((await createCheckout(server.merchantUrl, merchant.apiKey, ONE_TIME, randomUUID())).id);
    const body = JSON.stringify(ONE_TIME);
    const scenarios = {
      floor: { method: 'POST', paths: ['/__bench/floor'], headers: { 'content-type': 'application/json' }, body: '{}' },
      create: { method: 'POST', paths: ['/v1/checkout-sessions'], headers: { 'content-type': 'application/json', 'x-api-key': merchant.apiKey }, body, freshIdempotencyKey: true },
      get: { method: 'GET', paths: sessionIds.map((id) => `/v1/checkout-sessions/${id}`), headers: { 'x-api-key': merchant.apiKey } },
    } as const;
    // BENCH_SCENARIOS=create (say) runs a subset, for profiling; the ratios need floor and create.
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
          if (!row) rows.push((row = { name, connections, requests: 0, seconds: 0, rates: [], p50s: [], p99s: [], max: 0, non2xx: 0, failed: 0, serverCpuMs: 0, pgCpuMs: 0, loadCpuMs: 0 }));
          row.requests += result.requests;
          row.seconds += result.requests / result.requestsPerSecond;
          row.rates.push(result.requestsPerSecond);
          row.p50s.push(result.p50);
          row.p99s.push(result.p99);
          row.max = Math.max(row.max, result.max);
          row.non2xx += result.non2xx;
          row.failed += result.errors + result.timeouts;
          row.serverCpuMs += serverCpuMs;
          row.pgCpuMs = pgBefore === null || pgAfter === null || Number.isNaN(row.pgCpuMs) ? NaN : row.pgCpuMs + (pgAfter - pgBefore) * 1000;
          row.loadCpuMs += result.cpuMsPerRequest * result.requests;
          process.stderr.write(`  ${name} @${connections} round ${round + 1}/${rounds}: ${result.requestsPerSecond.toFixed(0)} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms\n`);
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
    const perRequest = (ms: number, r: Row) => (Number.isNaN(ms) ? 'n/a' : (ms / r.requests).toFixed(2));
    const cores = os.cpus().length;
    const lines = [
      '',
      `bench:checkout — PostgreSQL, 1 API process (pool ${poolMax}), load from a second process; ${cores} CPUs, load average ${os.loadavg()[0]!.toFixed(1)} at the end; ${rounds} rounds of ${roundSeconds} s per route, the routes taking turns`,
      '',
      `${'route'.padEnd(38)}${pad('conns', 6)}${pad('req/s', 8)}${pad('p50 ms', 8)}${pad('p99 ms', 8)}${pad('max ms', 8)}${pad('CPU ms/req: server', 20)}${pad('PostgreSQL', 12)}${pad('load gen', 10)}${pad('non-2xx', 9)}${pad('errors', 8)}`,
      ...rows.map((r) =>
        `${{ floor: 'floor  POST /__bench/floor', create: 'create POST /v1/checkout-sessions', get: 'get    GET /v1/checkout-sessions/{id}' }[r.name]!.padEnd(38)}${pad(String(r.connections), 6)}${pad((r.requests / r.seconds).toFixed(0), 8)}${pad(String(median(r.p50s)), 8)}${pad(String(Math.max(...r.p99s)), 8)}${pad(String(r.max), 8)}${pad(perRequest(r.serverCpuMs, r), 20)}${pad(perRequest(r.pgCpuMs, r), 12)}${pad(perRequest(r.loadCpuMs, r), 10)}${pad(String(r.non2xx), 9)}${pad(String(r.failed), 8)}`,
      ),
      '(req/s and CPU over all rounds; p50 the median of the rounds\', p99 the worst round\'s)',
      '',
    ];
    let ok = only === undefined;
    for (const connections of only ? [] : connectionCounts) {
      const of = (name: string) => rows.find((r) => r.name === name && r.connections === connections)!;
      const roundRatios = (name: string) => of(name).rates.map((rate, i) => rate / of('floor').rates[i]!);
      const ratio = median(roundRatios('create'));
      const ratioOk = ratio >= 0.5;
      const cpuRatio = (name: string) => (of('floor').serverCpuMs / of('floor').requests) / (of(name).serverCpuMs / of(name).requests);
      lines.push(
        `@${connections} connections: create/floor ${(ratio * 100).toFixed(0)} % of req/s (median of the rounds: ${roundRatios('create').map((x) => `${(x * 100).toFixed(0)} %`).join(', ')}; target ≥ 50 %: ${ratioOk ? 'met' : 'MISSED'}), ` +
          `get/floor ${(median(roundRatios('get')) * 100).toFixed(0)} %; by server CPU per request: create ${(cpuRatio('create') * 100).toFixed(0)} %, get ${(cpuRatio('get') * 100).toFixed(0)} % of the floor`,
      );
      ok &&= ratioOk;
      if (connections === 64) {
        const create = of('create');
        const p99 = Math.max(...create.p99s);
        const p99Ok = p99 <= 50;
        lines.push(`@64 connections: create p99 ${p99} ms (target ≤ 50 ms: ${p99Ok ? 'met' : 'MISSED'})`);
        // Little's law: 64 requests always in flight at a mean latency W means 64 / W req/s, and
        // the mean is below the p99, so p99 ≤ 50 ms needs ≥ 1,280 req/s. What the machine can give
        // a create follows from the CPU every party spends on one.
        const [serverMs, pgMs, loadMs] = [create.serverCpuMs, create.pgCpuMs, create.loadCpuMs].map((ms) => ms / create.requests) as [number, number, number];
        lines.push(`  Little's law: 64 connections at p99 ≤ 50 ms need ≥ ${Math.ceil(64 / 0.05)} req/s (the mean is below the p99); create ran at ${(create.requests / create.seconds).toFixed(0)} req/s`);
        if (!Number.isNaN(pgMs)) {
          lines.push(
            `  CPU per create: server ${serverMs.toFixed(2)} + PostgreSQL ${pgMs.toFixed(2)} + load generator ${loadMs.toFixed(2)} ms on ${cores} cores: at most ${((cores * 1000) / (serverMs + pgMs + loadMs)).toFixed(0)} req/s; ` +
              `with a server that cost nothing, ${((cores * 1000) / (pgMs + loadMs)).toFixed(0)} req/s`,
          );
        }
        lines.push(`  the floor itself: ${(of('floor').requests / of('floor').seconds).toFixed(0)} req/s at p99 ${Math.max(...of('floor').p99s)} ms`);
        ok &&= p99Ok;
      }
    }
    if (steady) {
      const r = steady.result;
      lines.push(
        `@64 connections, steady: create offered ${steady.offered} req/s (half its saturated rate) for ${duration} s: ${r.requestsPerSecond.toFixed(0)} req/s answered, ` +
          `p50 ${r.p50} ms, p99 ${r.p99} ms, max ${r.max} ms (latency from when each request was due); ${r.non2xx + r.errors + r.timeouts} failed`,
      );
    }
    const failures = rows.reduce((n, r) => n + r.non2xx + r.failed, 0) + (steady ? steady.result.non2xx + steady.result.errors + steady.result.timeouts : 0);
    lines.push(`${created} checkout sessions in the database; ${failures} failed requests in total`);
    lines.push('(the load generator, the server and PostgreSQL share these CPUs; on a loaded machine every figure is pessimistic)');
    process.stdout.write(`${lines.join('\n')}\n`);
    process.exitCode = ok && failures === 0 ? 0 : 1;
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
