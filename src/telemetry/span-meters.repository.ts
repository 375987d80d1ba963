/**
 * Span meter rollups (migration 0381): the hourly rows of the usage meters whose source is a
 * project's model-call spans, and their points (0391: one row per matched span, for the partial
 * hours at a range's edges), kept by ingest and built in the background. Telemetry owns the spans, so it owns these rows; it reads the meter definitions
 * (filter, aggregation, property, customer attribute) from `meters` inside its own transactions,
 * as usage-event ingest does, so no span falls between a meter's creation and its build.
 *
 * Rules (the same as the raw read, TraceRepository.modelCallAggregates):
 * - a span counts when it is a model call (`llm.model` is a string), matches the meter's filter,
 *   and its key — the customer attribute on the span, else on its trace's root span (a non-empty
 *   string, or a number as float8 text) — is present;
 * - cell = (meter, key, UTC hour of the span's start).
 *
 * Ingest (apply): new traces add their cells' aggregates (counts and sums add, maxima and the
 * latest (start, "trace:span") win, distinct values are inserted). A stored trace that gets more
 * spans may change what it contributed (a re-sent span replaces its old version, a new root span
 * may carry the customer attribute), and max/last cannot be subtracted: when the trace already
 * contributed, every cell it touched before or touches now is recomputed from the raw spans.
 * Both paths take a transaction-scoped advisory lock per cell (sorted, one statement) before
 * reading the raw spans, so a recompute sees every committed contribution and a concurrent add
 * waits for it (no double count, no loss).
 *
 * The project's meter lock: ingest holds it shared for its transaction, a build chunk exclusively
 * (as usage-event ingest and its rollup build do with the organization's lock).
 */
import type { Knex } from 'knex';

type Db = Knex | Knex.Transaction;

const HOUR_MS = 3_600_000;
/** The project's span-meter lock (shared by ingest, exclusive for a build chunk). */
const PROJECT_LOCK = (projectId: string) => `span-meters:${projectId}`;
const CELL_LOCK = (c: Cell) => `span-meter-cell:${c.meterId}|${c.key}|${c.hour}`;

export interface Cell {
  meterId: string;
  key: string;
  hour: number;
}
const cellId = (c: Cell) => `${c.meterId}|${c.key}|${c.hour}`;

interface CellRow {
  meter_id: string;
  key: string;
  hour: string | number;
  spans: string | number;
  total: string | number;
  maximum: string | number | null;
  last_at: string | number | null;
  last_id: string | null;
  last_value: string | number | null;
  vals: string[] | null;
}

/**
 * A span meter build's cursor (meters.rollup_cursor, text): '' = nothing built yet; `hour` = the
 * hours before it are built, none after; `hour|start|traceId` = besides, inside that hour the spans
 * of the traces up to that position (start_time, trace_id) are built, the later traces' not yet
 * (a chunk stops after a number of traces, mid-hour if need be).
 */
interface BuildCursor {
  hour: number | null;
  after: { at: Date; traceId: string } | null;
}

function parseCursor(text: string | null): BuildCursor {
  if (!text) return { hour: null, after: null };
  const first = text.indexOf('|');
  if (first < 0) return { hour: Number(text), after: null };
  const second = text.indexOf('|', first + 1);
  return { hour: Number(text.slice(0, first)), after: { at: new Date(text.slice(first + 1, second)), traceId: text.slice(second + 1) } };
}

const formatCursor = (hour: number, at: Date, traceId: string) => `${hour}|${at.toISOString()}|${traceId}`;

/**
 * For a BUILDING meter whose cursor stops inside an hour: that hour and the position built to
 * (columns b.hour, b.at, b.trace_id; NULL otherwise). Ingest leaves out the spans of that hour
 * from traces after the position: the build adds them when it gets there (see buildChunk).
 */
