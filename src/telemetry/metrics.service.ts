/**
 * GET /v1/metrics: one metric aggregated over time buckets across the organization's projects.
 *
 * Each bucket is tiled by the coarsest rollup cells that fit inside it (day, hour, five minutes,
 * minute, ten seconds; see rollups.ts `decompose`) plus raw model-call spans for the edges, and the
 * pieces are merged: counts, sums, min and max exactly, percentiles through the DDSketches
 * (relative error ≤ 1%). A 7-day query at 1h reads 168 hour cells per model and project instead
 * of every span; the same query with unaligned ends about 15 per bucket.
 */
import { primaryReads, type LagTolerantReads } from '../kernel/lag-tolerant-reads.js';
import { AppError, notFound, validationError } from '../kernel/errors.js';
import { batchPerTurn } from '../kernel/turn-batch.js';
import { Distribution, distributionIndex, mergeEncodedDistribution, type DistributionName } from './cell-stats.js';
import type { Project, ProjectRepository } from './projects.repository.js';
import type { QueryCellRow, RawAggregate, RollupRepository } from './rollups.repository.js';
import { decompose, type CompleteFrom, type Resolution, type TimeRange } from './rollups.js';

export const METRICS = [
  'llm.requests.total',
  'llm.requests.errors',
  'llm.tokens.input',
  'llm.tokens.output',
  'llm.tokens.total',
  'llm.cost.total',
  'llm.latency_ms',
] as const;
export type MetricName = (typeof METRICS)[number];
export const INTERVALS = { '1m': 60_000, '5m': 300_000, '15m': 900_000, '1h': 3_600_000, '1d': 86_400_000 } as const;
export type IntervalName = keyof typeof INTERVALS;
export const AGGREGATIONS = ['sum', 'avg', 'min', 'max', 'count', 'p50', 'p90', 'p95', 'p99'] as const;
export type AggregationName = (typeof AGGREGATIONS)[number];
export type GroupBy = 'model' | 'vendor' | 'environment' | 'project';
export const MAX_BUCKETS = 1440;

const DISTRIBUTION_OF: Partial<Record<MetricName, DistributionName>> = {
  'llm.tokens.input': 'tokensInput',
  'llm.tokens.output': 'tokensOutput',
  'llm.tokens.total': 'tokensTotal',
  'llm.cost.total': 'cost',
  'llm.latency_ms': 'latency',
};
const QUANTILE: Partial<Record<AggregationName, number>> = { p50: 0.5, p90: 0.9, p95: 0.95, p99: 0.99 };

export interface MetricsQuery {
  metric?: string;
  start_time: string;
  end_time: string;
  interval?: string;
  aggregation?: string;
  group_by?: GroupBy;
  model?: string;
  environment?: Project['environment'];
  /** Only this project of the organization (another's, or none, is 404). */
  project_id?: string;
}

export interface MetricSeries {
  metric: MetricName;
  aggregation: AggregationName;
  interval: IntervalName;
  series: Array<{ group: Record<string, string>; datapoints: Array<{ timestamp: string; value: number | null }> }>;
}

/** What a bucket of one group has gathered: request/error counts, or one distribution. */
class Accumulator {
  requests = 0;
  errors = 0;
  dist: Distribution | undefined;
}

const choice = <T extends string>(value: string | undefined, allowed: readonly T[], fallback: T | undefined): T | undefined =>
  value === undefined ? fallback : (allowed as readonly string[]).includes(value) ? (value as T) : undefined;

function invalid(code: 'invalid_metric' | 'invalid_interval' | 'invalid_aggregation', field: string, value: string | undefined, allowed: readonly string[]) {
  return new AppError('VALIDATION_ERROR', `${field} must be one of ${allowed.join(', ')}`, {
    telemetryCode: code,
    details: { field, value: value ?? null },
  });
}

/** What one read of a batch is for: its distribution, if any (see `batchPerTurn`). */
type Wanted = DistributionName | undefined;

/** The distinct distributions a batch of reads asks for, in a fixed order. */
const wanted = (args: Wanted[]): DistributionName[] => [...new Set(args.filter((d): d is DistributionName => d !== undefined))].sort();

/** A project id the reads can be started with before the project is known (see bulk.ts `idArray`). */
const PLAIN_ID = /^[0-9A-Za-z_]+$/;

export class MetricsService {
  /** From when the cells of later resolutions are complete (fixed by their migrations), read once. */
  private completeFrom: Promise<CompleteFrom> | undefined;

  /**
   * Reads of one event-loop turn with the same projects, resolution, ranges and model share one
   * statement that returns every distribution they ask for (a dashboard's requests and errors
   * need none, its three latency percentiles the same one): one round trip for a dashboard.
   */
  private readonly cellReads = batchPerTurn(async (key: string, args: Wanted[]) => {
    const input = JSON.parse(key) as { orgId: string; projectIds: string[]; resolution: Resolution; ranges: TimeRange[]; model?: string };
    const distributions = wanted(args);
    return { distributions, rows: await this.rollupReads.read(input.orgId, (rollups) => rollups.queryCells({ ...input, distributions })) };
  });
  private readonly rawReads = batchPerTurn(async (key: string, args: Wanted[]) => {
    const input = JSON.parse(key) as { orgId: string; projectIds: string[]; ranges: TimeRange[]; model?: string };
    const distributions = wanted(args);
    return { distributions, rows: await this.rollupReads.read(input.orgId, (rollups) => rollups.rawAggregates({ ...input, distributions })) };
  });
  /** The queried project, read once for the queries of one turn. */
  private readonly projectReads = batchPerTurn((key: string) => {
    const [orgId, id] = JSON.parse(key) as [string, string];
    return this.projects.findProject(orgId, id);
  });

