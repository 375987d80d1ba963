/** Usage events and meters in the database (the usage domain's only knex user). */
import type { Knex } from 'knex';
import { isEmbedded } from '../db/dialect.js';
import { runStatement } from '../db/knex.js';
import { PartitionEnsurer } from '../db/partitions.js';
import { serviceUnavailable } from '../kernel/errors.js';
import type { AggregationKind } from './aggregations/index.js';
import type { Meter, MeterFilter, MeterStatus, QuantityInterval, RollupStatus, Scalar, UsageEvent } from './usage.model.js';

export interface EventQuantityQuery {
  orgId: string;
  /** Undefined: every customer of the organization. */
  customerId?: string;
  eventName: string;
  properties: Record<string, Scalar>;
  aggregation: AggregationKind;
  property: string | null;
  start: Date;
  end: Date;
  /**
   * The ACTIVE meter whose filter this is: whole hours are read from its rollup (migration 0280).
   * Undefined: the raw events (an archived meter, whose rollup ingest no longer keeps).
   */
  meterId?: string;
}

/** The subscription whose billing period an event falls in, and that period's number. */
export interface EventPeriod {
  subscriptionId: string;
  period: number;
}

/** What one statement answers for a customer's quantity read (see CUSTOMER_QUANTITY_SQL). */
export interface CustomerQuantityRead {
  /** Undefined: no such meter in the organization. */
  meter: Meter | undefined;
  /** The customer the reference names (CUS_… id first, else externalId); undefined when none. */
  customer: { id: string; externalId: string | null } | undefined;
  /** The quantity over [start, end); null for a span meter (telemetry aggregates those) or without customer. */
  quantity: number | null;
}

export interface UsageEventRepository {
  /**
   * A customer's quantity of a usage-event meter over [start, end), with the meter and the
   * customer found by the same statement: one round trip (the read every metered access check,
   * balance and quantity request makes).
   */
  customerQuantity(orgId: string, meterId: string, customerRef: string, start: Date, end: Date): Promise<CustomerQuantityRead>;
  /**
   * Inserts the events whose id the organization has not stored yet; returns the ids not inserted
   * because the organization had stored them (before, or by a concurrent batch) — every other id
   * not refused is inserted — and the ids refused because their period (`periods`, by event id) is
   * closed for usage. The check
   * and the insert run in one transaction under a FOR KEY SHARE lock of the subscriptions' rows,
   * which the renewal job's close (FOR UPDATE, then the mark of migration 0285) conflicts with.
   */
  insertNew(events: UsageEvent[], periods?: ReadonlyMap<string, EventPeriod>): Promise<{ stored: Set<string>; closed: Set<string> }>;
  /**
   * One pass of the fold (migration 0395): up to `limit` queued delta rows of one organization —
   * the next one with a queue after the organization this instance folded last, round-robin,
   * skipping any another worker is folding — merged into the rollup and deleted, in one
   * transaction; returns how many rows it took (0: the queues were empty, or every organization
   * with a queue was being folded by another worker). `beforeCommit` is the tests' crash point.
   */
  foldRollupDeltas(limit: number, beforeCommit?: () => Promise<void>): Promise<number>;
  /** foldRollupDeltas, saying which organization it folded and whether a queue held `limit` rows or more of it (the pass was full). */
  foldRollupPass(limit: number, beforeCommit?: () => Promise<void>): Promise<FoldPass>;
  /**
   * VACUUM of the two delta queues (PostgreSQL; SKIP_LOCKED: skipped when a vacuum of a queue is
   * under way): the rows the fold deleted become free space that ingest's appends reuse, and no
   * longer lie in the path of the fold's next scan (see UsageEventService.foldRollups).
   */
  vacuumRollupQueues(): Promise<void>;
  /** Which of these ids the organization has stored. */
  storedIds(orgId: string, ids: string[]): Promise<Set<string>>;
  /** The aggregation over [start, end), and per bucket (epoch ms of the bucket's UTC start → quantity) when asked. */
  quantity(query: EventQuantityQuery): Promise<number>;
  bucketQuantities(query: EventQuantityQuery, interval: QuantityInterval): Promise<Map<number, number>>;
  /**
   * The total and the per-bucket quantities of an unsaved definition (the console's live preview),
   * under a statement timeout of PREVIEW_TIMEOUT_MS: beyond it, 503 rather than a long wait.
   */
  preview(query: EventQuantityQuery, interval: QuantityInterval): Promise<{ total: number; buckets: Map<number, number> }>;
}

/** The console's meter preview waits at most this long for the database (docs/usage-billing.md). */
export const PREVIEW_TIMEOUT_MS = 5000;

/** One fold pass: the organization it folded (none: no queue it could take), the rows it merged, and whether it left rows behind (a queue gave `limit`). */
export interface FoldPass {
  orgId: string | undefined;
  rows: number;
  full: boolean;
}

export interface MeterRepository {
  insert(meter: Meter): Promise<void>;
  find(orgId: string, id: string): Promise<Meter | undefined>;
  list(orgId: string, status: MeterStatus): Promise<Meter[]>;
  /** Writes name and filter while the meter is ACTIVE; false otherwise. */
  update(meter: Meter): Promise<boolean>;
  /** ACTIVE → ARCHIVED; false when it was not ACTIVE. */
  archive(orgId: string, id: string, at: Date): Promise<boolean>;
  /** The BUILDING meters (ACTIVE), oldest change first, at most `limit`. */
  building(limit: number): Promise<Array<{ orgId: string; id: string; source: Meter['source'] }>>;
  /** One chunk of a meter's rollup build (see buildRollupChunk); 'none' when it is not BUILDING. */
  buildChunk(orgId: string, id: string, chunkEvents: number, beforeCommit?: () => Promise<void>): Promise<'none' | 'chunk' | 'ready'>;
}

