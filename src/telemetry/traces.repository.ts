/**
 * Traces with their span documents, and the monthly trace counter behind the quota: the writes of
 * an ingest transaction and the reads of trace search and detail.
 *
 * On PostgreSQL new traces go in with COPY: no per-row SQL, no JSON parsing server-side. Elsewhere,
 * and on PGlite, a batch travels as one JSON parameter expanded with json_to_recordset: one
 * statement and one round trip whatever the batch size.
 */
import type { Knex } from 'knex';
import { copyIn, copyText, idArray, textArray } from '../db/bulk.js';
import { PREPARED, type Db } from '../db/knex.js';
import { weekStart, type PartitionEnsurer } from '../db/partitions.js';
import type { Clock } from '../kernel/clock.js';
import { enqueueTraceChanges, type GroupContribution, type TraceChange } from './groups.repository.js';
import type { Attributes, SpanEvent, SpanStatusCode } from './normalize.js';

export type { GroupContribution, TraceChange } from './groups.repository.js';

export interface TraceSummary {
  traceId: string;
  /** `session.id` (or OpenLLMetry's association property) of the trace's spans; null when none carries one. */
  sessionId: string | null;
  /** `user.id` / `enduser.id` (or OpenLLMetry's association property); null when none carries one. */
  userId: string | null;
  /** Short scalar span attributes as `key=value`, for the attribute filter. */
  attributePairs: string[];
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
  sessionId: string | null;
  userId: string | null;
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

/** A span as stored inside its trace; its model-call fields live in its attributes. */
export interface StoredSpan {
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: string | null;
  /** Epoch milliseconds. */
  startMs: number;
  endMs: number;
  statusCode: SpanStatusCode;
  statusMessage: string | null;
  /** After GenAI mapping and pricing. */
  attributes: Attributes;
  /** OTLP span events; absent when the span has none. */
  events?: SpanEvent[];
}

/** A trace row to write: its summary and all its spans. */
export interface TraceWrite extends TraceSummary {
  spans: StoredSpan[];
}

export interface LockedTrace {
  spans: StoredSpan[];
  /** What the stored trace contributes to its session and user (before this batch). */
  summary: GroupContribution;
}

/** Orders of the trace list: a column, descending when prefixed by `-`. */
export const TRACE_SORTS = ['-start_time', 'start_time', '-duration_ms', 'duration_ms', '-cost', 'cost'] as const;
export type TraceSort = (typeof TRACE_SORTS)[number];

export interface TraceSearch {
  projectId: string;
  limit: number;
  sort: TraceSort;
  /** Keyset position: the last row's sort value (a Date for start_time) and trace id. */
  after?: { value: Date | number; traceId: string };
  startTime?: Date;
  endTime?: Date;
  model?: string;
  minLatencyMs?: number;
  minCost?: number;
  status?: 'ok' | 'error';
  traceId?: string;
  /** `key=value` as stored in attribute_pairs. */
  attributePair?: string;
  sessionId?: string;
  userId?: string;
}

/** One session (traces sharing `session.id`) with its totals. */
export interface SessionSummary {
  sessionId: string;
  userId: string | null;
  traceCount: number;
  firstStart: Date;
  lastEnd: Date;
  tokensInput: number;
  tokensOutput: number;
  cost: number;
  errorCount: number;
}

/** One end user with the totals of their traces. */
export interface UserSummary {
  userId: string;
  sessionCount: number;
  traceCount: number;
  firstStart: Date;
  lastEnd: Date;
  tokensInput: number;
  tokensOutput: number;
  cost: number;
  errorCount: number;
}

export interface GroupSearch {
  projectId: string;
  limit: number;
  startTime?: Date;
  endTime?: Date;
  userId?: string;
  /** Keyset position: the last group's last activity and id (newest activity first). */
  after?: { lastEnd: Date; id: string };
}

/** Another transaction stored one of the batch's new traces first; retrying the batch resolves it. */
export class ConcurrentInsertError extends Error {
  constructor() {
    super('a trace of the batch was inserted concurrently');
    this.name = 'ConcurrentInsertError';
  }
}

/**
 * A model call (a span telemetry priced: it has `llm.model`) as other modules read it, e.g. a
 * usage meter: its own attributes and its trace root's, where end-user attributes often sit.
 */
export interface ModelCallSpan {
  traceId: string;
  spanId: string;
  /** Epoch milliseconds. */
  startMs: number;
  endMs: number;
  attributes: Attributes;
  rootAttributes: Attributes;
}

/** What to aggregate of a project's model-call spans (see TraceRepository.modelCallAggregates). */
export interface ModelCallAggregateQuery {
  projectId: string;
  start: Date;
  end: Date;
  /** Equality on the span's `llm.model`, `llm.vendor` and on each given attribute. */
  model?: string;
  vendor?: string;
  attributes: Record<string, string | number | boolean>;
  /** The attribute the groups are keyed by: on the span, else on its trace's root span (a non-empty string, or a number as text). */
  groupAttribute: string;
  /** The attribute whose values are aggregated, or `duration_ms`; null: spans are only counted. */
  property: string | null;
  /** Distinct values wanted (the `unique` aggregation). */
  distinct: boolean;
  /** UTC buckets (epoch ms of their start); absent: one group per key. */
  interval?: 'hour' | 'day' | 'month';
  /** Only these group keys (one customer's id and externalId): the other groups are neither sorted nor aggregated. */
  keys?: readonly string[];
}

/** One group of model-call spans: counted, the property's numeric values summed and maxed, the latest one by (start, traceId:spanId). */
export interface ModelCallAggregate {
  key: string;
  bucket: number | null;
  count: number;
  sum: number;
  max: number | null;
  last: { at: number; id: string; value: number } | null;
  /** JSON texts of the property's distinct values (when asked). */
  values: string[];
}

export interface TraceRepository {
  searchTraces(search: TraceSearch): Promise<StoredTrace[]>;
  /** Aggregates of the project's model-call spans starting in [start, end), per group key (and bucket): computed by the database, no span document leaves it. */
  modelCallAggregates(query: ModelCallAggregateQuery): Promise<ModelCallAggregate[]>;
  /** The project's model-call spans that start in [start, end), in no particular order. */
  modelCallSpans(projectId: string, start: Date, end: Date): Promise<ModelCallSpan[]>;
  /** Sessions whose activity (first start to last end) overlaps the range, newest last activity first. */
  searchSessions(search: GroupSearch): Promise<SessionSummary[]>;
  /** Users whose activity overlaps the range, newest last activity first. */
  searchUsers(search: GroupSearch): Promise<UserSummary[]>;
  findTrace(projectId: string, traceId: string): Promise<{ trace: StoredTrace; spans: StoredSpan[] } | undefined>;
}

/** Trace writes inside one ingest transaction. */
export interface TraceWriter {
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
  /**
   * Queues the batch's trace changes (inserted: `before` null; updated: stored and new summary)
   * for the session and user rollups (one row; the telemetry-group-changes job applies them);
   * once per batch, after the trace writes.
   */
  updateGroups(projectId: string, changes: TraceChange[], now: Date): Promise<void>;
  /** Adds to the organization's monthly trace counter; returns the new total. */
  addUsage(orgId: string, monthStart: Date, traces: number): Promise<number>;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** A span in the stored document (telemetry_traces.spans, JSON text). */
interface SpanDocument {
  span_id: string;
  parent_span_id: string | null;
  name: string;
  kind: string | null;
  start_ms: number;
  end_ms: number;
  status_code: SpanStatusCode;
  status_message: string | null;
  attributes: Attributes;
  events?: Array<{ name: string; time_ms: number | null; attributes: Attributes }>;
}

/** The one-letter keys of releases before migration 0070, which a process of such a release may still write while this one rolls out. */
interface LegacySpanDocument {
  s: string;
  p: string | null;
  n: string;
  k: string | null;
  st: number;
  et: number;
  c: SpanStatusCode;
  m: string | null;
  a: Attributes;
}

const toSpanDocument = (s: StoredSpan): SpanDocument => ({
  span_id: s.spanId,
  parent_span_id: s.parentSpanId,
  name: s.name,
  kind: s.kind,
  start_ms: s.startMs,
  end_ms: s.endMs,
  status_code: s.statusCode,
  status_message: s.statusMessage,
  attributes: s.attributes,
  ...(s.events ? { events: s.events.map((e) => ({ name: e.name, time_ms: e.timeMs, attributes: e.attributes })) } : {}),
});

const fromSpanDocument = (d: SpanDocument | LegacySpanDocument): StoredSpan => {
  if (!('span_id' in d)) return fromLegacySpanDocument(d);
  const span: StoredSpan = {
    spanId: d.span_id,
    parentSpanId: d.parent_span_id,
    name: d.name,
    kind: d.kind,
    startMs: d.start_ms,
    endMs: d.end_ms,
    statusCode: d.status_code,
    statusMessage: d.status_message,
    attributes: d.attributes,
  };
  // Assigned, not spread: a spread copies the object (5,000 times for a large trace).
  if (d.events) span.events = d.events.map((e) => ({ name: e.name, timeMs: e.time_ms, attributes: e.attributes }));
  return span;
};

const fromLegacySpanDocument = (d: LegacySpanDocument): StoredSpan => ({
  spanId: d.s,
  parentSpanId: d.p,
  name: d.n,
  kind: d.k,
  startMs: d.st,
  endMs: d.et,
  statusCode: d.c,
  statusMessage: d.m,
  attributes: d.a,
});

const spansJson = (spans: StoredSpan[]): string => JSON.stringify(spans.map(toSpanDocument));
const parseSpans = (text: string): StoredSpan[] => (JSON.parse(text) as Array<SpanDocument | LegacySpanDocument>).map(fromSpanDocument);

/** Trace rows as one JSON parameter; each row's span document travels as JSON and is stored as its text. */
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
      sp: t.spans.map(toSpanDocument),
      sid: t.sessionId,
      uid: t.userId,
      ap: t.attributePairs,
    })),
  );
}

