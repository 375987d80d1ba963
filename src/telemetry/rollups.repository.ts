/**
 * The metrics side of telemetry: model calls (the raw samples), metric rollup cells and metric
 * points — the writes of an ingest transaction and the reads of GET /v1/metrics.
 */
import type { Knex } from 'knex';
import type { PartitionEnsurer } from '../db/partitions.js';
import { copyIn, copyText, idArray } from '../db/bulk.js';
import type { Db } from '../db/knex.js';
import { DISTRIBUTIONS, type DistributionName } from './cell-stats.js';
import type { NormalizedMetric } from './normalize.js';
import type { CompleteFrom, Resolution, TimeRange } from './rollups.js';

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

/** The cells of one requested range and one project, model and vendor, added up. */
export interface QueryCellRow {
  range: number;
  projectId: string;
  model: string;
  vendor: string;
  requests: number;
  errors: number;
  /** Per requested distribution (in the order asked), its encoding in each cell, one after another. */
  stats: Uint8Array[];
}

/** The model calls of one requested range and one project, model and vendor, added up. */
export interface RawAggregate {
  range: number;
  projectId: string;
  model: string;
  vendor: string | null;
  requests: number;
  errors: number;
  /** Per requested distribution (in the order asked), its sample of each call that has one. */
  values: number[][];
}

export interface RollupRepository {
  /** Cells of the given projects (those of the organization) in the ranges, added up per range, project, model and vendor. */
  queryCells(input: { orgId: string; projectIds: string[]; resolution: Resolution; ranges: TimeRange[]; model?: string; distributions: DistributionName[] }): Promise<QueryCellRow[]>;
  /** Model calls of the given projects (those of the organization) in the ranges, added up per range, project, model and vendor. */
  rawAggregates(input: { orgId: string; projectIds: string[]; ranges: TimeRange[]; model?: string; distributions: DistributionName[] }): Promise<RawAggregate[]>;
  /** From when (epoch ms) the cells of each resolution added after the first release are complete. */
  completeFrom(): Promise<CompleteFrom>;
}