const BUILD_POSITION = `CROSS JOIN LATERAL (SELECT
      CASE WHEN m.rollup_status = 'BUILDING' AND strpos(m.rollup_cursor, '|') > 0 THEN split_part(m.rollup_cursor, '|', 1)::bigint END AS hour,
      CASE WHEN m.rollup_status = 'BUILDING' AND strpos(m.rollup_cursor, '|') > 0 THEN split_part(m.rollup_cursor, '|', 2)::timestamptz END AS at,
      CASE WHEN m.rollup_status = 'BUILDING' AND strpos(m.rollup_cursor, '|') > 0 THEN regexp_replace(m.rollup_cursor, '^[^|]*[|][^|]*[|]', '') END COLLATE "C" AS trace_id) b`;
const NOT_YET_BUILT = 'NOT coalesce(y.hour = b.hour AND (t.start_time, t.trace_id) > (b.at, b.trace_id), false)';

/**
 * The matched model-call spans of the traces `traces` selects (a condition on alias t, besides
 * the project) for the meters `meters` selects (a condition on alias m), the spans `spans`
 * selects (a condition on x.st and t): columns meter_id, aggregation, key, hour, st, id, v, num.
 * Bindings in text order: those of `traces`, then `meters`, then `spans`. Ingest's reads leave
 * out what a build under way has still to add (`ingest`, BUILD_POSITION); the build's do not.
 */
function matchedSpans(meters: string, traces: string, spans = 'true', ingest = true): string {
  return `SELECT m.id AS meter_id, m.aggregation, y.key, y.hour, x.st, y.id, y.v, y.num
    FROM meters m
    ${ingest ? BUILD_POSITION : ''}
    JOIN telemetry_traces t ON t.project_id = m.filter ->> 'projectId' AND cardinality(t.models) > 0 AND ${traces}
    CROSS JOIN LATERAL jsonb_array_elements(t.spans::jsonb) s
    CROSS JOIN LATERAL (SELECT coalesce(s -> 'attributes', s -> 'a') AS a, coalesce(s -> 'start_ms', s -> 'st')::bigint AS st,
      coalesce(s -> 'end_ms', s -> 'et')::bigint AS et, coalesce(s ->> 'span_id', s ->> 's') AS span_id) x
    CROSS JOIN LATERAL (SELECT CASE WHEN coalesce(x.a -> m.customer_attribute, 'null'::jsonb) <> 'null'::jsonb THEN x.a -> m.customer_attribute
      ELSE t.root_attributes::jsonb -> m.customer_attribute END AS ref) r
    CROSS JOIN LATERAL (SELECT
      CASE jsonb_typeof(r.ref) WHEN 'string' THEN nullif(r.ref #>> '{}', '') WHEN 'number' THEN (r.ref #>> '{}')::float8::text END AS key,
      (x.st / ${HOUR_MS}) * ${HOUR_MS} AS hour, (t.trace_id || ':' || x.span_id) COLLATE "C" AS id,
      CASE WHEN m.property IS NULL THEN NULL::jsonb WHEN m.property = 'duration_ms' THEN to_jsonb(x.et - x.st) ELSE x.a -> m.property END AS v) y0
    CROSS JOIN LATERAL (SELECT y0.key, y0.hour, y0.id, y0.v, CASE WHEN jsonb_typeof(y0.v) = 'number' THEN (y0.v #>> '{}')::numeric END AS num) y
    WHERE m.source = 'SPANS' AND ${meters}
      AND jsonb_typeof(x.a -> 'llm.model') = 'string' AND y.key IS NOT NULL
      AND ((m.filter -> 'model') IS NULL OR x.a -> 'llm.model' = m.filter -> 'model')
      AND ((m.filter -> 'vendor') IS NULL OR x.a -> 'llm.vendor' = m.filter -> 'vendor')
      AND x.a @> coalesce(m.filter -> 'attributes', '{}'::jsonb) AND ${spans}${ingest ? ` AND ${NOT_YET_BUILT}` : ''}`;
}

