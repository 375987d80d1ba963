/** Trace search (keyset pagination) and trace detail, within the key's project. */
import { notFound, validationError } from '../kernel/errors.js';
import type { SpanMeterHourAggregate, SpanMeterHoursQuery, SpanMeterRollups } from './span-meters.repository.js';
import type { ModelCallAggregate, ModelCallAggregateQuery, ModelCallSpan, SessionSummary, StoredSpan, StoredTrace, TraceRepository, TraceSort, UserSummary } from './traces.repository.js';

export interface TraceQuery {
  limit?: number;
  cursor?: string;
  start_time?: string;
  end_time?: string;
  model?: string;
  min_latency_ms?: number;
  min_cost?: number;
  status?: 'ok' | 'error';
  trace_id?: string;
  attribute_key?: string;
  attribute_value?: string;
  session_id?: string;
  user_id?: string;
  sort?: TraceSort;
}

export interface GroupQuery {
  limit?: number;
  cursor?: string;
  start_time?: string;
  end_time?: string;
  user_id?: string;
}

const DEFAULT_LIMIT = 50;
const TRACE_ID = /^[0-9a-f]{32}$/;
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const invalidCursor = () => validationError('cursor is malformed; pass pagination.next_cursor unchanged', { field: 'cursor' });

function parseCursor(cursor: string): Record<string, unknown> {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalidCursor();
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw invalidCursor();
    return parsed as Record<string, unknown>;
  } catch {
    throw invalidCursor();
  }
}

const cursorTime = (t: unknown): Date => {
  if (typeof t !== 'string' || !CURSOR_TIME.test(t)) throw invalidCursor();
  const time = new Date(t);
  if (Number.isNaN(time.getTime()) || time.toISOString() !== t) throw invalidCursor();
  return time;
};

const sortValue = (trace: StoredTrace, sort: TraceSort): string | number => {
  const column = sort.replace(/^-/, '');
  return column === 'start_time' ? trace.startTime.toISOString() : column === 'duration_ms' ? trace.durationMs : trace.cost;
};

/**
 * Opaque to clients: base64url of {"t": last start_time, "id": last trace_id} under the default
 * order (the format of earlier releases), else {"s": sort, "v": last sort value, "id": …}.
 */
export function encodeCursor(trace: StoredTrace, sort: TraceSort = '-start_time'): string {
  const body = sort === '-start_time' ? { t: trace.startTime.toISOString(), id: trace.traceId } : { s: sort, v: sortValue(trace, sort), id: trace.traceId };
  return Buffer.from(JSON.stringify(body)).toString('base64url');
}

/** The keyset position of a cursor made for `sort`; a cursor of another order is malformed. */
export function decodeCursor(cursor: string, sort: TraceSort = '-start_time'): { value: Date | number; traceId: string } {
  const p = parseCursor(cursor);
  if (typeof p.id !== 'string' || !TRACE_ID.test(p.id)) throw invalidCursor();
  if (sort === '-start_time') {
    if (Object.keys(p).length !== 2) throw invalidCursor();
    return { value: cursorTime(p.t), traceId: p.id };
  }
  if (Object.keys(p).length !== 3 || p.s !== sort) throw invalidCursor();
  if (sort.endsWith('start_time')) return { value: cursorTime(p.v), traceId: p.id };
  if (typeof p.v !== 'number' || !Number.isFinite(p.v) || p.v < 0) throw invalidCursor();
  return { value: p.v, traceId: p.id };
}

function encodeGroupCursor(lastEnd: Date, id: string): string {
  return Buffer.from(JSON.stringify({ e: lastEnd.toISOString(), id })).toString('base64url');
}

function decodeGroupCursor(cursor: string): { lastEnd: Date; id: string } {
  const p = parseCursor(cursor);
  if (Object.keys(p).length !== 2 || typeof p.id !== 'string' || p.id.length === 0 || p.id.length > 256) throw invalidCursor();
  return { lastEnd: cursorTime(p.e), id: p.id };
}

function range(query: { start_time?: string; end_time?: string }): { startTime?: Date; endTime?: Date } {
  const startTime = query.start_time !== undefined ? new Date(query.start_time) : undefined;
  const endTime = query.end_time !== undefined ? new Date(query.end_time) : undefined;
  if (startTime && endTime && endTime.getTime() <= startTime.getTime()) {
    throw validationError('end_time must be after start_time', { field: 'end_time' });
  }
  return { startTime, endTime };
}

export class TraceService {
  constructor(
    private readonly traces: TraceRepository,
    private readonly spanMeters?: SpanMeterRollups,
  ) {}

  /** A span meter's rollup rows over whole hours, per key (and bucket): usage meters (migration 0381). */
  spanMeterHours(query: SpanMeterHoursQuery): Promise<SpanMeterHourAggregate[]> {
    if (!this.spanMeters) throw new Error('span meter rollups are not wired');
    return this.spanMeters.hours(query);
  }

