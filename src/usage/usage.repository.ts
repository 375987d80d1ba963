/** Usage events and meters in the database (the usage domain's only knex user). */
import type { Knex } from 'knex';
import type { AggregationKind } from './aggregations/index.js';
import type { Meter, MeterFilter, MeterStatus, QuantityInterval, Scalar, UsageEvent } from './usage.model.js';

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
}

export interface UsageEventRepository {
  /** Inserts the events whose id the organization has not stored yet; returns the ids inserted. */
  insertNew(events: UsageEvent[]): Promise<Set<string>>;
  /** Which of these ids the organization has stored. */
  storedIds(orgId: string, ids: string[]): Promise<Set<string>>;
  /** The aggregation over [start, end), and per bucket (epoch ms of the bucket's UTC start → quantity) when asked. */
  quantity(query: EventQuantityQuery): Promise<number>;
  bucketQuantities(query: EventQuantityQuery, interval: QuantityInterval): Promise<Map<number, number>>;
}

export interface MeterRepository {
  insert(meter: Meter): Promise<void>;
  find(orgId: string, id: string): Promise<Meter | undefined>;
  list(orgId: string, status: MeterStatus): Promise<Meter[]>;
  /** Writes name and filter while the meter is ACTIVE; false otherwise. */
  update(meter: Meter): Promise<boolean>;
  /** ACTIVE → ARCHIVED; false when it was not ACTIVE. */
  archive(orgId: string, id: string, at: Date): Promise<boolean>;
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

export class KnexUsageEventRepository implements UsageEventRepository {
  constructor(private readonly db: Knex) {}

  async insertNew(events: UsageEvent[]): Promise<Set<string>> {
    if (events.length === 0) return new Set();
    const rows = events.map((e) => ({
      org_id: e.orgId,
      id: e.id,
      customer_id: e.customerId,
      name: e.name,
      ts: e.timestamp,
      properties: JSON.stringify(e.properties),
      received_at: e.receivedAt,
    }));
    // One statement per batch; an id already stored (by an earlier or a concurrent batch) is skipped.
    const inserted = (await this.db('usage_events').insert(rows).onConflict(['org_id', 'id']).ignore().returning('id')) as Array<{ id: string }>;
    return new Set(inserted.map((r) => r.id));
  }

  async storedIds(orgId: string, ids: string[]): Promise<Set<string>> {
    const rows = (await this.db('usage_events').where('org_id', orgId).whereIn('id', ids).select('id')) as Array<{ id: string }>;
    return new Set(rows.map((r) => r.id));
  }

  private filtered(query: EventQuantityQuery): Knex.QueryBuilder {
    const q = this.db('usage_events').where('org_id', query.orgId);
    if (query.customerId !== undefined) q.andWhere('customer_id', query.customerId);
    q.andWhere('name', query.eventName).andWhere('ts', '>=', query.start).andWhere('ts', '<', query.end);
    if (Object.keys(query.properties).length > 0) q.andWhereRaw('properties @> ?::jsonb', [JSON.stringify(query.properties)]);
    return q;
  }

  async quantity(query: EventQuantityQuery): Promise<number> {
    const { sql, bindings } = aggregateSql(query.aggregation, query.property);
    const row = (await this.filtered(query).first(this.db.raw(`${sql} AS quantity`, bindings))) as { quantity: string | number | null } | undefined;
    return Number(row?.quantity ?? 0);
  }

  async bucketQuantities(query: EventQuantityQuery, interval: QuantityInterval): Promise<Map<number, number>> {
    const { sql, bindings } = aggregateSql(query.aggregation, query.property);
    // The bucket's start as UTC epoch seconds, whatever the session's time zone.
    const bucket = `extract(epoch FROM date_trunc('${interval}', ts AT TIME ZONE 'UTC'))`;
    const rows = (await this.filtered(query)
      .select(this.db.raw(`${bucket} AS bucket`), this.db.raw(`${sql} AS quantity`, bindings))
      .groupByRaw('1')) as Array<{ bucket: string | number; quantity: string | number }>;
    return new Map(rows.map((r) => [Math.round(Number(r.bucket) * 1000), Number(r.quantity)]));
  }
}

export class KnexMeterRepository implements MeterRepository {
  constructor(private readonly db: Knex) {}

  async insert(m: Meter): Promise<void> {
    await this.db('meters').insert({
      id: m.id,
      org_id: m.orgId,
      name: m.name,
      source: m.source,
      filter: JSON.stringify(m.filter),
      aggregation: m.aggregation,
      property: m.property,
      customer_attribute: m.customerAttribute,
      status: m.status,
      created_at: m.createdAt,
      updated_at: m.updatedAt,
      archived_at: m.archivedAt,
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
    const written = await this.db('meters')
      .where({ org_id: m.orgId, id: m.id, status: 'ACTIVE' })
      .update({ name: m.name, filter: JSON.stringify(m.filter), updated_at: m.updatedAt });
    return written === 1;
  }

  async archive(orgId: string, id: string, at: Date): Promise<boolean> {
    const written = await this.db('meters').where({ org_id: orgId, id, status: 'ACTIVE' }).update({ status: 'ARCHIVED', archived_at: at, updated_at: at });
    return written === 1;
  }
}