interface TraceRow {
  trace_id: string;
  session_id: string | null;
  user_id: string | null;
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
  sessionId: r.session_id,
  userId: r.user_id,
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
  'trace_id, session_id, user_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, tokens_input, tokens_output, cost, has_error';

interface GroupRow {
  id: string;
  user_id?: string | null;
  session_count?: number | string;
  trace_count: number | string;
  first_start: Date;
  last_end: Date;
  tokens_input: number | string;
  tokens_output: number | string;
  cost: number | string;
  error_count: number | string;
}

const groupTotals = (r: GroupRow) => ({
  traceCount: Number(r.trace_count),
  firstStart: new Date(r.first_start),
  lastEnd: new Date(r.last_end),
  tokensInput: Number(r.tokens_input),
  tokensOutput: Number(r.tokens_output),
  cost: Number(r.cost),
  errorCount: Number(r.error_count),
});

/** The columns of a stored trace that its session and user totals are made of. */
export interface GroupSourceRow {
  session_id: string | null;
  user_id: string | null;
  start_time: Date;
  end_time: Date;
  tokens_input: number | string;
  tokens_output: number | string;
  cost: number;
  has_error: boolean;
}

export const toContribution = (r: GroupSourceRow): GroupContribution => ({
  sessionId: r.session_id,
  userId: r.user_id,
  startMs: new Date(r.start_time).getTime(),
  endMs: new Date(r.end_time).getTime(),
  tokensInput: Number(r.tokens_input),
  tokensOutput: Number(r.tokens_output),
  cost: Number(r.cost),
  hasError: r.has_error,
});

const newerFirst = (a: TraceRow, b: TraceRow): number =>
  new Date(b.start_time).getTime() - new Date(a.start_time).getTime() || (a.trace_id < b.trace_id ? 1 : a.trace_id > b.trace_id ? -1 : 0);

/**
 * Whether a list statement has one right plan whatever its values and statistics: no filter but
 * the project, so each week is read down the index of its order, from the project's first entry
 * (project_id leads every index), for exactly the page. Such a statement runs prepared
 * (PREPARED): on weekly partitions planning it costs several times its execution (every week's
 * partition and its indexes are planned), and PostgreSQL's generic plan, made once per
 * connection, is the plan each call would get. A filter is not prepared: a generic plan costs
 * `user_id = $2` at the column's average frequency, so on an install with few users it would walk
 * the start-time index and filter — reading every trace of the project for a rare user — where a
 * custom plan takes the user index (the same holds for a session, a range or a value filter).
 */
/** The LIMITs a prepared list is written with: the API's default page (50 + 1), its largest (100 + 1), and two below. */
const PREPARED_LIMITS = [11, 26, 51, 101];

const fixedPlan = (s: TraceSearch): boolean =>
  !s.startTime && !s.endTime && s.traceId === undefined && s.model === undefined && s.minLatencyMs === undefined && s.minCost === undefined &&
  s.status === undefined && s.attributePair === undefined && s.sessionId === undefined && s.userId === undefined;

export class KnexTraceRepository implements TraceRepository {
  /** `clock`: where a newest-first list not bounded in time starts reading (without it, every week at once). */
  constructor(
    private readonly db: Db,
    private readonly clock?: Clock,
  ) {}

