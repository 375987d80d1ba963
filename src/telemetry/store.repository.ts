/**
 * Traces (with their span documents), model calls, metric points, metric rollups and the usage
 * counter in PostgreSQL — the only knex of the ingest, search, metrics and retention paths.
 *
 * The bulk rows of ingest (traces with their span documents, model calls) go in with COPY on
 * PostgreSQL: no per-row SQL, no JSON parsing server-side. Elsewhere, and on PGlite (which has no
 * COPY FROM STDIN), batches travel as one JSON parameter expanded with json_to_recordset: one
 * statement and one round trip per table whatever the batch size.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Knex } from 'knex';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { isPostgres, type Db } from '../db/knex.js';
import { DISTRIBUTIONS, type DistributionName } from './cell-stats.js';
import type { Attributes, NormalizedMetric, SpanStatusCode } from './normalize.js';

export type Resolution = 'm' | 'h' | 'd';

export interface TraceSummary {
  traceId: string;
  startMs: number;
  endMs: number;
  spanCount: number;
  rootName: string;
  rootAttributes: Attributes;
  model: string | null;
  models: string[];
  tokensInput: number;
  tokensOutput: number;
  cost: number;
  hasError: boolean;
}

export interface StoredTrace {
  traceId: string;
  startTime: Date;
  endTime: Date;
  durationMs: number;
  spanCount: number;
  rootName: string;
  rootAttributes: Attributes;
  model: string | null;
  tokensInput: number;
  tokensOutput: number;
  cost: number;
  hasError: boolean;
}

/** A span as stored inside its trace's document (compact keys: the document is written often). */
export interface SpanDoc {
  /** span id */
  s: string;
  /** parent span id */
  p: string | null;
  /** name */
  n: string;
  /** kind */
  k: string | null;
  /** start and end, epoch ms */
  st: number;
  et: number;
  /** status code and message */
  c: SpanStatusCode;
  m: string | null;
  /** attributes (after GenAI mapping and pricing) */
  a: Attributes;
}

/** A trace row to write: its summary and all its spans. */
export interface TraceWrite extends TraceSummary {
  spans: SpanDoc[];
}

export interface LockedTrace {
  spans: SpanDoc[];
}

/** One model-call span: a raw metrics sample. */
export interface ModelCallRow {
  traceId: string;
  spanId: string;
  startMs: number;
  model: string;
  vendor: string | null;
  durationMs: number;
  tokensInput: number | null;
  tokensOutput: number | null;
  cost: number | null;
  isError: boolean;
}

export interface CellKey {
  resolution: Resolution;
  bucketMs: number;
  model: string;
  vendor: string;
}

export interface CellRow extends CellKey {
  requests: number;
  errors: number;
  /** Encoded distributions, in DISTRIBUTIONS order (cell-stats.ts). */
  stats: Uint8Array[];
}

export interface RawSample {
  /** Index of the requested range it fell in. */
  range: number;
  projectId: string;
  model: string;
  vendor: string | null;
  durationMs: number;
  tokensInput: number | null;
  tokensOutput: number | null;
  cost: number | null;
  isError: boolean;
}

export interface QueryCellRow {
  range: number;
  projectId: string;
  model: string;
  vendor: string;
  requests: number;
  errors: number;
  /** The requested distribution, encoded; null when none was requested. */
  stats: Uint8Array | null;
}

export interface TimeRange {
  fromMs: number;
  toMs: number;
}

export interface TraceSearch {
  projectId: string;
  limit: number;
  after?: { startTime: Date; traceId: string };
  startTime?: Date;
  endTime?: Date;
  model?: string;
  minLatencyMs?: number;
  minCost?: number;
  status?: 'ok' | 'error';
}

/** Another transaction stored one of the batch's new traces first; retrying the batch resolves it. */
export class ConcurrentInsertError extends Error {
  constructor() {
    super('a trace of the batch was inserted concurrently');
    this.name = 'ConcurrentInsertError';
  }
}