interface MeterRow {
  id: string;
  org_id: string;
  name: string;
  source: Meter['source'];
  filter: MeterFilter | string;
  aggregation: AggregationKind;
  property: string | null;
  customer_attribute: string | null;
  status: MeterStatus;
  rollup_status: RollupStatus;
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

const toMeter = (r: MeterRow): Meter => ({
  id: r.id,
  orgId: r.org_id,
  name: r.name,
  source: r.source,
  filter: typeof r.filter === 'string' ? (JSON.parse(r.filter) as MeterFilter) : r.filter,
  aggregation: r.aggregation,
  property: r.property,
  customerAttribute: r.customer_attribute,
  status: r.status,
  rollupStatus: r.rollup_status,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
  archivedAt: r.archived_at ? new Date(r.archived_at) : null,
});

/** The property's value as a number when it is a JSON number, else NULL. */
const NUMERIC = `CASE WHEN jsonb_typeof(properties -> ?) = 'number' THEN (properties ->> ?)::numeric END`;

/** Each aggregation kind in SQL, over the rows of a group; the same rules as src/usage/aggregations/. */
function aggregateSql(kind: AggregationKind, property: string | null): { sql: string; bindings: string[] } {
  const p = property ?? '';
  switch (kind) {
    case 'count':
      return { sql: 'count(*)', bindings: [] };
    case 'sum':
      return { sql: `coalesce(sum(${NUMERIC}), 0)`, bindings: [p, p] };
    case 'max':
      return { sql: `coalesce(max(${NUMERIC}), 0)`, bindings: [p, p] };
    case 'unique':
      return { sql: 'count(DISTINCT properties -> ?)', bindings: [p] };
    case 'last':
      return { sql: `coalesce((array_agg(${NUMERIC} ORDER BY ts DESC, id DESC) FILTER (WHERE jsonb_typeof(properties -> ?) = 'number'))[1], 0)`, bindings: [p, p, p] };
  }
}

/** Absolute UTC hours, whatever the session's TimeZone (as the commerce rollups). */
const HOUR_OF = (column: string) => `date_bin('1 hour', ${column}, timestamptz '2000-01-01 00:00:00+00')`;
const HOUR_MS = 3_600_000;

/** The organization's meter lock: ingest holds it shared, a meter's rebuild exclusively (see migration 0280). */
const METER_LOCK = (orgId: string) => `usage-meters:${orgId}`;
/** The prefix of an organization's fold lock (pickFoldOrganization): one fold pass per organization at a time. */
const FOLD_LOCK_PREFIX = 'usage-meter-fold:';

/**
 * The rollup rows of the events in `source` (columns org_id, id, customer_id, name, ts,
 * properties) that the meters in `meters` (an alias m, already restricted) match; grouped per
 * (meter, customer, hour), in key order when `ordered` (a rebuild upserts shared rows in one order).
 * Only a `last` meter's rows carry the latest numeric value (last_ts, last_id, last_value): no read
 * of any other aggregation uses them (a meter's aggregation never changes), so its events are
 * grouped without a sort. For a `last` meter it is the row a window ranks first among the group's
 * numeric rows by (ts, id) descending: one sort of its events, which the grouping reuses.
 * Exported with the columns and the merge below for scripts/bench/usage-xid-prototype.ts.
 */
export function rollupSelect(source: string, meters: string, ordered = true): { matched: string; hours: string; values: string } {
  const matchedWhere = (aggregation: string) => `FROM ${source} e
    JOIN meters m ON m.org_id = e.org_id AND m.source = 'EVENTS' AND m.filter ->> 'eventName' = e.name
      AND e.properties @> coalesce(m.filter -> 'properties', '{}'::jsonb) AND ${meters} AND ${aggregation}
    CROSS JOIN LATERAL (SELECT e.properties -> m.property AS v) p
    CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(p.v) = 'number' THEN (p.v #>> '{}')::numeric END AS num) n`;
  const matched = matchedWhere('true');
  const latest = (column: string) => `max(${column}) FILTER (WHERE r.rank = 1 AND r.num IS NOT NULL)`;
  return {
    matched,
    hours: `SELECT m.org_id, m.id AS meter_id, e.customer_id, ${HOUR_OF('e.ts')} AS hour, count(*), coalesce(sum(n.num), 0), max(n.num),
        NULL::timestamptz, NULL::text COLLATE "C", NULL::numeric
      ${matchedWhere("m.aggregation <> 'last'")}
      GROUP BY 1, 2, 3, 4
      UNION ALL
      SELECT r.org_id, r.meter_id, r.customer_id, r.hour, count(*), coalesce(sum(r.num), 0), max(r.num), ${latest('r.ts')}, ${latest('r.id')}, ${latest('r.num')}
      FROM (
        SELECT m.org_id, m.id AS meter_id, e.customer_id, ${HOUR_OF('e.ts')} AS hour, e.ts, e.id, n.num,
          row_number() OVER (PARTITION BY m.org_id, m.id, e.customer_id, ${HOUR_OF('e.ts')}, n.num IS NULL ORDER BY e.ts DESC, e.id DESC) AS rank
        ${matchedWhere("m.aggregation = 'last'")}
      ) r
      GROUP BY r.org_id, r.meter_id, r.customer_id, r.hour${ordered ? '\n      ORDER BY 1, 2, 3, 4' : ''}`,
    values: `SELECT DISTINCT m.org_id, m.id, e.customer_id, ${HOUR_OF('e.ts')}, p.v
      ${matched}
      WHERE m.aggregation = 'unique' AND p.v IS NOT NULL${ordered ? '\n      ORDER BY 2, 3, 4, 5' : ''}`,
  };
}
export const HOURS_COLUMNS = 'org_id, meter_id, customer_id, hour, events, total, maximum, last_ts, last_id, last_value';
export const VALUES_COLUMNS = 'org_id, meter_id, customer_id, hour, value';

/** An hour row meeting the events of a batch: counts and sums add, the max and the latest (ts, id) win. */
export const MERGE_HOURS = `ON CONFLICT (org_id, meter_id, customer_id, hour) DO UPDATE SET
  events = h.events + excluded.events,
  total = h.total + excluded.total,
  maximum = greatest(h.maximum, excluded.maximum),
  last_ts = CASE WHEN excluded.last_ts IS NOT NULL AND (h.last_ts IS NULL OR (excluded.last_ts, excluded.last_id) > (h.last_ts, h.last_id)) THEN excluded.last_ts ELSE h.last_ts END,
  last_id = CASE WHEN excluded.last_ts IS NOT NULL AND (h.last_ts IS NULL OR (excluded.last_ts, excluded.last_id) > (h.last_ts, h.last_id)) THEN excluded.last_id ELSE h.last_id END,
  last_value = CASE WHEN excluded.last_ts IS NOT NULL AND (h.last_ts IS NULL OR (excluded.last_ts, excluded.last_id) > (h.last_ts, h.last_id)) THEN excluded.last_value ELSE h.last_value END`;

/** Rebuilds one meter's rollup rows from the stored events (its creation, a change of its filter). */
export async function rebuildMeterRollup(trx: Knex.Transaction, orgId: string, meterId: string): Promise<void> {
  await trx.raw('DELETE FROM usage_meter_hours WHERE org_id = ? AND meter_id = ?', [orgId, meterId]);
  await trx.raw('DELETE FROM usage_meter_hour_values WHERE org_id = ? AND meter_id = ?', [orgId, meterId]);
  await trx.raw('DELETE FROM usage_meter_hour_deltas WHERE org_id = ? AND meter_id = ?', [orgId, meterId]);
  await trx.raw('DELETE FROM usage_meter_hour_value_deltas WHERE org_id = ? AND meter_id = ?', [orgId, meterId]);
  const { hours, values } = rollupSelect("(SELECT * FROM usage_events WHERE org_id = ?)", "m.id = ? AND m.status = 'ACTIVE'");
  // The hours' select names the source and the meter twice (its `last` and other branches).
  await trx.raw(`INSERT INTO usage_meter_hours (${HOURS_COLUMNS}) ${hours}`, [orgId, meterId, orgId, meterId]);
  await trx.raw(`INSERT INTO usage_meter_hour_values (${VALUES_COLUMNS}) ${values}`, [orgId, meterId]);
}

/**
 * A usage-event meter build's position (meters.rollup_cursor): the (customer, hour) keys up to it
 * are built. `customer|hour` (the hour's ISO start) since a chunk may end inside a customer; a
 * plain customer id (a cursor written before) is that customer's last hour; '' is nothing built.
 */
export function parseEventBuildCursor(cursor: string | null): { customerId: string; nextHour: Date } {
  const at = (cursor ?? '').lastIndexOf('|');
  if (at < 0) return { customerId: cursor ?? '', nextHour: END_OF_TIME };
  return { customerId: cursor!.slice(0, at), nextHour: new Date(Date.parse(cursor!.slice(at + 1)) + HOUR_MS) };
}
export const formatEventBuildCursor = (customerId: string, hour: Date) => `${customerId}|${hour.toISOString()}`;
/** Later than any event's hour: a customer whose every hour is built. */
const END_OF_TIME = new Date(Date.UTC(9999, 0, 1));

/**
 * One chunk of a meter's background rollup build (migration 0335), in the caller's transaction:
 * under the organization's meter lock (exclusive: no ingest is in flight, every committed event is
 * visible), the rows of the (customer, hour) keys after the meter's cursor up to the key of the
 * event `chunkEvents` events further (in the index usage_events_customer_name_ts, the meter's
 * event name: by customer, then time), or to the end, are deleted and rewritten from the events,
 * and the cursor moves on in the same transaction — READY after the last chunk. A chunk ends on an
 * hour of a customer, so it takes at most `chunkEvents` plus one customer-hour of events (before,
 * all of a customer's events: one customer with millions was one unbounded chunk). The rollup rows
 * and the queued deltas are keyed by (meter, customer, hour), so each key is wholly before the
 * cursor — complete, and ingest keeps it so (it adds to BUILDING meters) — or wholly after it,
 * rewritten when its chunk comes. A killed chunk leaves nothing (the transaction) and the next run
 * does it again. `beforeCommit` is the tests' crash point.
 */
export async function buildRollupChunk(trx: Knex.Transaction, orgId: string, meterId: string, chunkEvents: number, beforeCommit?: () => Promise<void>): Promise<'none' | 'chunk' | 'ready'> {
  await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [METER_LOCK(orgId)]);
  const meter = (await trx('meters')
    .where({ org_id: orgId, id: meterId, status: 'ACTIVE', source: 'EVENTS', rollup_status: 'BUILDING' })
    .forUpdate()
    .first('rollup_cursor', trx.raw("filter ->> 'eventName' AS event_name"))) as { rollup_cursor: string | null; event_name: string } | undefined;
  if (!meter) return 'none';
  const after = parseEventBuildCursor(meter.rollup_cursor);
  // Keys after the cursor: a later customer, or the cursor's customer from its next hour on.
  const afterEvents = '(customer_id > ? OR (customer_id = ? AND ts >= ?))';
  const afterHours = '(customer_id > ? OR (customer_id = ? AND hour >= ?))';
  const afterBindings = [after.customerId, after.customerId, after.nextHour];
  // The event chunkEvents entries further among the meter's name (an index-only scan of the chunk), if any.
  const { rows } = (await trx.raw(
    `SELECT customer_id, ${HOUR_OF('ts')} AS hour FROM usage_events WHERE org_id = ? AND customer_id >= ? AND name = ? AND ${afterEvents}
     ORDER BY customer_id, ts OFFSET ? LIMIT 1`,
    [orgId, after.customerId, meter.event_name, ...afterBindings, Math.max(0, chunkEvents - 1)],
  )) as { rows: Array<{ customer_id: string; hour: Date | string }> };
  const upTo = rows[0] ? { customerId: rows[0].customer_id, hour: new Date(rows[0].hour) } : undefined;
  // Up to that key: an earlier customer, or its customer up to the end of its hour.
  const upToBindings = upTo ? [upTo.customerId, upTo.customerId, new Date(upTo.hour.getTime() + HOUR_MS)] : [];
  const rangeEvents = upTo ? `${afterEvents} AND (customer_id < ? OR (customer_id = ? AND ts < ?))` : afterEvents;
  const rangeHours = upTo ? `${afterHours} AND (customer_id < ? OR (customer_id = ? AND hour < ?))` : afterHours;
  const rangeBindings = [...afterBindings, ...upToBindings];
  for (const table of ['usage_meter_hours', 'usage_meter_hour_values', 'usage_meter_hour_deltas', 'usage_meter_hour_value_deltas']) {
    // Queued deltas of the range too (migration 0395): the rewrite below counts their events.
    await trx.raw(`DELETE FROM ${table} WHERE org_id = ? AND meter_id = ? AND customer_id >= ? AND ${rangeHours}`, [orgId, meterId, after.customerId, ...rangeBindings]);
  }
  const source = `(SELECT * FROM usage_events WHERE org_id = ? AND customer_id >= ? AND name = ? AND ${rangeEvents})`;
  const sourceBindings = [orgId, after.customerId, meter.event_name, ...rangeBindings];
  const { hours, values } = rollupSelect(source, "m.id = ? AND m.status = 'ACTIVE'");
  // The hours' select names the source and the meter twice (its `last` and other branches).
  await trx.raw(`INSERT INTO usage_meter_hours (${HOURS_COLUMNS}) ${hours}`, [...sourceBindings, meterId, ...sourceBindings, meterId]);
  await trx.raw(`INSERT INTO usage_meter_hour_values (${VALUES_COLUMNS}) ${values}`, [...sourceBindings, meterId]);
  await trx('meters')
    .where({ org_id: orgId, id: meterId })
    .update(upTo === undefined ? { rollup_status: 'READY', rollup_cursor: null } : { rollup_cursor: formatEventBuildCursor(upTo.customerId, upTo.hour) });
  await beforeCommit?.();
  return upTo === undefined ? 'ready' : 'chunk';
}