  /**
   * The page of a newest-first list in at most two reads split on `partition_start` (the partition
   * key), so a page found in the recent week never descends the older weeks' indexes: first the
   * traces stored since `recent`. Every other trace starts before `recent` (start_time <=
   * partition_start), so when that page's rows all start at or after `recent` they come first:
   * a full page stands, a short one is completed by the older traces' first rows. Otherwise (a
   * trace's start moved back across the split) both pages are read whole and merged in order.
   */
  async searchTraces(search: TraceSearch): Promise<StoredTrace[]> {
    const recent = this.recentBound(search);
    if (recent === undefined) return (await this.searchRows(search)).map(toTrace);
    const newer = await this.searchRows(search, (q) => q.andWhere('partition_start', '>=', recent));
    const ahead = newer.length === 0 || new Date(newer[newer.length - 1]!.start_time).getTime() >= recent.getTime();
    if (ahead && newer.length === search.limit) return newer.map(toTrace);
    const older = await this.searchRows({ ...search, limit: ahead ? search.limit - newer.length : search.limit }, (q) => q.andWhere('partition_start', '<', recent));
    return (ahead ? [...newer, ...older] : [...newer, ...older].sort(newerFirst).slice(0, search.limit)).map(toTrace);
  }

  /**
   * Where a newest-first list splits: the Monday (a partition's lower bound) of the week of the
   * page's newest possible start (the cursor, the range's end, or now). None when the list is in
   * another order, names one trace, or its range starts in that week already.
   */
  private recentBound(search: TraceSearch): Date | undefined {
    if (search.sort !== '-start_time' || search.traceId !== undefined || !this.clock) return undefined;
    // A user's or a session's traces seldom fill a page from one week: the split then sends a
    // second statement (planned again over the older weeks) to save a few buffers; one read costs
    // half the CPU (docs/benchmarks.md, round 22).
    if (search.userId !== undefined || search.sessionId !== undefined) return undefined;
    let newest = this.clock.now().getTime();
    if (search.endTime) newest = Math.min(newest, search.endTime.getTime());
    if (search.after) newest = Math.min(newest, (search.after.value as Date).getTime());
    const recent = weekStart(newest);
    if (search.startTime && search.startTime.getTime() >= recent) return undefined;
    return new Date(recent);
  }