/** Operations inside one ingest transaction. */
export interface IngestTx {
  /**
   * Row-locks the batch's traces that are stored (serialising batches that extend the same trace)
   * and reads their spans, then inserts the others. Throws ConcurrentInsertError when another
   * transaction inserted one of them meanwhile: the caller retries the whole batch.
   *
   * `optimistic`: skip the lookup and insert every trace at once, for batches expected to hold new
   * traces only; a stored one then fails the insert (ConcurrentInsertError) and the caller retries
   * without the option. The lookup costs as much as the insert's own uniqueness check.
   */
  claimTraces(
    projectId: string,
    traces: TraceWrite[],
    now: Date,
    options?: { optimistic?: boolean },
  ): Promise<{ inserted: Set<string>; existing: Map<string, LockedTrace> }>;
  /** Rewrites stored traces (summary and spans) after merging new spans in. */
  updateTraces(projectId: string, traces: TraceWrite[], now: Date): Promise<void>;
  /** Removes the model-call rows of replaced spans (located by their stored start time). */
  deleteModelCalls(projectId: string, calls: Array<{ traceId: string; spanId: string; startMs: number }>): Promise<void>;
  insertModelCalls(projectId: string, calls: ModelCallRow[]): Promise<void>;
  /** Transaction-scoped mutexes on rollup cells (project, resolution, bucket), taken in key order. */
  lockCells(keys: Array<[number, number]>): Promise<void>;
  readCells(projectId: string, keys: CellKey[]): Promise<CellRow[]>;
  readCellsInRange(projectId: string, resolution: Resolution, range: TimeRange): Promise<CellRow[]>;
  writeCells(projectId: string, rows: CellRow[]): Promise<void>;
  deleteCells(projectId: string, resolution: Resolution, bucketsMs: number[]): Promise<void>;
  rawSamples(projectIds: string[], ranges: TimeRange[]): Promise<RawSample[]>;
  insertMetricPoints(projectId: string, points: NormalizedMetric[]): Promise<void>;
  /** Adds to the organization's monthly trace counter; returns the new total. */
  addUsage(orgId: string, monthStart: Date, traces: number): Promise<number>;
}

export interface StoreRepository {
  transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T>;
  searchTraces(search: TraceSearch): Promise<StoredTrace[]>;
  findTrace(projectId: string, traceId: string): Promise<{ trace: StoredTrace; spans: SpanDoc[] } | undefined>;
  /** Cells of the given projects in the ranges; with `distribution`, that one encoded distribution each. */
  queryCells(input: { projectIds: string[]; resolution: Resolution; ranges: TimeRange[]; model?: string; distribution?: DistributionName }): Promise<QueryCellRow[]>;
  rawSamples(projectIds: string[], ranges: TimeRange[], model?: string): Promise<RawSample[]>;
  /** Deletes up to `limit` traces (with their spans) starting before `cutoff`; returns how many. */
  deleteExpiredTraces(projectId: string, cutoff: Date, limit: number): Promise<number>;
  deleteExpiredModelCalls(projectId: string, cutoff: Date, limit: number): Promise<number>;
  deleteExpiredMetricPoints(projectId: string, cutoff: Date, limit: number): Promise<number>;
  deleteExpiredRollups(projectId: string, cutoff: Date): Promise<number>;
}

const iso = (ms: number): string => new Date(ms).toISOString();
const DIST_COLUMN: Record<DistributionName, string> = {
  latency: 'dist_latency',
  tokensInput: 'dist_tokens_input',
  tokensOutput: 'dist_tokens_output',
  tokensTotal: 'dist_tokens_total',
  cost: 'dist_cost',
};
/** In DISTRIBUTIONS order. */
const DIST_COLUMNS = DISTRIBUTIONS.map((d) => DIST_COLUMN[d]).join(', ');
const asBytes = (v: unknown): Uint8Array => (v instanceof Uint8Array ? v : Buffer.from(v as string, 'hex'));
/** A PostgreSQL text[] literal of ids made of [0-9A-Za-z_] only (no quoting needed). */
const idArray = (ids: string[]): string => {
  for (const id of ids) if (!/^[0-9A-Za-z_]+$/.test(id)) throw new Error('idArray takes plain identifiers only');
  return `{${ids.join(',')}}`;
};

