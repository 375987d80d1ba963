/**
 * Meters: a filter over usage events or a telemetry project's model-call spans, and an
 * aggregation. Quantities are computed from the raw events (by the database) or spans (by the
 * aggregation units) when asked, so a changed filter applies to the past too.
 */
import type { Customer } from '../commerce/model.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import { conflict, notFound, validationError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { AGGREGATIONS, type AggregationKind, type Contribution } from './aggregations/index.js';
import type { Meter, MeterFilter, MeterSource, MeterStatus, QuantityBucket, QuantityInterval, Scalar } from './usage.model.js';
import type { EventQuantityQuery, MeterRepository, UsageEventRepository } from './usage.repository.js';

/** A model-call span as telemetry hands it over (src/telemetry's TraceService.modelCallSpans). */
export interface MeteredSpan {
  traceId: string;
  spanId: string;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  rootAttributes: Record<string, unknown>;
}

/** What meters read of telemetry, through its module's interface (never its tables). */
export interface SpanReader {
  projectBelongsTo(orgId: string, projectId: string): Promise<boolean>;
  modelCallSpans(projectId: string, start: Date, end: Date): Promise<MeteredSpan[]>;
}

export interface MeterInput {
  name: string;
  source: MeterSource;
  filter: MeterFilter;
  aggregation: AggregationKind;
  property?: string;
  customerAttribute?: string;
}

export interface Quantities {
  meterId: string;
  customerId: string | null;
  start: Date;
  end: Date;
  interval: QuantityInterval | null;
  total: number;
  buckets: QuantityBucket[];
}

export const MAX_BUCKETS = 1000;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The UTC start of the bucket holding `at`, and the start of the next. */
export function bucketStart(at: number, interval: QuantityInterval): number {
  if (interval === 'hour') return Math.floor(at / HOUR) * HOUR;
  if (interval === 'day') return Math.floor(at / DAY) * DAY;
  const d = new Date(at);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}
