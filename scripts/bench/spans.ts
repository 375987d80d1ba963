/**
 * A telemetry data set of any size (10 million spans in minutes, not the hours the ingest API would
 * take), for the benchmarks of the trace list, trace reads and metrics (issues 31 and 32).
 *
 * The spans are stored exactly as ingest stores them, by the same code: each chunk of traces is
 * built as a native ingest request (`POST /v1/ingest` body), normalized and priced by
 * `normalizeIngest` (GenAI mapping, costs from the price table), summarized by the ingest service's
 * `summarize`, and written by the ingest repositories' COPY paths (KnexTraceWriter.claimTraces,
 * KnexRollupWriter.insertModelCalls); the session and user rollups' changes queued by
 * KnexTraceWriter.updateGroups as ingest queues them, and applied at the end by the job's code
 * (drainQueuedTraceChanges). The rollup cells (ten-second, minute, five-minute, hour,
 * day) are CellStats built from the same model calls and merged upwards as ingest merges them,
 * written by KnexRollupWriter.writeCells once complete; the monthly trace counter is added to as
 * ingest does. What ingest does and this skips: per-batch locking and read-merge-write of cells
 * (chunks are disjoint in time, so every cell is written once, whole).
 *
 * The traces are an LLM application's: a request span (service, route, session.id, user.id, user
 * tier) with a retrieval step in most, one to four model calls over five models from three vendors
 * (input/output tokens log-normal, latency by model), tool calls between them, ~3 % of model calls
 * failing (rate limits, context length) and some of those failing the request. Everything derives
 * from `seed`: the same options give the same data.
 *
 * Library: `generateSpans(db, options)`; CLI: `npx tsx scripts/bench/spans.ts [spans] [days]`
 * creates a database (kept, its name printed), provisions a project through the bench server and
 * generates the spans, then prints the storage bytes per span (tables + indexes + TOAST).
 */
import type { Knex } from 'knex';
import type { components } from '../../generated/telemetry.js';
import { normalizeIngest } from '../../src/telemetry/normalize.js';
import { PriceTable } from '../../src/telemetry/prices.js';
import { summarize } from '../../src/telemetry/ingest.service.js';
import { drainQueuedTraceChanges } from '../../src/telemetry/groups.repository.js';
import { KnexTraceWriter, type TraceWrite } from '../../src/telemetry/traces.repository.js';
import { KnexRollupWriter, type CellKey, type ModelCallRow } from '../../src/telemetry/rollups.repository.js';
import { CellStats } from '../../src/telemetry/cell-stats.js';
import { PartitionEnsurer } from '../../src/db/partitions.js';
import { RESOLUTION_MS, floorTo, vendorKey, type Resolution } from '../../src/telemetry/rollups.js';
import { prng } from './common.js';

type IngestRequest = components['schemas']['IngestRequest'];
type IngestTrace = NonNullable<IngestRequest['traces']>[number];
type IngestSpan = IngestTrace['spans'][number];

export interface SpanSetOptions {
  orgId: string;
  projectId: string;
  /** How many spans (the last trace may take it a few over). */
  spans: number;
  /** The traces start in [fromMs, toMs), in time order of writing. */
  fromMs: number;
  toMs: number;
  seed?: number;
  /** Spans per transaction (default 20,000). */
  chunkSpans?: number;
  prices?: PriceTable;
  /** Called after each chunk with the spans written so far. */
  progress?: (spans: number) => void;
}

export interface SpanSet {
  spans: number;
  traces: number;
  modelCalls: number;
  cells: number;
  seconds: number;
  /** Where the time went: building the requests, normalizing and summarizing, cells in memory, writing traces and model calls, writing cells. */
  stageSeconds: { build: number; normalize: number; cells: number; write: number; flush: number };
}

const MODELS: Array<{ model: string; vendor: string; latencyMs: number }> = [
  { model: 'gpt-4o', vendor: 'openai', latencyMs: 1800 },
  { model: 'gpt-4o-mini', vendor: 'openai', latencyMs: 700 },
  { model: 'claude-sonnet-4-5', vendor: 'anthropic', latencyMs: 2400 },
  { model: 'claude-haiku-4-5', vendor: 'anthropic', latencyMs: 800 },
  { model: 'gemini-2.5-flash', vendor: 'google', latencyMs: 900 },
];
/** Model popularity: the cheap ones carry most traffic. */
const MODEL_WEIGHTS = [0.2, 0.35, 0.2, 0.15, 0.1];
const SERVICES = [
  { name: 'support-bot', route: '/v1/chat' },
  { name: 'search-assistant', route: '/v1/answer' },
  { name: 'doc-summarizer', route: '/v1/summarize' },
];
const TOOLS = ['lookup_order', 'search_docs', 'create_ticket', 'get_weather', 'run_sql'];
const MODEL_ERRORS = ['rate_limit_exceeded: 429 Too Many Requests', 'context_length_exceeded: maximum context length is 128000 tokens', 'upstream timeout after 30000 ms'];