/** The part of [start, end) that whole UTC hours cover (read from the rollup), and the edges around it (read from the events). */
export function splitRange(start: number, end: number): { hours: [number, number] | null; edges: Array<[number, number]> } {
  const first = Math.ceil(start / HOUR_MS) * HOUR_MS;
  const last = Math.floor(end / HOUR_MS) * HOUR_MS;
  if (first >= last) return { hours: null, edges: [[start, end]] };
  const edges: Array<[number, number]> = [];
  if (start < first) edges.push([start, first]);
  if (last < end) edges.push([last, end]);
  return { hours: [first, last], edges };
}

/**
 * A customer's quantity of a meter over [$4, $5) in one fixed statement, run prepared
 * (runStatement): the meter ($2), the customer named by $3 (its CUS_… id first, else its
 * externalId) and the quantity. Every aggregation and both read paths are in the one text, so it
 * is one prepared statement whatever the meter; the meter's row decides which branch reads rows:
 * - rollup (an ACTIVE meter whose rollup is READY): the hour rows of [$6, $7) by the key of
 *   usage_meter_hours (usage_meter_hour_values for `unique`), and the events of the edges
 *   [$4, $6) and [$7, $5) by usage_events_customer_name_ts (empty ranges when $6 = $7 = $5);
 * - otherwise (archived, BUILDING): the events of [$4, $5) by the same index;
 * - a span meter whose rollup is READY (migrations 0381, 0391): the same ranges in epoch ms
 *   ($8–$11 = $6, $7, $4, $5): span_meter_hours (span_meter_hour_values for `unique`) and the
 *   edges' span_meter_points, each by (meter, key, time) for the customer's id and externalId
 *   (the raw attribute value the spans carry); otherwise its quantity is NULL and the service
 *   reads the raw spans (exact, only slower). The span tables are telemetry's: read here so that
 *   the access check is one statement (a crossing of table ownership, docs/usage-billing.md).
 * Each branch is gated by a scalar subquery on the one-row meter (a one-time filter: a branch the
 * meter fails reads nothing), and the customer's id, the event name and every bound are scalar
 * parameters of the index scans, whatever the statistics: each range is an index range, never a
 * filter over the meter's or the customer's other rows, so the read costs the same at 1M and 10M
 * events in the organization (test/usage/rollup-plan.test.ts checks the generic plan).
 * Aggregations combine the parts by the rules of src/usage/aggregations/ (as combine() below); the
 * sorting ones (`unique`, `last`) are FILTERed to their own meters: every aggregate of a CASE is
 * computed, and sorting ~720 hour rows for nothing was most of the statement's time.
 */