function nextBucket(start: number, interval: QuantityInterval): number {
  if (interval === 'hour') return start + HOUR;
  if (interval === 'day') return start + DAY;
  const d = new Date(start);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** The range's buckets, the first and last cut to it. */
export function bucketsOf(start: number, end: number, interval: QuantityInterval): Array<{ key: number; start: number; end: number }> {
  const buckets: Array<{ key: number; start: number; end: number }> = [];
  for (let key = bucketStart(start, interval); key < end; key = nextBucket(key, interval)) {
    if (buckets.length === MAX_BUCKETS) throw validationError(`The range holds more than ${MAX_BUCKETS} buckets of one ${interval}; use a wider interval or a shorter range`, { field: 'interval' });
    buckets.push({ key, start: Math.max(key, start), end: Math.min(nextBucket(key, interval), end) });
  }
  return buckets;
}

const SOURCE_FIELDS: Record<MeterSource, ReadonlyArray<keyof MeterFilter>> = {
  EVENTS: ['eventName', 'properties'],
  SPANS: ['projectId', 'model', 'vendor', 'attributes'],
};

/** A span's value of a meter property: its attribute, or a computed field. */
function spanValue(span: MeteredSpan, property: string): unknown {
  if (property === 'duration_ms') return span.endMs - span.startMs;
  return span.attributes[property];
}

/** The span's customer reference: the named attribute on the span, else on its trace's root span. */
function spanCustomerRef(span: MeteredSpan, attribute: string): string | undefined {
  const value = span.attributes[attribute] ?? span.rootAttributes[attribute];
  if (typeof value === 'string' && value.length > 0) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

const equalsScalar = (value: unknown, expected: Scalar) => value === expected;

export class MeterService {
  constructor(
    private readonly meters: MeterRepository,
    private readonly events: UsageEventRepository,
    private readonly commerce: CommerceUnitOfWork,
    private readonly spans: SpanReader,
    private readonly clock: Clock,
  ) {}

  private async checkFilter(orgId: string, source: MeterSource, filter: MeterFilter): Promise<MeterFilter> {
    const other = SOURCE_FIELDS[source === 'EVENTS' ? 'SPANS' : 'EVENTS'].find((f) => filter[f] !== undefined);
    if (other) throw validationError(`filter.${other} is not a filter of source ${source}`, { field: `filter.${other}` });
    if (source === 'EVENTS') {
      if (filter.eventName === undefined) throw validationError('filter.eventName is required for source EVENTS', { field: 'filter.eventName' });
      return { eventName: filter.eventName, properties: filter.properties ?? {} };
    }
    if (filter.projectId === undefined) throw validationError('filter.projectId is required for source SPANS', { field: 'filter.projectId' });
    if (!(await this.spans.projectBelongsTo(orgId, filter.projectId))) {
      throw validationError(`filter.projectId ${filter.projectId} is not a telemetry project of this organization`, { field: 'filter.projectId' });
    }
    return {
      projectId: filter.projectId,
      ...(filter.model !== undefined ? { model: filter.model } : {}),
      ...(filter.vendor !== undefined ? { vendor: filter.vendor } : {}),
      attributes: filter.attributes ?? {},
    };
  }

  async create(orgId: string, input: MeterInput): Promise<Meter> {
    const name = input.name.trim();
    if (name.length === 0) throw validationError('name must not be blank', { field: 'name' });
    const aggregation = AGGREGATIONS[input.aggregation];
    if (aggregation.readsProperty && input.property === undefined) throw validationError(`property is required for aggregation ${input.aggregation}`, { field: 'property' });
    if (!aggregation.readsProperty && input.property !== undefined) throw validationError('count reads no property; leave property out', { field: 'property' });
    if (input.source === 'SPANS' && input.customerAttribute === undefined) {
      throw validationError('customerAttribute is required for source SPANS (the span attribute holding the customer\'s externalId, e.g. user.id)', { field: 'customerAttribute' });
    }
    if (input.source === 'EVENTS' && input.customerAttribute !== undefined) {
      throw validationError('customerAttribute is for source SPANS; usage events name their customer', { field: 'customerAttribute' });
    }
    const filter = await this.checkFilter(orgId, input.source, input.filter);
    const now = this.clock.now();
    const meter: Meter = {
      id: newId('MTR'),
      orgId,
      name,
      source: input.source,
      filter,
      aggregation: input.aggregation,
      property: input.property ?? null,
      customerAttribute: input.customerAttribute ?? null,
      status: 'ACTIVE',
      createdAt: now,
      updatedAt: now,
      archivedAt: null,
    };
    await this.meters.insert(meter);
    return meter;
  }

  async get(orgId: string, id: string): Promise<Meter> {
    const meter = await this.meters.find(orgId, id);
    if (!meter) throw notFound('Meter');
    return meter;
  }

  list(orgId: string, status: MeterStatus = 'ACTIVE'): Promise<Meter[]> {
    return this.meters.list(orgId, status);
  }

  async update(orgId: string, id: string, change: { name?: string; filter?: MeterFilter }): Promise<Meter> {
    const meter = await this.get(orgId, id);
    if (change.name === undefined && change.filter === undefined) throw validationError('Give name or filter');
    if (meter.status !== 'ACTIVE') throw conflict('An archived meter cannot change');
    const name = change.name !== undefined ? change.name.trim() : meter.name;
    if (name.length === 0) throw validationError('name must not be blank', { field: 'name' });
    const filter = change.filter !== undefined ? await this.checkFilter(orgId, meter.source, change.filter) : meter.filter;
    const updated: Meter = { ...meter, name, filter, updatedAt: this.clock.now() };
    if (!(await this.meters.update(updated))) throw conflict('An archived meter cannot change');
    return updated;
  }

  async archive(orgId: string, id: string): Promise<Meter> {
    const meter = await this.get(orgId, id);
    if (meter.status === 'ARCHIVED') return meter;
    await this.meters.archive(orgId, id, this.clock.now());
    return this.get(orgId, id);
  }

  /** A customer named by `CUS_…` id first, else by externalId. */
  async resolveCustomer(orgId: string, ref: string): Promise<Customer> {
    const customers = this.commerce.stores.customers;
    const customer = (await customers.find(orgId, ref)) ?? (await customers.findByExternalId(orgId, ref));
    if (!customer) throw notFound('Customer');
    return customer;
  }

  async quantities(orgId: string, id: string, query: { customer?: string; start: Date; end: Date; interval?: QuantityInterval }): Promise<Quantities> {
    const meter = await this.get(orgId, id);
    if (!(query.end.getTime() > query.start.getTime())) throw validationError('end must be after start', { field: 'end' });
    const buckets = query.interval ? bucketsOf(query.start.getTime(), query.end.getTime(), query.interval) : [];
    const customer = query.customer !== undefined ? await this.resolveCustomer(orgId, query.customer) : undefined;
    const result = { meterId: meter.id, customerId: customer?.id ?? null, start: query.start, end: query.end, interval: query.interval ?? null };
    if (meter.source === 'EVENTS') {
      const q: EventQuantityQuery = {
        orgId,
        customerId: customer?.id,
        eventName: meter.filter.eventName!,
        properties: meter.filter.properties ?? {},
        aggregation: meter.aggregation,
        property: meter.property,
        start: query.start,
        end: query.end,
        // Ingest keeps the rollup of ACTIVE meters only; an archived meter is read from the events.
        ...(meter.status === 'ACTIVE' ? { meterId: meter.id } : {}),
      };
      const [total, byBucket] = await Promise.all([
        this.events.quantity(q),
        query.interval ? this.events.bucketQuantities(q, query.interval) : Promise.resolve(new Map<number, number>()),
      ]);
      return { ...result, total, buckets: buckets.map((b) => ({ start: new Date(b.start), end: new Date(b.end), quantity: byBucket.get(b.key) ?? 0 })) };
    }
    const contributions = await this.spanContributions(orgId, meter, customer, query.start, query.end);
    const aggregation = AGGREGATIONS[meter.aggregation];
    const perBucket = new Map<number, Contribution[]>();
    if (query.interval) {
      for (const c of contributions) {
        const key = bucketStart(c.at, query.interval);
        const list = perBucket.get(key);
        if (list) list.push(c);
        else perBucket.set(key, [c]);
      }
    }
    return {
      ...result,
      total: aggregation.quantity(contributions),
      buckets: buckets.map((b) => ({ start: new Date(b.start), end: new Date(b.end), quantity: aggregation.quantity(perBucket.get(b.key) ?? []) })),
    };
  }

  /** The meter's spans in the range that belong to the customer (or to any customer), as contributions. */
  private async spanContributions(orgId: string, meter: Meter, customer: Customer | undefined, start: Date, end: Date): Promise<Contribution[]> {
    const { filter } = meter;
    const attribute = meter.customerAttribute!;
    const spans = (await this.spans.modelCallSpans(filter.projectId!, start, end)).filter(
      (s) =>
        (filter.model === undefined || s.attributes['llm.model'] === filter.model) &&
        (filter.vendor === undefined || s.attributes['llm.vendor'] === filter.vendor) &&
        Object.entries(filter.attributes ?? {}).every(([k, v]) => equalsScalar(s.attributes[k], v)),
    );
    let belongs: (ref: string) => boolean;
    if (customer) {
      belongs = (ref) => ref === customer.externalId || ref === customer.id;
    } else {
      const refs = new Set<string>();
      for (const s of spans) {
        const ref = spanCustomerRef(s, attribute);
        if (ref !== undefined) refs.add(ref);
      }
      const known = await this.commerce.stores.customers.findByRefs(orgId, { ids: [...refs].filter((r) => r.startsWith('CUS_')), externalIds: [...refs] });
      const names = new Set<string>();
      for (const c of known) {
        names.add(c.id);
        if (c.externalId !== null) names.add(c.externalId);
      }
      belongs = (ref) => names.has(ref);
    }
    const contributions: Contribution[] = [];
    for (const s of spans) {
      const ref = spanCustomerRef(s, attribute);
      if (ref === undefined || !belongs(ref)) continue;
      contributions.push({ at: s.startMs, id: `${s.traceId}:${s.spanId}`, value: meter.property === null ? undefined : spanValue(s, meter.property) });
    }
    return contributions;
  }
}