/** A field of COPY's text format: backslash, tab, newline and carriage return escaped; null is \N. */
function copyText(value: string | null): string {
  if (value === null) return '\\N';
  return /[\\\t\n\r]/.test(value)
    ? value.replace(/[\\\t\n\r]/g, (ch) => (ch === '\\' ? '\\\\' : ch === '\t' ? '\\t' : ch === '\n' ? '\\n' : '\\r'))
    : value;
}

/** A text[] literal with every element quoted. */
function textArray(values: string[]): string {
  return `{${values.map((v) => `"${v.replace(/[\\"]/g, (ch) => `\\${ch}`)}"`).join(',')}}`;
}

/** Trace rows as one JSON parameter; each row's spans array travels as JSON and is stored as its text. */
function traceJson(traces: TraceWrite[]): string {
  return JSON.stringify(
    traces.map((t) => ({
      id: t.traceId,
      s: iso(t.startMs),
      e: iso(t.endMs),
      d: t.endMs - t.startMs,
      c: t.spanCount,
      rn: t.rootName,
      ra: JSON.stringify(t.rootAttributes),
      m: t.model,
      ms: t.models,
      ti: t.tokensInput,
      to: t.tokensOutput,
      cost: t.cost,
      err: t.hasError,
      sp: t.spans,
    })),
  );
}

interface TraceRow {
  trace_id: string;
  start_time: Date;
  end_time: Date;
  duration_ms: number;
  span_count: number;
  root_name: string;
  root_attributes: string;
  model: string | null;
  tokens_input: number | string;
  tokens_output: number | string;
  cost: number;
  has_error: boolean;
}

const toTrace = (r: TraceRow): StoredTrace => ({
  traceId: r.trace_id,
  startTime: new Date(r.start_time),
  endTime: new Date(r.end_time),
  durationMs: Number(r.duration_ms),
  spanCount: Number(r.span_count),
  rootName: r.root_name,
  rootAttributes: JSON.parse(r.root_attributes) as Attributes,
  model: r.model,
  tokensInput: Number(r.tokens_input),
  tokensOutput: Number(r.tokens_output),
  cost: Number(r.cost),
  hasError: r.has_error,
});

const TRACE_COLUMNS =
  'trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, tokens_input, tokens_output, cost, has_error';

interface SampleRow {
  i: number;
  project_id: string;
  model: string;
  vendor: string | null;
  duration_ms: number;
  tokens_input: number | string | null;
  tokens_output: number | string | null;
  cost: number | null;
  is_error: boolean;
}

const toSample = (r: SampleRow): RawSample => ({
  range: Number(r.i),
  projectId: r.project_id,
  model: r.model,
  vendor: r.vendor,
  durationMs: Number(r.duration_ms),
  tokensInput: r.tokens_input === null ? null : Number(r.tokens_input),
  tokensOutput: r.tokens_output === null ? null : Number(r.tokens_output),
  cost: r.cost === null ? null : Number(r.cost),
  isError: r.is_error,
});

async function rawSamplesQuery(db: Knex | Knex.Transaction, projectIds: string[], ranges: TimeRange[], model?: string): Promise<RawSample[]> {
  if (ranges.length === 0 || projectIds.length === 0) return [];
  const json = JSON.stringify(ranges.map((r, i) => ({ i, f: iso(r.fromMs), t: iso(r.toMs) })));
  const result = await db.raw(
    // LATERAL … OFFSET 0: one index range scan per requested range, whatever the statistics say
    // (a join over a fresh table otherwise degenerates into filtering every row per range).
    `SELECT x.i, s.*
       FROM json_to_recordset(?::json) AS x(i int, f timestamptz, t timestamptz)
      CROSS JOIN LATERAL (
        SELECT project_id, model, vendor, duration_ms, tokens_input, tokens_output, cost, is_error
          FROM telemetry_model_calls
         WHERE project_id = ANY(?::text[]) AND start_time >= x.f AND start_time < x.t
               ${model !== undefined ? 'AND model = ?' : ''}
        OFFSET 0) s`,
    model !== undefined ? [json, idArray(projectIds), model] : [json, idArray(projectIds)],
  );
  return (result.rows as SampleRow[]).map(toSample);
}