  private async searchRows(search: TraceSearch, part?: (q: Knex.QueryBuilder) => void): Promise<TraceRow[]> {
    const q = this.db('telemetry_traces').select(this.db.raw(TRACE_COLUMNS)).where('project_id', search.projectId);
    const descending = search.sort.startsWith('-');
    const column = descending ? search.sort.slice(1) : search.sort;
    if (search.after) {
      q.andWhere(this.db.raw(`(${column}, trace_id) ${descending ? '<' : '>'} (?, ?)`, [search.after.value, search.after.traceId]));
    }
    if (search.startTime) {
      q.andWhere('start_time', '>=', search.startTime);
      // Implied (a trace's start only moves earlier than the start it was first stored with, the
      // partition key: migration 0390), and it prunes the weeks before the range.
      q.andWhere('partition_start', '>=', search.startTime);
    }
    if (search.after && column === 'start_time' && !descending) q.andWhere('partition_start', '>=', search.after.value);
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
    if (search.traceId !== undefined) q.andWhere('trace_id', search.traceId);
    if (search.attributePair !== undefined) q.andWhere(this.db.raw('attribute_pairs @> ?::text[]', [textArray([search.attributePair])]));
    if (search.sessionId !== undefined) q.andWhere('session_id', search.sessionId);
    if (search.userId !== undefined) q.andWhere('user_id', search.userId);
    part?.(q);
    const order = descending ? 'desc' : 'asc';
    q.orderBy([{ column, order }, { column: 'trace_id', order }]);
    const bucket = PREPARED_LIMITS.find((n) => n >= search.limit);
    if (!part && bucket !== undefined && fixedPlan(search)) {
      // The page size in the text: with LIMIT as a parameter the generic plan is costed for a
      // tenth of the rows, and PostgreSQL keeps planning each call. A few sizes only (the page
      // cut from the next one up), so a connection keeps a few statements per order, not one
      // per page size a client asks for.
      q.limit(bucket, { skipBinding: true }).options(PREPARED);
      return ((await q) as TraceRow[]).slice(0, search.limit);
    }
    return (await q.limit(search.limit)) as TraceRow[];
  }

