/**
 * Traces, spans, metric points, metric rollups and the usage counter in PostgreSQL — the only
 * knex of the ingest, search, metrics and retention paths.
 *
 * Batches travel as one JSON parameter expanded server-side with json_to_recordset: one statement
 * and one round trip per table whatever the batch size, no per-row SQL, and the same SQL on
 * PostgreSQL and PGlite.
 */
import type { Knex } from 'knex';
import type { Db } from '../db/knex.js';
import type { Attributes, NormalizedMetric, NormalizedSpan } from './normalize.js';

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

export interface StoredSpan {
  spanId: string;
  parentSpanId: string | null;
  name: string;
  startTime: Date;
  endTime: Date;
  durationMs: number;
  attributes: Attributes;
  statusCode: 'OK' | 'ERROR' | 'UNSET';
  statusMessage: string | null;
}

/** The parts of a stored span that its metric contribution depends on. */
export interface PreviousSpan {
  traceId: string;
  spanId: string;
  startMs: number;
  isModelCall: boolean;
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
  stats: Uint8Array;
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

/** Operations inside one ingest transaction. */
export interface IngestTx {
  /** Inserts summaries of traces not stored yet; returns the ids actually inserted. */
  insertNewTraces(projectId: string, traces: TraceSummary[], now: Date): Promise<Set<string>>;
  /** Row-locks stored traces (serialising batches that extend the same trace); returns those found. */
  lockTraces(projectId: string, traceIds: string[]): Promise<Set<string>>;
  spansOf(projectId: string, traceIds: string[]): Promise<PreviousSpan[]>;
  upsertSpans(projectId: string, spans: NormalizedSpan[]): Promise<void>;
  /** Recomputes stored trace summaries from their spans. */
  recomputeTraces(projectId: string, traceIds: string[], now: Date): Promise<void>;
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
  findTrace(projectId: string, traceId: string): Promise<{ trace: StoredTrace; spans: StoredSpan[] } | undefined>;
  queryCells(input: { projectIds: string[]; resolution: Resolution; ranges: TimeRange[]; model?: string; withStats: boolean }): Promise<QueryCellRow[]>;
  rawSamples(projectIds: string[], ranges: TimeRange[], model?: string): Promise<RawSample[]>;
  /** Deletes up to `limit` traces (with their spans) starting before `cutoff`; returns how many. */
  deleteExpiredTraces(projectId: string, cutoff: Date, limit: number): Promise<number>;
  deleteExpiredMetricPoints(projectId: string, cutoff: Date, limit: number): Promise<number>;
  deleteExpiredRollups(projectId: string, cutoff: Date): Promise<number>;
}

const iso = (ms: number): string => new Date(ms).toISOString();
const asBytes = (v: unknown): Uint8Array => (v instanceof Uint8Array ? v : Buffer.from(v as string, 'hex'));
/** A PostgreSQL text[] literal of ids made of [0-9A-Za-z_] only (no quoting needed). */
const idArray = (ids: string[]): string => {
  for (const id of ids) if (!/^[0-9A-Za-z_]+$/.test(id)) throw new Error('idArray takes plain identifiers only');
  return `{${ids.join(',')}}`;
};

interface TraceRow {
  trace_id: string;
  start_time: Date;
  end_time: Date;
  duration_ms: number;
  span_count: number;
  root_name: string;
  root_attributes: Attributes;
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
  rootAttributes: r.root_attributes,
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
    `SELECT x.i, s.project_id, s.model, s.vendor, s.duration_ms, s.tokens_input, s.tokens_output, s.cost,
            s.status_code = 'ERROR' AS is_error
       FROM json_to_recordset(?::json) AS x(i int, f timestamptz, t timestamptz)
       JOIN telemetry_spans s
         ON s.project_id = ANY(?::text[]) AND s.model IS NOT NULL AND s.start_time >= x.f AND s.start_time < x.t
      ${model !== undefined ? 'WHERE s.model = ?' : ''}`,
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
  stats: unknown;
}

const toCell = (r: CellDbRow): CellRow => ({
  resolution: r.resolution as Resolution,
  bucketMs: new Date(r.bucket_start).getTime(),
  model: r.model,
  vendor: r.vendor,
  requests: Number(r.requests),
  errors: Number(r.errors),
  stats: asBytes(r.stats),
});

class KnexIngestTx implements IngestTx {
  constructor(private readonly trx: Knex.Transaction) {}