  constructor(
    private readonly rollups: RollupRepository,
    private readonly projects: ProjectRepository,
    /** The explorer's figures may lag ingest (they already do by the rollups' pace): a replica may answer them. */
    private readonly rollupReads: LagTolerantReads<RollupRepository> = primaryReads(rollups),
  ) {}

  /** The cells of the ranges, and where the asked distribution is in each row's `stats` (-1: none asked). */
  private async readCells(input: { orgId: string; projectIds: string[]; resolution: Resolution; ranges: TimeRange[]; model?: string }, distribution: Wanted): Promise<{ rows: QueryCellRow[]; d: number }> {
    if (input.ranges.length === 0 || input.projectIds.length === 0) return { rows: [], d: -1 };
    const { distributions, rows } = await this.cellReads(JSON.stringify(input), distribution);
    return { rows, d: distribution === undefined ? -1 : distributions.indexOf(distribution) };
  }

  /** The raw edges' model calls, and where the asked distribution is in each row's `values` (-1: none asked). */
  private async readRaw(input: { orgId: string; projectIds: string[]; ranges: TimeRange[]; model?: string }, distribution: Wanted): Promise<{ rows: RawAggregate[]; d: number }> {
    if (input.ranges.length === 0 || input.projectIds.length === 0) return { rows: [], d: -1 };
    const { distributions, rows } = await this.rawReads(JSON.stringify(input), distribution);
    return { rows, d: distribution === undefined ? -1 : distributions.indexOf(distribution) };
  }

