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
import { AGGREGATIONS, type AggregationKind } from './aggregations/index.js';
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

/** Aggregates of a project's model-call spans per customer reference (and bucket), as telemetry computes them (TraceService.modelCallAggregates). */
export interface SpanAggregate {
  /** The customer reference: the value of the meter's customer attribute. */
  key: string;
  bucket: number | null;
  count: number;
  sum: number;
  max: number | null;
  last: { at: number; id: string; value: number } | null;
  /** JSON texts of the distinct values (unique meters). */
  values: string[];
}

export interface SpanAggregateQuery {
  projectId: string;
  start: Date;
  end: Date;
  model?: string;
  vendor?: string;
  attributes: Record<string, Scalar>;
  groupAttribute: string;
  property: string | null;
  distinct: boolean;
  interval?: QuantityInterval;
}

/** A span meter's rollup over whole UTC hours [from, to) (epoch ms) and its points over `edges` (with `keys` only), per key (and bucket). */
export interface SpanMeterHoursQuery {
  meterId: string;
  from: number;
  to: number;
  edges?: ReadonlyArray<readonly [number, number]>;
  keys?: readonly string[];
  distinct: boolean;
  interval?: QuantityInterval;
}

/** What meters read of telemetry, through its module's interface (never its tables). */
export interface SpanReader {
  projectBelongsTo(orgId: string, projectId: string): Promise<boolean>;
  modelCallSpans(projectId: string, start: Date, end: Date): Promise<MeteredSpan[]>;
  modelCallAggregates(query: SpanAggregateQuery): Promise<SpanAggregate[]>;
  /** The hourly rollup of a span meter (migration 0381), kept by span ingest for ACTIVE meters. */
  meterHours(query: SpanMeterHoursQuery): Promise<SpanAggregate[]>;
  /** One chunk of a span meter's background rollup build; 'none' when it is not BUILDING. */
  buildMeterChunk(orgId: string, meterId: string, chunkTraces: number, beforeCommit?: () => Promise<void>): Promise<'none' | 'chunk' | 'ready'>;
}