/** Per cell: the rollup row's aggregates and, for `unique` meters, the distinct values (JSON texts). */
function cellAggregates(matched: string): string {
  const latest = (column: string) => `(array_agg(${column} ORDER BY st DESC, id DESC) FILTER (WHERE num IS NOT NULL))[1]`;
  return `SELECT meter_id, key, hour, count(*) AS spans, coalesce(sum(num), 0) AS total, max(num) AS maximum,
      ${latest('st')} AS last_at, ${latest('id')} AS last_id, ${latest('num')} AS last_value,
      (array_agg(DISTINCT v) FILTER (WHERE aggregation = 'unique' AND v IS NOT NULL AND v <> 'null'::jsonb))::text[] AS vals
    FROM (${matched}) matched
    GROUP BY meter_id, key, hour`;
}

const HOURS_COLUMNS = 'meter_id, key, hour_ms, spans, total, maximum, last_at, last_id, last_value';
const MERGE_HOURS = `ON CONFLICT (meter_id, key, hour_ms) DO UPDATE SET
  spans = h.spans + excluded.spans,
  total = h.total + excluded.total,
  maximum = greatest(h.maximum, excluded.maximum),
  last_at = CASE WHEN excluded.last_at IS NOT NULL AND (h.last_at IS NULL OR (excluded.last_at, excluded.last_id) > (h.last_at, h.last_id)) THEN excluded.last_at ELSE h.last_at END,
  last_id = CASE WHEN excluded.last_at IS NOT NULL AND (h.last_at IS NULL OR (excluded.last_at, excluded.last_id) > (h.last_at, h.last_id)) THEN excluded.last_id ELSE h.last_id END,
  last_value = CASE WHEN excluded.last_at IS NOT NULL AND (h.last_at IS NULL OR (excluded.last_at, excluded.last_id) > (h.last_at, h.last_id)) THEN excluded.last_value ELSE h.last_value END`;

/**
 * Writes cell rows (from cellAggregates) given as JSON: merged into existing rows (`merge`) or as
 * fresh rows; and, in the same statement, the cells' points (migration 0391): the rows `points`
 * selects (columns meter_id, key, st, id, v; its bindings follow the payload's).
 */
async function writeCells(db: Db, rows: CellRow[], merge: boolean, points?: { sql: string; bindings: Knex.Value[] }): Promise<void> {
  if (rows.length === 0) return;
  rows.sort((a, b) => (cellId({ meterId: a.meter_id, key: a.key, hour: Number(a.hour) }) < cellId({ meterId: b.meter_id, key: b.key, hour: Number(b.hour) }) ? -1 : 1));
  const payload = JSON.stringify(rows.map((r) => ({ ...r, hour: Number(r.hour), vals: r.vals ?? [] })));
  await db.raw(
    `WITH r AS (
       SELECT * FROM jsonb_to_recordset(?::jsonb) AS r(meter_id text, key text, hour bigint, spans bigint, total numeric, maximum numeric,
         last_at bigint, last_id text, last_value numeric, vals text[])
     ), hours AS (
       INSERT INTO span_meter_hours AS h (${HOURS_COLUMNS})
       SELECT meter_id, key, hour, spans, total, maximum, last_at, last_id, last_value FROM r
       ${merge ? MERGE_HOURS : ''}
     )
${points ? `, points AS (INSERT INTO span_meter_points (${POINTS_COLUMNS}) SELECT meter_id, key, st, id, v FROM (${points.sql}) p)` : ''}
     INSERT INTO span_meter_hour_values (meter_id, key, hour_ms, value)
     SELECT DISTINCT r.meter_id, r.key, r.hour, v::jsonb FROM r CROSS JOIN LATERAL unnest(r.vals) v
     ON CONFLICT DO NOTHING`,
    [payload, ...(points?.bindings ?? [])],
  );
}