/** The events of one range of the customer read (a branch of CUSTOMER_QUANTITY_SQL), when `gate` holds. */
const customerEvents = (gate: string, from: string, to: string) => `
  SELECT 1, coalesce(n.num, 0), n.num, CASE WHEN n.num IS NOT NULL THEN e.ts END, CASE WHEN n.num IS NOT NULL THEN e.id END, n.num, e.properties -> (SELECT property FROM m)
  FROM usage_events e
    CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(e.properties -> (SELECT property FROM m)) = 'number' THEN (e.properties ->> (SELECT property FROM m))::numeric END AS num) n
  WHERE (SELECT source = 'EVENTS' AND ${gate} FROM m) AND e.org_id = $1 AND e.customer_id = (SELECT id FROM c) AND e.name = (SELECT event_name FROM m)
    AND e.ts >= ${from} AND e.ts < ${to} AND e.properties @> (SELECT event_properties FROM m)`;

/**
 * The customer's keys in span meter rows: its id, and its externalId when it has one (and it
 * differs). Each is a scalar of its own, so each read is an index range on (meter, key, time) —
 * `key = ANY(id, externalId)`, or a join on the pair, was planned as a filter over every key's
 * rows of the range when the statistics made that look cheap.
 */
const CUSTOMER_SPAN_KEYS = [
  { key: '(SELECT id FROM c) COLLATE "C"', gate: 'true' },
  { key: '(SELECT external_id FROM c) COLLATE "C"', gate: '(SELECT external_id IS NOT NULL AND external_id <> id FROM c)' },
];

/**
 * A span meter's parts for one key of the customer: the hour rows of [$8, $9)
 * (span_meter_hours, or span_meter_hour_values for `unique`) and the points (migration 0391) of
 * the edges [$10, $8) and [$9, $11), each point a part of its own (counted once; its numeric
 * value summed, maxed, a candidate for the latest by (start, id)).
 */