interface CellDbRow {
  resolution: string;
  bucket_start: Date;
  model: string;
  vendor: string;
  requests: number | string;
  errors: number | string;
  dist_latency: unknown;
  dist_tokens_input: unknown;
  dist_tokens_output: unknown;
  dist_tokens_total: unknown;
  dist_cost: unknown;
}

const toCell = (r: CellDbRow): CellRow => ({
  resolution: r.resolution as Resolution,
  bucketMs: new Date(r.bucket_start).getTime(),
  model: r.model,
  vendor: r.vendor,
  requests: Number(r.requests),
  errors: Number(r.errors),
  stats: [r.dist_latency, r.dist_tokens_input, r.dist_tokens_output, r.dist_tokens_total, r.dist_cost].map(asBytes),
});

class KnexIngestTx implements IngestTx {
  constructor(
    private readonly trx: Knex.Transaction,
    /** Whether COPY FROM STDIN is available (node-postgres, not PGlite). */
    private readonly copy: boolean,
  ) {}

  async claimTraces(projectId: string, traces: TraceWrite[], now: Date, options: { optimistic?: boolean } = {}) {
    const existing = options.optimistic && this.copy ? new Map<string, LockedTrace>() : await this.lockTraces(projectId, traces.map((t) => t.traceId));
    const fresh = traces.filter((t) => !existing.has(t.traceId));
    if (fresh.length === 0) return { inserted: new Set<string>(), existing };
    if (this.copy) {
      const at = now.toISOString();
      const lines = fresh.map(
        (t) =>
          `${projectId}\t${t.traceId}\t${iso(t.startMs)}\t${iso(t.endMs)}\t${t.endMs - t.startMs}\t${t.spanCount}\t` +
          `${copyText(t.rootName)}\t${copyText(JSON.stringify(t.rootAttributes))}\t${copyText(t.model)}\t` +
          `${copyText(textArray(t.models))}\t${t.tokensInput}\t${t.tokensOutput}\t${t.cost}\t${t.hasError ? 't' : 'f'}\t` +
          `${copyText(JSON.stringify(t.spans))}\t${at}\t${at}\n`,
      );
      try {
        await this.copyIn(
          `COPY telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name,
             root_attributes, model, models, tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at)
           FROM STDIN`,
          lines,
        );
      } catch (err) {
        if ((err as { code?: string }).code === '23505') throw new ConcurrentInsertError();
        throw err;
      }
      return { inserted: new Set(fresh.map((t) => t.traceId)), existing };
    }
    const result = await this.trx.raw(
      `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name,
                                     root_attributes, model, models, tokens_input, tokens_output, cost, has_error,
                                     spans, created_at, updated_at)
       SELECT ?, x.id, x.s, x.e, x.d, x.c, x.rn, x.ra, x.m, x.ms, x.ti, x."to", x.cost, x.err, x.sp, ?, ?
         FROM json_to_recordset(?::json) AS x(id text, s timestamptz, e timestamptz, d bigint, c int, rn text, ra text,
                                              m text, ms text[], ti bigint, "to" bigint, cost float8, err boolean, sp text)
        ORDER BY x.id
       ON CONFLICT (project_id, trace_id) DO NOTHING
       RETURNING trace_id`,
      [projectId, now, now, traceJson(fresh)],
    );
    const inserted = new Set((result.rows as Array<{ trace_id: string }>).map((r) => r.trace_id));
    if (inserted.size !== fresh.length) throw new ConcurrentInsertError();
    return { inserted, existing };
  }