/** Model calls, rollup cells and metric points written inside one ingest transaction. */
export interface RollupWriter {
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

async function rawSamplesQuery(db: Knex | Knex.Transaction, projectIds: string[], ranges: TimeRange[]): Promise<RawSample[]> {
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
        OFFSET 0) s`,
    [json, idArray(projectIds)],
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

/** Each distribution's sample of a model call, as SQL over telemetry_model_calls (cell-stats.ts `addSample`). */
const SAMPLE_VALUE: Record<DistributionName, string> = {
  latency: 'duration_ms',
  tokensInput: 'tokens_input',
  tokensOutput: 'tokens_output',
  tokensTotal: 'CASE WHEN tokens_input IS NULL AND tokens_output IS NULL THEN NULL ELSE coalesce(tokens_input, 0) + coalesce(tokens_output, 0) END',
  cost: 'cost',
};

interface RawAggregateDbRow {
  i: number;
  project_id: string;
  model: string;
  vendor: string | null;
  requests: number | string;
  errors: number | string;
  /** vals0, vals1, …: the requested distributions' samples. */
  [vals: `vals${number}`]: string | null;
}

interface QueryCellDbRow {
  i: number;
  project_id: string;
  model: string;
  vendor: string;
  requests: number | string;
  errors: number | string;
  /** stats0, stats1, …: the requested distributions. */
  [stats: `stats${number}`]: unknown;
}

const toQueryCell = (r: QueryCellDbRow, distributions: number): QueryCellRow => {
  const stats: Uint8Array[] = [];
  for (let d = 0; d < distributions; d++) stats.push(asBytes(r[`stats${d}`]));
  return { range: Number(r.i), projectId: r.project_id, model: r.model, vendor: r.vendor, requests: Number(r.requests), errors: Number(r.errors), stats };
};

/**
 * The asked project ids that are the organization's (an InitPlan: one primary-key lookup per
 * statement). The metrics service starts its reads with a queried id before the project is
 * known to be the organization's; this way they never read another organization's rows.
 */
const ORG_PROJECTS = 'ARRAY(SELECT id FROM telemetry_projects WHERE org_id = ? AND id = ANY(?::text[]))';

export class KnexRollupRepository implements RollupRepository {
  constructor(private readonly db: Db) {}

  /**
   * A metrics read: one statement, no transaction. PostgreSQL's JIT compilation, which cost these
   * reads more than running them (the planner sees a range list of unknown length, counted as 100
   * rows, times a generic range estimate, so a statement that runs in tens of milliseconds looks
   * costly enough to compile: docs/benchmarks.md), is off for every pooled connection
   * (src/db/knex.ts), so no `SET LOCAL jit = off` transaction (four round trips) is needed.
   */
  private async read(sql: string, bindings: Knex.RawBinding[]): Promise<{ rows: unknown[] }> {
    return (await this.db.raw(sql, bindings)) as { rows: unknown[] };
  }

  async queryCells(input: { orgId: string; projectIds: string[]; resolution: Resolution; ranges: TimeRange[]; model?: string; distributions: DistributionName[] }): Promise<QueryCellRow[]> {
    if (input.ranges.length === 0 || input.projectIds.length === 0) return [];
    const json = JSON.stringify(input.ranges.map((r, i) => ({ i, f: iso(r.fromMs), t: iso(r.toMs) })));
    const bindings: unknown[] = [json, input.orgId, idArray(input.projectIds), input.resolution];
    if (input.model !== undefined) bindings.push(input.model);
    // Added up in the database, range by range (small in-memory groups): an unaligned range reads
    // dozens of minute cells per model, and a row per cell costs more to parse than to merge.
    const result = await this.read(
      `SELECT x.i, c.*
         FROM json_to_recordset(?::json) AS x(i int, f timestamptz, t timestamptz)
        CROSS JOIN LATERAL (
          SELECT project_id, model, vendor, sum(requests) AS requests, sum(errors) AS errors
                 ${input.distributions.map((d, n) => `, string_agg(${DIST_COLUMN[d]}, ''::bytea) AS stats${n}`).join('')}
            FROM telemetry_rollups
           WHERE project_id = ANY(${ORG_PROJECTS}) AND resolution = ? AND bucket_start >= x.f AND bucket_start < x.t
                 ${input.model !== undefined ? 'AND model = ?' : ''}
           GROUP BY project_id, model, vendor) c`,
      bindings as Knex.RawBinding[],
    );
    return (result.rows as QueryCellDbRow[]).map((r) => toQueryCell(r, input.distributions.length));
  }

  async completeFrom(): Promise<CompleteFrom> {
    // Resolutions of the first release (minute, hour, day) have no row: complete from the start.
    const rows = (await this.db('telemetry_rollup_levels').select('resolution', 'complete_from')) as Array<{ resolution: Resolution; complete_from: Date | string }>;
    return Object.fromEntries(rows.map((r) => [r.resolution, new Date(r.complete_from).getTime()]));
  }

  async rawAggregates(input: { orgId: string; projectIds: string[]; ranges: TimeRange[]; model?: string; distributions: DistributionName[] }): Promise<RawAggregate[]> {
    if (input.ranges.length === 0 || input.projectIds.length === 0) return [];
    const json = JSON.stringify(input.ranges.map((r, i) => ({ i, f: iso(r.fromMs), t: iso(r.toMs) })));
    const bindings: unknown[] = [json, input.orgId, idArray(input.projectIds)];
    if (input.model !== undefined) bindings.push(input.model);
    // The samples travel as one text list per group (string_agg skips calls without the value);
    // float8 and bigint print exactly, so the sketch sees the same numbers as from rows.
    const result = await this.read(
      `SELECT x.i, s.*
         FROM json_to_recordset(?::json) AS x(i int, f timestamptz, t timestamptz)
        CROSS JOIN LATERAL (
          SELECT project_id, model, vendor, count(*) AS requests, count(*) FILTER (WHERE is_error) AS errors
                 ${input.distributions.map((d, n) => `, string_agg((${SAMPLE_VALUE[d]})::text, ',') AS vals${n}`).join('')}
            FROM telemetry_model_calls
           WHERE project_id = ANY(${ORG_PROJECTS}) AND start_time >= x.f AND start_time < x.t
                 ${input.model !== undefined ? 'AND model = ?' : ''}
           GROUP BY project_id, model, vendor) s`,
      bindings as Knex.RawBinding[],
    );
    return (result.rows as RawAggregateDbRow[]).map((r) => ({
      range: Number(r.i),
      projectId: r.project_id,
      model: r.model,
      vendor: r.vendor,
      requests: Number(r.requests),
      errors: Number(r.errors),
      values: input.distributions.map((_, n) => {
        const vals = r[`vals${n}`];
        return vals ? vals.split(',').map(Number) : [];
      }),
    }));
  }
}

export class KnexRollupWriter implements RollupWriter {
  constructor(
    private readonly trx: Knex.Transaction,
    /** Whether COPY FROM STDIN is available (node-postgres, not PGlite). */
    private readonly copy: boolean,
    /** Creates the weekly partitions the rows need (partitions.repository.ts), relative to `now`. */
    private readonly partitions?: { ensurer: PartitionEnsurer; now: Date },
  ) {}

  async deleteModelCalls(projectId: string, calls: Array<{ traceId: string; spanId: string; startMs: number }>): Promise<void> {
    if (calls.length === 0) return;
    // The table is partitioned (migration 0290): a ctid names a row only within its partition, so
    // the rows are matched by (tableoid, ctid), each found by its key (the partition key included,
    // so the lookup is pruned to the span's week at run time).
    await this.trx.raw(
      `DELETE FROM telemetry_model_calls d USING (
         SELECT m.tableoid AS toid, m.ctid AS tid FROM json_to_recordset(?::json) AS x(st timestamptz, t text, s text)
          CROSS JOIN LATERAL (SELECT tableoid, ctid FROM telemetry_model_calls
                               WHERE project_id = ? AND start_time = x.st AND trace_id = x.t AND span_id = x.s
                              OFFSET 0) m) z
        WHERE d.tableoid = z.toid AND d.ctid = z.tid`,
      [JSON.stringify(calls.map((c) => ({ st: iso(c.startMs), t: c.traceId, s: c.spanId }))), projectId],
    );
  }

  async insertModelCalls(projectId: string, calls: ModelCallRow[]): Promise<void> {
    if (calls.length === 0) return;
    if (this.partitions) {
      await this.partitions.ensurer.ensure(
        this.trx,
        'telemetry_model_calls',
        calls.map((c) => c.startMs),
        this.partitions.now,
      );
    }
    if (this.copy) {
      const num = (v: number | null) => (v === null ? '\\N' : String(v));
      await copyIn(
        this.trx,
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
}