/** Aggregates of one customer (or everyone) merged into a quantity, by the aggregation's own rule. */
function mergeAggregates(kind: AggregationKind, parts: readonly SpanAggregate[]): number {
  switch (kind) {
    case 'count':
      return parts.reduce((n, p) => n + p.count, 0);
    case 'sum':
      return parts.reduce((n, p) => n + p.sum, 0);
    case 'max': {
      let found: number | undefined;
      for (const p of parts) if (p.max !== null && (found === undefined || p.max > found)) found = p.max;
      return found ?? 0;
    }
    case 'last': {
      let latest: { at: number; id: string; value: number } | undefined;
      for (const p of parts) if (p.last && (!latest || p.last.at > latest.at || (p.last.at === latest.at && p.last.id > latest.id))) latest = p.last;
      return latest?.value ?? 0;
    }
    case 'unique':
      return new Set(parts.flatMap((p) => p.values)).size;
  }
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
/** Events per chunk of a meter's rollup build: well under a second of the database's time each. */
export const ROLLUP_CHUNK_EVENTS = 20_000;
/** The console's meter preview covers this many UTC days, ending now. */
export const PREVIEW_DAYS = 30;

export interface MeterPreview {
  start: Date;
  end: Date;
  interval: 'day';
  /** Where the quantities came from: an active meter's rollup, the raw events, the spans. */
  read: 'ROLLUP' | 'EVENTS' | 'SPANS';
  total: number;
  buckets: QuantityBucket[];
}

/** JSON with sorted keys: two property filters that are equal as sets of pairs read the same. */
const canonical = (o: Record<string, Scalar>): string => JSON.stringify(Object.keys(o).sort().map((k) => [k, o[k]]));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The whole UTC hours in [start, end) (null: none), and the partial edges the rollup does not hold. */
export function splitHours(start: number, end: number): { hours: [number, number] | null; edges: Array<[number, number]> } {
  const first = Math.ceil(start / HOUR) * HOUR;
  const last = Math.floor(end / HOUR) * HOUR;
  if (first >= last) return { hours: null, edges: [[start, end]] };
  const edges: Array<[number, number]> = [];
  if (start < first) edges.push([start, first]);
  if (last < end) edges.push([last, end]);
  return { hours: [first, last], edges };
}

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

export class MeterService {
  constructor(
    private readonly meters: MeterRepository,
    private readonly events: UsageEventRepository,
    private readonly commerce: CommerceUnitOfWork,
    private readonly spans: SpanReader,
    private readonly clock: Clock,
    /** Events per chunk of a rollup build (one transaction under the organization's meter lock). */
    private readonly chunkEvents: number = ROLLUP_CHUNK_EVENTS,
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

  /** The rules of a definition (everything but the name), shared by create and the console's preview. */
  private async checkDefinition(orgId: string, input: Omit<MeterInput, 'name'>): Promise<MeterFilter> {
    const aggregation = AGGREGATIONS[input.aggregation];
    if (aggregation.readsProperty && input.property === undefined) throw validationError(`property is required for aggregation ${input.aggregation}`, { field: 'property' });
    if (!aggregation.readsProperty && input.property !== undefined) throw validationError('count reads no property; leave property out', { field: 'property' });
    if (input.source === 'SPANS' && input.customerAttribute === undefined) {
      throw validationError('customerAttribute is required for source SPANS (the span attribute holding the customer\'s externalId, e.g. user.id)', { field: 'customerAttribute' });
    }
    if (input.source === 'EVENTS' && input.customerAttribute !== undefined) {
      throw validationError('customerAttribute is for source SPANS; usage events name their customer', { field: 'customerAttribute' });
    }
    return this.checkFilter(orgId, input.source, input.filter);
  }

  async create(orgId: string, input: MeterInput): Promise<Meter> {
    const name = input.name.trim();
    if (name.length === 0) throw validationError('name must not be blank', { field: 'name' });
    const filter = await this.checkDefinition(orgId, input);
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
      // A meter's rollup (usage-event hours, migration 0280; span hours, 0381) is built in the background.
      rollupStatus: 'BUILDING',
      createdAt: now,
      updatedAt: now,
      archivedAt: null,
    };
    await this.meters.insert(meter);
    return this.buildFirstChunk(meter);
  }

  /**
   * The request builds one chunk of the rollup (≤ ROLLUP_CHUNK_EVENTS events): a small
   * organization's meter answers READY at once, a large one's build goes on in the background
   * (the `usage-meter-rollups` job). A failure here is the job's to retry, not the request's.
   */
  private async buildFirstChunk(meter: Meter): Promise<Meter> {
    try {
      const step = await this.buildChunk(meter.source, meter.orgId, meter.id);
      return step === 'ready' ? { ...meter, rollupStatus: 'READY' } : meter;
    } catch {
      return meter;
    }
  }

  /**
   * One pass of the background build (the `usage-meter-rollups` job): one chunk of each BUILDING
   * meter (at most 20 per pass); true when it did work. Several workers may run it: a chunk holds
   * the organization's meter lock and re-reads the meter's cursor under it.
   */
  async buildRollups(): Promise<boolean> {
    let worked = false;
    for (const { orgId, id, source } of await this.meters.building(20)) {
      if ((await this.buildChunk(source, orgId, id)) !== 'none') worked = true;
    }
    return worked;
  }

  /** One chunk of a meter's build: usage events by customer, spans by hour (telemetry builds those, under its project's meter lock). */
  private buildChunk(source: MeterSource, orgId: string, id: string): Promise<'none' | 'chunk' | 'ready'> {
    return source === 'EVENTS' ? this.meters.buildChunk(orgId, id, this.chunkEvents) : this.spans.buildMeterChunk(orgId, id, this.chunkEvents);
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
    if (JSON.stringify(meter.filter) !== JSON.stringify(filter)) return this.buildFirstChunk({ ...updated, rollupStatus: 'BUILDING' });
    return this.get(orgId, id);
  }

  async archive(orgId: string, id: string): Promise<Meter> {
    const meter = await this.get(orgId, id);
    if (meter.status === 'ARCHIVED') return meter;
    await this.meters.archive(orgId, id, this.clock.now());
    return this.get(orgId, id);
  }

  /**
   * A customer named by `CUS_…` id first, else by externalId: one query for both (a quantity read
   * is ~3 statements, and this was two of them).
   */
  async resolveCustomer(orgId: string, ref: string): Promise<Customer> {
    const found = await this.commerce.stores.customers.findByRefs(orgId, { ids: ref.startsWith('CUS_') ? [ref] : [], externalIds: [ref] });
    const customer = found.find((c) => c.id === ref) ?? found.find((c) => c.externalId === ref);
    if (!customer) throw notFound('Customer');
    return customer;
  }

  async quantities(orgId: string, id: string, query: { customer?: string; start: Date; end: Date; interval?: QuantityInterval }): Promise<Quantities> {
    if (query.customer !== undefined && !query.interval) {
      // A customer's total (the quantity request, the balances, the metered access check): the
      // meter, the customer and the quantity in one statement, a span meter's from its rollup and
      // points too. A span meter still building (or archived) answers no quantity there: its raw
      // spans are read below with the meter and customer found here.
      const read = await this.events.customerQuantity(orgId, id, query.customer, query.start, query.end);
      if (!read.meter) throw notFound('Meter');
      if (!(query.end.getTime() > query.start.getTime())) throw validationError('end must be after start', { field: 'end' });
      if (!read.customer) throw notFound('Customer');
      const result = { meterId: read.meter.id, customerId: read.customer.id, start: query.start, end: query.end, interval: null, buckets: [] };
      if (read.quantity !== null) return { ...result, total: read.quantity };
      // A span meter without a READY rollup: the meter and the customer found above, the quantity from the raw spans.
      if (read.meter.source === 'SPANS') return { ...result, total: (await this.spanQuantities(orgId, read.meter, read.customer, query.start, query.end, undefined, [])).total };
    }
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
        // Ingest keeps the rollup of ACTIVE meters only; an archived meter, and one whose rollup is
        // still being built (migration 0335), is read from the events: exact, only slower.
        ...(meter.status === 'ACTIVE' && meter.rollupStatus === 'READY' ? { meterId: meter.id } : {}),
      };
      const [total, byBucket] = await Promise.all([
        this.events.quantity(q),
        query.interval ? this.events.bucketQuantities(q, query.interval) : Promise.resolve(new Map<number, number>()),
      ]);
      return { ...result, total, buckets: buckets.map((b) => ({ start: new Date(b.start), end: new Date(b.end), quantity: byBucket.get(b.key) ?? 0 })) };
    }
    return { ...result, ...(await this.spanQuantities(orgId, meter, customer, query.start, query.end, query.interval, buckets)) };
  }

  /**
   * A console preview of an unsaved definition: its quantity for every customer together in each
   * of the last PREVIEW_DAYS UTC days, today's included (to its end). Bounded: a fixed range,
   * aggregated by the database — the rollup of an active meter with the same definition, else one
   * SQL aggregation under a statement timeout (events), else telemetry's aggregate (spans).
   */
  async preview(orgId: string, input: Omit<MeterInput, 'name'>): Promise<MeterPreview> {
    const filter = await this.checkDefinition(orgId, input);
    const now = this.clock.now().getTime();
    // Whole UTC days, today's included whole: an event stamped now (or up to the accepted 5 minutes ahead) is in it.
    const end = bucketStart(now, 'day') + DAY;
    const start = end - PREVIEW_DAYS * DAY;
    const buckets = bucketsOf(start, end, 'day');
    const range = { start: new Date(start), end: new Date(end), interval: 'day' as const };
    if (input.source === 'EVENTS') {
      const property = input.property ?? null;
      const same = (await this.meters.list(orgId, 'ACTIVE')).find(
        (m) =>
          m.source === 'EVENTS' &&
          // A rollup still being built (background build, migration 0335) is incomplete: read the events.
          m.rollupStatus === 'READY' &&
          m.filter.eventName === filter.eventName &&
          canonical(m.filter.properties ?? {}) === canonical(filter.properties ?? {}) &&
          m.aggregation === input.aggregation &&
          m.property === property,
      );
      const q: EventQuantityQuery = { orgId, eventName: filter.eventName!, properties: filter.properties ?? {}, aggregation: input.aggregation, property, start: range.start, end: range.end };
      const read = same
        ? await Promise.all([this.events.quantity({ ...q, meterId: same.id }), this.events.bucketQuantities({ ...q, meterId: same.id }, 'day')]).then(([total, byBucket]) => ({ total, buckets: byBucket }))
        : await this.events.preview(q, 'day');
      return {
        ...range,
        read: same ? 'ROLLUP' : 'EVENTS',
        total: read.total,
        buckets: buckets.map((b) => ({ start: new Date(b.start), end: new Date(b.end), quantity: read.buckets.get(b.key) ?? 0 })),
      };
    }
    const definition = { filter, aggregation: input.aggregation, property: input.property ?? null, customerAttribute: input.customerAttribute ?? null };
    return { ...range, read: 'SPANS', ...(await this.spanQuantities(orgId, definition, undefined, range.start, range.end, 'day', buckets)) };
  }

  /** A span meter's quantities: the database aggregates the spans per customer reference (and bucket); the references are mapped to customers here. */
  private async spanQuantities(
    orgId: string,
    meter: Pick<Meter, 'filter' | 'aggregation' | 'property' | 'customerAttribute'> & Partial<Pick<Meter, 'id' | 'status' | 'rollupStatus'>>,
    customer: Pick<Customer, 'id' | 'externalId'> | undefined,
    start: Date,
    end: Date,
    interval: QuantityInterval | undefined,
    buckets: Array<{ key: number; start: number; end: number }>,
  ): Promise<{ total: number; buckets: QuantityBucket[] }> {
    const { filter } = meter;
    const keys = customer ? (customer.externalId !== null ? [customer.externalId, customer.id] : [customer.id]) : undefined;
    const raw = (from: number, to: number) =>
      this.spans.modelCallAggregates({
        projectId: filter.projectId!,
        start: new Date(from),
        end: new Date(to),
        ...(filter.model !== undefined ? { model: filter.model } : {}),
        ...(filter.vendor !== undefined ? { vendor: filter.vendor } : {}),
        attributes: filter.attributes ?? {},
        groupAttribute: meter.customerAttribute!,
        property: meter.property,
        distinct: meter.aggregation === 'unique',
        ...(interval ? { interval } : {}),
        ...(keys ? { keys } : {}),
      });
    // An ACTIVE meter whose rollup is READY (migration 0381): its hour rows for the whole UTC hours
    // of the range and, for one customer, its points (0391) for the partial hours at the edges, in
    // one statement; for every customer together the edges' raw spans (points are read by key).
    // Otherwise (a preview, an archived meter, a build under way): the raw spans of the whole range.
    let parts: SpanAggregate[];
    const { hours, edges } = splitHours(start.getTime(), end.getTime());
    const rolled = meter.id !== undefined && meter.status === 'ACTIVE' && meter.rollupStatus === 'READY';
    if (rolled && keys) {
      const [from, to] = hours ?? [end.getTime(), end.getTime()];
      parts = await this.spans.meterHours({ meterId: meter.id!, from, to, edges, keys, distinct: meter.aggregation === 'unique', ...(interval ? { interval } : {}) });
    } else if (rolled && hours) {
      const read = await Promise.all([
        this.spans.meterHours({ meterId: meter.id!, from: hours[0], to: hours[1], distinct: meter.aggregation === 'unique', ...(keys ? { keys } : {}), ...(interval ? { interval } : {}) }),
        ...edges.map(([from, to]) => raw(from, to)),
      ]);
      parts = read.flat();
    } else {
      parts = await raw(start.getTime(), end.getTime());
    }
    let belongs: (ref: string) => boolean;
    if (customer) {
      belongs = (ref) => ref === customer.externalId || ref === customer.id;
    } else {
      const refs = [...new Set(parts.map((p) => p.key))];
      const known = refs.length === 0 ? [] : await this.commerce.stores.customers.idsByRefs(orgId, { ids: refs.filter((r) => r.startsWith('CUS_')), externalIds: refs });
      const names = new Set<string>();
      for (const c of known) {
        names.add(c.id);
        if (c.externalId !== null) names.add(c.externalId);
      }
      belongs = (ref) => names.has(ref);
    }
    const mine = parts.filter((p) => belongs(p.key));
    const perBucket = new Map<number, SpanAggregate[]>();
    for (const p of mine) {
      if (p.bucket === null) continue;
      const list = perBucket.get(p.bucket);
      if (list) list.push(p);
      else perBucket.set(p.bucket, [p]);
    }
    return {
      total: mergeAggregates(meter.aggregation, mine),
      buckets: buckets.map((b) => ({ start: new Date(b.start), end: new Date(b.end), quantity: mergeAggregates(meter.aggregation, perBucket.get(b.key) ?? []) })),
    };
  }
}