  private async lockTraces(projectId: string, traceIds: string[]): Promise<Map<string, LockedTrace>> {
    if (traceIds.length === 0) return new Map();
    const result = await this.trx.raw(
      `SELECT trace_id, spans FROM telemetry_traces WHERE project_id = ? AND trace_id = ANY(?::text[]) ORDER BY trace_id FOR UPDATE`,
      [projectId, idArray(traceIds)],
    );
    return new Map((result.rows as Array<{ trace_id: string; spans: string }>).map((r) => [r.trace_id, { spans: JSON.parse(r.spans) as SpanDoc[] }]));
  }

  /** COPY … FROM STDIN on this transaction's connection (PostgreSQL only). */
  private async copyIn(sql: string, lines: string[]): Promise<void> {
    const client = (this.trx as unknown as { client: { acquireConnection(): Promise<pg.PoolClient> } }).client;
    const connection = await client.acquireConnection();
    // A few large chunks: one per ~64 rows keeps memory flat without a write per row.
    const chunks: string[] = [];
    for (let i = 0; i < lines.length; i += 64) chunks.push(lines.slice(i, i + 64).join(''));
    await pipeline(Readable.from(chunks), connection.query(copyFrom(sql)));
  }

  async updateTraces(projectId: string, traces: TraceWrite[], now: Date): Promise<void> {
    if (traces.length === 0) return;
    await this.trx.raw(
      // Rows are found by primary key one by one (LATERAL … OFFSET 0), then updated by ctid: the
      // plan stays an index lookup per trace even when the table's statistics are stale.
      `UPDATE telemetry_traces t SET
          start_time = x.s, end_time = x.e, duration_ms = x.d, span_count = x.c, root_name = x.rn,
          root_attributes = x.ra, model = x.m, models = x.ms, tokens_input = x.ti, tokens_output = x."to",
          cost = x.cost, has_error = x.err, spans = x.sp, updated_at = ?
         FROM (SELECT x.*, r.ctid AS row_ctid
                 FROM json_to_recordset(?::json) AS x(id text, s timestamptz, e timestamptz, d bigint, c int, rn text,
                                                      ra text, m text, ms text[], ti bigint, "to" bigint, cost float8,
                                                      err boolean, sp text)
                CROSS JOIN LATERAL (SELECT ctid FROM telemetry_traces WHERE project_id = ? AND trace_id = x.id OFFSET 0) r) x
        WHERE t.ctid = x.row_ctid`,
      [now, traceJson(traces), projectId],
    );
  }

  async deleteModelCalls(projectId: string, calls: Array<{ traceId: string; spanId: string; startMs: number }>): Promise<void> {
    if (calls.length === 0) return;
    await this.trx.raw(
      `DELETE FROM telemetry_model_calls WHERE ctid = ANY(ARRAY(
         SELECT m.ctid FROM json_to_recordset(?::json) AS x(st timestamptz, t text, s text)
          CROSS JOIN LATERAL (SELECT ctid FROM telemetry_model_calls
                               WHERE project_id = ? AND start_time = x.st AND trace_id = x.t AND span_id = x.s
                              OFFSET 0) m))`,
      [JSON.stringify(calls.map((c) => ({ st: iso(c.startMs), t: c.traceId, s: c.spanId }))), projectId],
    );
  }

