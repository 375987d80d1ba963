/**
 * `npm run bench:webhooks`: webhook deliveries per second and event-to-delivery latency.
 *
 * A Kassa worker process (`--role worker`, its own throw-away PostgreSQL database) delivers to a
 * local HTTPS receiver in this process that answers 200 at once. Events are real `order.paid`
 * events (the payload of one sandbox card payment) queued through the transactional outbox
 * (`enqueueWebhookEvent`), the way orders emit them:
 * 1. throughput: N events committed in one transaction, then the time until the receiver has
 *    them all → deliveries/s (a backlog drained at full speed);
 * 2. latency: events committed one per transaction at a steady rate R; for each, the time from
 *    its commit to its arrival at the receiver → p50/p99.
 * Targets: ≤ 0.5 ms of worker CPU per delivery, ≥ 1,000 deliveries/s and p50 ≤ 100 ms.
 *
 * Before the measured backlog the worker drains a warm-up backlog (BENCH_WARMUP_EVENTS): the
 * target is a running worker's CPU per delivery; the cold figure is printed beside it. Figures and
 * the profile behind them: docs/benchmarks.md.
 *
 * BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_EVENTS
 * (default 3000), BENCH_RATE (events/s, default half the measured throughput, at most 500),
 * BENCH_LATENCY_SECONDS (default 10), BENCH_WARMUP_EVENTS (default 1000, 0 for none),
 * BENCH_WORKERS (worker processes, default 1), BENCH_WORKER_NODE_ARGS (extra node flags of the first
 * worker, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof-webhooks"). The worker reads the environment
 * (WEBHOOK_DELIVERY_BATCH_SIZE, …) like any Kassa process.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/db/knex.js';
import { systemClock } from '../../src/kernel/clock.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createLogger } from '../../src/kernel/logger.js';
import { loadConfig } from '../../src/config.js';
import { createServices } from '../../src/services.js';
import { enqueueWebhookEvent, type OutboxEvent } from '../../src/webhooks/outbox.repository.js';
import { emit, report, round, shortRun, summary, target } from './summary.js';
import { DEFAULT_SERVER_URL, ONE_TIME, REPO_ROOT, createDatabase, newDeployment, sleep, startKassa, waitFor, type KassaProcess } from '../../tools/cluster.js';

const serverUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER_URL;
const EVENTS = Number(process.env.BENCH_EVENTS ?? (shortRun ? 1000 : 3000));
/** Steady rate; unset → half the throughput just measured (at or above capacity, latency only measures the queue). */
const RATE_SETTING = process.env.BENCH_RATE ? Number(process.env.BENCH_RATE) : undefined;
const LATENCY_SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? (shortRun ? 4 : 10));
const WORKERS = Number(process.env.BENCH_WORKERS ?? 1);
const WARMUP_EVENTS = Number(process.env.BENCH_WARMUP_EVENTS ?? 1000);
const CERT = path.join(REPO_ROOT, 'test/webhooks/fixtures/receiver-cert.pem');
const KEY = path.join(REPO_ROOT, 'test/webhooks/fixtures/receiver-key.pem');

const percentile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1)))]! : NaN;
};