const POINTS_COLUMNS = 'meter_id, key, st, id, v';

const toCell = (r: { meter_id: string; key: string; hour: string | number }): Cell => ({ meterId: r.meter_id, key: r.key, hour: Number(r.hour) });

/** The span meter rollup writes of one ingest transaction (see the file's comment). */
export interface SpanMeterWriter {
  /**
   * The project's meter lock, shared, taken before the batch's traces are read or written; then
   * whether the project has an ACTIVE span meter (read after the lock: a meter whose build ran
   * before it is seen).
   */
  lockShared(projectId: string): Promise<boolean>;
  cellsOf(projectId: string, traceIds: string[]): Promise<Map<string, Cell[]>>;
  apply(projectId: string, added: string[], changed: string[], before: Cell[]): Promise<void>;
}

export class KnexSpanMeterWriter implements SpanMeterWriter {
  constructor(private readonly trx: Knex.Transaction) {}

  async lockShared(projectId: string): Promise<boolean> {
    await this.trx.raw('SELECT pg_advisory_xact_lock_shared(hashtextextended(?, 0))', [PROJECT_LOCK(projectId)]);
    const { rows } = (await this.trx.raw("SELECT EXISTS (SELECT 1 FROM meters WHERE source = 'SPANS' AND status = 'ACTIVE' AND filter ->> 'projectId' = ?) AS metered", [projectId])) as {
      rows: Array<{ metered: boolean }>;
    };
    return rows[0]?.metered === true;
  }

  /** The cells the stored traces contribute to now (call before rewriting them), per trace id. */
  async cellsOf(projectId: string, traceIds: string[]): Promise<Map<string, Cell[]>> {
    const out = new Map<string, Cell[]>();
    if (traceIds.length === 0) return out;
    const { rows } = (await this.trx.raw(
      `SELECT DISTINCT trace_id, meter_id, key, hour FROM (${matchedSpans("m.status = 'ACTIVE' AND m.filter ->> 'projectId' = ?", 't.trace_id = ANY(?::text[])').replace('SELECT m.id AS meter_id,', 'SELECT t.trace_id, m.id AS meter_id,')}) c`,
      [traceIds, projectId],
    )) as { rows: Array<{ trace_id: string; meter_id: string; key: string; hour: string | number }> };
    for (const r of rows) {
      const list = out.get(r.trace_id);
      if (list) list.push(toCell(r));
      else out.set(r.trace_id, [toCell(r)]);
    }
    return out;
  }

  /**
   * After the batch's traces are written: `added` (new traces, and stored ones that contributed
   * nothing before) add their aggregates; `changed` (stored traces that contributed before, with
   * `before` their cells then) have their cells, old and new, recomputed from the raw spans.
   */
  async apply(projectId: string, added: string[], changed: string[], before: Cell[]): Promise<void> {
    if (added.length === 0 && changed.length === 0) return;
    const meters = "m.status = 'ACTIVE' AND m.filter ->> 'projectId' = ?";
    const adds =
      added.length === 0
        ? []
        : ((await this.trx.raw(cellAggregates(matchedSpans(meters, 't.trace_id = ANY(?::text[])')), [added, projectId])) as { rows: CellRow[] }).rows;
    const recompute = new Map(before.map((c) => [cellId(c), c]));
    if (changed.length > 0) for (const cells of (await this.cellsOf(projectId, changed)).values()) for (const c of cells) recompute.set(cellId(c), c);
    const addRows = adds.filter((r) => !recompute.has(cellId(toCell(r))));
    const locks = [...new Set([...addRows.map((r) => CELL_LOCK(toCell(r))), ...[...recompute.values()].map(CELL_LOCK)])].sort();
    if (locks.length === 0) return;
    await this.trx.raw('SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM (SELECT k FROM unnest(?::text[]) k ORDER BY k COLLATE "C" OFFSET 0) s', [locks]);
    // The added traces' points go with their cells; a cell also recomputed below gets its points rewritten there.
    await writeCells(this.trx, addRows, true, {
      sql: `SELECT a.* FROM (${matchedSpans(meters, 't.trace_id = ANY(?::text[])')}) a WHERE NOT (a.meter_id || '|' || a.key || '|' || a.hour) = ANY(?::text[])`,
      bindings: [added, projectId, [...recompute.keys()]],
    });
    if (recompute.size > 0) await recomputeCells(this.trx, projectId, [...recompute.values()]);
  }
}