  async insertModelCalls(projectId: string, calls: ModelCallRow[]): Promise<void> {
    if (calls.length === 0) return;
    if (this.copy) {
      const num = (v: number | null) => (v === null ? '\\N' : String(v));
      await this.copyIn(
        `COPY telemetry_model_calls (project_id, start_time, trace_id, span_id, model, vendor, duration_ms, tokens_input,
           tokens_output, cost, is_error) FROM STDIN`,
        calls.map(
          (c) =>
            `${projectId}\t${iso(c.startMs)}\t${c.traceId}\t${c.spanId}\t${copyText(c.model)}\t${copyText(c.vendor)}\t` +
            `${c.durationMs}\t${num(c.tokensInput)}\t${num(c.tokensOutput)}\t${num(c.cost)}\t${c.isError ? 't' : 'f'}\n`,
        ),
      );
      return;
    }
    const json = JSON.stringify(
      calls.map((c) => ({ st: iso(c.startMs), t: c.traceId, s: c.spanId, m: c.model, v: c.vendor, d: c.durationMs, ti: c.tokensInput, to: c.tokensOutput, c: c.cost, e: c.isError })),
    );
    await this.trx.raw(
      `INSERT INTO telemetry_model_calls (project_id, start_time, trace_id, span_id, model, vendor, duration_ms,
                                          tokens_input, tokens_output, cost, is_error)
       SELECT ?, x.st, x.t, x.s, x.m, x.v, x.d, x.ti, x."to", x.c, x.e
         FROM json_to_recordset(?::json) AS x(st timestamptz, t text, s text, m text, v text, d bigint, ti bigint,
                                              "to" bigint, c float8, e boolean)`,
      [projectId, json],
    );
  }

  async lockCells(keys: Array<[number, number]>): Promise<void> {
    if (keys.length === 0) return;
    const a = `{${keys.map((k) => k[0]).join(',')}}`;
    const b = `{${keys.map((k) => k[1]).join(',')}}`;
    await this.trx.raw(`SELECT count(pg_advisory_xact_lock(u.a, u.b)) FROM unnest(?::int[], ?::int[]) AS u(a, b)`, [a, b]);
  }

  async readCells(projectId: string, keys: CellKey[]): Promise<CellRow[]> {
    if (keys.length === 0) return [];
    const json = JSON.stringify(keys.map((k) => ({ r: k.resolution, b: iso(k.bucketMs), m: k.model, v: k.vendor })));
    const result = await this.trx.raw(
      `SELECT c.*
         FROM json_to_recordset(?::json) AS x(r text, b timestamptz, m text, v text)
        CROSS JOIN LATERAL (
          SELECT resolution, bucket_start, model, vendor, requests, errors, ${DIST_COLUMNS} FROM telemetry_rollups
           WHERE project_id = ? AND resolution = x.r AND bucket_start = x.b AND model = x.m AND vendor = x.v
          OFFSET 0) c`,
      [json, projectId],
    );
    return (result.rows as CellDbRow[]).map(toCell);
  }

  async readCellsInRange(projectId: string, resolution: Resolution, range: TimeRange): Promise<CellRow[]> {
    const result = await this.trx.raw(
      `SELECT resolution, bucket_start, model, vendor, requests, errors, ${DIST_COLUMNS} FROM telemetry_rollups
        WHERE project_id = ? AND resolution = ? AND bucket_start >= ? AND bucket_start < ?`,
      [projectId, resolution, new Date(range.fromMs), new Date(range.toMs)],
    );
    return (result.rows as CellDbRow[]).map(toCell);
  }

