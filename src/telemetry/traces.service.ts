/** Trace search (keyset pagination) and trace detail, within the key's project. */
import { notFound, validationError } from '../kernel/errors.js';
import type { StoredSpan, StoredTrace, TraceRepository } from './traces.repository.js';

export interface TraceQuery {
  limit?: number;
  cursor?: string;
  start_time?: string;
  end_time?: string;
  model?: string;
  min_latency_ms?: number;
  min_cost?: number;
  status?: 'ok' | 'error';
}

const DEFAULT_LIMIT = 50;
const TRACE_ID = /^[0-9a-f]{32}$/;
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Opaque to clients: base64url of {"t": last start_time, "id": last trace_id}. */
export function encodeCursor(trace: StoredTrace): string {
  return Buffer.from(JSON.stringify({ t: trace.startTime.toISOString(), id: trace.traceId })).toString('base64url');
}

export function decodeCursor(cursor: string): { startTime: Date; traceId: string } {
  const invalid = () => validationError('cursor is malformed; pass pagination.next_cursor unchanged', { field: 'cursor' });
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  const p = parsed as { t?: unknown; id?: unknown };
  if (!p || typeof p !== 'object' || Object.keys(p).length !== 2 || typeof p.t !== 'string' || typeof p.id !== 'string') throw invalid();
  if (!CURSOR_TIME.test(p.t) || !TRACE_ID.test(p.id)) throw invalid();
  const startTime = new Date(p.t);
  if (Number.isNaN(startTime.getTime()) || startTime.toISOString() !== p.t) throw invalid();
  return { startTime, traceId: p.id };
}

export class TraceService {
  constructor(private readonly traces: TraceRepository) {}

  async search(projectId: string, query: TraceQuery): Promise<{ traces: StoredTrace[]; hasMore: boolean; nextCursor: string | null; limit: number }> {
    const limit = query.limit ?? DEFAULT_LIMIT;
    const startTime = query.start_time !== undefined ? new Date(query.start_time) : undefined;
    const endTime = query.end_time !== undefined ? new Date(query.end_time) : undefined;
    if (startTime && endTime && endTime.getTime() <= startTime.getTime()) {
      throw validationError('end_time must be after start_time', { field: 'end_time' });
    }
    const rows = await this.traces.searchTraces({
      projectId,
      limit: limit + 1,
      after: query.cursor !== undefined ? decodeCursor(query.cursor) : undefined,
      startTime,
      endTime,
      model: query.model,
      minLatencyMs: query.min_latency_ms,
      minCost: query.min_cost,
      status: query.status,
    });
    const hasMore = rows.length > limit;
    const traces = hasMore ? rows.slice(0, limit) : rows;
    return { traces, hasMore, nextCursor: hasMore ? encodeCursor(traces[traces.length - 1]!) : null, limit };
  }

  /** The trace with its spans ordered by start time, then span id. */
  async get(projectId: string, traceId: string): Promise<{ trace: StoredTrace; spans: StoredSpan[] }> {
    const found = await this.traces.findTrace(projectId, traceId);
    if (!found || found.spans.length === 0) throw notFound('Trace');
    found.spans.sort((a, b) => a.startMs - b.startMs || (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0));
    return found;
  }
}