const spanKeyParts = ({ key, gate }: { key: string; gate: string }) => `
  SELECT h.spans, h.total, h.maximum, h.last_at, h.last_id, h.last_value, NULL::jsonb AS v
  FROM span_meter_hours h
  WHERE (SELECT source = 'SPANS' AND rolled AND aggregation <> 'unique' FROM m) AND ${gate}
    AND h.meter_id = $2 AND h.key = ${key} AND h.hour_ms >= $8::bigint AND h.hour_ms < $9::bigint
  UNION ALL
  SELECT 0, 0, NULL, NULL, NULL, NULL, hv.value
  FROM span_meter_hour_values hv
  WHERE (SELECT source = 'SPANS' AND rolled AND aggregation = 'unique' FROM m) AND ${gate}
    AND hv.meter_id = $2 AND hv.key = ${key} AND hv.hour_ms >= $8::bigint AND hv.hour_ms < $9::bigint
  UNION ALL ${[
    ['$10', '$8'],
    ['$9', '$11'],
  ]
    .map(
      ([from, to]) => `
  SELECT 1, coalesce(n.num, 0), n.num, CASE WHEN n.num IS NOT NULL THEN p.st END, CASE WHEN n.num IS NOT NULL THEN p.id END, n.num, p.v
  FROM span_meter_points p
    CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(p.v) = 'number' THEN (p.v #>> '{}')::numeric END AS num) n
  WHERE (SELECT source = 'SPANS' AND rolled FROM m) AND ${gate}
    AND p.meter_id = $2 AND p.key = ${key} AND p.st >= ${from}::bigint AND p.st < ${to}::bigint`,
    )
    .join('\n  UNION ALL')}`;

export const CUSTOMER_QUANTITY_SQL = `WITH m AS MATERIALIZED (
  SELECT meters.*, (status = 'ACTIVE' AND rollup_status = 'READY') AS rolled, filter ->> 'eventName' AS event_name,
    coalesce(filter -> 'properties', '{}'::jsonb) AS event_properties
  FROM meters WHERE org_id = $1 AND id = $2
), c AS MATERIALIZED (
  SELECT id, external_id FROM (
    SELECT id, external_id, 0 AS o FROM customers WHERE id = $3 AND org_id = $1
    UNION ALL SELECT id, external_id, 1 FROM customers WHERE org_id = $1 AND external_id = $3
  ) found ORDER BY o LIMIT 1
), parts AS (
  SELECT h.events, h.total, h.maximum, h.last_ts, h.last_id, h.last_value, NULL::jsonb AS v
  FROM usage_meter_hours h
  WHERE (SELECT source = 'EVENTS' AND rolled AND aggregation <> 'unique' FROM m)
    AND h.org_id = $1 AND h.meter_id = $2 AND h.customer_id = (SELECT id FROM c) AND h.hour >= $6::timestamptz AND h.hour < $7::timestamptz
  UNION ALL
  SELECT 0, 0, NULL, NULL, NULL, NULL, hv.value
  FROM usage_meter_hour_values hv
  WHERE (SELECT source = 'EVENTS' AND rolled AND aggregation = 'unique' FROM m)
    AND hv.org_id = $1 AND hv.meter_id = $2 AND hv.customer_id = (SELECT id FROM c) AND hv.hour >= $6::timestamptz AND hv.hour < $7::timestamptz
  UNION ALL
  SELECT d.events, d.total, d.maximum, d.last_ts, d.last_id, d.last_value, NULL::jsonb
  FROM usage_meter_hour_deltas d
  WHERE (SELECT source = 'EVENTS' AND rolled AND aggregation <> 'unique' FROM m)
    AND d.org_id = $1 AND d.meter_id = $2 AND d.customer_id = (SELECT id FROM c) AND d.hour >= $6::timestamptz AND d.hour < $7::timestamptz
  UNION ALL
  SELECT 0, 0, NULL, NULL, NULL, NULL, vd.value
  FROM usage_meter_hour_value_deltas vd
  WHERE (SELECT source = 'EVENTS' AND rolled AND aggregation = 'unique' FROM m)
    AND vd.org_id = $1 AND vd.meter_id = $2 AND vd.customer_id = (SELECT id FROM c) AND vd.hour >= $6::timestamptz AND vd.hour < $7::timestamptz
  UNION ALL ${customerEvents('rolled', '$4::timestamptz', '$6::timestamptz')}
  UNION ALL ${customerEvents('rolled', '$7::timestamptz', '$5::timestamptz')}
  UNION ALL ${customerEvents('NOT rolled', '$4::timestamptz', '$5::timestamptz')}
), span_parts AS (${CUSTOMER_SPAN_KEYS.map(spanKeyParts).join('\n  UNION ALL')}
)
SELECT to_jsonb(m.*) - 'rolled' - 'event_name' - 'event_properties' AS meter, c.id AS customer_id, c.external_id,
  CASE WHEN c.id IS NULL THEN NULL
    WHEN m.source = 'EVENTS' THEN (SELECT CASE m.aggregation
      WHEN 'count' THEN coalesce(sum(events), 0)
      WHEN 'sum' THEN coalesce(sum(total), 0)
      WHEN 'max' THEN coalesce(max(maximum), 0)
      WHEN 'unique' THEN count(DISTINCT v) FILTER (WHERE m.aggregation = 'unique')
      ELSE coalesce((array_agg(last_value ORDER BY last_ts DESC, last_id DESC) FILTER (WHERE m.aggregation = 'last' AND last_ts IS NOT NULL))[1], 0) END
    FROM parts)
    WHEN m.source = 'SPANS' AND m.rolled THEN (SELECT CASE m.aggregation
      WHEN 'count' THEN coalesce(sum(spans), 0)
      WHEN 'sum' THEN coalesce(sum(total), 0)
      WHEN 'max' THEN coalesce(max(maximum), 0)
      WHEN 'unique' THEN count(DISTINCT v) FILTER (WHERE m.aggregation = 'unique' AND v IS NOT NULL AND v <> 'null'::jsonb)
      ELSE coalesce((array_agg(last_value ORDER BY last_at DESC, last_id DESC) FILTER (WHERE m.aggregation = 'last' AND last_at IS NOT NULL))[1], 0) END
    FROM span_parts)
    ELSE NULL END AS quantity
FROM m LEFT JOIN c ON true`;

export class KnexUsageEventRepository implements UsageEventRepository {
  private readonly partitions = new PartitionEnsurer();

  /**
   * The organization this instance (one worker's fold) folded last: its next pass starts after it
   * (pickFoldOrganization). In memory: a restarted worker starts again from the first organization.
   */
  private foldCursor = '';

  constructor(private readonly db: Knex) {}

  async customerQuantity(orgId: string, meterId: string, customerRef: string, start: Date, end: Date): Promise<CustomerQuantityRead> {
    const { hours } = splitRange(start.getTime(), end.getTime());
    // Without a whole hour the rollup's range and the second edge are empty: [start, end) is the first edge.
    const [first, last] = hours ?? [end.getTime(), end.getTime()];
    const rows = await runStatement<{ meter: MeterRow; customer_id: string | null; external_id: string | null; quantity: string | number | null }>(
      this.db,
      CUSTOMER_QUANTITY_SQL,
      [orgId, meterId, customerRef, start.toISOString(), end.toISOString(), new Date(first).toISOString(), new Date(last).toISOString(), first, last, start.getTime(), end.getTime()],
    );
    const row = rows[0];
    if (!row) return { meter: undefined, customer: undefined, quantity: null };
    return {
      meter: toMeter(row.meter),
      customer: row.customer_id === null ? undefined : { id: row.customer_id, externalId: row.external_id },
      quantity: row.quantity === null ? null : Number(row.quantity),
    };
  }

  async insertNew(events: UsageEvent[], periods: ReadonlyMap<string, EventPeriod> = new Map()): Promise<{ stored: Set<string>; closed: Set<string> }> {
    if (events.length === 0) return { stored: new Set(), closed: new Set() };
    const orgId = events[0]!.orgId;
    if (events.some((e) => e.orgId !== orgId)) throw new Error('insertNew takes one organization\'s events');
    // One JSON parameter for the batch (cheaper to build than 7 bindings per row), one statement:
    // the events whose id is new are inserted (an id already stored, by an earlier or a concurrent
    // batch, is skipped) and only those reach the rollups of the meters they match — as deltas
    // queued for the fold (migration 0395): appended, no shared row updated or locked here.
    const { hours, values } = rollupSelect('inserted', "m.status = 'ACTIVE'", false);
    return this.db.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock_shared(hashtextextended(?, 0))', [METER_LOCK(orgId)]);
      // The close of a metered period (subscription.service.ts closingUsage) marks it under the
      // row's FOR UPDATE lock and then reads the quantities: held until this insert commits, this
      // lock orders the two, so an event is either stored before the close's read or refused here.
      const closed = new Set<string>();
      const subscriptionIds = [...new Set([...periods.values()].map((p) => p.subscriptionId))].sort();
      if (subscriptionIds.length > 0) {
        const rows = (await trx('subscriptions').whereIn('id', subscriptionIds).orderBy('id').forKeyShare().select('id', 'usage_closed_period')) as Array<{ id: string; usage_closed_period: number | null }>;
        const closedThrough = new Map(rows.map((r) => [r.id, r.usage_closed_period]));
        for (const [eventId, p] of periods) {
          const through = closedThrough.get(p.subscriptionId);
          if (through !== null && through !== undefined && p.period <= through) closed.add(eventId);
        }
      }
      // One row per id (the service sends each id once; a repeat would be stored twice below).
      const open: UsageEvent[] = [];
      const openIds = new Set<string>();
      for (const e of events) {
        if (closed.has(e.id) || openIds.has(e.id)) continue;
        openIds.add(e.id);
        open.push(e);
      }
      if (open.length === 0) return { stored: new Set<string>(), closed };
      // The weekly partitions of the batch's weeks (migration 0380), created here when missing.
      await this.partitions.ensure(trx, 'usage_events', open.map((e) => e.timestamp.getTime()), events[0]!.receivedAt);
      const payload = JSON.stringify(open.map((e) => ({ id: e.id, customer_id: e.customerId, name: e.name, ts: e.timestamp.toISOString(), properties: e.properties })));
      // Exactly once (migration 0380): the id is claimed in usage_event_ids first — an id stored
      // before, or being stored by a concurrent batch (whose transaction this waits for), is not
      // claimed — and only the claimed events are inserted and reach the rollups. The answer is
      // the ids not claimed (usually none): a row per inserted event cost a row to parse in Node.
      const result = await trx.raw(
        `WITH batch AS (
           SELECT r.id, r.customer_id, r.name, r.ts, r.properties
           FROM jsonb_to_recordset(?::jsonb) AS r(id text, customer_id text, name text, ts timestamptz, properties jsonb)
         ), claimed AS (
           INSERT INTO usage_event_ids (org_id, id, ts) SELECT ?, id, ts FROM batch
           ON CONFLICT (org_id, id) DO NOTHING
           RETURNING id
         ), inserted AS (
           INSERT INTO usage_events (org_id, id, customer_id, name, ts, properties, received_at)
           SELECT ?, b.id, b.customer_id, b.name, b.ts, b.properties, ?
           FROM batch b JOIN claimed c ON c.id = b.id
           RETURNING org_id, id, customer_id, name, ts, properties
         ), hours AS (
           INSERT INTO usage_meter_hour_deltas (${HOURS_COLUMNS}) ${hours}
         ), distinct_values AS (
           INSERT INTO usage_meter_hour_value_deltas (${VALUES_COLUMNS}) ${values}
         )
         SELECT b.id FROM batch b WHERE NOT EXISTS (SELECT FROM inserted i WHERE i.id = b.id)`,
        [payload, orgId, orgId, events[0]!.receivedAt],
      );
      return { stored: new Set((result.rows as Array<{ id: string }>).map((r) => r.id)), closed };
    });
  }

  async foldRollupDeltas(limit: number, beforeCommit?: () => Promise<void>): Promise<number> {
    return (await this.foldRollupPass(limit, beforeCommit)).rows;
  }

  async foldRollupPass(limit: number, beforeCommit?: () => Promise<void>): Promise<FoldPass> {
    return this.db.transaction(async (trx) => {
      const orgId = await this.pickFoldOrganization(trx);
      if (orgId === undefined) return { orgId, rows: 0, full: false };
      this.foldCursor = orgId;
      // The organization's fold lock (taken by the pick) keeps any other fold off its queue, so the
      // rows are taken without a row lock each (FOR UPDATE wrote a lock record per queued row before
      // the DELETE wrote its own); a row is deleted by the transaction that merges it, so it is
      // counted by the queue or by the rollup, in any snapshot, never both. Shared, as ingest: a
      // meter's build (exclusive) deletes queued deltas of its range, so no fold takes them meanwhile.
      await trx.raw('SELECT pg_advisory_xact_lock_shared(hashtextextended(?, 0))', [METER_LOCK(orgId)]);
      // The latest (ts, id) of each rollup row from one window sort of the taken rows, which the
      // grouping reuses (three ordered array_agg sorted each group three times); merged in key order.
      const hours = (await trx.raw(
        `WITH taken AS (
           DELETE FROM usage_meter_hour_deltas WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM usage_meter_hour_deltas WHERE org_id = ? LIMIT ?))
           RETURNING ${HOURS_COLUMNS}
         ), ranked AS (
           SELECT t.*, row_number() OVER (PARTITION BY org_id, meter_id, customer_id, hour ORDER BY last_ts DESC NULLS LAST, last_id DESC) AS rank
           FROM taken t
         ), merged AS (
           INSERT INTO usage_meter_hours AS h (${HOURS_COLUMNS})
           SELECT org_id, meter_id, customer_id, hour, sum(events), sum(total), max(maximum),
             max(last_ts) FILTER (WHERE rank = 1 AND last_ts IS NOT NULL),
             max(last_id) FILTER (WHERE rank = 1 AND last_ts IS NOT NULL),
             max(last_value) FILTER (WHERE rank = 1 AND last_ts IS NOT NULL)
           FROM ranked GROUP BY org_id, meter_id, customer_id, hour ORDER BY 1, 2, 3, 4
           ${MERGE_HOURS}
         )
         SELECT count(*)::int AS n FROM taken`,
        [orgId, limit],
      )) as { rows: Array<{ n: number }> };
      const values = (await trx.raw(
        `WITH taken AS (
           DELETE FROM usage_meter_hour_value_deltas WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM usage_meter_hour_value_deltas WHERE org_id = ? LIMIT ?))
           RETURNING ${VALUES_COLUMNS}
         ), merged AS (
           INSERT INTO usage_meter_hour_values (${VALUES_COLUMNS})
           SELECT DISTINCT ${VALUES_COLUMNS} FROM taken ORDER BY 1, 2, 3, 4, 5
           ON CONFLICT DO NOTHING
         )
         SELECT count(*)::int AS n FROM taken`,
        [orgId, limit],
      )) as { rows: Array<{ n: number }> };
      await beforeCommit?.();
      const [hourRows, valueRows] = [Number(hours.rows[0]?.n ?? 0), Number(values.rows[0]?.n ?? 0)];
      return { orgId, rows: hourRows + valueRows, full: hourRows >= limit || valueRows >= limit };
    });
  }

  /**
   * The organization a fold pass takes (issue 38, the fold's fair pick): the next organization
   * with queued deltas after the one this worker folded last, in org id order, wrapping around
   * (round-robin), whose fold lock is free — taken here, `pg_try_advisory_xact_lock`, for the
   * pass's transaction. An organization another worker is folding is skipped, never waited for;
   * undefined when no organization has queued deltas or every one of them is being folded.
   *
   * So an organization with a queue is folded within as many passes of any worker as there are
   * organizations with a queue, however fast another organization's queue refills (before, the
   * pick was the first queued row's organization, which a busy organization could hold for ever),
   * and two workers fold two organizations at once instead of meeting on one organization's
   * rollup rows. Why not
   * "oldest queued row first": the queues carry no time column, and adding one would put a write
   * on the ingest path for the order alone; round-robin needs nothing from ingest.
   */
  private async pickFoldOrganization(trx: Knex.Transaction): Promise<string | undefined> {
    // The organizations with a queue, those after this worker's last first (then wrapping around):
    // one scan of each queue (they hold what the last half second appended; the queues are indexed
    // by customer for their readers, migration 0435, not by organization).
    const { rows } = (await trx.raw(
      `SELECT org_id FROM (SELECT org_id FROM usage_meter_hour_deltas UNION SELECT org_id FROM usage_meter_hour_value_deltas) o
       ORDER BY org_id COLLATE "C" <= ? COLLATE "C", org_id COLLATE "C"`,
      [this.foldCursor],
    )) as { rows: Array<{ org_id: string }> };
    for (const { org_id: orgId } of rows) {
      const { rows: lock } = (await trx.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS mine', [FOLD_LOCK_PREFIX + orgId])) as { rows: Array<{ mine: boolean }> };
      if (lock[0]?.mine) return orgId;
    }
    return undefined;
  }

  async vacuumRollupQueues(): Promise<void> {
    // Outside any transaction (VACUUM refuses to run in one): the pool's connection in autocommit.
    // TRUNCATE false: no exclusive lock to cut an empty tail off (ingest would queue behind it);
    // the freed pages stay in the free space map for ingest's next appends.
    const options = isEmbedded(this.db) ? 'TRUNCATE false' : 'SKIP_LOCKED, TRUNCATE false';
    await this.db.raw(`VACUUM (${options}) usage_meter_hour_deltas, usage_meter_hour_value_deltas`);
  }

  async storedIds(orgId: string, ids: string[]): Promise<Set<string>> {
    const rows = (await this.db('usage_event_ids').where('org_id', orgId).whereIn('id', ids).select('id')) as Array<{ id: string }>;
    return new Set(rows.map((r) => r.id));
  }

  private filtered(query: EventQuantityQuery, start: Date = query.start, end: Date = query.end): Knex.QueryBuilder {
    const q = this.db('usage_events').where('org_id', query.orgId);
    if (query.customerId !== undefined) q.andWhere('customer_id', query.customerId);
    q.andWhere('name', query.eventName).andWhere('ts', '>=', start).andWhere('ts', '<', end);
    if (Object.keys(query.properties).length > 0) q.andWhereRaw('properties @> ?::jsonb', [JSON.stringify(query.properties)]);
    return q;
  }

  /**
   * The query's contributions as rollup-shaped parts (at, events, total, maximum, last_ts,
   * last_id, last_value — or at, value for `unique`): the meter's hour rows for the whole hours of
   * the range, the raw events for the edges a partial hour leaves.
   */
  private parts(query: EventQuantityQuery & { meterId: string }): { sql: string; bindings: Knex.Value[] } {
    const { hours, edges } = splitRange(query.start.getTime(), query.end.getTime());
    const unique = query.aggregation === 'unique';
    const p = query.property ?? '';
    const selects: string[] = [];
    const bindings: Knex.Value[] = [];
    if (hours) {
      const customer = query.customerId !== undefined ? ' AND customer_id = ?' : '';
      // The folded rows and the deltas still queued for the fold (migration 0395), in one statement: one snapshot.
      const tables = unique ? ['usage_meter_hour_values', 'usage_meter_hour_value_deltas'] : ['usage_meter_hours', 'usage_meter_hour_deltas'];
      const columns = unique ? 'hour AS at, value AS v' : 'hour AS at, events, total, maximum, last_ts, last_id, last_value';
      for (const table of tables) {
        selects.push(`SELECT ${columns} FROM ${table} WHERE org_id = ? AND meter_id = ?${customer} AND hour >= ? AND hour < ?`);
        bindings.push(query.orgId, query.meterId, ...(query.customerId !== undefined ? [query.customerId] : []), new Date(hours[0]), new Date(hours[1]));
      }
    }
    for (const [from, to] of edges) {
      const raw = this.filtered(query, new Date(from), new Date(to));
      const num = `CASE WHEN jsonb_typeof(properties -> ?) = 'number' THEN (properties ->> ?)::numeric END`;
      const columns = unique
        ? this.db.raw('ts AS at, properties -> ? AS v', [p])
        : this.db.raw(
            `ts AS at, 1::bigint AS events, coalesce(${num}, 0) AS total, ${num} AS maximum,
             CASE WHEN ${num} IS NOT NULL THEN ts END AS last_ts, CASE WHEN ${num} IS NOT NULL THEN id END AS last_id, ${num} AS last_value`,
            Array<string>(10).fill(p),
          );
      const built = raw.select(columns).toSQL().toNative();
      // knex hands back the driver's placeholders; the parts are embedded in a raw statement with `?`.
      selects.push(built.sql.replace(/\$\d+/g, '?'));
      bindings.push(...(built.bindings as Knex.Value[]));
    }
    return { sql: selects.map((s) => `(${s})`).join(' UNION ALL '), bindings };
  }

  /** Each aggregation kind over parts (see parts()); the same rules as src/usage/aggregations/. */
  private static combine(kind: AggregationKind): string {
    switch (kind) {
      case 'count':
        return 'coalesce(sum(events), 0)';
      case 'sum':
        return 'coalesce(sum(total), 0)';
      case 'max':
        return 'coalesce(max(maximum), 0)';
      case 'unique':
        return 'count(DISTINCT v)';
      case 'last':
        return 'coalesce((array_agg(last_value ORDER BY last_ts DESC, last_id DESC) FILTER (WHERE last_ts IS NOT NULL))[1], 0)';
    }
  }

  async quantity(query: EventQuantityQuery): Promise<number> {
    if (query.meterId !== undefined) {
      const { sql, bindings } = this.parts({ ...query, meterId: query.meterId });
      const { rows } = (await this.db.raw(`SELECT ${KnexUsageEventRepository.combine(query.aggregation)} AS quantity FROM (${sql}) parts`, bindings)) as {
        rows: Array<{ quantity: string | number | null }>;
      };
      return Number(rows[0]?.quantity ?? 0);
    }
    const { sql, bindings } = aggregateSql(query.aggregation, query.property);
    const row = (await this.filtered(query).first(this.db.raw(`${sql} AS quantity`, bindings))) as { quantity: string | number | null } | undefined;
    return Number(row?.quantity ?? 0);
  }

  async bucketQuantities(query: EventQuantityQuery, interval: QuantityInterval): Promise<Map<number, number>> {
    // The bucket's start as UTC epoch seconds, whatever the session's time zone.
    const bucketOf = (column: string) => `extract(epoch FROM date_trunc('${interval}', ${column} AT TIME ZONE 'UTC'))`;
    let rows: Array<{ bucket: string | number; quantity: string | number }>;
    if (query.meterId !== undefined) {
      const { sql, bindings } = this.parts({ ...query, meterId: query.meterId });
      rows = ((await this.db.raw(`SELECT ${bucketOf('at')} AS bucket, ${KnexUsageEventRepository.combine(query.aggregation)} AS quantity FROM (${sql}) parts GROUP BY 1`, bindings)) as { rows: typeof rows }).rows;
    } else {
      const { sql, bindings } = aggregateSql(query.aggregation, query.property);
      rows = (await this.filtered(query)
        .select(this.db.raw(`${bucketOf('ts')} AS bucket`), this.db.raw(`${sql} AS quantity`, bindings))
        .groupByRaw('1')) as typeof rows;
    }
    return new Map(rows.map((r) => [Math.round(Number(r.bucket) * 1000), Number(r.quantity)]));
  }

  async preview(query: EventQuantityQuery, interval: QuantityInterval): Promise<{ total: number; buckets: Map<number, number> }> {
    try {
      return await this.db.transaction(async (trx) => {
        // SET LOCAL: the timeout ends with this transaction, the pooled connection keeps its own.
        await trx.raw(`SET LOCAL statement_timeout = ${PREVIEW_TIMEOUT_MS}`);
        const bound = new KnexUsageEventRepository(trx);
        return { total: await bound.quantity(query), buckets: await bound.bucketQuantities(query, interval) };
      });
    } catch (error) {
      if ((error as { code?: string }).code === '57014') {
        throw serviceUnavailable(`Too many events of ${query.eventName} to preview within ${PREVIEW_TIMEOUT_MS / 1000} s; save the meter and read its quantities (its rollup answers at any size)`);
      }
      throw error;
    }
  }
}

