/** The traces page's filters: what the URL holds, the query sent for it, and what sits behind "More filters". Pure. */
import type { paths } from '../../../../../generated/console.js';

type TraceQuery = NonNullable<paths['/v1/console/telemetry-projects/{project_id}/traces']['get']['parameters']['query']>;

export type TraceFilters = Partial<Record<(typeof TRACE_FILTER_KEYS)[number], string>>;

export const TRACE_FILTER_KEYS = ['range', 'status', 'model', 'min_latency_ms', 'min_cost', 'attribute_key', 'attribute_value', 'trace_id', 'session_id', 'user_id', 'sort', 'cursor', 'start_time', 'end_time'] as const;
const RANGES: Record<string, number> = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 };

export function tracesQuery(filters: TraceFilters, now: number): TraceQuery {
  const q: TraceQuery = { limit: 50 };
  if (filters.start_time) q.start_time = filters.start_time;
  else q.start_time = new Date(now - (RANGES[filters.range ?? '24h'] ?? RANGES['24h']!)).toISOString();
  if (filters.end_time) q.end_time = filters.end_time;
  if (filters.status === 'ok' || filters.status === 'error') q.status = filters.status;
  if (filters.model) q.model = filters.model;
  if (filters.min_latency_ms && /^\d+$/.test(filters.min_latency_ms)) q.min_latency_ms = Number(filters.min_latency_ms);
  if (filters.min_cost && Number.isFinite(Number(filters.min_cost))) q.min_cost = Number(filters.min_cost);
  if (filters.attribute_key && filters.attribute_value !== undefined) {
    q.attribute_key = filters.attribute_key;
    q.attribute_value = filters.attribute_value;
  }
  if (filters.trace_id) q.trace_id = filters.trace_id;
  if (filters.session_id) q.session_id = filters.session_id;
  if (filters.user_id) q.user_id = filters.user_id;
  if (filters.sort) q.sort = filters.sort as TraceQuery['sort'];
  if (filters.cursor) q.cursor = filters.cursor;
  return q;
}

/** Filters behind "More filters": the first screen at 390 px keeps room for the traces. */
export const MORE_FILTER_KEYS = ['min_latency_ms', 'min_cost', 'attribute_key', 'attribute_value', 'trace_id', 'session_id', 'user_id'] as const;

/** How many of the filters behind "More filters" are set (an attribute and its value count once). */
export function moreFiltersSet(filters: TraceFilters): number {
  const set = (key: (typeof MORE_FILTER_KEYS)[number]) => (filters[key] ?? '').trim() !== '';
  return MORE_FILTER_KEYS.filter((key) => key !== 'attribute_value' && (set(key) || (key === 'attribute_key' && set('attribute_value')))).length;
}