  async insertNewTraces(projectId: string, traces: TraceSummary[], now: Date): Promise<Set<string>> {
    if (traces.length === 0) return new Set();
    const json = JSON.stringify(
      traces.map((t) => ({
        id: t.traceId,
        s: iso(t.startMs),
        e: iso(t.endMs),
        d: t.endMs - t.startMs,
        c: t.spanCount,
        rn: t.rootName,
        ra: t.rootAttributes,
        m: t.model,
        ms: t.models,
        ti: t.tokensInput,
        to: t.tokensOutput,
        cost: t.cost,
        err: t.hasError,
      })),
    );
    const result = await this.trx.raw(
      `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name,
                                     root_attributes, model, models, tokens_input, tokens_output, cost, has_error,
                                     created_at, updated_at)
       SELECT ?, x.id, x.s, x.e, x.d, x.c, x.rn, x.ra, x.m, x.ms, x.ti, x."to", x.cost, x.err, ?, ?
         FROM json_to_recordset(?::json) AS x(id text, s timestamptz, e timestamptz, d int, c int, rn text, ra jsonb,
                                              m text, ms text[], ti bigint, "to" bigint, cost float8, err boolean)
        ORDER BY x.id
       ON CONFLICT (project_id, trace_id) DO NOTHING
       RETURNING trace_id`,
      [projectId, now, now, json],
    );
    return new Set((result.rows as Array<{ trace_id: string }>).map((r) => r.trace_id));
  }

  async lockTraces(projectId: string, traceIds: string[]): Promise<Set<string>> {
    if (traceIds.length === 0) return new Set();
    const result = await this.trx.raw(
      `SELECT trace_id FROM telemetry_traces WHERE project_id = ? AND trace_id = ANY(?::text[]) ORDER BY trace_id FOR UPDATE`,
      [projectId, idArray(traceIds)],
    );
    return new Set((result.rows as Array<{ trace_id: string }>).map((r) => r.trace_id));
  }

  async spansOf(projectId: string, traceIds: string[]): Promise<PreviousSpan[]> {
    if (traceIds.length === 0) return [];
    const result = await this.trx.raw(
      `SELECT trace_id, span_id, start_time, model IS NOT NULL AS is_model_call
         FROM telemetry_spans WHERE project_id = ? AND trace_id = ANY(?::text[])`,
      [projectId, idArray(traceIds)],
    );
    return (result.rows as Array<{ trace_id: string; span_id: string; start_time: Date; is_model_call: boolean }>).map((r) => ({
      traceId: r.trace_id,
      spanId: r.span_id,
      startMs: new Date(r.start_time).getTime(),
      isModelCall: r.is_model_call,
    }));
  }