async function main(): Promise<void> {
  // The receiver: first arrival time per webhook-id, 200 at once.
  const arrivals = new Map<string, number>();
  let requests = 0;
  const receiver = https.createServer({ cert: readFileSync(CERT), key: readFileSync(KEY) }, (req, res) => {
    req.resume();
    req.on('end', () => {
      requests++;
      const id = String(req.headers['webhook-id']);
      if (!arrivals.has(id)) arrivals.set(id, performance.now());
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `https://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

  const db = await createDatabase(serverUrl, 'kassa_bench');
  const deployment = newDeployment(db.url, {
    WEBHOOK_ALLOW_LOOPBACK: 'true',
    NODE_EXTRA_CA_CERTS: CERT,
    LOG_LEVEL: 'warn',
  });
  const workers: KassaProcess[] = [];
  const database = await openDatabase({ databaseUrl: db.url, poolMax: 10 });
  try {
    // The first worker migrates the database and creates the signing key.
    // BENCH_WORKER_NODE_ARGS="--cpu-prof --cpu-prof-dir=…" profiles the worker.
    const nodeArgs = process.env.BENCH_WORKER_NODE_ARGS?.split(' ').filter(Boolean);
    workers.push(await startKassa(deployment, { role: 'worker', name: 'bench-worker-1', echo: true, nodeArgs }));
    for (let i = 1; i < WORKERS; i++) workers.push(await startKassa(deployment, { role: 'worker', name: `bench-worker-${i + 1}`, echo: true }));
    const config = loadConfig({ WEBHOOK_ALLOW_LOOPBACK: 'true', DATABASE_URL: db.url }, []);
    const services = createServices({ db: database.db, clock: systemClock, secretBox: new SecretBox(Buffer.from(deployment.encryptionKey, 'base64')), config, logger: createLogger({ level: 'warn' }) });
    const org = await services.orgs.createOrganization({ name: 'Bench' });
    await services.webhooks.createEndpoint(org.id, { name: 'Bench receiver', url: receiverUrl, events: ['order.paid'] });
    // One real payment gives a real order.paid payload (and its own delivery).
    const { session } = await services.checkout.create(org.id, 'bench-sample', ONE_TIME as never);
    const paid = await services.checkout.pay(session.pageToken, { card: { number: '4242424242424242', expMonth: 12, expYear: 2034, cvc: '123' } });
    if (paid.kind !== 'paid') throw new Error(`sample payment: ${paid.kind}`);
    const sample = (await database.db('webhook_events').where({ org_id: org.id, type: 'order.paid' }).first()) as { id: string; payload: OutboxEvent['data'] };
    await waitFor('the sample delivery', async () => arrivals.has(sample.id), 60_000);
    const event: OutboxEvent = { orgId: org.id, type: 'order.paid', data: sample.payload };

    // The workers' own CPU time per delivery (from their /metrics): unlike deliveries/s, it does
    // not depend on how much CPU the rest of the machine leaves them.
    const workerCpuSeconds = async () => {
      let sum = 0;
      for (const w of workers) sum += Number(/^kassa_process_cpu_seconds_total\{[^}]*\} (\S+)$/m.exec(await (await fetch(`${w.adminUrl}/metrics`)).text())?.[1] ?? NaN);
      return sum;
    };

    // Transactions the database committed (every statement of the worker outside a transaction is
    // one): per delivery, the worker's round trips to PostgreSQL. Statistics are flushed about once
    // a second, hence the pauses around the reads.
    const commits = async () => {
      await sleep(1100);
      const row = (await database.db.raw(`SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`)).rows[0] as { xact_commit: string | number };
      return Number(row.xact_commit);
    };

    // A backlog of `count` events committed at once, drained: its ids, commit time and the workers' CPU per delivery.
    const drain = async (count: number) => {
      const ids: string[] = [];
      await database.db.transaction(async (trx) => {
        for (let i = 0; i < count; i++) ids.push(await enqueueWebhookEvent(trx, event, new Date()));
      });
      const at = performance.now();
      const cpuBefore = await workerCpuSeconds();
      await waitFor('the backlog to drain', async () => ids.every((id) => arrivals.has(id)), 600_000, 50);
      return { ids, at, cpuMs: (((await workerCpuSeconds()) - cpuBefore) * 1000) / count };
    };

    // 0. Warm-up: a freshly started worker spends its first deliveries' CPU on compiling its hot
    // paths (V8's optimizing compiler threads count in its process CPU); a long-running worker
    // has done that once. Reported, not targeted.
    const warmup = WARMUP_EVENTS > 0 ? await drain(WARMUP_EVENTS) : undefined;

    // 1. Throughput: a backlog of EVENTS committed at once.
    const commitsBefore = await commits();
    const { ids: backlog, at: committedAt, cpuMs: cpuMsPerDelivery } = await drain(EVENTS);
    const drainedAt = Math.max(...backlog.map((id) => arrivals.get(id)!));
    const perSecond = EVENTS / ((drainedAt - committedAt) / 1000);
    const backlogLatency = backlog.map((id) => arrivals.get(id)! - committedAt);

    // The backlog's own transaction, the two statistics reads and the worker's other jobs (a few polls a second) are in the count too.
    const commitsPerDelivery = ((await commits()) - commitsBefore) / EVENTS;

    // 2. Latency: one event per transaction at a steady RATE.
    await sleep(400);
    const committed = new Map<string, number>();
    const started = performance.now();
    const RATE = RATE_SETTING ?? Math.max(5, Math.min(500, Math.round(perSecond / 2)));
    const total = Math.round(RATE * LATENCY_SECONDS);
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; i < total; i++) {
      const due = started + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      // At most 8 commits outstanding: when the database cannot keep up, the offered rate drops
      // (and is printed) instead of the producer's pool timing out.
      while (inFlight.size >= 8) await Promise.race(inFlight);
      const p: Promise<void> = database.db
        .transaction((trx) => enqueueWebhookEvent(trx, event, new Date()))
        .then((id) => void committed.set(id, performance.now()))
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
    const offeredRate = total / ((performance.now() - started) / 1000);
    await waitFor('the steady-rate events', async () => [...committed.keys()].every((id) => arrivals.has(id)), 120_000, 50);
    const latencies = [...committed].map(([id, at]) => arrivals.get(id)! - at);

    const duplicates = requests - arrivals.size;
    const statuses = (await database.db('webhook_deliveries').where({ org_id: org.id }).select('status').count({ n: '*' }).groupBy('status')) as Array<{ status: string; n: number }>;
    const fmt = (n: number) => n.toFixed(1);
    const rows: Array<[string, string, string]> = [
      ['backlog drained', `${EVENTS} events`, `${perSecond.toFixed(0)} deliveries/s`],
      ...(warmup ? [['worker CPU per delivery', `warm-up drain of ${WARMUP_EVENTS} (cold process)`, `${warmup.cpuMs.toFixed(2)} ms`] as [string, string, string]] : []),
      ['worker CPU per delivery', 'during the drain', `${cpuMsPerDelivery.toFixed(2)} ms (≈ ${(1000 / cpuMsPerDelivery).toFixed(0)}/s per worker core)`],
      ['database commits per delivery', 'during the drain', commitsPerDelivery.toFixed(2)],
      ['backlog: commit → arrival', 'p50 / p99', `${fmt(percentile(backlogLatency, 0.5))} / ${fmt(percentile(backlogLatency, 0.99))} ms`],
      ['steady rate', `${offeredRate.toFixed(0)} events/s × ${LATENCY_SECONDS} s`, `${latencies.length} events`],
      ['steady: commit → arrival', 'p50 / p99', `${fmt(percentile(latencies, 0.5))} / ${fmt(percentile(latencies, 0.99))} ms`],
      ['requests received', `${requests}`, `${duplicates} duplicates`],
      ['deliveries by status', '', statuses.map((s) => `${s.status}: ${s.n}`).join(', ')],
    ];
    const w = [Math.max(...rows.map((r) => r[0].length)), Math.max(...rows.map((r) => r[1].length)), Math.max(...rows.map((r) => r[2].length))];
    const lines = [
      '',
      `bench:webhooks — ${WORKERS} worker process(es) on PostgreSQL → local HTTPS receiver; ${os.cpus().length} CPUs, load average ${os.loadavg()[0]!.toFixed(1)} at the end`,
      '',
      ...rows.map((r) => `${r[0].padEnd(w[0]!)}  ${r[1].padEnd(w[1]!)}  ${r[2].padStart(w[2]!)}`),
      '',
      `throughput ${perSecond.toFixed(0)} deliveries/s (target ≥ 1000: ${perSecond >= 1000 ? 'met' : 'MISSED'}); steady p50 ${fmt(percentile(latencies, 0.5))} ms (target ≤ 100: ${percentile(latencies, 0.5) <= 100 ? 'met' : 'MISSED'})`,
      '(the worker, the receiver, this process and PostgreSQL share these CPUs; on a loaded machine every figure is pessimistic)',
    ];
    report(lines.join('\n'));
    const result = summary('webhooks', {
      settings: { events: EVENTS, warmupEvents: WARMUP_EVENTS, workers: WORKERS, steadySeconds: LATENCY_SECONDS },
      figures: {
        deliveriesPerSecond: round(perSecond),
        workerCpuMsPerDelivery: round(cpuMsPerDelivery),
        ...(warmup ? { warmupWorkerCpuMsPerDelivery: round(warmup.cpuMs) } : {}),
        commitsPerDelivery: round(commitsPerDelivery),
        steadyRate: round(offeredRate),
        steadyP50Ms: round(percentile(latencies, 0.5)),
        steadyP99Ms: round(percentile(latencies, 0.99)),
        duplicates,
      },
      floors: {},
      targets: [
        target('worker CPU per delivery', cpuMsPerDelivery, 'ms', 0.5, true),
        target('deliveries/s draining a backlog', perSecond, 'deliveries/s', 1000, false),
        target('steady commit → arrival p50', percentile(latencies, 0.5), 'ms', 100, true),
      ],
    });
    emit(result);
    process.exitCode = perSecond >= 1000 && percentile(latencies, 0.5) <= 100 ? 0 : 1;
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    await database.close();
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