/** Rewrites these cells of one project from the raw spans (the caller holds their locks). */
async function recomputeCells(db: Db, projectId: string, cells: Cell[]): Promise<void> {
  const payload = JSON.stringify(cells.map((c) => ({ meter_id: c.meterId, key: c.key, hour: c.hour })));
  const from = Math.min(...cells.map((c) => c.hour));
  const to = Math.max(...cells.map((c) => c.hour)) + HOUR_MS;
  const cellSet = 'SELECT * FROM jsonb_to_recordset(?::jsonb) AS c(meter_id text, key text, hour bigint)';
  await db.raw(`DELETE FROM span_meter_hours h USING (${cellSet}) c WHERE h.meter_id = c.meter_id AND h.key = c.key AND h.hour_ms = c.hour`, [payload]);
  await db.raw(`DELETE FROM span_meter_hour_values h USING (${cellSet}) c WHERE h.meter_id = c.meter_id AND h.key = c.key AND h.hour_ms = c.hour`, [payload]);
  await db.raw(`DELETE FROM span_meter_points p USING (${cellSet}) c WHERE p.meter_id = c.meter_id AND p.key = c.key AND p.st >= c.hour AND p.st < c.hour + ${HOUR_MS}`, [payload]);
  const matched = matchedSpans(
    "m.status = 'ACTIVE' AND m.filter ->> 'projectId' = ? AND m.id IN (SELECT meter_id FROM cells)",
    "t.start_time < ? AND t.end_time >= ? AND t.start_time >= ?::timestamptz - (SELECT coalesce(max(d.duration_ms), 0) FROM telemetry_traces d WHERE d.project_id = t.project_id) * interval '1 millisecond'",
    'x.st >= ? AND x.st < ?',
  );
  // The cells' matched spans once: their points written here, their aggregates returned for writeCells.
  const { rows } = (await db.raw(
    `WITH cells AS (${cellSet}),
     kept AS MATERIALIZED (SELECT a.* FROM (${matched}) a JOIN cells c ON c.meter_id = a.meter_id AND c.key = a.key AND c.hour = a.hour),
     points AS (INSERT INTO span_meter_points (${POINTS_COLUMNS}) SELECT meter_id, key, st, id, v FROM kept)
     ${cellAggregates('SELECT * FROM kept')}`,
    [payload, new Date(to), new Date(from), new Date(from), projectId, from, to],
  )) as { rows: CellRow[] };
  await writeCells(db, rows, false);
}

/** What a span meter's rollup read answers: per key (and bucket), as TraceRepository.modelCallAggregates. */
export interface SpanMeterHourAggregate {
  key: string;
  bucket: number | null;
  count: number;
  sum: number;
  max: number | null;
  last: { at: number; id: string; value: number } | null;
  values: string[];
}

export interface SpanMeterHoursQuery {
  meterId: string;
  /** Whole UTC hours [from, to), epoch ms (from = to: none). */
  from: number;
  to: number;
  /**
   * Ranges [from, to) of epoch ms within partial hours (a range's edges), read from the meter's
   * points (migration 0391) by (meter, key, start): only with `keys`.
   */
  edges?: ReadonlyArray<readonly [number, number]>;
  keys?: readonly string[];
  distinct: boolean;
  interval?: 'hour' | 'day' | 'month';
}