  async upsertSpans(projectId: string, spans: NormalizedSpan[]): Promise<void> {
    if (spans.length === 0) return;
    const json = JSON.stringify(
      spans.map((s) => ({
        t: s.traceId,
        s: s.spanId,
        p: s.parentSpanId,
        n: s.name,
        k: s.kind,
        st: iso(s.startMs),
        et: iso(s.endMs),
        d: s.endMs - s.startMs,
        sc: s.statusCode,
        sm: s.statusMessage,
        a: s.attributes,
        m: s.model,
        v: s.vendor,
        ti: s.tokensInput,
        to: s.tokensOutput,
        c: s.cost,
      })),
    );
    await this.trx.raw(
      `INSERT INTO telemetry_spans (project_id, trace_id, span_id, parent_span_id, name, kind, start_time, end_time,
                                    duration_ms, status_code, status_message, attributes, model, vendor,
                                    tokens_input, tokens_output, cost)
       SELECT ?, x.t, x.s, x.p, x.n, x.k, x.st, x.et, x.d, x.sc, x.sm, x.a, x.m, x.v, x.ti, x."to", x.c
         FROM json_to_recordset(?::json) AS x(t text, s text, p text, n text, k text, st timestamptz, et timestamptz,
                                              d int, sc text, sm text, a jsonb, m text, v text, ti bigint, "to" bigint,
                                              c float8)
       ON CONFLICT (project_id, trace_id, span_id) DO UPDATE SET
         parent_span_id = excluded.parent_span_id, name = excluded.name, kind = excluded.kind,
         start_time = excluded.start_time, end_time = excluded.end_time, duration_ms = excluded.duration_ms,
         status_code = excluded.status_code, status_message = excluded.status_message,
         attributes = excluded.attributes, model = excluded.model, vendor = excluded.vendor,
         tokens_input = excluded.tokens_input, tokens_output = excluded.tokens_output, cost = excluded.cost`,
      [projectId, json],
    );
  }

  async recomputeTraces(projectId: string, traceIds: string[], now: Date): Promise<void> {
    if (traceIds.length === 0) return;
    // Same rules as the in-memory summary of a new trace (ingest.service.ts, summarize).
    await this.trx.raw(
      `UPDATE telemetry_traces t SET
          start_time = a.start_time, end_time = a.end_time,
          duration_ms = round(extract(epoch FROM a.end_time - a.start_time) * 1000)::int,
          span_count = a.n, root_name = a.root_name, root_attributes = a.root_attributes,
          model = a.model, models = a.models, tokens_input = a.ti, tokens_output = a.tout, cost = a.cost,
          has_error = a.err, updated_at = ?
        FROM (
          SELECT trace_id, min(start_time) AS start_time, max(end_time) AS end_time, count(*)::int AS n,
                 (array_agg(name ORDER BY parent_span_id IS NOT NULL, start_time, span_id))[1] AS root_name,
                 (array_agg(attributes ORDER BY parent_span_id IS NOT NULL, start_time, span_id))[1] AS root_attributes,
                 (array_agg(model ORDER BY start_time, span_id) FILTER (WHERE model IS NOT NULL))[1] AS model,
                 coalesce(array_agg(DISTINCT model) FILTER (WHERE model IS NOT NULL), '{}') AS models,
                 coalesce(sum(tokens_input), 0) AS ti, coalesce(sum(tokens_output), 0) AS tout,
                 coalesce(sum(cost), 0) AS cost, bool_or(status_code = 'ERROR') AS err
            FROM telemetry_spans WHERE project_id = ? AND trace_id = ANY(?::text[])
           GROUP BY trace_id
        ) a
       WHERE t.project_id = ? AND t.trace_id = a.trace_id`,
      [now, projectId, idArray(traceIds), projectId],
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
      `SELECT c.resolution, c.bucket_start, c.model, c.vendor, c.requests, c.errors, c.stats
         FROM json_to_recordset(?::json) AS x(r text, b timestamptz, m text, v text)
         JOIN telemetry_rollups c
           ON c.project_id = ? AND c.resolution = x.r AND c.bucket_start = x.b AND c.model = x.m AND c.vendor = x.v`,
      [json, projectId],
    );
    return (result.rows as CellDbRow[]).map(toCell);
  }

  async readCellsInRange(projectId: string, resolution: Resolution, range: TimeRange): Promise<CellRow[]> {
    const result = await this.trx.raw(
      `SELECT resolution, bucket_start, model, vendor, requests, errors, stats FROM telemetry_rollups
        WHERE project_id = ? AND resolution = ? AND bucket_start >= ? AND bucket_start < ?`,
      [projectId, resolution, new Date(range.fromMs), new Date(range.toMs)],
    );
    return (result.rows as CellDbRow[]).map(toCell);
  }