function hexOf(rand: () => number, bytes: number): string {
  let out = '';
  for (let i = 0; i < bytes; i++) out += Math.floor(rand() * 256).toString(16).padStart(2, '0');
  return out;
}

/** exp of a normal variate (Box–Muller): token counts and latencies have long right tails. */
const logNormal = (rand: () => number, median: number, sigma: number) => median * Math.exp(sigma * Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()));

function pickModel(rand: () => number) {
  let x = rand();
  for (let i = 0; i < MODELS.length; i++) if ((x -= MODEL_WEIGHTS[i]!) < 0) return MODELS[i]!;
  return MODELS[MODELS.length - 1]!;
}

/** One request of an LLM application, starting at `start`, as a native ingest trace. */
function makeTrace(rand: () => number, start: number, users: number): IngestTrace {
  const iso = (ms: number) => new Date(ms).toISOString();
  const root = hexOf(rand, 8);
  const service = SERVICES[Math.floor(rand() * SERVICES.length)]!;
  const user = Math.floor(Math.pow(rand(), 2) * users); // a few heavy users
  const spans: IngestSpan[] = [];
  let t = start + 2 + Math.floor(rand() * 5);
  if (rand() < 0.7) {
    const d = 15 + Math.floor(logNormal(rand, 40, 0.6));
    spans.push({ span_id: hexOf(rand, 8), parent_span_id: root, name: 'retrieval.search', kind: 'INTERNAL', start_time: iso(t), end_time: iso(t + d), attributes: { 'db.system': 'pgvector', 'retrieval.top_k': 5 + Math.floor(rand() * 3) * 5 } });
    t += d + 1;
  }
  const calls = 1 + Math.floor(Math.pow(rand(), 1.5) * 4);
  let failed = false;
  for (let c = 0; c < calls; c++) {
    const m = pickModel(rand);
    const input = Math.max(1, Math.round(logNormal(rand, 1200, 0.8)));
    const output = Math.max(1, Math.round(logNormal(rand, 250, 0.7)));
    const latency = Math.max(50, Math.round(logNormal(rand, m.latencyMs, 0.5) + output * 2));
    const error = rand() < 0.03;
    const span: IngestSpan = {
      span_id: hexOf(rand, 8),
      parent_span_id: root,
      name: `chat ${m.model}`,
      kind: 'CLIENT',
      start_time: iso(t),
      end_time: iso(t + (error ? Math.round(latency / 4) : latency)),
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': m.vendor,
        'gen_ai.request.model': m.model,
        'gen_ai.usage.input_tokens': input,
        ...(error ? {} : { 'gen_ai.usage.output_tokens': output }),
        'gen_ai.request.temperature': Math.round(rand() * 10) / 10,
        'gen_ai.request.max_tokens': 1024,
      },
      status: error ? { code: 'ERROR', message: MODEL_ERRORS[Math.floor(rand() * MODEL_ERRORS.length)]! } : { code: 'OK' },
    };
    spans.push(span);
    t += error ? Math.round(latency / 4) : latency;
    if (error && rand() < 0.5) {
      failed = true;
      break;
    }
    if (c < calls - 1 && rand() < 0.6) {
      const tool = TOOLS[Math.floor(rand() * TOOLS.length)]!;
      const d = 5 + Math.floor(logNormal(rand, 60, 1));
      const toolError = rand() < 0.02;
      spans.push({ span_id: hexOf(rand, 8), parent_span_id: root, name: `tool ${tool}`, kind: 'INTERNAL', start_time: iso(t), end_time: iso(t + d), attributes: { 'gen_ai.tool.name': tool, 'tool.call.id': `call_${hexOf(rand, 6)}` }, ...(toolError ? { status: { code: 'ERROR', message: `${tool} failed` } } : {}) });
      t += d;
    }
  }
  spans.unshift({
    span_id: root,
    parent_span_id: null,
    name: `POST ${service.route}`,
    kind: 'SERVER',
    start_time: iso(start),
    end_time: iso(t + 3),
    attributes: {
      'service.name': service.name,
      'http.route': service.route,
      'http.response.status_code': failed ? 502 : 200,
      // A user's requests within the same half hour are one session.
      'session.id': `sess_${((user * 2654435761) ^ Math.floor(start / 1_800_000)).toString(16).replace('-', '')}`,
      'user.id': `user_${user}`,
      'user.tier': user % 5 === 0 ? 'pro' : 'free',
    },
    status: failed ? { code: 'ERROR', message: 'model call failed' } : { code: 'OK' },
  });
  return { trace_id: hexOf(rand, 16), spans };
}