  /**
   * A page of the session or user rollup: rows whose activity overlaps the range, newest last
   * activity first — an index scan of (project_id[, user_id], last_end DESC, id DESC) that stops
   * after the page.
   *
   * Sessions with an `end_time` in the past: walking down from the newest session would pass every
   * session after the range (they fail `first_start <= end_time`). The page is instead the merge of
   * the sessions active at `end_time` (first_start ≤ end_time < last_end: a GiST lookup of that
   * instant, few rows) and those whose last activity is in the range (an index range scan). Users
   * are long-lived — most pass the filter — so they keep the single scan.
   */
  private groupRows(search: GroupSearch, table: 'telemetry_sessions' | 'telemetry_users', key: 'session_id' | 'user_id', extra: string) {
    const columns = `${key} AS id, ${extra} trace_count, first_start, last_end, tokens_input, tokens_output, cost, error_count`;
    const common = (where: string[], bindings: Knex.Value[]) => {
      where.push('project_id = ?');
      bindings.push(search.projectId);
      if (search.userId !== undefined) (where.push('user_id = ?'), bindings.push(search.userId));
      if (search.startTime) (where.push('last_end >= ?'), bindings.push(search.startTime));
      if (search.after) (where.push(`(last_end, ${key}) < (?, ?)`), bindings.push(search.after.lastEnd, search.after.id));
    };
    const order = `ORDER BY last_end DESC, ${key} DESC LIMIT ?`;
    if (table === 'telemetry_sessions' && search.endTime) {
      const activeWhere: string[] = [];
      const activeBindings: Knex.Value[] = [];
      common(activeWhere, activeBindings);
      activeWhere.push(`tstzrange(first_start, last_end, '[]') @> ?::timestamptz`, 'last_end > ?');
      activeBindings.push(search.endTime, search.endTime, search.limit);
      const endedWhere: string[] = [];
      const endedBindings: Knex.Value[] = [];
      common(endedWhere, endedBindings);
      endedWhere.push('last_end <= ?');
      endedBindings.push(search.endTime, search.limit);
      return this.db.raw(
        `SELECT * FROM (
           (SELECT ${columns} FROM ${table} WHERE ${activeWhere.join(' AND ')} ${order})
           UNION ALL
           (SELECT ${columns} FROM ${table} WHERE ${endedWhere.join(' AND ')} ${order})
         ) page ORDER BY last_end DESC, id DESC LIMIT ?`,
        [...activeBindings, ...endedBindings, search.limit],
      );
    }
    const where: string[] = [];
    const bindings: Knex.Value[] = [];
    common(where, bindings);
    if (search.endTime) (where.push('first_start <= ?'), bindings.push(search.endTime));
    bindings.push(search.limit);
    return this.db.raw(`SELECT ${columns} FROM ${table} WHERE ${where.join(' AND ')} ${order}`, bindings);
  }

  async searchSessions(search: GroupSearch): Promise<SessionSummary[]> {
    const result = await this.groupRows(search, 'telemetry_sessions', 'session_id', 'user_id,');
    return (result.rows as GroupRow[]).map((r) => ({ sessionId: r.id, userId: r.user_id ?? null, ...groupTotals(r) }));
  }

  async searchUsers(search: GroupSearch): Promise<UserSummary[]> {
    const result = await this.groupRows(search, 'telemetry_users', 'user_id', 'session_count,');
    return (result.rows as GroupRow[]).map((r) => ({ userId: r.id, sessionCount: Number(r.session_count), ...groupTotals(r) }));
  }

  async modelCallSpans(projectId: string, start: Date, end: Date): Promise<ModelCallSpan[]> {
    // A trace holding a span that starts in the range overlaps it: the (project_id, start_time) index bounds the scan.
    const rows = (await this.db('telemetry_traces')
      .select('trace_id', 'root_attributes', 'spans')
      .where('project_id', projectId)
      .andWhere('start_time', '<', end)
      .andWhere('end_time', '>=', start)
      .andWhere(this.db.raw('cardinality(models) > 0'))) as Array<{ trace_id: string; root_attributes: string; spans: string }>;
    const startMs = start.getTime();
    const endMs = end.getTime();
    const calls: ModelCallSpan[] = [];
    for (const row of rows) {
      const rootAttributes = JSON.parse(row.root_attributes) as Attributes;
      for (const span of parseSpans(row.spans)) {
        if (typeof span.attributes['llm.model'] !== 'string' || span.startMs < startMs || span.startMs >= endMs) continue;
        calls.push({ traceId: row.trace_id, spanId: span.spanId, startMs: span.startMs, endMs: span.endMs, attributes: span.attributes, rootAttributes });
      }
    }
    return calls;
  }