  async writeCells(projectId: string, rows: CellRow[]): Promise<void> {
    if (rows.length === 0) return;
    const json = JSON.stringify(
      rows.map((c) => ({
        r: c.resolution,
        b: iso(c.bucketMs),
        m: c.model,
        v: c.vendor,
        q: c.requests,
        e: c.errors,
        s: c.stats.map((d) => Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64')),
      })),
    );
    await this.trx.raw(
      `INSERT INTO telemetry_rollups (project_id, resolution, bucket_start, model, vendor, requests, errors, ${DIST_COLUMNS})
       SELECT ?, x.r, x.b, x.m, x.v, x.q, x.e, decode(x.s[1], 'base64'), decode(x.s[2], 'base64'), decode(x.s[3], 'base64'),
              decode(x.s[4], 'base64'), decode(x.s[5], 'base64')
         FROM json_to_recordset(?::json) AS x(r text, b timestamptz, m text, v text, q bigint, e bigint, s text[])
       ON CONFLICT (project_id, resolution, bucket_start, model, vendor) DO UPDATE SET
         requests = excluded.requests, errors = excluded.errors, dist_latency = excluded.dist_latency,
         dist_tokens_input = excluded.dist_tokens_input, dist_tokens_output = excluded.dist_tokens_output,
         dist_tokens_total = excluded.dist_tokens_total, dist_cost = excluded.dist_cost`,
      [projectId, json],
    );
  }

  async deleteCells(projectId: string, resolution: Resolution, bucketsMs: number[]): Promise<void> {
    if (bucketsMs.length === 0) return;
    await this.trx.raw(
      `DELETE FROM telemetry_rollups WHERE project_id = ? AND resolution = ? AND bucket_start = ANY(?::timestamptz[])`,
      [projectId, resolution, `{${bucketsMs.map(iso).join(',')}}`],
    );
  }

  rawSamples(projectIds: string[], ranges: TimeRange[]): Promise<RawSample[]> {
    return rawSamplesQuery(this.trx, projectIds, ranges);
  }

  async insertMetricPoints(projectId: string, points: NormalizedMetric[]): Promise<void> {
    if (points.length === 0) return;
    const json = JSON.stringify(points.map((p) => ({ n: p.name, v: p.value, t: iso(p.timestampMs), a: p.attributes })));
    await this.trx.raw(
      `INSERT INTO telemetry_metric_points (project_id, name, value, timestamp, attributes)
       SELECT ?, x.n, x.v, x.t, x.a FROM json_to_recordset(?::json) AS x(n text, v float8, t timestamptz, a jsonb)`,
      [projectId, json],
    );
  }

  async addUsage(orgId: string, monthStart: Date, traces: number): Promise<number> {
    const result = await this.trx.raw(
      `INSERT INTO telemetry_usage (org_id, month, traces) VALUES (?, ?::date, ?)
       ON CONFLICT (org_id, month) DO UPDATE SET traces = telemetry_usage.traces + excluded.traces
       RETURNING traces`,
      [orgId, monthStart.toISOString().slice(0, 10), traces],
    );
    return Number((result.rows as Array<{ traces: number | string }>)[0]!.traces);
  }
}

export class KnexStoreRepository implements StoreRepository {
  /** COPY FROM STDIN needs node-postgres; PGlite takes the JSON path. */
  private readonly copy: boolean;

  constructor(private readonly db: Db) {
    this.copy = isPostgres(db);
  }


  transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T> {
    return this.db.transaction((trx) => work(new KnexIngestTx(trx, this.copy)));
  }

  async searchTraces(search: TraceSearch): Promise<StoredTrace[]> {
    const q = this.db('telemetry_traces').select(this.db.raw(TRACE_COLUMNS)).where('project_id', search.projectId);
    if (search.after) {
      q.andWhere(this.db.raw('(start_time, trace_id) < (?, ?)', [search.after.startTime, search.after.traceId]));
    }
    if (search.startTime) q.andWhere('start_time', '>=', search.startTime);
    if (search.endTime) {
      q.andWhere('end_time', '<=', search.endTime);
      // Implied (a trace starts before it ends), and it lets the index scan start at end_time
      // instead of walking down from the newest trace.
      q.andWhere('start_time', '<=', search.endTime);
    }
    if (search.model !== undefined) q.andWhere(this.db.raw('? = ANY(models)', [search.model]));
    if (search.minLatencyMs !== undefined) q.andWhere('duration_ms', '>=', search.minLatencyMs);
    if (search.minCost !== undefined) q.andWhere('cost', '>=', search.minCost);
    if (search.status !== undefined) q.andWhere('has_error', search.status === 'error');
    const rows = (await q.orderBy([{ column: 'start_time', order: 'desc' }, { column: 'trace_id', order: 'desc' }]).limit(search.limit)) as TraceRow[];
    return rows.map(toTrace);
  }