const RESOLUTIONS: Resolution[] = ['10s', 'm', '5m', 'h', 'd'];
/** Where each resolution's finished cells are merged into (ingest: minutes from ten-second cells; five-minute, hour, day from minutes). */
const PARENTS: Record<Resolution, Resolution[]> = { '10s': ['m'], m: ['5m', 'h', 'd'], '5m': [], h: [], d: [] };

/** The rollup cells under construction, written once complete (time only moves forward). */
class Cells {
  private readonly open: Record<Resolution, Map<string, { key: CellKey; stats: CellStats }>> = { '10s': new Map(), m: new Map(), '5m': new Map(), h: new Map(), d: new Map() };
  written = 0;

  private entry(resolution: Resolution, bucketMs: number, model: string, vendor: string) {
    const id = `${bucketMs}|${model}|${vendor}`;
    let e = this.open[resolution].get(id);
    if (!e) this.open[resolution].set(id, (e = { key: { resolution, bucketMs, model, vendor }, stats: new CellStats() }));
    return e;
  }

  add(call: ModelCallRow): void {
    this.entry('10s', floorTo(call.startMs, '10s'), call.model, vendorKey(call.vendor)).stats.addSample(call);
  }

  /** Writes the cells that end at or before `untilMs` (no later sample can fall in them). */
  async flush(writer: KnexRollupWriter, projectId: string, untilMs: number): Promise<void> {
    for (const resolution of RESOLUTIONS) {
      const done: Array<{ key: CellKey; stats: CellStats }> = [];
      for (const [id, e] of this.open[resolution]) {
        if (e.key.bucketMs + RESOLUTION_MS[resolution] > untilMs) continue;
        this.open[resolution].delete(id);
        done.push(e);
        for (const parent of PARENTS[resolution]) this.entry(parent, floorTo(e.key.bucketMs, parent), e.key.model, e.key.vendor).stats.merge(e.stats);
      }
      for (let i = 0; i < done.length; i += 2000) {
        await writer.writeCells(
          projectId,
          done.slice(i, i + 2000).map(({ key, stats }) => ({ ...key, requests: stats.requests, errors: stats.errors, stats: stats.encodeDistributions() })),
        );
      }
      this.written += done.length;
    }
  }
}