  async modelCallAggregates(q: ModelCallAggregateQuery): Promise<ModelCallAggregate[]> {
    const startMs = q.start.getTime();
    const endMs = q.end.getTime();
    // Span documents of both generations (migration 0070's keys and the one-letter ones before it).
    const filters: string[] = [];
    const bindings: Knex.Value[] = [];
    if (q.model !== undefined) (filters.push("x.a -> 'llm.model' = to_jsonb(?::text)"), bindings.push(q.model));
    if (q.vendor !== undefined) (filters.push("x.a -> 'llm.vendor' = to_jsonb(?::text)"), bindings.push(q.vendor));
    if (Object.keys(q.attributes).length > 0) (filters.push('x.a @> ?::jsonb'), bindings.push(JSON.stringify(q.attributes)));
    if (q.keys !== undefined) (filters.push('y.key = ANY(?::text[])'), bindings.push(q.keys as string[]));
    const value = q.property === null ? 'NULL::jsonb' : q.property === 'duration_ms' ? 'to_jsonb(x.et - x.st)' : 'x.a -> ?';
    const valueBindings = q.property !== null && q.property !== 'duration_ms' ? [q.property] : [];
    const bucket =
      q.interval === undefined
        ? 'NULL::bigint'
        : q.interval === 'month'
          ? "(extract(epoch FROM date_trunc('month', to_timestamp(x.st / 1000.0) AT TIME ZONE 'UTC')) * 1000)::bigint"
          : `(x.st / ${q.interval === 'hour' ? 3_600_000 : 86_400_000}) * ${q.interval === 'hour' ? 3_600_000 : 86_400_000}`;
    const latest = (column: string) => `(array_agg(${column} ORDER BY x.st DESC, y.id DESC) FILTER (WHERE y.num IS NOT NULL))[1]`;
    const { rows } = (await this.db.raw(
      `SELECT y.key, y.bucket, count(*) AS count, coalesce(sum(y.num), 0) AS sum, max(y.num) AS max,
         ${latest('x.st')} AS last_at, ${latest('y.id')} AS last_id, ${latest('y.num')} AS last_value,
         ${q.distinct ? "coalesce((array_agg(DISTINCT y.v) FILTER (WHERE y.v IS NOT NULL AND y.v <> 'null'::jsonb))::text[], '{}')" : "'{}'::text[]"} AS "values"
       FROM telemetry_traces t
       CROSS JOIN LATERAL jsonb_array_elements(t.spans::jsonb) s
       CROSS JOIN LATERAL (SELECT coalesce(s -> 'attributes', s -> 'a') AS a, coalesce(s -> 'start_ms', s -> 'st')::bigint AS st,
         coalesce(s -> 'end_ms', s -> 'et')::bigint AS et, coalesce(s ->> 'span_id', s ->> 's') AS span_id) x
       CROSS JOIN LATERAL (SELECT CASE WHEN coalesce(x.a -> ?, 'null'::jsonb) <> 'null'::jsonb THEN x.a -> ? ELSE t.root_attributes::jsonb -> ? END AS ref) r
       CROSS JOIN LATERAL (SELECT
         CASE jsonb_typeof(r.ref) WHEN 'string' THEN nullif(r.ref #>> '{}', '') WHEN 'number' THEN (r.ref #>> '{}')::float8::text END AS key,
         ${bucket} AS bucket, (t.trace_id || ':' || x.span_id) COLLATE "C" AS id, ${value} AS v) y0
       CROSS JOIN LATERAL (SELECT y0.key, y0.bucket, y0.id, y0.v, CASE WHEN jsonb_typeof(y0.v) = 'number' THEN (y0.v #>> '{}')::numeric END AS num) y
       WHERE t.project_id = ? AND t.start_time < ? AND t.end_time >= ? AND cardinality(t.models) > 0
         -- A trace ending at or after start began at most the project's longest trace before it:
         -- the lower bound keeps the (project_id, start_time) scan to the range (not every older trace).
         AND t.start_time >= ?::timestamptz - (SELECT coalesce(max(d.duration_ms), 0) FROM telemetry_traces d WHERE d.project_id = ?) * interval '1 millisecond'
         AND jsonb_typeof(x.a -> 'llm.model') = 'string' AND x.st >= ? AND x.st < ? AND y.key IS NOT NULL
         ${filters.map((f) => `AND ${f}`).join(' ')}
       GROUP BY y.key, y.bucket`,
      [
        q.groupAttribute,
        q.groupAttribute,
        q.groupAttribute,
        ...valueBindings,
        q.projectId,
        q.end,
        q.start,
        q.start,
        q.projectId,
        startMs,
        endMs,
        ...bindings,
      ],
    )) as {
      rows: Array<{ key: string; bucket: string | number | null; count: string | number; sum: string | number; max: string | number | null; last_at: string | number | null; last_id: string | null; last_value: string | number | null; values: string[] }>;
    };
    return rows.map((r) => ({
      key: r.key,
      bucket: r.bucket === null ? null : Number(r.bucket),
      count: Number(r.count),
      sum: Number(r.sum),
      max: r.max === null ? null : Number(r.max),
      last: r.last_at === null ? null : { at: Number(r.last_at), id: r.last_id!, value: Number(r.last_value) },
      values: r.values,
    }));
  }

