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
 *
 * BENCH_FORMATS (default `native,otlp-json,otlp-protobuf`) runs the same kind of batches, one
 * phase after another in the same run, through POST /v1/ingest and through /v1/otlp/v1/traces as
 * OTLP JSON and as OTLP protobuf, and compares their server CPU per span.
 */
import { cpuMeter, createDatabase, makeBatch, percentile, prng, startServer, table, type BenchTrace } from './common.js';
import { loadavg } from 'node:os';
import { emit, report, round, shortRun, summary, target } from './summary.js';
import { encodeOtlpTraceRequest } from '../../src/telemetry/otlp-protobuf.js';
import { openDatabase } from '../../src/db/knex.js';
import { drainQueuedTraceChanges } from '../../src/telemetry/groups.repository.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? (shortRun ? 6 : 20));
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const BATCH_SPANS = Number(process.env.BENCH_BATCH_SPANS ?? 1000);
const API_WORKERS = Number(process.env.BENCH_API_WORKERS ?? 2);
const TARGET = 25_000;
const FORMATS = (process.env.BENCH_FORMATS ?? 'native,otlp-json,otlp-protobuf').split(',') as Format[];

type Format = 'native' | 'otlp-json' | 'otlp-protobuf';

const KIND: Record<string, number> = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 };
const STATUS: Record<string, number> = { UNSET: 0, OK: 1, ERROR: 2 };
const nanos = (iso: string): string => (BigInt(Date.parse(iso)) * 1_000_000n).toString();
const anyValue = (v: string | number | boolean) =>
  typeof v === 'string' ? { stringValue: v } : typeof v === 'boolean' ? { boolValue: v } : Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };

/** The same traces as an OTLP ExportTraceServiceRequest (JSON form). */
function toOtlp(traces: BenchTrace[]): Record<string, unknown> {
  const spans = traces.flatMap((t) =>
    t.spans.map((s) => ({
      traceId: t.trace_id,
      spanId: s.span_id,
      ...(s.parent_span_id ? { parentSpanId: s.parent_span_id } : {}),
      name: s.name,
      kind: KIND[s.kind ?? ''] ?? 0,
      startTimeUnixNano: nanos(s.start_time),
      endTimeUnixNano: nanos(s.end_time),
      attributes: Object.entries(s.attributes).map(([key, v]) => ({ key, value: anyValue(v) })),
      status: { code: STATUS[s.status?.code ?? 'UNSET'] ?? 0 },
    })),
  );
  return { resourceSpans: [{ scopeSpans: [{ scope: { name: 'kassa-bench' }, spans }] }] };
}

const ROUTES: Record<Format, { path: string; contentType: string; ok: number }> = {
  native: { path: '/v1/ingest', contentType: 'application/json', ok: 202 },
  'otlp-json': { path: '/v1/otlp/v1/traces', contentType: 'application/json', ok: 200 },
  'otlp-protobuf': { path: '/v1/otlp/v1/traces', contentType: 'application/x-protobuf', ok: 200 },
};