/** Writes `options.spans` spans into the project; returns what was written. PostgreSQL only (COPY). */
export async function generateSpans(db: Knex, options: SpanSetOptions): Promise<SpanSet> {
  const t0 = performance.now();
  const rand = prng(options.seed ?? 31);
  const prices = options.prices ?? new PriceTable();
  const chunkSpans = options.chunkSpans ?? 20_000;
  const spanRate = options.spans / (options.toMs - options.fromMs);
  const users = Math.max(100, Math.round(options.spans / 200));
  const cells = new Cells();
  const partitions = new PartitionEnsurer();
  const usage = new Map<number, number>();
  let spans = 0;
  let traces = 0;
  let modelCalls = 0;
  let from = options.fromMs;
  const stage = { build: 0, normalize: 0, cells: 0, write: 0, flush: 0 };
  let mark = performance.now();
  const lap = (name: keyof typeof stage) => {
    const now = performance.now();
    stage[name] += (now - mark) / 1000;
    mark = now;
  };
  while (spans < options.spans) {
    // The chunk's time slice holds about chunkSpans spans; traces start in it at random.
    const to = Math.min(options.toMs, from + Math.max(1, Math.round(chunkSpans / spanRate)));
    const traceList: IngestTrace[] = [];
    let n = 0;
    while (n < chunkSpans && spans + n < options.spans) {
      const trace = makeTrace(rand, from + Math.floor(rand() * (to - from)), users);
      traceList.push(trace);
      n += trace.spans.length;
    }
    const body: IngestRequest = { traces: traceList };
    traceList.sort((a, b) => Date.parse(a.spans[0]!.start_time) - Date.parse(b.spans[0]!.start_time));
    lap('build');
    const batch = normalizeIngest(body, prices);
    const writes: TraceWrite[] = batch.traces.map((t) => ({ ...summarize(t), spans: t.spans }));
    const calls: ModelCallRow[] = [];
    for (const t of batch.traces) {
      for (const s of t.spans) {
        if (s.model === null) continue;
        calls.push({ traceId: s.traceId, spanId: s.spanId, startMs: s.startMs, model: s.model, vendor: s.vendor, durationMs: s.endMs - s.startMs, tokensInput: s.tokensInput, tokensOutput: s.tokensOutput, cost: s.cost, isError: s.statusCode === 'ERROR' });
      }
    }
    calls.sort((a, b) => a.startMs - b.startMs);
    lap('normalize');
    for (const c of calls) cells.add(c);
    lap('cells');
    // Stored as if ingested as the slice ended (created_at: what project statistics count by).
    const now = new Date(to);
    await db.transaction(async (trx) => {
      // Each week's partition of the traces too, as ingest creates it (migration 0390).
      const traceWriter = new KnexTraceWriter(trx, true, { ensurer: partitions, now: new Date() });
      await traceWriter.claimTraces(options.projectId, writes, now, { optimistic: true });
      // The session and user rollups, as ingest writes them (every trace of a chunk is new).
      await traceWriter.updateGroups(options.projectId, writes.map((w) => ({ before: null, after: w })), now);
      // Each week's partition of the model calls, as ingest creates it (migration 0290).
      const rollups = new KnexRollupWriter(trx, true, { ensurer: partitions, now: new Date() });
      await rollups.insertModelCalls(options.projectId, calls);
      lap('write');
      // Every later span starts at or after `to`.
      await cells.flush(rollups, options.projectId, to);
      lap('flush');
    });
    const month = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    usage.set(month, (usage.get(month) ?? 0) + writes.length);
    spans += batch.spanCount;
    traces += writes.length;
    modelCalls += calls.length;
    options.progress?.(spans);
    from = to >= options.toMs ? options.fromMs : to; // more spans than the window holds: wrap (rare)
  }
  await db.transaction(async (trx) => {
    await cells.flush(new KnexRollupWriter(trx, true), options.projectId, Number.MAX_SAFE_INTEGER);
    const writer = new KnexTraceWriter(trx, true);
    for (const [month, n] of usage) await writer.addUsage(options.orgId, new Date(month), n);
  });
  // The session and user rollups: the queued changes applied now (the worker's job would, within a
  // second), so the data set's lists are exact when this returns. Small chunks: each queue row
  // holds a whole slice's traces.
  await drainQueuedTraceChanges(db, 20);
  lap('flush');
  const round = (x: number) => Math.round(x * 10) / 10;
  return { spans, traces, modelCalls, cells: cells.written, seconds: (performance.now() - t0) / 1000, stageSeconds: { build: round(stage.build), normalize: round(stage.normalize), cells: round(stage.cells), write: round(stage.write), flush: round(stage.flush) } };
}

/** Bytes on disk of the span tables (heap, TOAST and indexes) per span. */
export async function bytesPerSpan(db: Knex, spans: number): Promise<{ total: number; perSpan: number; tables: Record<string, number> }> {
  const tables: Record<string, number> = {};
  for (const table of ['telemetry_traces', 'telemetry_model_calls', 'telemetry_rollups', 'telemetry_sessions', 'telemetry_users']) {
    const { rows } = await db.raw<{ rows: Array<{ bytes: string }> }>('SELECT pg_total_relation_size(?::regclass) AS bytes', [table]);
    tables[table] = Number(rows[0]!.bytes);
  }
  const total = Object.values(tables).reduce((a, b) => a + b, 0);
  return { total, perSpan: total / spans, tables };
}

async function cli(): Promise<void> {
  const { createDatabase, startServer } = await import('./common.js');
  const { openDatabase } = await import('../../src/db/knex.js');
  const count = Number(process.argv[2] ?? 1_000_000);
  const days = Number(process.argv[3] ?? 30);
  const database = await createDatabase('kassa_spans');
  const server = await startServer(database.url, { BENCH_API_WORKERS: '0' });
  const project = server.projects[0]!;
  await server.stop();
  const { db, close } = await openDatabase({ databaseUrl: database.url });
  try {
    const end = Date.now();
    let last = 0;
    const set = await generateSpans(db, {
      orgId: server.orgId,
      projectId: project.projectId,
      spans: count,
      fromMs: end - days * 86_400_000,
      toMs: end,
      progress: (n) => {
        if (n - last >= 1_000_000) process.stderr.write(`  ${(last = n).toLocaleString('en-US')} spans\n`);
      },
    });
    await db.raw('VACUUM ANALYZE telemetry_traces, telemetry_model_calls, telemetry_rollups, telemetry_sessions, telemetry_users');
    const size = await bytesPerSpan(db, set.spans);
    process.stdout.write(
      `${JSON.stringify({ database: database.name, projectId: project.projectId, apiKey: project.key, ...set, seconds: Math.round(set.seconds), bytesPerSpan: Math.round(size.perSpan), bytes: size.tables })}\n`,
    );
  } finally {
    await close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  cli().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