  async findTrace(projectId: string, traceId: string) {
    // Through the id table, which holds the trace's partition key: one partition is read (run-time pruning).
    const result = await this.db.raw(
      `SELECT t.* FROM telemetry_trace_ids i
        CROSS JOIN LATERAL (SELECT ${TRACE_COLUMNS}, spans FROM telemetry_traces
                             WHERE project_id = i.project_id AND trace_id = i.trace_id AND partition_start = i.partition_start OFFSET 0) t
        WHERE i.project_id = ? AND i.trace_id = ?`,
      [projectId, traceId],
    );
    const row = (result.rows as Array<TraceRow & { spans: string }>)[0];
    if (!row) return undefined;
    return { trace: toTrace(row), spans: parseSpans(row.spans) };
  }
}

export class KnexTraceWriter implements TraceWriter {
  constructor(
    private readonly trx: Knex.Transaction,
    /** Whether COPY FROM STDIN is available (node-postgres, not PGlite). */
    private readonly copy: boolean,
    /** Creates the weekly partitions new traces need (src/db/partitions.ts), relative to `now`. */
    private readonly partitions?: { ensurer: PartitionEnsurer; now: Date },
  ) {}

  /**
   * Claims the new traces' ids in telemetry_trace_ids (the identity across partitions, migration
   * 0390), with each trace's partition key: its start as first stored. Another transaction holding
   * one of the ids makes this one wait for it, then fail (ConcurrentInsertError): the retried batch
   * finds the trace stored.
   */
  private async claimIds(projectId: string, fresh: TraceWrite[]): Promise<void> {
    if (this.copy) {
      try {
        await copyIn(
          this.trx,
          'COPY telemetry_trace_ids (project_id, trace_id, partition_start) FROM STDIN',
          fresh.map((t) => `${projectId}\t${t.traceId}\t${iso(t.startMs)}\n`),
        );
      } catch (err) {
        if ((err as { code?: string }).code === '23505') throw new ConcurrentInsertError();
        throw err;
      }
      return;
    }
    const result = await this.trx.raw(
      `INSERT INTO telemetry_trace_ids (project_id, trace_id, partition_start)
       SELECT ?, x.id, x.s FROM json_to_recordset(?::json) AS x(id text, s timestamptz) ORDER BY x.id
       ON CONFLICT DO NOTHING RETURNING trace_id`,
      [projectId, JSON.stringify(fresh.map((t) => ({ id: t.traceId, s: iso(t.startMs) })))],
    );
    if (result.rows.length !== fresh.length) throw new ConcurrentInsertError();
  }

  async claimTraces(projectId: string, traces: TraceWrite[], now: Date, options: { optimistic?: boolean } = {}) {
    // The weeks' partitions first, before this transaction reads or locks any trace: creating one
    // (ATTACH) waits for the transactions holding a lock on the default partition, and a lookup
    // (lockTraces) locks every partition; the other order deadlocked two first batches of one
    // trace on PostgreSQL (test/telemetry/trace-partitions.test.ts, 1 round in 8 before the fix).
    if (this.partitions) {
      await this.partitions.ensurer.ensure(
        this.trx,
        'telemetry_traces',
        traces.map((t) => t.startMs),
        this.partitions.now,
      );
    }
    const existing = options.optimistic && this.copy ? new Map<string, LockedTrace>() : await this.lockTraces(projectId, traces.map((t) => t.traceId));
    const fresh = traces.filter((t) => !existing.has(t.traceId));
    if (fresh.length === 0) return { inserted: new Set<string>(), existing };
    await this.claimIds(projectId, fresh);
    if (this.copy) {
      const at = now.toISOString();
      const lines = fresh.map(
        (t) =>
          `${projectId}\t${t.traceId}\t${iso(t.startMs)}\t${iso(t.endMs)}\t${t.endMs - t.startMs}\t${t.spanCount}\t` +
          `${copyText(t.rootName)}\t${copyText(JSON.stringify(t.rootAttributes))}\t${copyText(t.model)}\t` +
          `${copyText(textArray(t.models))}\t${t.tokensInput}\t${t.tokensOutput}\t${t.cost}\t${t.hasError ? 't' : 'f'}\t` +
          `${copyText(spansJson(t.spans))}\t${at}\t${at}\t${copyText(t.sessionId)}\t${copyText(t.userId)}\t${copyText(textArray(t.attributePairs))}\t${iso(t.startMs)}\n`,
      );
      await copyIn(
        this.trx,
        `COPY telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name,
           root_attributes, model, models, tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at,
           session_id, user_id, attribute_pairs, partition_start)
         FROM STDIN`,
        lines,
      );
      return { inserted: new Set(fresh.map((t) => t.traceId)), existing };
    }
    const result = await this.trx.raw(
      `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name,
                                     root_attributes, model, models, tokens_input, tokens_output, cost, has_error,
                                     spans, created_at, updated_at, session_id, user_id, attribute_pairs, partition_start)
       SELECT ?, x.id, x.s, x.e, x.d, x.c, x.rn, x.ra, x.m, x.ms, x.ti, x."to", x.cost, x.err, x.sp, ?, ?, x.sid, x.uid, x.ap, x.s
         FROM json_to_recordset(?::json) AS x(id text, s timestamptz, e timestamptz, d bigint, c int, rn text, ra text,
                                              m text, ms text[], ti bigint, "to" bigint, cost float8, err boolean, sp text,
                                              sid text, uid text, ap text[])
        ORDER BY x.id
       RETURNING trace_id`,
      [projectId, now, now, traceJson(fresh)],
    );
    const inserted = new Set((result.rows as Array<{ trace_id: string }>).map((r) => r.trace_id));
    return { inserted, existing };
  }