  async query(orgId: string, q: MetricsQuery): Promise<MetricSeries> {
    const metric = choice(q.metric, METRICS, undefined);
    if (!metric) throw invalid('invalid_metric', 'metric', q.metric, METRICS);
    const interval = choice(q.interval, Object.keys(INTERVALS) as IntervalName[], '1h');
    if (!interval) throw invalid('invalid_interval', 'interval', q.interval, Object.keys(INTERVALS));
    const aggregation = choice(q.aggregation, AGGREGATIONS, 'sum');
    if (!aggregation) throw invalid('invalid_aggregation', 'aggregation', q.aggregation, AGGREGATIONS);
    const startMs = new Date(q.start_time).getTime();
    const endMs = new Date(q.end_time).getTime();
    if (!(endMs > startMs)) throw validationError('end_time must be after start_time', { field: 'end_time' });
    const step = INTERVALS[interval];
    const buckets = Math.ceil((endMs - startMs) / step);
    if (buckets > MAX_BUCKETS) {
      throw new AppError('VALIDATION_ERROR', `The query would produce ${buckets} buckets; at most ${MAX_BUCKETS} are allowed`, {
        telemetryCode: 'invalid_interval',
        details: { field: 'interval', value: interval, buckets, max_buckets: MAX_BUCKETS },
      });
    }

    const distName = DISTRIBUTION_OF[metric];
    const distIndex = distName ? distributionIndex(distName) : -1;

    // Every bucket's pieces, per resolution; `owner` maps a piece back to its bucket.
    const pieces: Record<Resolution | 'raw', { ranges: TimeRange[]; owner: number[] }> = {
      raw: { ranges: [], owner: [] },
      '10s': { ranges: [], owner: [] },
      m: { ranges: [], owner: [] },
      '5m': { ranges: [], owner: [] },
      h: { ranges: [], owner: [] },
      d: { ranges: [], owner: [] },
    };
    const completeFrom = await (this.completeFrom ??= this.rollups.completeFrom());
    for (let b = 0; b < buckets; b++) {
      const from = startMs + b * step;
      const to = Math.min(from + step, endMs);
      const parts = decompose(from, to, completeFrom);
      for (const level of ['raw', '10s', 'm', '5m', 'h', 'd'] as const) {
        for (const range of parts[level]) {
          pieces[level].ranges.push(range);
          pieces[level].owner.push(b);
        }
      }
    }

    const read = (projectIds: string[]) => {
      const cells = (resolution: Resolution) => this.readCells({ orgId, projectIds, resolution, ranges: pieces[resolution].ranges, model: q.model }, distName);
      return Promise.all([cells('10s'), cells('m'), cells('5m'), cells('h'), cells('d'), this.readRaw({ orgId, projectIds, ranges: pieces.raw.ranges, model: q.model }, distName)]);
    };
    const none = { rows: [], d: -1 };
    let projects: Project[];
    let results: Awaited<ReturnType<typeof read>>;
    if (q.project_id === undefined) {
      const all = await this.projects.listProjects(orgId);
      projects = all.filter((p) => q.environment === undefined || p.environment === q.environment);
      results = await read(projects.map((p) => p.id));
    } else {
      // The reads start with the queried id while the project is looked up (in the organization);
      // they are dropped when it is not the organization's or not of the asked environment. An
      // id the reads cannot take (not a plain identifier) is never a project's: only looked up.
      const early = PLAIN_ID.test(q.project_id) ? read([q.project_id]).then((r) => ({ r }), (e: unknown) => ({ e })) : undefined;
      const project = await this.projectReads(JSON.stringify([orgId, q.project_id]), undefined);
      if (!project) throw notFound('Project');
      projects = q.environment === undefined || project.environment === q.environment ? [project] : [];
      const settled = projects.length === 0 || !early ? { r: [none, none, none, none, none, none] as Awaited<ReturnType<typeof read>> } : await early;
      if ('e' in settled) throw settled.e;
      results = settled.r;
    }
    const environmentOf = new Map(projects.map((p) => [p.id, p.environment]));
    const groupOf = (projectId: string, model: string, vendor: string | null): string => {
      switch (q.group_by) {
        case 'model':
          return model;
        case 'vendor':
          return vendor ? vendor : 'unknown';
        case 'environment':
          return environmentOf.get(projectId)!;
        case 'project':
          return projectId;
        default:
          return '';
      }
    };

    const groups = new Map<string, Array<Accumulator | undefined>>();
    const accumulator = (group: string, bucket: number): Accumulator => {
      let row = groups.get(group);
      if (!row) groups.set(group, (row = new Array<Accumulator | undefined>(buckets)));
      let acc = row[bucket];
      if (!acc) row[bucket] = acc = new Accumulator();
      return acc;
    };

    const [cells10s, cellsM, cells5m, cellsH, cellsD, samples] = results;
    for (const [resolution, { rows, d }] of [['10s', cells10s], ['m', cellsM], ['5m', cells5m], ['h', cellsH], ['d', cellsD]] as const) {
      for (const cell of rows) {
        const acc = accumulator(groupOf(cell.projectId, cell.model, cell.vendor), pieces[resolution].owner[cell.range]!);
        acc.requests += cell.requests;
        acc.errors += cell.errors;
        if (distIndex >= 0) mergeEncodedDistribution(cell.stats[d]!, (acc.dist ??= new Distribution()));
      }
    }
    for (const s of samples.rows) {
      const acc = accumulator(groupOf(s.projectId, s.model, s.vendor), pieces.raw.owner[s.range]!);
      acc.requests += s.requests;
      acc.errors += s.errors;
      const values = samples.d >= 0 ? s.values[samples.d]! : [];
      if (values.length > 0) {
        const dist = (acc.dist ??= new Distribution());
        for (const value of values) dist.add(value);
      }
    }

    const hasSamples = (acc: Accumulator | undefined): boolean => !!acc && (distIndex >= 0 ? (acc.dist?.count ?? 0) > 0 : acc.requests > 0);
    const names = [...groups.keys()].filter((g) => groups.get(g)!.some(hasSamples)).sort();
    if (q.group_by === undefined && names.length === 0) names.push('');
    return {
      metric,
      aggregation,
      interval,
      series: names.map((name) => {
        const row = groups.get(name);
        return {
          group: q.group_by === undefined ? {} : { [q.group_by]: name },
          datapoints: Array.from({ length: buckets }, (_, b) => ({
            timestamp: new Date(startMs + b * step).toISOString(),
            value: valueOf(metric, aggregation, row?.[b], distIndex >= 0),
          })),
        };
      }),
    };
  }
}

/** The aggregate of one bucket; empty buckets are 0 for sum and count, null otherwise. */
export function valueOf(metric: MetricName, aggregation: AggregationName, acc: Accumulator | undefined, distributional: boolean): number | null {
  const q = QUANTILE[aggregation];
  if (distributional) {
    const d = acc?.dist;
    const n = d?.count ?? 0;
    if (aggregation === 'count') return n;
    if (aggregation === 'sum') return n > 0 ? d!.sum : 0;
    if (n === 0) return null;
    if (aggregation === 'avg') return d!.sum / n;
    if (aggregation === 'min') return d!.min;
    if (aggregation === 'max') return d!.max;
    return d!.quantile(q!);
  }
  // Request metrics: every model call is a sample of 1 (total) or of 0/1 (errors), so every
  // aggregation, percentiles included, follows exactly from the two counts.
  const n = acc?.requests ?? 0;
  const ones = metric === 'llm.requests.total' ? n : (acc?.errors ?? 0);
  if (aggregation === 'count') return n;
  if (aggregation === 'sum') return ones;
  if (n === 0) return null;
  if (aggregation === 'avg') return ones / n;
  if (aggregation === 'min') return ones === n ? 1 : 0;
  if (aggregation === 'max') return ones > 0 ? 1 : 0;
  // Sorted samples are (n − ones) zeros then ones; the lower nearest rank as for the sketches.
  return Math.floor(q! * (n - 1)) >= n - ones ? 1 : 0;
}