  /** One chunk of a span meter's background rollup build (see KnexSpanMeterRollups.buildChunk). */
  buildSpanMeterChunk(orgId: string, meterId: string, chunkTraces: number, beforeCommit?: () => Promise<void>): Promise<'none' | 'chunk' | 'ready'> {
    if (!this.spanMeters) throw new Error('span meter rollups are not wired');
    return this.spanMeters.buildChunk(orgId, meterId, chunkTraces, beforeCommit);
  }

  /** The project's model-call spans starting in [start, end): what other modules (usage meters) read of telemetry. */
  modelCallSpans(projectId: string, start: Date, end: Date): Promise<ModelCallSpan[]> {
    return this.traces.modelCallSpans(projectId, start, end);
  }

  /** Aggregates of the project's model-call spans, per group key and bucket, computed by the database (usage meters). */
  modelCallAggregates(query: ModelCallAggregateQuery): Promise<ModelCallAggregate[]> {
    return this.traces.modelCallAggregates(query);
  }

  async search(projectId: string, query: TraceQuery): Promise<{ traces: StoredTrace[]; hasMore: boolean; nextCursor: string | null; limit: number }> {
    const limit = query.limit ?? DEFAULT_LIMIT;
    const sort = query.sort ?? '-start_time';
    if ((query.attribute_key === undefined) !== (query.attribute_value === undefined)) {
      const missing = query.attribute_key === undefined ? 'attribute_key' : 'attribute_value';
      throw validationError('attribute_key and attribute_value go together', { field: missing });
    }
    const rows = await this.traces.searchTraces({
      projectId,
      limit: limit + 1,
      sort,
      after: query.cursor !== undefined ? decodeCursor(query.cursor, sort) : undefined,
      ...range(query),
      model: query.model,
      minLatencyMs: query.min_latency_ms,
      minCost: query.min_cost,
      status: query.status,
      traceId: query.trace_id,
      attributePair: query.attribute_key !== undefined ? `${query.attribute_key}=${query.attribute_value}` : undefined,
      sessionId: query.session_id,
      userId: query.user_id,
    });
    const hasMore = rows.length > limit;
    const traces = hasMore ? rows.slice(0, limit) : rows;
    return { traces, hasMore, nextCursor: hasMore ? encodeCursor(traces[traces.length - 1]!, sort) : null, limit };
  }

  /** Sessions (traces sharing `session.id`) with their totals, newest activity first. */
  async sessions(projectId: string, query: GroupQuery): Promise<{ sessions: SessionSummary[]; hasMore: boolean; nextCursor: string | null; limit: number }> {
    const limit = query.limit ?? DEFAULT_LIMIT;
    const rows = await this.traces.searchSessions({
      projectId,
      limit: limit + 1,
      ...range(query),
      userId: query.user_id,
      after: query.cursor !== undefined ? decodeGroupCursor(query.cursor) : undefined,
    });
    const hasMore = rows.length > limit;
    const sessions = hasMore ? rows.slice(0, limit) : rows;
    const last = sessions[sessions.length - 1];
    return { sessions, hasMore, nextCursor: hasMore && last ? encodeGroupCursor(last.lastEnd, last.sessionId) : null, limit };
  }

  /** End users (`user.id` / `enduser.id`) with their totals, newest activity first. */
  async users(projectId: string, query: GroupQuery): Promise<{ users: UserSummary[]; hasMore: boolean; nextCursor: string | null; limit: number }> {
    const limit = query.limit ?? DEFAULT_LIMIT;
    const rows = await this.traces.searchUsers({
      projectId,
      limit: limit + 1,
      ...range(query),
      userId: query.user_id,
      after: query.cursor !== undefined ? decodeGroupCursor(query.cursor) : undefined,
    });
    const hasMore = rows.length > limit;
    const users = hasMore ? rows.slice(0, limit) : rows;
    const last = users[users.length - 1];
    return { users, hasMore, nextCursor: hasMore && last ? encodeGroupCursor(last.lastEnd, last.userId) : null, limit };
  }

  /** The trace with its spans ordered by start time, then span id. */
  async get(projectId: string, traceId: string): Promise<{ trace: StoredTrace; spans: StoredSpan[] }> {
    const found = await this.traces.findTrace(projectId, traceId);
    if (!found || found.spans.length === 0) throw notFound('Trace');
    const order = (a: StoredSpan, b: StoredSpan) => a.startMs - b.startMs || (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0);
    // Stored documents are mostly in order already: a linear check spares the sort.
    let sorted = true;
    for (let i = 1; i < found.spans.length && sorted; i++) sorted = order(found.spans[i - 1]!, found.spans[i]!) <= 0;
    if (!sorted) found.spans.sort(order);
    return found;
  }
}