export interface SpanMeterRollups {
  hours(q: SpanMeterHoursQuery): Promise<SpanMeterHourAggregate[]>;
  buildChunk(orgId: string, meterId: string, chunkTraces: number, beforeCommit?: () => Promise<void>): Promise<'none' | 'chunk' | 'ready'>;
}

const bucketOf = (column: string, interval: SpanMeterHoursQuery['interval']) =>
  interval === undefined
    ? 'NULL::bigint'
    : interval === 'month'
      ? `(extract(epoch FROM date_trunc('month', to_timestamp(${column} / 1000.0) AT TIME ZONE 'UTC')) * 1000)::bigint`
      : `(${column} / ${interval === 'hour' ? HOUR_MS : 24 * HOUR_MS}) * ${interval === 'hour' ? HOUR_MS : 24 * HOUR_MS}`;

/**
 * The statement of a span meter's rollup read (KnexSpanMeterRollups.hours): the hour rows of
 * [from, to) and the points of the edges, grouped per key (and bucket). A point is a cell's part
 * at its own millisecond: counted once, its numeric value summed, maxed and a candidate for the
 * latest by (start, "traceId:spanId"), as the raw read does.
 */
export function spanMeterHoursSql(q: SpanMeterHoursQuery): { sql: string; bindings: Knex.Value[] } {
  if (q.edges !== undefined && q.edges.length > 0 && q.keys === undefined) throw new Error('span meter points are read by key: edges need keys');
  const edges = (q.edges ?? []).filter(([a, b]) => b > a);
  // One branch per key (a scalar `key = ?`, always an index condition; `key = ANY(…)` was planned
  // as a filter over every key's rows when the statistics made that look cheap), or one for all keys.
  const keys: Array<string | null> = q.keys !== undefined ? [...new Set(q.keys)] : [null];
  const distinct = q.distinct;
  const hoursColumns = distinct ? `key, ${bucketOf('hour_ms', q.interval)} AS bucket, value` : `key, ${bucketOf('hour_ms', q.interval)} AS bucket, spans, total, maximum, last_at, last_id, last_value`;
  const pointColumns = distinct
    ? `key, ${bucketOf('st', q.interval)}, v`
    : `key, ${bucketOf('st', q.interval)}, 1, coalesce(n.num, 0), n.num, CASE WHEN n.num IS NOT NULL THEN st END, CASE WHEN n.num IS NOT NULL THEN id END, n.num`;
  const branches: string[] = [];
  const bindings: Knex.Value[] = [];
  for (const key of keys) {
    const byKey = key === null ? '' : ' AND key = ?';
    branches.push(`SELECT ${hoursColumns} FROM ${distinct ? 'span_meter_hour_values' : 'span_meter_hours'} WHERE meter_id = ? AND hour_ms >= ? AND hour_ms < ?${byKey}`);
    bindings.push(q.meterId, q.from, q.to, ...(key === null ? [] : [key]));
    if (key === null) continue;
    for (const [a, b] of edges) {
      branches.push(`SELECT ${pointColumns} FROM span_meter_points p
        CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(p.v) = 'number' THEN (p.v #>> '{}')::numeric END AS num) n
        WHERE meter_id = ? AND key = ? AND st >= ? AND st < ?`);
      bindings.push(q.meterId, key, a, b);
    }
  }
  const parts = branches.join('\n  UNION ALL ');
  const latest = (column: string) => `(array_agg(${column} ORDER BY last_at DESC, last_id DESC) FILTER (WHERE last_at IS NOT NULL))[1]`;
  const sql = distinct
    ? `SELECT key, bucket, 0 AS count, 0 AS sum, NULL AS max, NULL AS last_at, NULL AS last_id, NULL AS last_value,
         coalesce(array_agg(DISTINCT value) FILTER (WHERE value IS NOT NULL AND value <> 'null'::jsonb), '{}')::text[] AS "values"
       FROM (${parts}) parts GROUP BY 1, 2`
    : `SELECT key, bucket, sum(spans) AS count, sum(total) AS sum, max(maximum) AS max,
         ${latest('last_at')} AS last_at, ${latest('last_id')} AS last_id, ${latest('last_value')} AS last_value, '{}'::text[] AS "values"
       FROM (${parts}) parts GROUP BY 1, 2`;
  return { sql, bindings };
}