export class KnexMeterRepository implements MeterRepository {
  constructor(private readonly db: Knex) {}

  async insert(m: Meter): Promise<void> {
    await this.db.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [METER_LOCK(m.orgId)]);
      await trx('meters').insert({
      id: m.id,
      org_id: m.orgId,
      name: m.name,
      source: m.source,
      filter: JSON.stringify(m.filter),
      aggregation: m.aggregation,
      property: m.property,
      customer_attribute: m.customerAttribute,
      status: m.status,
      rollup_status: m.rollupStatus,
      rollup_cursor: m.rollupStatus === 'BUILDING' ? '' : null,
      created_at: m.createdAt,
      updated_at: m.updatedAt,
      archived_at: m.archivedAt,
      });
    });
  }

  async find(orgId: string, id: string): Promise<Meter | undefined> {
    const row = (await this.db('meters').where({ org_id: orgId, id }).first()) as MeterRow | undefined;
    return row ? toMeter(row) : undefined;
  }

  async list(orgId: string, status: MeterStatus): Promise<Meter[]> {
    const rows = (await this.db('meters').where({ org_id: orgId, status }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])) as MeterRow[];
    return rows.map(toMeter);
  }

  async update(m: Meter): Promise<boolean> {
    return this.db.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [METER_LOCK(m.orgId)]);
      const before = (await trx('meters').where({ org_id: m.orgId, id: m.id, status: 'ACTIVE' }).first('filter')) as Pick<MeterRow, 'filter'> | undefined;
      if (!before) return false;
      // A changed filter applies to the past too: the rollup is rebuilt from the events, in the
      // background (buildChunk), from the first customer on — a build under way starts over.
      const previous = typeof before.filter === 'string' ? (JSON.parse(before.filter) as MeterFilter) : before.filter;
      const rebuild = JSON.stringify(previous) !== JSON.stringify(m.filter);
      await trx('meters')
        .where({ org_id: m.orgId, id: m.id })
        .update({ name: m.name, filter: JSON.stringify(m.filter), updated_at: m.updatedAt, ...(rebuild ? { rollup_status: 'BUILDING', rollup_cursor: '' } : {}) });
      return true;
    });
  }

  async archive(orgId: string, id: string, at: Date): Promise<boolean> {
    // An archived meter is read from the events: a build under way stops (ingest no longer keeps its rows).
    const written = await this.db('meters').where({ org_id: orgId, id, status: 'ACTIVE' }).update({ status: 'ARCHIVED', archived_at: at, updated_at: at, rollup_status: 'READY', rollup_cursor: null });
    return written === 1;
  }

  async building(limit: number): Promise<Array<{ orgId: string; id: string; source: Meter['source'] }>> {
    const rows = (await this.db('meters').where('rollup_status', 'BUILDING').orderBy([{ column: 'updated_at' }, { column: 'id' }]).limit(limit).select('org_id', 'id', 'source')) as Array<{ org_id: string; id: string; source: Meter['source'] }>;
    return rows.map((r) => ({ orgId: r.org_id, id: r.id, source: r.source }));
  }

  buildChunk(orgId: string, id: string, chunkEvents: number, beforeCommit?: () => Promise<void>): Promise<'none' | 'chunk' | 'ready'> {
    return this.db.transaction((trx) => buildRollupChunk(trx, orgId, id, chunkEvents, beforeCommit));
  }
}