  private async lockTraces(projectId: string, traceIds: string[]): Promise<Map<string, LockedTrace>> {
    if (traceIds.length === 0) return new Map();
    // Each trace's partition key from the id table, then its row in that one partition (run-time
    // pruning per trace), locked in trace-id order.
    const result = await this.trx.raw(
      `SELECT t.* FROM (SELECT project_id, trace_id, partition_start FROM telemetry_trace_ids
                         WHERE project_id = ? AND trace_id = ANY(?::text[]) ORDER BY trace_id) i
        CROSS JOIN LATERAL (SELECT trace_id, spans, session_id, user_id, start_time, end_time, tokens_input, tokens_output, cost, has_error
                              FROM telemetry_traces
                             WHERE project_id = i.project_id AND trace_id = i.trace_id AND partition_start = i.partition_start
                               FOR UPDATE) t`,
      [projectId, idArray(traceIds)],
    );
    return new Map(
      (result.rows as Array<GroupSourceRow & { trace_id: string; spans: string }>).map((r) => [r.trace_id, { spans: parseSpans(r.spans), summary: toContribution(r) }]),
    );
  }

  async updateGroups(projectId: string, changes: TraceChange[], now: Date): Promise<void> {
    await enqueueTraceChanges(this.trx, projectId, changes, now);
  }

  async updateTraces(projectId: string, traces: TraceWrite[], now: Date): Promise<void> {
    if (traces.length === 0) return;
    await this.trx.raw(
      // Rows are found one by one through the id table's key and partition key (LATERAL … OFFSET 0:
      // one partition's index per trace), then updated by (tableoid, ctid) — a ctid names a row only
      // within its partition: the plan stays a lookup per trace even when statistics are stale.
      `UPDATE telemetry_traces t SET
          start_time = x.s, end_time = x.e, duration_ms = x.d, span_count = x.c, root_name = x.rn,
          root_attributes = x.ra, model = x.m, models = x.ms, tokens_input = x.ti, tokens_output = x."to",
          cost = x.cost, has_error = x.err, spans = x.sp, updated_at = ?,
          session_id = x.sid, user_id = x.uid, attribute_pairs = x.ap
         FROM (SELECT x.*, r.toid AS row_tableoid, r.tid AS row_ctid
                 FROM json_to_recordset(?::json) AS x(id text, s timestamptz, e timestamptz, d bigint, c int, rn text,
                                                      ra text, m text, ms text[], ti bigint, "to" bigint, cost float8,
                                                      err boolean, sp text, sid text, uid text, ap text[])
                CROSS JOIN LATERAL (SELECT tr.tableoid AS toid, tr.ctid AS tid FROM telemetry_trace_ids i
                                     CROSS JOIN LATERAL (SELECT tableoid, ctid FROM telemetry_traces
                                                          WHERE project_id = i.project_id AND trace_id = i.trace_id
                                                            AND partition_start = i.partition_start OFFSET 0) tr
                                     WHERE i.project_id = ? AND i.trace_id = x.id OFFSET 0) r) x
        WHERE t.tableoid = x.row_tableoid AND t.ctid = x.row_ctid`,
      [now, traceJson(traces), projectId],
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
