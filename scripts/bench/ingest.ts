/**
 * `npm run bench:ingest`: sustained ingest throughput against PostgreSQL.
 *
 * Creates its own database on BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432),
 * starts the telemetry API as a child process (scripts/bench/server.ts) with an organization,
 * project and key,
 * pre-builds distinct batches (BENCH_BATCH_SPANS spans each, GenAI model calls included) and posts
 * them with BENCH_CONCURRENCY requests in flight for BENCH_SECONDS. The API runs as
 * BENCH_API_WORKERS processes (default 2: one per core, as deployed on this 2-core machine).
 * Prints spans/s, request latency percentiles and the CPU cost per span, then drops the database.
 */
import { cpuMeter, createDatabase, makeBatch, percentile, prng, startServer, table } from './common.js';
import { loadavg } from 'node:os';
import { emit, report, round, shortRun, summary, target } from './summary.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? (shortRun ? 6 : 20));
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const BATCH_SPANS = Number(process.env.BENCH_BATCH_SPANS ?? 1000);
const API_WORKERS = Number(process.env.BENCH_API_WORKERS ?? 2);
const TARGET = 25_000;

async function main(): Promise<void> {
  const db = await createDatabase('kassa_bench_ingest');
  const server = await startServer(db.url, { BENCH_API_WORKERS: String(API_WORKERS) });
  try {
    const { key } = server.projects[0]!;
    const rand = prng(1);
    // Enough distinct batches for the run at twice the target rate: re-sent ids would measure upserts.
    const batchCount = Math.ceil(((SECONDS + WARMUP_SECONDS) * TARGET * 2) / BATCH_SPANS);
    process.stderr.write(`building ${batchCount} batches of ~${BATCH_SPANS} spans...\n`);
    const base = Date.now() - 3_600_000;
    const batches = Array.from({ length: batchCount }, (_, i) => makeBatch(rand, BATCH_SPANS, base + i * 1000, base + i * 1000 + 2000));
    const avgBytes = batches.reduce((a, b) => a + b.body.length, 0) / batches.length;

    let next = 0;
    const post = async (): Promise<{ ms: number; spans: number }> => {
      const batch = batches[next++ % batches.length]!;
      const t0 = performance.now();
      const res = await fetch(`${server.apiUrl}/v1/ingest`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: batch.body,
      });
      const text = await res.text();
      if (res.status !== 202) throw new Error(`ingest answered ${res.status}: ${text.slice(0, 300)}`);
      return { ms: performance.now() - t0, spans: batch.spans };
    };

    const run = async (seconds: number) => {
      const latencies: number[] = [];
      let spans = 0;
      const t0 = performance.now();
      const until = t0 + seconds * 1000;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (performance.now() < until) {
            const r = await post();
            latencies.push(r.ms);
            spans += r.spans;
          }
        }),
      );
      return { latencies: latencies.sort((a, b) => a - b), spans, elapsed: (performance.now() - t0) / 1000 };
    };

    process.stderr.write(`warming up for ${WARMUP_SECONDS} s...\n`);
    await run(WARMUP_SECONDS);
    process.stderr.write(`measuring for ${SECONDS} s with ${CONCURRENCY} requests in flight...\n`);
    const load = loadavg()[0]!;
    const meter = await cpuMeter(server.pids, db.name);
    const r = await run(SECONDS);
    const cpu = await meter();
    const rate = r.spans / r.elapsed;
    // CPU cost per span, and what it means on 2 otherwise idle cores: each API process runs on one
    // core at most; API processes and PostgreSQL together share the two cores.
    const serverPerSpan = cpu.server / r.spans;
    const pgPerSpan = cpu.postgres / r.spans;
    const idleCapacity = Math.min(Math.min(2, API_WORKERS) / serverPerSpan, 2 / (serverPerSpan + pgPerSpan));
    report(
      `\nKassa telemetry ingest benchmark (PostgreSQL, POST /v1/ingest)\n${table([
        ['spans ingested', r.spans.toLocaleString('en-US')],
        ['duration (s)', r.elapsed.toFixed(1)],
        ['spans/s', Math.round(rate).toLocaleString('en-US')],
        ['requests', String(r.latencies.length)],
        ['spans per request', String(BATCH_SPANS)],
        ['request body (KB)', (avgBytes / 1024).toFixed(0)],
        ['concurrency', String(CONCURRENCY)],
        ['API processes', String(API_WORKERS)],
        ['latency p50 (ms)', percentile(r.latencies, 0.5).toFixed(1)],
        ['latency p99 (ms)', percentile(r.latencies, 0.99).toFixed(1)],
        ['server CPU µs / span', (serverPerSpan * 1e6).toFixed(1)],
        ['PostgreSQL CPU µs / span', (pgPerSpan * 1e6).toFixed(1)],
        ['CPU-bound capacity, 2 idle cores (spans/s)', Math.round(idleCapacity).toLocaleString('en-US')],
        ['machine load average (1 min) at start', load.toFixed(1)],
        ['target spans/s', `>= ${TARGET.toLocaleString('en-US')} ${rate >= TARGET ? '(met)' : '(NOT met)'}`],
      ])}\n`,
    );
    emit(
      summary('ingest', {
        settings: { seconds: SECONDS, concurrency: CONCURRENCY, spansPerRequest: BATCH_SPANS, apiProcesses: API_WORKERS },
        figures: {
          spansPerSecond: round(rate),
          latencyP50Ms: round(percentile(r.latencies, 0.5)),
          latencyP99Ms: round(percentile(r.latencies, 0.99)),
          serverCpuMicrosecondsPerSpan: round(serverPerSpan * 1e6),
          postgresCpuMicrosecondsPerSpan: round(pgPerSpan * 1e6),
          cpuBoundCapacitySpansPerSecond: round(idleCapacity),
        },
        floors: {},
        targets: [
          target('server CPU per span', serverPerSpan * 1e6, 'µs', 35, true),
          target('spans/s sustained', rate, 'spans/s', TARGET, false),
        ],
      }),
    );
  } finally {
    await server.stop();
    await db.drop();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n${(err as { cause?: unknown })?.cause ? `cause: ${String((err as { cause?: unknown }).cause)}\n` : ''}`);
  process.exit(1);
});