  async findTrace(projectId: string, traceId: string) {
    const row = (await this.db('telemetry_traces')
      .select(this.db.raw(`${TRACE_COLUMNS}, spans`))
      .where({ project_id: projectId, trace_id: traceId })
      .first()) as (TraceRow & { spans: string }) | undefined;
    if (!row) return undefined;
    return { trace: toTrace(row), spans: JSON.parse(row.spans) as SpanDoc[] };
  }

  async queryCells(input: { projectIds: string[]; resolution: Resolution; ranges: TimeRange[]; model?: string; distribution?: DistributionName }): Promise<QueryCellRow[]> {
    const column = input.distribution ? DIST_COLUMN[input.distribution] : undefined;
    if (input.ranges.length === 0 || input.projectIds.length === 0) return [];
    const json = JSON.stringify(input.ranges.map((r, i) => ({ i, f: iso(r.fromMs), t: iso(r.toMs) })));
    const bindings: unknown[] = [json, idArray(input.projectIds), input.resolution];
    if (input.model !== undefined) bindings.push(input.model);
    const result = await this.db.raw(
      `SELECT x.i, c.*
         FROM json_to_recordset(?::json) AS x(i int, f timestamptz, t timestamptz)
        CROSS JOIN LATERAL (
          SELECT project_id, model, vendor, requests, errors${column ? `, ${column} AS stats` : ''}
            FROM telemetry_rollups
           WHERE project_id = ANY(?::text[]) AND resolution = ? AND bucket_start >= x.f AND bucket_start < x.t
                 ${input.model !== undefined ? 'AND model = ?' : ''}
          OFFSET 0) c`,
      bindings as Knex.RawBinding[],
    );
    return (result.rows as Array<{ i: number; project_id: string; model: string; vendor: string; requests: number | string; errors: number | string }>).map((r) => ({
      range: Number(r.i),
      projectId: r.project_id,
      model: r.model,
      vendor: r.vendor,
      requests: Number(r.requests),
      errors: Number(r.errors),
      stats: column ? asBytes((r as { stats?: unknown }).stats) : null,
    }));
  }

  rawSamples(projectIds: string[], ranges: TimeRange[], model?: string): Promise<RawSample[]> {
    return rawSamplesQuery(this.db, projectIds, ranges, model);
  }

  async deleteExpiredTraces(projectId: string, cutoff: Date, limit: number): Promise<number> {
    // SKIP LOCKED: a trace an ingest is extending right now is left for the next pass.
    const result = await this.db.raw(
      `DELETE FROM telemetry_traces WHERE project_id = ? AND trace_id IN (
         SELECT trace_id FROM telemetry_traces WHERE project_id = ? AND start_time < ?
          ORDER BY start_time LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING 1`,
      [projectId, projectId, cutoff, limit],
    );
    return (result.rows as unknown[]).length;
  }

  async deleteExpiredModelCalls(projectId: string, cutoff: Date, limit: number): Promise<number> {
    const result = await this.db.raw(
      `DELETE FROM telemetry_model_calls WHERE ctid IN (
         SELECT ctid FROM telemetry_model_calls WHERE project_id = ? AND start_time < ? LIMIT ?)
       RETURNING 1`,
      [projectId, cutoff, limit],
    );
    return (result.rows as unknown[]).length;
  }

  async deleteExpiredMetricPoints(projectId: string, cutoff: Date, limit: number): Promise<number> {
    const result = await this.db.raw(
      `DELETE FROM telemetry_metric_points WHERE id IN (
         SELECT id FROM telemetry_metric_points WHERE project_id = ? AND timestamp < ? LIMIT ?)
       RETURNING 1`,
      [projectId, cutoff, limit],
    );
    return (result.rows as unknown[]).length;
  }

  async deleteExpiredRollups(projectId: string, cutoff: Date): Promise<number> {
    return this.db('telemetry_rollups').where('project_id', projectId).andWhere('bucket_start', '<', cutoff).delete();
  }
}