export class KnexSpanMeterRollups implements SpanMeterRollups {
  constructor(private readonly db: Knex) {}

  /** The rollup rows of [from, to) grouped per key (and bucket). */
  async hours(q: SpanMeterHoursQuery): Promise<SpanMeterHourAggregate[]> {
    const { sql, bindings } = spanMeterHoursSql(q);
    const { rows } = (await this.db.raw(sql, bindings)) as {
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

  /**
   * One chunk of a span meter's background build, in one transaction under the project's meter
   * lock (exclusive: no ingest is in flight, every committed span is visible). The unit is a number
   * of traces, whatever the hours: the chunk takes the project's traces after the meter's cursor
   * (BuildCursor) in (start_time, trace_id) order up to the `chunkTraces`-th, Q, and builds the
   * hours from the cursor's to Q's: the cursor's hour gets the spans of the traces after the
   * position built to (merged into its rows; a set of distinct values merges by union), the hours
   * after it are deleted and rewritten from the spans, and Q's hour gets the spans of the traces up
   * to Q. The cursor moves to (Q's hour, Q) in the same transaction — READY after the last chunk.
   * Hours before the cursor are complete and ingest keeps them so (it adds to BUILDING meters too);
   * in the cursor's hour ingest keeps the part of the traces up to the position (BUILD_POSITION);
   * hours after it are rewritten when their chunk comes. A trace's spans in later hours than the
   * cursor's are read again by the chunk that builds those hours (traces span hours). A killed
   * chunk leaves nothing and the next run does it again. 'none': not a BUILDING span meter.
   */
  buildChunk(orgId: string, meterId: string, chunkTraces: number, beforeCommit?: () => Promise<void>): Promise<'none' | 'chunk' | 'ready'> {
    return this.db.transaction(async (trx) => {
      const found = (await trx('meters').where({ org_id: orgId, id: meterId, source: 'SPANS' }).first(trx.raw("filter ->> 'projectId' AS project_id"))) as { project_id: string } | undefined;
      if (!found) return 'none';
      await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [PROJECT_LOCK(found.project_id)]);
      // The row lock orders this chunk with a change of the filter (which resets the cursor).
      const meter = (await trx('meters').where({ org_id: orgId, id: meterId }).forUpdate().first('status', 'rollup_status', 'rollup_cursor', trx.raw("filter ->> 'projectId' AS project_id"))) as
        | { status: string; rollup_status: string; rollup_cursor: string | null; project_id: string }
        | undefined;
      if (!meter || meter.status !== 'ACTIVE' || meter.rollup_status !== 'BUILDING' || meter.project_id !== found.project_id) return 'none';
      const { hour: from, after } = parseCursor(meter.rollup_cursor);
      // Q: the chunkTraces-th trace after the cursor (partition_start >= start_time prunes the earlier weeks).
      const since = after ? after.at : from !== null ? new Date(from) : null;
      const { rows: found2 } = (await trx.raw(
        `SELECT start_time, trace_id FROM telemetry_traces WHERE project_id = ?
           ${after ? 'AND (start_time, trace_id) > (?, ? COLLATE "C")' : from !== null ? 'AND start_time >= ?' : ''}
           ${since ? 'AND partition_start >= ?' : ''}
         ORDER BY start_time, trace_id OFFSET ? LIMIT 1`,
        [meter.project_id, ...(after ? [after.at, after.traceId] : from !== null ? [new Date(from)] : []), ...(since ? [since] : []), Math.max(0, chunkTraces - 1)],
      )) as { rows: Array<{ start_time: Date | string; trace_id: string }> };
      const last = found2[0] ? { at: new Date(found2[0].start_time), traceId: found2[0].trace_id } : null;
      const lastHour = last ? Math.max(from ?? Number.MIN_SAFE_INTEGER, Math.floor(last.at.getTime() / HOUR_MS) * HOUR_MS) : null;
      const lower = from ?? Number.MIN_SAFE_INTEGER;
      const upper = lastHour !== null ? lastHour + HOUR_MS : Number.MAX_SAFE_INTEGER;
      // The cursor's hour keeps its built part; the hours after it hold only what ingest wrote ahead of the build.
      const rewriteFrom = after && from !== null ? from + HOUR_MS : lower;
      if (rewriteFrom < upper) {
        // A point lives in a cell that has an hour row: the range's deleted hour rows name the keys whose points go (by the key's index range).
        await trx.raw(
          `WITH gone AS (DELETE FROM span_meter_hours WHERE meter_id = ? AND hour_ms >= ? AND hour_ms < ? RETURNING key)
           DELETE FROM span_meter_points p USING (SELECT DISTINCT key FROM gone) k WHERE p.meter_id = ? AND p.key = k.key AND p.st >= ? AND p.st < ?`,
          [meterId, rewriteFrom, upper, meterId, rewriteFrom, upper],
        );
        await trx.raw('DELETE FROM span_meter_hour_values WHERE meter_id = ? AND hour_ms >= ? AND hour_ms < ?', [meterId, rewriteFrom, upper]);
      }
      // The traces with spans in [lower, upper): none after Q; those up to the position built to only for their later hours.
      const traces: string[] = [];
      const traceBindings: Knex.Value[] = [];
      if (last) {
        traces.push('(t.start_time, t.trace_id) <= (?, ? COLLATE "C")');
        traceBindings.push(last.at, last.traceId);
      }
      if (from !== null) {
        const longest = (await trx('telemetry_traces').where('project_id', meter.project_id).max({ d: 'duration_ms' }).first()) as { d: string | number | null } | undefined;
        const earliest = new Date(from - Number(longest?.d ?? 0));
        traces.push('t.end_time >= ?', 't.start_time >= ?', 't.partition_start >= ?');
        traceBindings.push(new Date(from), earliest, earliest);
      }
      if (after && from !== null) {
        traces.push('((t.start_time, t.trace_id) > (?, ? COLLATE "C") OR t.end_time >= ?)');
        traceBindings.push(after.at, after.traceId, new Date(from + HOUR_MS));
      }
      const spans = ['x.st >= ? AND x.st < ?'];
      const spanBindings: Knex.Value[] = [lower, upper];
      if (after && from !== null) {
        spans.push('NOT (x.st < ? AND (t.start_time, t.trace_id) <= (?, ? COLLATE "C"))');
        spanBindings.push(from + HOUR_MS, after.at, after.traceId);
      }
      const { rows } = (await trx.raw(
        `WITH kept AS MATERIALIZED (${matchedSpans('m.id = ?', [...traces, 'true'].join(' AND '), spans.join(' AND '), false)}),
         points AS (INSERT INTO span_meter_points (${POINTS_COLUMNS}) SELECT meter_id, key, st, id, v FROM kept)
         ${cellAggregates('SELECT * FROM kept')}`,
        [...traceBindings, meterId, ...spanBindings],
      )) as { rows: CellRow[] };
      await writeCells(trx, rows, true);
      await trx('meters')
        .where({ org_id: orgId, id: meterId })
        .update(last === null || lastHour === null ? { rollup_status: 'READY', rollup_cursor: null } : { rollup_cursor: formatCursor(lastHour, last.at, last.traceId) });
      if (beforeCommit) await beforeCommit();
      return last === null ? 'ready' : 'chunk';
    });
  }
}