  async writeCells(projectId: string, rows: CellRow[]): Promise<void> {
    if (rows.length === 0) return;
    const json = JSON.stringify(
      rows.map((c) => ({ r: c.resolution, b: iso(c.bucketMs), m: c.model, v: c.vendor, q: c.requests, e: c.errors, s: Buffer.from(c.stats).toString('base64') })),
    );
    await this.trx.raw(
      `INSERT INTO telemetry_rollups (project_id, resolution, bucket_start, model, vendor, requests, errors, stats)
       SELECT ?, x.r, x.b, x.m, x.v, x.q, x.e, decode(x.s, 'base64')
         FROM json_to_recordset(?::json) AS x(r text, b timestamptz, m text, v text, q bigint, e bigint, s text)
       ON CONFLICT (project_id, resolution, bucket_start, model, vendor) DO UPDATE SET
         requests = excluded.requests, errors = excluded.errors, stats = excluded.stats`,
      [projectId, json],
    );
  }

  async deleteCells(projectId: string, resolution: Resolution, bucketsMs: number[]): Promise<void> {
    if (bucketsMs.length === 0) return;
    await this.trx.raw(
      `DELETE FROM telemetry_rollups WHERE project_id = ? AND resolution = ?
          AND bucket_start IN (SELECT value::timestamptz FROM json_array_elements_text(?::json))`,
      [projectId, resolution, JSON.stringify(bucketsMs.map(iso))],
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

interface SpanRow {
  span_id: string;
  parent_span_id: string | null;
  name: string;
  start_time: Date;
  end_time: Date;
  duration_ms: number;
  attributes: Attributes;
  status_code: 'OK' | 'ERROR' | 'UNSET';
  status_message: string | null;
}

export class KnexStoreRepository implements StoreRepository {
  constructor(private readonly db: Db) {}

  transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T> {
    return this.db.transaction((trx) => work(new KnexIngestTx(trx)));
  }

  async searchTraces(search: TraceSearch): Promise<StoredTrace[]> {
    const q = this.db('telemetry_traces').select(this.db.raw(TRACE_COLUMNS)).where('project_id', search.projectId);
    if (search.after) {
      q.andWhere(this.db.raw('(start_time, trace_id) < (?, ?)', [search.after.startTime, search.after.traceId]));
    }
    if (search.startTime) q.andWhere('start_time', '>=', search.startTime);
    if (search.endTime) q.andWhere('end_time', '<=', search.endTime);
    if (search.model !== undefined) q.andWhere(this.db.raw('? = ANY(models)', [search.model]));
    if (search.minLatencyMs !== undefined) q.andWhere('duration_ms', '>=', search.minLatencyMs);
    if (search.minCost !== undefined) q.andWhere('cost', '>=', search.minCost);
    if (search.status !== undefined) q.andWhere('has_error', search.status === 'error');
    const rows = (await q.orderBy([{ column: 'start_time', order: 'desc' }, { column: 'trace_id', order: 'desc' }]).limit(search.limit)) as TraceRow[];
    return rows.map(toTrace);
  }

  async findTrace(projectId: string, traceId: string) {
    const row = (await this.db('telemetry_traces')
      .select(this.db.raw(TRACE_COLUMNS))
      .where({ project_id: projectId, trace_id: traceId })
      .first()) as TraceRow | undefined;
    if (!row) return undefined;
    const spans = (await this.db('telemetry_spans')
      .select('span_id', 'parent_span_id', 'name', 'start_time', 'end_time', 'duration_ms', 'attributes', 'status_code', 'status_message')
      .where({ project_id: projectId, trace_id: traceId })
      .orderBy([{ column: 'start_time', order: 'asc' }, { column: 'span_id', order: 'asc' }])) as SpanRow[];
    return {
      trace: toTrace(row),
      spans: spans.map(
        (s): StoredSpan => ({
          spanId: s.span_id,
          parentSpanId: s.parent_span_id,
          name: s.name,
          startTime: new Date(s.start_time),
          endTime: new Date(s.end_time),
          durationMs: Number(s.duration_ms),
          attributes: s.attributes,
          statusCode: s.status_code,
          statusMessage: s.status_message,
        }),
      ),
    };
  }

  async queryCells(input: { projectIds: string[]; resolution: Resolution; ranges: TimeRange[]; model?: string; withStats: boolean }): Promise<QueryCellRow[]> {
    if (input.ranges.length === 0 || input.projectIds.length === 0) return [];
    const json = JSON.stringify(input.ranges.map((r, i) => ({ i, f: iso(r.fromMs), t: iso(r.toMs) })));
    const bindings: unknown[] = [json, idArray(input.projectIds), input.resolution];
    if (input.model !== undefined) bindings.push(input.model);
    const result = await this.db.raw(
      `SELECT x.i, c.project_id, c.model, c.vendor, c.requests, c.errors${input.withStats ? ', c.stats' : ''}
         FROM json_to_recordset(?::json) AS x(i int, f timestamptz, t timestamptz)
         JOIN telemetry_rollups c
           ON c.project_id = ANY(?::text[]) AND c.resolution = ? AND c.bucket_start >= x.f AND c.bucket_start < x.t
        ${input.model !== undefined ? 'WHERE c.model = ?' : ''}`,
      bindings as Knex.RawBinding[],
    );
    return (result.rows as Array<Omit<CellDbRow, 'resolution' | 'bucket_start'> & { i: number; project_id: string }>).map((r) => ({
      range: Number(r.i),
      projectId: r.project_id,
      model: r.model,
      vendor: r.vendor,
      requests: Number(r.requests),
      errors: Number(r.errors),
      stats: input.withStats ? asBytes(r.stats) : null,
    }));
  }

  rawSamples(projectIds: string[], ranges: TimeRange[], model?: string): Promise<RawSample[]> {
    return rawSamplesQuery(this.db, projectIds, ranges, model);
  }

  async deleteExpiredTraces(projectId: string, cutoff: Date, limit: number): Promise<number> {
    return this.db.transaction(async (trx) => {
      // SKIP LOCKED: a trace an ingest is extending right now is left for the next pass.
      const doomed = await trx.raw(
        `SELECT trace_id FROM telemetry_traces WHERE project_id = ? AND start_time < ?
          ORDER BY start_time LIMIT ? FOR UPDATE SKIP LOCKED`,
        [projectId, cutoff, limit],
      );
      const ids = (doomed.rows as Array<{ trace_id: string }>).map((r) => r.trace_id);
      if (ids.length === 0) return 0;
      await trx.raw(`DELETE FROM telemetry_spans WHERE project_id = ? AND trace_id = ANY(?::text[])`, [projectId, idArray(ids)]);
      await trx.raw(`DELETE FROM telemetry_traces WHERE project_id = ? AND trace_id = ANY(?::text[])`, [projectId, idArray(ids)]);
      return ids.length;
    });
  }

  async deleteExpiredMetricPoints(projectId: string, cutoff: Date, limit: number): Promise<number> {
    const result = await this.db.raw(
      `DELETE FROM telemetry_metric_points WHERE id IN (
         SELECT id FROM telemetry_metric_points WHERE project_id = ? AND timestamp < ? LIMIT ?)`,
      [projectId, cutoff, limit],
    );
    return Number(result.rowCount ?? result.affectedRows ?? 0);
  }

  async deleteExpiredRollups(projectId: string, cutoff: Date): Promise<number> {
    return this.db('telemetry_rollups').where('project_id', projectId).andWhere('bucket_start', '<', cutoff).delete();
  }
}