async function main(): Promise<void> {
  const db = await createDatabase('kassa_bench_ingest');
  const server = await startServer(db.url, { BENCH_API_WORKERS: String(API_WORKERS) });
  const rollups = await openDatabase({ databaseUrl: db.url });
  try {
    const { key } = server.projects[0]!;
    const rand = prng(1);
    // Enough distinct batches for a phase at twice the target rate: re-sent ids would measure
    // upserts. Each phase builds its own (fresh ids) and drops them before the next.
    const batchCount = Math.ceil(((SECONDS + WARMUP_SECONDS) * TARGET * 2) / BATCH_SPANS);
    const base = Date.now() - 3_600_000;
    let built = 0;
    const rows: Array<{ format: Format; rate: number; ingestOnlyRate: number; applySeconds: number; serverPerSpan: number; pgPerSpan: number; avgBytes: number; p50: number; p99: number; spans: number; elapsed: number; requests: number }> = [];

    for (const format of FORMATS) {
      const route = ROUTES[format];
      if (!route) throw new Error(`BENCH_FORMATS: unknown format ${format}`);
      process.stderr.write(`${format}: building ${batchCount} batches of ~${BATCH_SPANS} spans...\n`);
      const batches = Array.from({ length: batchCount }, () => {
        const i = built++;
        const b = makeBatch(rand, BATCH_SPANS, base + i * 1000, base + i * 1000 + 2000);
        const body: string | Buffer = format === 'native' ? b.body : format === 'otlp-json' ? JSON.stringify(toOtlp(b.traces)) : encodeOtlpTraceRequest(toOtlp(b.traces));
        return { body, spans: b.spans };
      });
      const avgBytes = batches.reduce((a, b) => a + b.body.length, 0) / batches.length;

      let next = 0;
      const post = async (): Promise<{ ms: number; spans: number }> => {
        const batch = batches[next++ % batches.length]!;
        const t0 = performance.now();
        const res = await fetch(`${server.apiUrl}${route.path}`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': route.contentType },
          body: batch.body,
        });
        const text = await res.text();
        if (res.status !== route.ok) throw new Error(`${route.path} answered ${res.status}: ${text.slice(0, 300)}`);
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

      process.stderr.write(`${format}: warming up for ${WARMUP_SECONDS} s...\n`);
      await run(WARMUP_SECONDS);
      await drainQueuedTraceChanges(rollups.db);
      process.stderr.write(`${format}: measuring for ${SECONDS} s with ${CONCURRENCY} requests in flight...\n`);
      const meter = await cpuMeter(server.pids, db.name);
      const r = await run(SECONDS);
      const cpu = await meter();
      // The session and user rollups are applied by the worker from the queue ingest writes
      // (migration 0211): the bench applies what this phase queued, after it, as the worker's job
      // does, and counts its time and CPU in the sustained rate and the CPU per span.
      const applyMeter = await cpuMeter([process.pid], db.name);
      const applyStarted = performance.now();
      await drainQueuedTraceChanges(rollups.db);
      const applySeconds = (performance.now() - applyStarted) / 1000;
      const apply = await applyMeter();
      rows.push({
        format,
        rate: r.spans / (r.elapsed + applySeconds),
        ingestOnlyRate: r.spans / r.elapsed,
        applySeconds,
        serverPerSpan: (cpu.server + apply.server) / r.spans,
        pgPerSpan: (cpu.postgres + apply.postgres) / r.spans,
        avgBytes,
        p50: percentile(r.latencies, 0.5),
        p99: percentile(r.latencies, 0.99),
        spans: r.spans,
        elapsed: r.elapsed,
        requests: r.latencies.length,
      });
    }

    const load = loadavg()[0]!;
    for (const row of rows) {
      // CPU cost per span, and what it means on 2 otherwise idle cores: each API process runs on one
      // core at most; API processes and PostgreSQL together share the two cores.
      const idleCapacity = Math.min(Math.min(2, API_WORKERS) / row.serverPerSpan, 2 / (row.serverPerSpan + row.pgPerSpan));
      report(
        `\nKassa telemetry ingest benchmark (PostgreSQL, ${row.format}: POST ${ROUTES[row.format].path}, ${ROUTES[row.format].contentType})\n${table([
          ['spans ingested', row.spans.toLocaleString('en-US')],
          ['duration (s)', row.elapsed.toFixed(1)],
          ['spans/s (ingest, then the rollups applied)', Math.round(row.rate).toLocaleString('en-US')],
          ['spans/s (ingest alone)', Math.round(row.ingestOnlyRate).toLocaleString('en-US')],
          ['rollups applied after the phase (s)', row.applySeconds.toFixed(2)],
          ['requests', String(row.requests)],
          ['spans per request', String(BATCH_SPANS)],
          ['request body (KB)', (row.avgBytes / 1024).toFixed(0)],
          ['concurrency', String(CONCURRENCY)],
          ['API processes', String(API_WORKERS)],
          ['latency p50 (ms)', row.p50.toFixed(1)],
          ['latency p99 (ms)', row.p99.toFixed(1)],
          ['server CPU µs / span', (row.serverPerSpan * 1e6).toFixed(1)],
          ['PostgreSQL CPU µs / span', (row.pgPerSpan * 1e6).toFixed(1)],
          ['CPU-bound capacity, 2 idle cores (spans/s)', Math.round(idleCapacity).toLocaleString('en-US')],
          ['target spans/s', `>= ${TARGET.toLocaleString('en-US')} ${row.rate >= TARGET ? '(met)' : '(NOT met)'}`],
        ])}\n`,
      );
    }
    const reference = rows[0]!;
    report(
      `\nServer CPU per span by format, same run (relative to ${reference.format}); machine load average (1 min) at the end: ${load.toFixed(1)}\n${table(
        rows.map((row) => [row.format, `${(row.serverPerSpan * 1e6).toFixed(1)} µs (${((row.serverPerSpan / reference.serverPerSpan) * 100).toFixed(0)}%)`]),
      )}\n`,
    );
    emit(
      summary('ingest', {
        settings: { seconds: SECONDS, concurrency: CONCURRENCY, spansPerRequest: BATCH_SPANS, apiProcesses: API_WORKERS, formats: FORMATS.join(',') },
        figures: Object.fromEntries(
          rows.flatMap((row) => [
            [`${row.format}.spansPerSecond`, round(row.rate)],
            [`${row.format}.spansPerSecondIngestAlone`, round(row.ingestOnlyRate)],
            [`${row.format}.rollupsAppliedAfterSeconds`, round(row.applySeconds)],
            [`${row.format}.latencyP50Ms`, round(row.p50)],
            [`${row.format}.latencyP99Ms`, round(row.p99)],
            [`${row.format}.serverCpuMicrosecondsPerSpan`, round(row.serverPerSpan * 1e6)],
            [`${row.format}.postgresCpuMicrosecondsPerSpan`, round(row.pgPerSpan * 1e6)],
          ]),
        ),
        floors: {},
        targets: rows.flatMap((row) => [
          target(`${row.format}: server CPU per span`, row.serverPerSpan * 1e6, 'µs', 35, true),
          target(`${row.format}: spans/s sustained`, row.rate, 'spans/s', TARGET, false),
        ]),
      }),
    );
  } finally {
    await rollups.close();
    await server.stop();
    await db.drop();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n${(err as { cause?: unknown })?.cause ? `cause: ${String((err as { cause?: unknown }).cause)}\n` : ''}`);
  process.exit(1);
});
